/*! \file
 *  \brief Training stage 46: training stage 40's choice by the shape, for the FP32 stages: 25, 13,
 *         05 or 04, whichever design suits the shape.
 *
 * No kernels of its own: the stage holds training stage 25 (persistent kernels, each backward
 * block reading the dz it needs), training stage 13 (persistent kernels, partial sums of dh sent
 * to the blocks that own them), training stage 05 (one cuBLAS GEMM per step, the layers as a
 * wavefront) and training stage 04 (one cuBLAS GEMM per step, layer by layer), asks algorithm.h
 * which of them suits the problem's shape, and hands every call of the pass to that one. Where
 * the one chosen does not fit, the next in that order (per-step GEMMs keep no weights on chip).
 *
 * The lesson, the prediction and the measurement: README.md beside this file.
 */
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "algorithm.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"
#include "stages_it_runs.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr Algorithm kAlgorithms[] = {Algorithm::kPersistent, Algorithm::kPartialSums,
                                     Algorithm::kLayerWavefront, Algorithm::kLayerByLayer};

class AlgorithmByShape final : public TrainingStage {
 public:
  void add_flags(CLI::App& app) override {
    app.add_option("--algorithm", algorithm_name_,
                   "which stage runs the pass: auto (by the shape, README.md), persistent "
                   "(training stage 25), partial_sums (13), layer_wavefront (05) or "
                   "layer_by_layer (04) [default: auto]")
        ->check(CLI::IsMember(
            {"auto", "persistent", "partial_sums", "layer_wavefront", "layer_by_layer"}));
    app.add_flag("--verbose", verbose_, "print which stage runs the pass, and why");
  }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    return stage(choose(s, device)).unsupported_reason(s, device);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    return stage(choose(s, current_device())).workspace_bytes(s);
  }

  void prepare(const DeviceTensors& t) override {
    const Algorithm algorithm = choose(t.size, current_device());
    if (verbose_)
      std::printf(
          "algorithm: %s (%s); a layer's step: %.3g multiply-adds (stage 13 from %.3g, layer by "
          "layer from %.3g); B = %d, L = %d (the wavefront from B = %d over several layers)\n",
          algorithm_name(algorithm),
          algorithm_name_ != "auto"            ? "--algorithm"
          : algorithm == algorithm_for(t.size) ? "by the shape"
                                               : "the shape's stage does not fit",
          layer_step_macs(t.size), kPartialSumsFromMacs, kGemmsFromMacs, t.size.batch,
          t.size.layers, kWavefrontFromRows);
    active_ = &stage(algorithm);
    // The other stages' device memory goes (an earlier shape may have prepared them).
    for (const Algorithm other : kAlgorithms)
      if (other != algorithm) made(other).reset();
    // A caller that waits on a layer's gradients (data-parallel training) hears it from the
    // stage that computes them.
    active_->set_gradients_ready_hook(
        [this](int layer, cudaStream_t stream) { gradients_ready(layer, stream); });
    active_->prepare(t);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    active_->forward(t, stream);
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    active_->backward(t, stream);
  }

 private:
  /// --algorithm where it pins one; else the shape's (algorithm.h), except that where its plan
  /// does not fit on `device` the next one runs: stage 25 gives way to 13, and 13 to the per-step
  /// GEMMs (05 over several layers, 04 for one), which keep no weights on chip.
  Algorithm choose(const ProblemSize& s, const cudaDeviceProp& device) const {
    if (algorithm_name_ != "auto") {
      for (const Algorithm a : kAlgorithms)
        if (algorithm_name_ == algorithm_name(a)) return a;
      throw std::logic_error("training stage 46: unknown --algorithm " + algorithm_name_);
    }
    Algorithm chosen = algorithm_for(s);
    if (chosen == Algorithm::kPersistent &&
        !stage(Algorithm::kPersistent).unsupported_reason(s, device).empty())
      chosen = Algorithm::kPartialSums;
    if (chosen == Algorithm::kPartialSums &&
        !stage(Algorithm::kPartialSums).unsupported_reason(s, device).empty())
      chosen = s.layers > 1 ? Algorithm::kLayerWavefront : Algorithm::kLayerByLayer;
    return chosen;
  }

  std::unique_ptr<TrainingStage>& made(Algorithm algorithm) const {
    return made_[static_cast<int>(algorithm)];
  }

  /// The stage of `algorithm`, made when first asked for. None gets flags of its own: their
  /// planners choose.
  TrainingStage& stage(Algorithm algorithm) const {
    std::unique_ptr<TrainingStage>& held = made(algorithm);
    if (!held) {
      std::unique_ptr<Stage> fresh = algorithm == Algorithm::kPersistent    ? persistent::make()
                                     : algorithm == Algorithm::kPartialSums ? partial_sums::make()
                                     : algorithm == Algorithm::kLayerWavefront
                                         ? layer_wavefront::make()
                                         : layer_by_layer::make();
      if (fresh->kind() != StageKind::kTraining)
        throw std::logic_error("training stage 46: a stage it runs is not a training stage");
      held.reset(static_cast<TrainingStage*>(fresh.release()));
    }
    return *held;
  }

  static cudaDeviceProp current_device() {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return prop;
  }

  std::string algorithm_name_ = "auto";             // --algorithm
  bool verbose_ = false;                            // --verbose
  mutable std::unique_ptr<TrainingStage> made_[4];  // by stage(), in kAlgorithms' order
  TrainingStage* active_ = nullptr;  // the one prepare() chose: runs forward() and backward()
};

}  // namespace

/// The stage (FP32, as the four it runs).
std::unique_ptr<Stage> make() {
  return std::make_unique<AlgorithmByShape>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
