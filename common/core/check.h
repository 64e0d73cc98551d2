/*! \file validate.h
 *  \brief Element-by-element comparison of a stage's float32 outputs with the double-precision
 *         reference: relative-norm and max-abs bounds, NaN/Inf rejected, worst element reported.
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lstm {

/// Bounds an output must meet (docs/design.md: FP32 stages 1e-5 relative norm, 1e-4 max abs).
struct Tolerance {
  double max_relative_norm = 1e-5;  ///< bound on ||out - ref|| / ||ref|| (2-norms)
  double max_absolute = 1e-4;       ///< bound on max |out - ref|
};

/// The comparison of one output tensor with its reference.
struct TensorCheck {
  std::string name;                ///< "y", "hy" or "cy"
  std::vector<std::size_t> shape;  ///< shape of the compared part
  std::size_t compared = 0;        ///< elements compared
  double relative_norm = 0.0;      ///< ||out - ref|| / ||ref|| (||ref|| = 0: ||out - ref||)
  double max_absolute = 0.0;       ///< max |out - ref| over finite elements
  std::size_t nonfinite = 0;       ///< NaN or Inf elements in out (unwritten ones are NaN)
  std::size_t worst_index = 0;     ///< first non-finite element, else the largest |out - ref|
  float worst_value = 0.0f;        ///< out at worst_index
  double worst_reference = 0.0;    ///< ref at worst_index
  bool passed = false;             ///< within both bounds, every element finite

  /// "y[t=3, b=0, j=17]": the worst element as a multi-index of `shape` with `axis_names`.
  std::string worst_position(const std::vector<std::string>& axis_names) const;
};

/// Compares `count` float32 values with their double references.
TensorCheck compare_tensor(const std::string& name, const std::vector<std::size_t>& shape,
                           const float* out, const double* ref, std::size_t count,
                           const Tolerance& tolerance);

/// The check of a whole forward pass: y (all steps or a prefix), hy and cy (only when the
/// reference ran every step).
struct CheckReport {
  std::vector<TensorCheck> tensors;  ///< the tensors compared
  int steps_checked = 0;             ///< time steps of y compared
  int steps_total = 0;               ///< T
  bool passed() const;               ///< every compared tensor passed
  /// Lines for the console: what was checked (and what was not), each tensor's errors, and for
  /// a failure the worst element with its index, value and reference.
  std::string describe() const;
};

/// Compares outputs with a reference computed for the first `steps_checked` of `steps_total`
/// steps. `y_ref` holds steps_checked*B*H values; `hy_ref`/`cy_ref` are compared only when
/// steps_checked == steps_total.
CheckReport check_outputs(int batch, int hidden, int layers, int steps_total, int steps_checked,
                          const std::vector<float>& y, const std::vector<float>& hy,
                          const std::vector<float>& cy, const std::vector<double>& y_ref,
                          const std::vector<double>& hy_ref, const std::vector<double>& cy_ref,
                          const Tolerance& tolerance = {});

}  // namespace lstm
