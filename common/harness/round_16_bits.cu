#include "harness/round_16_bits.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "harness/cuda_utils.h"

namespace lstm {
namespace {

constexpr int kRoundThreads = 256;  // threads per block of the rounding kernel

/// out[i] = in[i] rounded to Element (__half or __nv_bfloat16; to nearest, ties to even) for
/// i < n. Grid-stride: any grid of 1-D blocks covers n; thread i of the grid takes i, i + grid
/// size, ...
template <typename Element>
__global__ void round_to_element(const float* __restrict__ in, Element* __restrict__ out,
                                 std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if constexpr (std::is_same_v<Element, __half>)
      out[i] = __float2half_rn(in[i]);
    else
      out[i] = __float2bfloat16_rn(in[i]);
  }
}

}  // namespace

void round_to_16_bits(const float* in, std::uint16_t* out, std::size_t n, Precision precision,
                      cudaStream_t stream) {
  const int blocks =
      static_cast<int>(std::min<std::size_t>(ceil_div<std::size_t>(n, kRoundThreads), 1024));
  if (precision == Precision::kBf16) {
    round_to_element<<<blocks, kRoundThreads, 0, stream>>>(
        in, reinterpret_cast<__nv_bfloat16*>(out), n);
  } else {
    round_to_element<<<blocks, kRoundThreads, 0, stream>>>(in, reinterpret_cast<__half*>(out), n);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace lstm
