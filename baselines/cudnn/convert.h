/*! \file baselines/cudnn/convert.h
 *  \brief Element types of the cuDNN baseline's device buffers, and the one kernel it owns: an
 *         element-wise conversion between float32 and FP16 or BF16 (round to nearest even), for
 *         the reduced-precision runs (the harness's tensors are float32; cuDNN's are not).
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/kind_and_precision.h"

namespace lstm::baseline_cudnn {

/// The type of the elements of a device buffer.
enum class ElementType {
  kFloat,     ///< float32
  kHalf,      ///< IEEE binary16 (__half)
  kBfloat16,  ///< bfloat16 (__nv_bfloat16)
};

/// The element type in which an implementation of `precision` keeps its data.
ElementType element_type(Precision precision);

/// Bytes of one element of `type` (4 or 2).
std::size_t element_bytes(ElementType type);

/// "float32", "fp16" or "bf16", for messages.
const char* element_type_name(ElementType type);

/// Enqueues on `stream` the conversion of `count` elements from `source` (of `source_type`) into
/// `destination` (of `destination_type`): float32 to FP16 or BF16 rounds to nearest even
/// (__float2half_rn, __float2bfloat16_rn), the other way is exact. The same type is a plain
/// copy (cudaMemcpyAsync). Between FP16 and BF16 it goes through float32.
void enqueue_conversion(void* destination, ElementType destination_type, const void* source,
                        ElementType source_type, std::size_t count, cudaStream_t stream);

}  // namespace lstm::baseline_cudnn
