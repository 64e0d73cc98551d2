/*! \file reference_math.h
 *  \brief What the reference's forward and backward share: the gate order and the double-precision
 *         helpers, defined once so that both compute (and round) the forward pass identically.
 *         Internal to reference/.
 */
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace lstm::reference_math {

/// The gates in PyTorch's order: row r of a weight matrix belongs to gate r / H, unit r % H.
enum Gate : std::size_t { kInputGate = 0, kForgetGate = 1, kCellGate = 2, kOutputGate = 3 };
/// Gates per hidden unit.
constexpr std::size_t kGateCount = 4;

/// σ(z) = 1 / (1 + exp(-z))
inline double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

/// Σ_k a[k] · b[k] over `length` contiguous elements.
inline double dot(const double* a, const double* b, std::size_t length) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (std::size_t k = 0; k < length; ++k) {
    sum += a[k] * b[k];
  }
  return sum;
}

/// The float32 values promoted to double.
inline std::vector<double> to_double(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

}  // namespace lstm::reference_math
