/*! \file check.h
 *  \brief Element-by-element comparison of named float32 tensors (what an implementation wrote)
 *         with their double-precision references: a bound per tensor, NaN/Inf rejected, the
 *         worst element of the worst tensor reported.
 */
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/kind_and_precision.h"
#include "core/named_tensor.h"

namespace lstm {

/// The comparison of one tensor with its reference.
struct TensorCheck {
  std::string name;                ///< the tensor's name
  std::vector<std::size_t> shape;  ///< shape of the compared part (the reference's)
  std::vector<std::string> axes;   ///< axis names, for the worst element's position
  Tolerance bound;                 ///< the bound it was checked against
  std::size_t compared = 0;        ///< elements compared
  double relative_norm = 0.0;      ///< ||out - ref|| / ||ref|| (||ref|| = 0: ||out - ref||)
  double max_absolute = 0.0;       ///< max |out - ref| over finite elements
  std::size_t nonfinite = 0;       ///< NaN or Inf elements in out (unwritten ones are NaN)
  bool missing = false;            ///< the implementation produced no tensor of this name
  std::size_t worst_index = 0;     ///< first non-finite element, else the largest |out - ref|
  float worst_value = 0.0f;        ///< out at worst_index
  double worst_reference = 0.0;    ///< ref at worst_index
  bool passed = false;             ///< present, every element finite, within both bounds

  /// How far past its bound the tensor is: max(relative_norm / bound, max_absolute / bound);
  /// infinite for a missing tensor or a non-finite element. Above 1 fails.
  double severity() const;
  /// "y[t=3, b=0, j=17]": the worst element as a multi-index of `shape`.
  std::string worst_position() const;
};

/// Compares the first `ref.values.size()` values of `out` with `ref` (the reference may cover a
/// prefix of `out`, e.g. the first steps of y) against `bound`.
/// \throws std::invalid_argument if `out` holds fewer values than `ref`.
TensorCheck compare_tensor(const OutputTensor& out, const ReferenceTensor& ref,
                           const Tolerance& bound);

/// The check of one run: every reference tensor against the output of the same name.
struct CheckReport {
  std::vector<TensorCheck> tensors;      ///< one per reference tensor, in the reference's order
  std::vector<std::string> not_checked;  ///< what was not compared and why, said on every report
  bool passed() const;                   ///< at least one tensor, and every one passed
  /// The tensor furthest past its bound (the first if several tie); nullptr if none.
  const TensorCheck* worst() const;
  /// Lines for the console: what was not checked, each tensor's errors and bound, and for a
  /// failure the worst element of the worst tensor with its index, value and reference.
  std::string describe() const;
};

/// The bound each tensor is checked against, by name.
using BoundForTensor = std::function<Tolerance(const std::string& name)>;

/// Compares every tensor of `references` with the output of the same name (a missing one
/// fails) against `bound_for(name)`; `not_checked` is carried into the report.
CheckReport check_tensors(const std::vector<OutputTensor>& outputs,
                          const std::vector<ReferenceTensor>& references,
                          const BoundForTensor& bound_for,
                          std::vector<std::string> not_checked = {});

}  // namespace lstm
