#include "core/check.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace lstm {

double TensorCheck::severity() const {
  if (missing || nonfinite > 0 || compared == 0) return std::numeric_limits<double>::infinity();
  return std::max(relative_norm / bound.max_relative_norm, max_absolute / bound.max_absolute);
}

std::string TensorCheck::worst_position() const {
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
    if (axis < axes.size()) text << axes[axis] << "=";
    text << index[axis];
  }
  text << "]";
  return text.str();
}

TensorCheck compare_tensor(const OutputTensor& out, const ReferenceTensor& ref,
                           const Tolerance& bound) {
  const std::size_t count = ref.values.size();
  if (out.values.size() < count) {
    throw std::invalid_argument("compare_tensor: " + out.name + " has " +
                                std::to_string(out.values.size()) + " values, its reference " +
                                std::to_string(count));
  }
  TensorCheck check;
  check.name = ref.name;
  check.shape = ref.shape;
  check.axes = ref.axes;
  check.bound = bound;
  check.compared = count;
  double diff_squared = 0.0, ref_squared = 0.0;
  std::size_t largest_diff_index = 0, first_nonfinite_index = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double value = out.values[i];
    ref_squared += ref.values[i] * ref.values[i];
    if (!std::isfinite(value)) {  // NaN fails every comparison, so it is counted explicitly
      if (check.nonfinite++ == 0) first_nonfinite_index = i;
      continue;
    }
    const double diff = std::abs(value - ref.values[i]);
    diff_squared += diff * diff;
    if (diff > check.max_absolute) {
      check.max_absolute = diff;
      largest_diff_index = i;
    }
  }
  check.worst_index = check.nonfinite ? first_nonfinite_index : largest_diff_index;
  if (count > 0) {
    check.worst_value = out.values[check.worst_index];
    check.worst_reference = ref.values[check.worst_index];
  }
  const double ref_norm = std::sqrt(ref_squared);
  check.relative_norm = std::sqrt(diff_squared) / (ref_norm > 0.0 ? ref_norm : 1.0);
  check.passed = count > 0 && check.nonfinite == 0 &&
                 check.relative_norm <= bound.max_relative_norm &&
                 check.max_absolute <= bound.max_absolute;
  return check;
}

bool CheckReport::passed() const {
  if (tensors.empty()) return false;
  for (const TensorCheck& check : tensors) {
    if (!check.passed) return false;
  }
  return true;
}

const TensorCheck* CheckReport::worst() const {
  const TensorCheck* worst = nullptr;
  for (const TensorCheck& check : tensors) {
    if (worst == nullptr || check.severity() > worst->severity()) worst = &check;
  }
  return worst;
}

std::string CheckReport::describe() const {
  std::ostringstream text;
  text.precision(3);
  for (const std::string& note : not_checked)
    text << "check: " << note << "\n";
  for (const TensorCheck& check : tensors) {
    text << "check " << check.name << ": " << (check.passed ? "ok  " : "FAIL");
    if (check.missing) {
      text << "  not produced by the implementation\n";
      continue;
    }
    text << "  rel-norm err " << std::scientific << check.relative_norm << "  max-abs err "
         << check.max_absolute << "  (bound " << check.bound.max_relative_norm << ", "
         << check.bound.max_absolute << ")" << std::defaultfloat << "  (" << check.compared
         << " elements";
    if (check.nonfinite) text << ", " << check.nonfinite << " NaN/Inf";
    text << ")\n";
  }
  const TensorCheck* worst = this->worst();
  if (worst != nullptr && !passed() && !worst->missing) {
    text.precision(9);
    text << "  worst element " << worst->worst_position() << " = " << worst->worst_value
         << ", reference " << worst->worst_reference
         << (std::isfinite(worst->worst_value) ? "" : "  (NaN/Inf: unwritten or overflowed)")
         << "\n";
  }
  return text.str();
}

CheckReport check_tensors(const std::vector<OutputTensor>& outputs,
                          const std::vector<ReferenceTensor>& references,
                          const BoundForTensor& bound_for, std::vector<std::string> not_checked) {
  CheckReport report;
  report.not_checked = std::move(not_checked);
  for (const ReferenceTensor& ref : references) {
    const OutputTensor* out = nullptr;
    for (const OutputTensor& candidate : outputs) {
      if (candidate.name == ref.name) out = &candidate;
    }
    if (out == nullptr) {
      TensorCheck check;
      check.name = ref.name;
      check.shape = ref.shape;
      check.axes = ref.axes;
      check.bound = bound_for(ref.name);
      check.missing = true;
      report.tensors.push_back(check);
      continue;
    }
    report.tensors.push_back(compare_tensor(*out, ref, bound_for(ref.name)));
  }
  return report;
}

}  // namespace lstm
