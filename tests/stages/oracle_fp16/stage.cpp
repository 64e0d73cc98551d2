// A test-only stage of another precision: the forward pass as the CPU reference computes it,
// rounded to FP16 (11 significant bits), written by copies. It declares precision fp16 and its
// own bound, so it exercises the harness for a non-FP32 implementation: the FP32 bound would
// fail it (FP16 rounding alone is ~3e-4 relative), its own bound passes it, and its record says
// fp16. --perturb NAME breaks one output on purpose. It refuses (throws from prepare) inputs that
// FP16 cannot hold: the harness must have rounded them to FP16 for it (core/quantize.h).
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "../oracle_support.h"
#include "core/quantize.h"
#include "lstm_reference.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

/// `value` rounded to the nearest number with 11 significant bits (FP16's precision; FP16's
/// range is not modelled, the values here are small).
float round_to_fp16_precision(double value) {
  if (value == 0.0 || !std::isfinite(value)) return static_cast<float>(value);
  int exponent = 0;
  const double mantissa = std::frexp(value, &exponent);  // value = mantissa * 2^exponent
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(mantissa, 11)), exponent - 11));
}

class OracleFp16 final : public Stage {
 public:
  Precision precision() const override { return Precision::kFp16; }

  /// FP16 rounding: relative error per element at most 2^-11 (4.9e-4), so a relative norm of
  /// about 3e-4 and, for |c| up to ~4, absolute errors up to ~2e-3.
  Tolerance tolerance(const std::string&) const override { return {1e-3, 4e-3}; }

  void add_flags(CLI::App& app) override { oracle::add_perturb_flag(app, perturbed_); }

  void prepare(const DeviceTensors& t) override {
    const LstmParams params = oracle::download_params(t);
    if (!problem_representable(Precision::kFp16, params)) {
      throw std::logic_error(
          "oracle_fp16: its inputs are not all FP16 values: the harness did not round them to "
          "the stage's precision");
    }
    const ReferenceOutputs ref = reference_forward(params);
    const std::vector<double>* values[] = {&ref.y, &ref.hy, &ref.cy};
    const char* names[] = {"y", "hy", "cy"};
    for (int i = 0; i < 3; ++i) {
      outputs_[i].clear();
      for (double value : *values[i])
        outputs_[i].push_back(round_to_fp16_precision(value));
      oracle::maybe_perturb(perturbed_, names[i], outputs_[i]);
    }
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    oracle::upload(t.y, outputs_[0], stream);
    oracle::upload(t.hy, outputs_[1], stream);
    oracle::upload(t.cy, outputs_[2], stream);
  }

 private:
  std::string perturbed_;
  std::vector<float> outputs_[3];  // y, hy, cy
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<OracleFp16>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
