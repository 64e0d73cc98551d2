// What the CPU reference's test suites share.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace lstm::testing {

/// Fills `values` uniformly in [-bound, bound] from `rng`.
inline void fill_uniform(std::vector<float>& values, std::mt19937& rng, float bound) {
  std::uniform_real_distribution<float> uniform(-bound, bound);
  for (float& value : values) {
    value = uniform(rng);
  }
}

/// ‖actual − expected‖₂ / ‖expected‖₂, with `expected` a float32 output (e.g. PyTorch's).
inline double relative_norm_error(const std::vector<double>& actual,
                                  const std::vector<float>& expected) {
  double difference = 0.0, norm = 0.0;
  for (std::size_t k = 0; k < actual.size(); ++k) {
    const double e = expected[k];
    difference += (actual[k] - e) * (actual[k] - e);
    norm += e * e;
  }
  return std::sqrt(difference / norm);
}

}  // namespace lstm::testing
