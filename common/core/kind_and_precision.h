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

/// The bound of FP32 implementations (relative norm 1e-5, max-abs 1e-4). Reduced-precision
/// stages have no default: they state their own bound, set from measurement.
/// \throws std::invalid_argument for any precision but FP32.
Tolerance default_tolerance(Precision precision);

}  // namespace lstm
