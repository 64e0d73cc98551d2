// A test-only stage of the second series ("selftest"): a training pass whose "kernels" are copies
// of the CPU reference's results, computed in prepare(). It exercises the harness end to end for
// a training implementation (upstream gradients, every gradient named, poisoned, downloaded,
// checked with the FP32 bound, timed as forward, backward and total, recorded as kind
// "training"), not any GPU code. --perturb NAME breaks one output on purpose.
#include <array>
#include <memory>
#include <string>

#include "../oracle_support.h"
#include "lstm_reference_backward.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

class OracleTraining final : public TrainingStage {
 public:
  void add_flags(CLI::App& app) override { oracle::add_perturb_flag(app, perturbed_); }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const TensorCounts counts = count_tensors(s);
    const UpstreamGradients upstream = {oracle::download(t.dy, counts.y),
                                        oracle::download(t.dhy, counts.state),
                                        oracle::download(t.dcy, counts.state)};
    const ReferenceTraining ref = reference_training(oracle::download_params(t), upstream);
    forward_ = {oracle::to_float(ref.forward.y), oracle::to_float(ref.forward.hy),
                oracle::to_float(ref.forward.cy)};
    gradients_ = {oracle::to_float(ref.gradients.dx), oracle::to_float(ref.gradients.dh0),
                  oracle::to_float(ref.gradients.dc0)};  // std::array: assigned whole
    layer_gradients_.clear();
    for (const ReferenceLayerGradients& layer : ref.gradients.layers) {
      layer_gradients_.push_back({oracle::to_float(layer.w_ih), oracle::to_float(layer.w_hh),
                                  oracle::to_float(layer.b_ih), oracle::to_float(layer.b_hh)});
    }
    const char* forward_names[] = {"y", "hy", "cy"};
    const char* gradient_names[] = {"dx", "dh0", "dc0"};
    for (int i = 0; i < 3; ++i) {
      oracle::maybe_perturb(perturbed_, forward_names[i], forward_[i]);
      oracle::maybe_perturb(perturbed_, gradient_names[i], gradients_[i]);
    }
    for (std::size_t layer = 0; layer < layer_gradients_.size(); ++layer) {
      const std::string suffix = "_l" + std::to_string(layer);
      const char* names[] = {"grad_weight_ih", "grad_weight_hh", "grad_bias_ih", "grad_bias_hh"};
      for (int i = 0; i < 4; ++i)
        oracle::maybe_perturb(perturbed_, names[i] + suffix, layer_gradients_[layer][i]);
    }
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    oracle::upload(t.y, forward_[0], stream);
    oracle::upload(t.hy, forward_[1], stream);
    oracle::upload(t.cy, forward_[2], stream);
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    oracle::upload(t.dx, gradients_[0], stream);
    oracle::upload(t.dh0, gradients_[1], stream);
    oracle::upload(t.dc0, gradients_[2], stream);
    for (std::size_t layer = 0; layer < layer_gradients_.size(); ++layer) {
      oracle::upload(t.grad_w_ih[layer], layer_gradients_[layer][0], stream);
      oracle::upload(t.grad_w_hh[layer], layer_gradients_[layer][1], stream);
      oracle::upload(t.grad_b_ih[layer], layer_gradients_[layer][2], stream);
      oracle::upload(t.grad_b_hh[layer], layer_gradients_[layer][3], stream);
    }
  }

 private:
  std::string perturbed_;
  std::array<std::vector<float>, 3> forward_;                       // y, hy, cy
  std::array<std::vector<float>, 3> gradients_;                     // dx, dh0, dc0
  std::vector<std::array<std::vector<float>, 4>> layer_gradients_;  // w_ih, w_hh, b_ih, b_hh
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<OracleTraining>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
