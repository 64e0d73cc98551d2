#include "convert.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "harness/cuda_utils.h"

namespace lstm::baseline_cudnn {
namespace {

__device__ float load_as_float(const void* base, ElementType type, std::size_t i) {
  switch (type) {
    case ElementType::kHalf:
      return __half2float(static_cast<const __half*>(base)[i]);
    case ElementType::kBfloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default:
      return static_cast<const float*>(base)[i];
  }
}

__device__ void store_from_float(void* base, ElementType type, std::size_t i, float value) {
  switch (type) {
    case ElementType::kHalf:
      static_cast<__half*>(base)[i] = __float2half_rn(value);
      break;
    case ElementType::kBfloat16:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(value);
      break;
    default:
      static_cast<float*>(base)[i] = value;
  }
}

/// One element per thread, grid-stride.
__global__ void convert_kernel(void* destination, ElementType destination_type, const void* source,
                               ElementType source_type, std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    store_from_float(destination, destination_type, i, load_as_float(source, source_type, i));
  }
}

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // grid-stride beyond this

}  // namespace

ElementType element_type(Precision precision) {
  switch (precision) {
    case Precision::kFp16:
      return ElementType::kHalf;
    case Precision::kBf16:
      return ElementType::kBfloat16;
    default:
      return ElementType::kFloat;
  }
}

std::size_t element_bytes(ElementType type) {
  return type == ElementType::kFloat ? 4 : 2;
}

const char* element_type_name(ElementType type) {
  switch (type) {
    case ElementType::kHalf:
      return "fp16";
    case ElementType::kBfloat16:
      return "bf16";
    default:
      return "float32";
  }
}

void enqueue_conversion(void* destination, ElementType destination_type, const void* source,
                        ElementType source_type, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  if (destination == nullptr || source == nullptr) {
    throw std::invalid_argument(
        std::string("enqueue_conversion: a null pointer (") + element_type_name(source_type) +
        " -> " + element_type_name(destination_type) + ", " + std::to_string(count) + " elements)");
  }
  if (destination_type == source_type) {
    CUDA_CHECK(cudaMemcpyAsync(destination, source, count * element_bytes(source_type),
                               cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const std::size_t blocks = std::min(kMaxBlocks, (count + kThreads - 1) / kThreads);
  convert_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      destination, destination_type, source, source_type, count);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace lstm::baseline_cudnn
