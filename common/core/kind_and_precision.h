/*! \file kind_and_precision.h
 *  \brief What a stage computes (its kind) and in which numeric precision, with the bound its
 *         outputs are checked against.
 */
#pragma once

#include <string>

namespace lstm {

/// What an implementation computes.
enum class StageKind {
  kForward,   ///< the forward pass: y, hy, cy
  kTraining,  ///< a training pass: the forward keeping what backward needs, then the backward
};

/// The numeric precision an implementation computes in (its data and math).
enum class Precision {
  kFp32,  ///< FP32 data and FP32 FMA math (no TF32)
  kFp16,  ///< FP16 data (accumulation as the stage states)
  kBf16,  ///< BF16 data (accumulation as the stage states)
};

/// Bounds one output tensor must meet against the double-precision reference.
struct Tolerance {
  double max_relative_norm = 1e-5;  ///< bound on ||out - ref|| / ||ref|| (2-norms)
  double max_absolute = 1e-4;       ///< bound on max |out - ref|
};

/// "forward" or "training", as records and benchmark labels spell it.
const char* kind_name(StageKind kind);

/// "fp32", "fp16" or "bf16", as records and benchmark labels spell it.
const char* precision_name(Precision precision);

/// The precision named `name` in precision_name's spelling.
/// \throws std::invalid_argument for any other name.
Precision precision_from_name(const std::string& name);

/// The bound of FP32 implementations (relative norm 1e-5, max-abs 1e-4). Reduced-precision
/// stages have no default: they state their own bound, set from measurement (e.g.
/// reduced_precision_tolerance).
/// \throws std::invalid_argument for any precision but FP32.
Tolerance default_tolerance(Precision precision);

/// Whether `tensor` is one of a training pass's gradients (dx, dh0, dc0, grad_*), not a forward
/// output (y, hy, cy).
bool is_gradient_tensor(const std::string& tensor);

/// The bound of an FP16 or BF16 implementation with FP32 accumulation for the output named
/// `tensor`, against the FP64 reference fed the same quantised inputs (core/quantize.h): what
/// cuDNN's tensor-op LSTM is held to, and the bound a tensor-core stage must meet at least as
/// well. The gradients' bounds are cuDNN's own largest error measured on this project's H100
/// (scripts/gradient_errors.sh and cudnn_gpu_tests, results/h100-sxm/); the outputs' are
/// PROVISIONAL, set a little above cuDNN's error measured through PyTorch (issue 22). FP32 gives
/// default_tolerance(kFp32). Relative norm / max-abs:
///   FP16: y, hy, cy 1e-3 / 1e-2; dx, dh0, dc0 1.1e-3 / 5.8e-4; grad_* 4.2e-3 / 2.3e-2.
///   BF16: y, hy, cy 8e-3 / 8e-2; dx, dh0, dc0 1.1e-2 / 4.2e-3; grad_* 1.7e-2 / 0.19.
Tolerance reduced_precision_tolerance(Precision precision, const std::string& tensor);

}  // namespace lstm
