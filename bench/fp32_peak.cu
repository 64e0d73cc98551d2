// The FP32 ceiling: a kernel of independent FMAs, timed with CUDA events. Every plot that shows a
// stage as a percentage of the GPU's FP32 rate divides by this measured number, not a datasheet.
#include "fp32_peak.h"

#include <algorithm>

#include "harness/cuda_utils.h"

namespace lstm::bench {
namespace {

constexpr int kChains = 8;         // independent FMA chains per thread: hides FMA latency
constexpr int kIterations = 4096;  // FMAs per chain
constexpr int kThreadsPerBlock = 256;
constexpr int kBlocksPerSm = 8;

/// Mapping: 1-D grid, kBlocksPerSm blocks per SM, every thread runs kChains independent chains
/// of kIterations dependent FMAs. The result is stored so the compiler cannot drop the work.
__global__ void fma_kernel(float* sink, float multiplier, float addend) {
  float chain[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
    chain[c] = threadIdx.x * 1e-3f + c;
  for (int i = 0; i < kIterations; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c)
      chain[c] = fmaf(chain[c], multiplier, addend);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c)
    sum += chain[c];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

}  // namespace

double measure_fp32_fma_ms(int sm_count, double* flops) {
  const int blocks = sm_count * kBlocksPerSm;
  DeviceBuffer<float> sink(static_cast<std::size_t>(blocks) * kThreadsPerBlock);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  for (int run = 0; run < 12; ++run) {  // the first runs warm up; keep the fastest
    CUDA_CHECK(cudaEventRecord(start));
    fma_kernel<<<blocks, kThreadsPerBlock>>>(sink.data(), 0.999f, 1e-4f);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best_ms = std::min(best_ms, ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  *flops = 2.0 * kChains * kIterations * static_cast<double>(blocks) * kThreadsPerBlock;
  return best_ms;
}

}  // namespace lstm::bench
