// The floor of a persistent kernel's step: every block hands one value to every other block and
// waits for all of theirs, as the persistent stages hand on h_t or dz_t. Two ways, timed as the
// grid barrier is (launch_timing.h): through global memory, each value polled until it appears (the
// stages' published values), and through the shared memory of the blocks of one thread-block
// cluster, each value sent with st.async and counted by an mbarrier in the block that receives it.
#include "exchange.h"

#include <stdexcept>
#include <string>

#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "launch_timing.h"

namespace lstm::bench {
namespace {

constexpr int kThreads = 128;              // threads per block
constexpr int kOneBlockPerSm = 120 << 10;  // dynamic shared memory that keeps one block an SM
constexpr int kMaxClusterBlocks = 16;      // the largest (non-portable) cluster of Hopper

__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_relaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arm(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

/// Mapping: 1-D grid, all blocks resident (cooperative launch). Step s: thread 0 of block b
/// stores s + 1 at slots[s % 2][b]; thread k polls slots[s % 2][k] until it reads s + 1; a block
/// barrier ends the step. Two slots a block: no block can be two steps ahead of another.
__global__ void global_exchange_kernel(unsigned* slots, int steps) {
  const int blocks = gridDim.x;
  for (int s = 0; s < steps; ++s) {
    unsigned* slot = slots + (s % 2) * blocks;
    if (threadIdx.x == 0) store_relaxed(slot + blockIdx.x, s + 1);
    for (int k = threadIdx.x; k < blocks; k += blockDim.x)
      while (load_relaxed(slot + k) != static_cast<unsigned>(s + 1)) {
      }
    __syncthreads();
  }
}

/// Mapping: one cluster of all the grid's blocks. Step s: thread k sends s + 1 into slot
/// [s % 2][rank] of block k's shared memory with st.async, which counts 4 bytes on block k's
/// mbarrier s % 2; every thread waits for its own mbarrier to count all blocks' values (phase
/// parity s / 2 % 2), checks them (a wrong value traps), and thread 0 arms it again for step
/// s + 2 before a block barrier ends the step.
__global__ void cluster_exchange_kernel(int steps) {
  __shared__ unsigned values[2][kMaxClusterBlocks];
  __shared__ alignas(8) unsigned long long bars[2];
  unsigned blocks, rank;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const unsigned bar0 = shared_address(&bars[0]), bytes = 4u * blocks;
  if (threadIdx.x == 0) {
    for (unsigned b = 0; b < 2; ++b)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    mbarrier_arm(bar0, bytes);
    mbarrier_arm(bar0 + 8, bytes);
  }
  cluster_barrier();  // every block's mbarriers exist before any value is sent
  for (int s = 0; s < steps; ++s) {
    const unsigned buffer = s % 2, bar = bar0 + 8 * buffer;
    if (threadIdx.x < blocks) {
      unsigned slot, remote_bar;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                   : "=r"(slot)
                   : "r"(shared_address(&values[buffer][rank])), "r"(threadIdx.x));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                   : "=r"(remote_bar)
                   : "r"(bar), "r"(threadIdx.x));
      asm volatile(
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(slot),
          "r"(s + 1), "r"(remote_bar)
          : "memory");
    }
    unsigned done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, "
          "0, p; }"
          : "=r"(done)
          : "r"(bar), "r"((s / 2) % 2)
          : "memory");
    if (threadIdx.x < blocks && values[buffer][threadIdx.x] != static_cast<unsigned>(s + 1))
      __trap();
    if (threadIdx.x == 0) mbarrier_arm(bar, bytes);
    __syncthreads();
  }
  cluster_barrier();  // no block leaves while another may still send into its shared memory
}

}  // namespace

double measure_global_exchange_us(int blocks, int steps) {
  if (blocks < 2 || steps < 2)
    throw std::invalid_argument("measure_global_exchange_us needs blocks >= 2, steps >= 2");
  int device = 0, sm_count = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const std::string why = check_co_resident(reinterpret_cast<const void*>(global_exchange_kernel),
                                            "exchange", kThreads, kOneBlockPerSm, blocks, sm_count);
  if (!why.empty()) throw std::runtime_error(why);
  DeviceBuffer<unsigned> slots(2 * static_cast<std::size_t>(blocks));
  unsigned* slots_data = slots.data();
  const auto launch = [&](int n, cudaEvent_t start, cudaEvent_t stop) {
    CUDA_CHECK(cudaMemset(slots_data, 0, 2 * blocks * sizeof(unsigned)));
    void* args[] = {&slots_data, &n};
    CUDA_CHECK(cudaEventRecord(start));
    CUDA_CHECK(cudaLaunchCooperativeKernel(global_exchange_kernel, dim3(blocks), dim3(kThreads),
                                           args, kOneBlockPerSm));
    CUDA_CHECK(cudaEventRecord(stop));
  };
  return us_per_step(launch, steps);
}

double measure_cluster_exchange_us(int blocks, int steps) {
  if (blocks < 2 || blocks > kMaxClusterBlocks || steps < 2)
    throw std::invalid_argument("measure_cluster_exchange_us needs 2 <= blocks <= 16, steps >= 2");
  int device = 0, cluster_launch = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device));
  if (!cluster_launch) throw std::runtime_error("the device has no thread-block clusters");
  CUDA_CHECK(cudaFuncSetAttribute(cluster_exchange_kernel,
                                  cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  if (resident_clusters(reinterpret_cast<const void*>(cluster_exchange_kernel), kThreads,
                        kOneBlockPerSm, blocks) < 1)
    throw std::runtime_error("a cluster of " + std::to_string(blocks) +
                             " blocks, one an SM, cannot be resident");
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = blocks;
  attribute.val.clusterDim.y = attribute.val.clusterDim.z = 1;
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kOneBlockPerSm;
  config.attrs = &attribute;
  config.numAttrs = 1;
  const auto launch = [&](int n, cudaEvent_t start, cudaEvent_t stop) {
    CUDA_CHECK(cudaEventRecord(start));
    CUDA_CHECK(cudaLaunchKernelEx(&config, cluster_exchange_kernel, n));
    CUDA_CHECK(cudaEventRecord(stop));
  };
  return us_per_step(launch, steps);
}

}  // namespace lstm::bench
