#include "core/check.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace lstm {

std::string TensorCheck::worst_position(const std::vector<std::string>& axis_names) const {
  std::vector<std::size_t> index(shape.size());
  std::size_t rest = worst_index;
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    index[axis] = rest % shape[axis];
    rest /= shape[axis];
  }
  std::ostringstream text;
  text << name << "[";
  for (std::size_t axis = 0; axis < index.size(); ++axis) {
    if (axis) text << ", ";
    if (axis < axis_names.size()) text << axis_names[axis] << "=";
    text << index[axis];
  }
  text << "]";
  return text.str();
}

TensorCheck compare_tensor(const std::string& name, const std::vector<std::size_t>& shape,
                           const float* out, const double* ref, std::size_t count,
                           const Tolerance& tolerance) {
  TensorCheck check;
  check.name = name;
  check.shape = shape;
  check.compared = count;
  double diff_squared = 0.0, ref_squared = 0.0;
  std::size_t largest_diff_index = 0, first_nonfinite_index = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double value = out[i];
    ref_squared += ref[i] * ref[i];
    if (!std::isfinite(value)) {  // NaN fails every comparison, so it is counted explicitly
      if (check.nonfinite++ == 0) first_nonfinite_index = i;
      continue;
    }
    const double diff = std::abs(value - ref[i]);
    diff_squared += diff * diff;
    if (diff > check.max_absolute) {
      check.max_absolute = diff;
      largest_diff_index = i;
    }
  }
  check.worst_index = check.nonfinite ? first_nonfinite_index : largest_diff_index;
  if (count > 0) {
    check.worst_value = out[check.worst_index];
    check.worst_reference = ref[check.worst_index];
  }
  const double ref_norm = std::sqrt(ref_squared);
  check.relative_norm = std::sqrt(diff_squared) / (ref_norm > 0.0 ? ref_norm : 1.0);
  check.passed = count > 0 && check.nonfinite == 0 &&
                 check.relative_norm <= tolerance.max_relative_norm &&
                 check.max_absolute <= tolerance.max_absolute;
  return check;
}

bool CheckReport::passed() const {
  if (tensors.empty()) return false;
  for (const TensorCheck& check : tensors) {
    if (!check.passed) return false;
  }
  return true;
}

std::string CheckReport::describe() const {
  std::ostringstream text;
  text.precision(3);
  if (steps_checked < steps_total) {
    text << "check: y compared for the first " << steps_checked << " of " << steps_total
         << " steps (the CPU reference was limited to a prefix); hy and cy NOT checked\n";
  }
  for (const TensorCheck& check : tensors) {
    text << "check " << check.name << ": " << (check.passed ? "ok  " : "FAIL") << "  rel-norm err "
         << std::scientific << check.relative_norm << "  max-abs err " << check.max_absolute
         << std::defaultfloat << "  (" << check.compared << " elements";
    if (check.nonfinite) text << ", " << check.nonfinite << " NaN/Inf";
    text << ")\n";
    if (!check.passed) {
      const std::vector<std::string> axes = check.name == "y"
                                                ? std::vector<std::string>{"t", "b", "j"}
                                                : std::vector<std::string>{"layer", "b", "j"};
      text.precision(9);
      text << "  worst element " << check.worst_position(axes) << " = " << check.worst_value
           << ", reference " << check.worst_reference
           << (std::isfinite(check.worst_value) ? "" : "  (NaN/Inf: unwritten or overflowed)")
           << "\n";
      text.precision(3);
    }
  }
  return text.str();
}

CheckReport check_outputs(int batch, int hidden, int layers, int steps_total, int steps_checked,
                          const std::vector<float>& y, const std::vector<float>& hy,
                          const std::vector<float>& cy, const std::vector<double>& y_ref,
                          const std::vector<double>& hy_ref, const std::vector<double>& cy_ref,
                          const Tolerance& tolerance) {
  const std::size_t B = batch, H = hidden, L = layers;
  const std::size_t steps = steps_checked;
  if (y_ref.size() != steps * B * H || y.size() < steps * B * H) {
    throw std::invalid_argument("check_outputs: y and its reference do not have T*B*H values");
  }
  CheckReport report;
  report.steps_total = steps_total;
  report.steps_checked = steps_checked;
  report.tensors.push_back(
      compare_tensor("y", {steps, B, H}, y.data(), y_ref.data(), steps * B * H, tolerance));
  if (steps_checked == steps_total) {
    if (hy.size() != L * B * H || hy_ref.size() != L * B * H || cy.size() != L * B * H ||
        cy_ref.size() != L * B * H) {
      throw std::invalid_argument("check_outputs: hy/cy and their references need L*B*H values");
    }
    report.tensors.push_back(
        compare_tensor("hy", {L, B, H}, hy.data(), hy_ref.data(), L * B * H, tolerance));
    report.tensors.push_back(
        compare_tensor("cy", {L, B, H}, cy.data(), cy_ref.data(), L * B * H, tolerance));
  }
  return report;
}

}  // namespace lstm
