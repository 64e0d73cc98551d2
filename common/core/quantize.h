/*! \file quantize.h
 *  \brief Rounding float32 values to FP16 or BF16 (round to nearest, ties to even), stored back
 *         as float32: how the harness gives a reduced-precision implementation data it can hold
 *         exactly, and the CPU reference the very same values.
 *
 * Why: an FP16 implementation rounds its inputs and weights to FP16 before it computes. Were the
 * reference fed the unrounded float32 values, the check would measure that input rounding (about
 * 3e-4 of relative error in FP16, 2e-3 in BF16, before any arithmetic) along with the
 * implementation's arithmetic. Quantising once on the host, and feeding the reference the
 * quantised values, leaves only the arithmetic (and the rounding of the outputs) to measure.
 */
#pragma once

#include <string>
#include <vector>

#include "core/kind_and_precision.h"
#include "core/lstm_data.h"

namespace lstm {

/// `value` rounded to the nearest IEEE binary16 (FP16: 11 significant bits, exponents down to
/// 2^-14, subnormals down to 2^-24, largest finite 65504), ties to even, as float32 (exactly).
/// Magnitudes from 65520 (the midpoint between 65504 and 2^16) up round to infinity, as the
/// hardware's __float2half_rn does; NaN stays NaN, infinities and signed zeros stay.
float round_to_fp16(float value);

/// `value` rounded to the nearest bfloat16 (BF16: float32's exponent range, 8 significant bits),
/// ties to even, as float32 (exactly). Magnitudes that round past BF16's largest finite value
/// (0x7F7F: 3.3895e38) become infinity, as __float2bfloat16_rn does; NaN stays NaN.
float round_to_bf16(float value);

/// `value` rounded to `precision` (FP32: `value` itself, bit for bit).
float round_to_precision(float value, Precision precision);

/// Whether `value` is exactly representable in `precision` (NaN counts as representable).
bool representable(float value, Precision precision);

/// Rounds every value of `values` (the tensor `name`) to `precision` in place (FP32: unchanged).
/// \throws std::invalid_argument naming `name`, the element and the limit where a finite value
///         would round to infinity: the run would compute on other data than it was given (and
///         its check could still pass: sigma and tanh of infinity are finite).
void quantize(std::vector<float>& values, Precision precision, const std::string& name);

/// Rounds every input of a problem to `precision` in place: x, h0, c0 and every layer's weights
/// and biases; and, when `upstream` is given, dy, dhy and dcy. FP32 leaves everything as it is.
/// \throws std::invalid_argument naming the tensor, the element and the limit where a finite
///         value would round to infinity (in FP16, |value| >= 65520); the problem is then
///         partly rounded and must be discarded.
void quantize_problem(Precision precision, LstmParams& params,
                      UpstreamGradients* upstream = nullptr);

/// Whether every input of the problem (as quantize_problem lists them) is representable in
/// `precision`.
bool problem_representable(Precision precision, const LstmParams& params,
                           const UpstreamGradients* upstream = nullptr);

}  // namespace lstm
