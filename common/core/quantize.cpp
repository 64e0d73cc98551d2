#include "core/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace lstm {
namespace {

/// `value` rounded to `bits` significant bits, with no exponent below `min_exponent` for its
/// quantum (the subnormal spacing) and magnitudes above `max_finite` turned into infinity. The
/// arithmetic is in double, where every step is exact; std::nearbyint rounds ties to even (the
/// default rounding mode, which nothing here changes).
float round_to(float value, int bits, int min_quantum_exponent, double max_finite) {
  if (!std::isfinite(value) || value == 0.0f) return value;
  int exponent = 0;
  std::frexp(static_cast<double>(value), &exponent);  // |value| in [2^(exponent-1), 2^exponent)
  const int quantum = std::max(exponent - bits, min_quantum_exponent);
  const double rounded =
      std::ldexp(std::nearbyint(std::ldexp(static_cast<double>(value), -quantum)), quantum);
  if (std::fabs(rounded) > max_finite) {
    return std::copysign(std::numeric_limits<float>::infinity(), value);
  }
  return static_cast<float>(rounded);  // exact: at most 11 (or 8) significant bits
}

}  // namespace

float round_to_fp16(float value) {
  return round_to(value, 11, -24, 65504.0);
}

float round_to_bf16(float value) {
  return round_to(value, 8, -133, std::ldexp(255.0, 127 - 7));  // (2 - 2^-7) * 2^127
}

float round_to_precision(float value, Precision precision) {
  switch (precision) {
    case Precision::kFp16:
      return round_to_fp16(value);
    case Precision::kBf16:
      return round_to_bf16(value);
    default:
      return value;
  }
}

bool representable(float value, Precision precision) {
  if (std::isnan(value)) return true;
  return round_to_precision(value, precision) == value;
}

void quantize(std::vector<float>& values, Precision precision, const std::string& name) {
  if (precision == Precision::kFp32) return;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float rounded = round_to_precision(values[i], precision);
    if (std::isinf(rounded) && std::isfinite(values[i])) {
      std::ostringstream why;
      why << name << "[" << i << "] = " << values[i] << " rounds to infinity in "
          << precision_name(precision) << " (largest finite value "
          << (precision == Precision::kFp16 ? "65504" : "3.3895e38") << ")";
      throw std::invalid_argument(why.str());
    }
    values[i] = rounded;
  }
}

void quantize_problem(Precision precision, LstmParams& params, UpstreamGradients* upstream) {
  if (precision == Precision::kFp32) return;
  quantize(params.x, precision, "x");
  quantize(params.h0, precision, "h0");
  quantize(params.c0, precision, "c0");
  for (std::size_t l = 0; l < params.layers.size(); ++l) {
    LayerWeights& layer = params.layers[l];
    const std::string suffix = "_l" + std::to_string(l);
    quantize(layer.w_ih, precision, "weight_ih" + suffix);
    quantize(layer.w_hh, precision, "weight_hh" + suffix);
    quantize(layer.b_ih, precision, "bias_ih" + suffix);
    quantize(layer.b_hh, precision, "bias_hh" + suffix);
  }
  if (upstream != nullptr) {
    quantize(upstream->dy, precision, "dy");
    quantize(upstream->dhy, precision, "dhy");
    quantize(upstream->dcy, precision, "dcy");
  }
}

bool problem_representable(Precision precision, const LstmParams& params,
                           const UpstreamGradients* upstream) {
  auto all = [precision](const std::vector<float>& values) {
    for (float value : values)
      if (!representable(value, precision)) return false;
    return true;
  };
  bool ok = all(params.x) && all(params.h0) && all(params.c0);
  for (const LayerWeights& layer : params.layers)
    ok = ok && all(layer.w_ih) && all(layer.w_hh) && all(layer.b_ih) && all(layer.b_hh);
  if (upstream != nullptr) ok = ok && all(upstream->dy) && all(upstream->dhy) && all(upstream->dcy);
  return ok;
}

}  // namespace lstm
