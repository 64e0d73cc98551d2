/*! \file round_16_bits.cuh
 *  \brief Rounds FP32 values on the GPU to 16-bit ones (FP16 or BF16): the operands of the
 *         16-bit GEMMs (cublasGemmEx) of the reduced-precision stages.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/kind_and_precision.h"

namespace lstm {

/// Rounds n floats into `out`, 16-bit values of `precision` (FP16 or BF16; to nearest, ties to
/// even), on `stream`: a GEMM operand. Asynchronous; throws CudaError (CUDA_CHECK) where the
/// launch fails.
void round_to_16_bits(const float* in, std::uint16_t* out, std::size_t n, Precision precision,
                      cudaStream_t stream);

}  // namespace lstm
