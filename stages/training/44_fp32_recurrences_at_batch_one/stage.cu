/*! \file
 *  \brief Training stage 44: training stage 40 with a third design, training stage 20's FP32
 *         recurrences, for one layer of one batch row.
 *
 * No kernels of its own: the stage holds training stage 20 (the recurrences in FP32 on the FMA
 * units, the GEMMs on tensor cores), training stage 43 (the recurrences on tensor cores, W_hh on
 * chip) and training stage 15 (one tensor-core GEMM per step, the layers as a wavefront), asks
 * algorithm.h which of them suits the problem's shape, and hands every call of the pass to that
 * one. Stage 15 from a step's work of kGemmsFromMacs multiply-adds on; below, stage 20 for one
 * layer of one batch row (H >= 384) and stage 43 otherwise; where the one chosen does not fit, the
 * next in that order.
 *
 * The lesson, the prediction and the measurement: README.md beside this file.
 */
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "algorithm.h"
#include "core/kind_and_precision.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"
#include "stages_it_runs.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

class AlgorithmByShape final : public TrainingStage {
 public:
  explicit AlgorithmByShape(std::string precision_name)
      : precision_name_(std::move(precision_name)) {}

  Precision precision() const override {
    return precision_name_ == "bf16" ? Precision::kBf16 : Precision::kFp16;
  }

  /// The project's bounds for the precision (core/kind_and_precision.h), every stage's bounds.
  Tolerance tolerance(const std::string& tensor) const override {
    return reduced_precision_tolerance(precision(), tensor);
  }

  void add_flags(CLI::App& app) override {
    app.add_option("--algorithm", algorithm_name_,
                   "which stage runs the pass: auto (by the shape, README.md), fp32_recurrences "
                   "(training stage 20), persistent (training stage 43) or gemms (training stage "
                   "15) [default: auto]")
        ->check(CLI::IsMember({"auto", "fp32_recurrences", "persistent", "gemms"}));
    app.add_option("--precision", precision_name_,
                   "the 16-bit type of the stages' tensor-core operands (FP32 sums)")
        ->check(CLI::IsMember({"fp16", "bf16"}));
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
          "algorithm: %s (%s); a step's recurrent products: %.3g multiply-adds, per-step "
          "GEMMs from %.3g\n",
          algorithm_name(algorithm),
          algorithm_name_ != "auto"            ? "--algorithm"
          : algorithm == algorithm_for(t.size) ? "by the shape"
                                               : "the shape's stage does not fit",
          wavefront_step_macs(t.size), kGemmsFromMacs);
    active_ = &stage(algorithm);
    // The other stages' device memory goes (an earlier shape may have prepared them).
    for (const Algorithm other :
         {Algorithm::kFp32Recurrences, Algorithm::kPersistent, Algorithm::kGemms})
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
  /// does not fit on `device` the next one runs: stage 20 gives way to stage 43, stage 43 to
  /// stage 15 (it keeps no weights on chip).
  Algorithm choose(const ProblemSize& s, const cudaDeviceProp& device) const {
    if (algorithm_name_ != "auto")
      return algorithm_name_ == "fp32_recurrences" ? Algorithm::kFp32Recurrences
             : algorithm_name_ == "persistent"     ? Algorithm::kPersistent
                                                   : Algorithm::kGemms;
    Algorithm chosen = algorithm_for(s);
    if (chosen == Algorithm::kFp32Recurrences &&
        !stage(Algorithm::kFp32Recurrences).unsupported_reason(s, device).empty())
      chosen = Algorithm::kPersistent;
    if (chosen == Algorithm::kPersistent &&
        !stage(Algorithm::kPersistent).unsupported_reason(s, device).empty())
      chosen = Algorithm::kGemms;
    return chosen;
  }

  std::unique_ptr<TrainingStage>& made(Algorithm algorithm) const {
    return algorithm == Algorithm::kFp32Recurrences ? fp32_recurrences_
           : algorithm == Algorithm::kPersistent    ? persistent_
                                                    : gemms_;
  }

  /// The stage of `algorithm` in this stage's precision, made when first asked for (after the
  /// flags are parsed, so in the precision they ask for). None gets flags of its own: their
  /// planners choose.
  TrainingStage& stage(Algorithm algorithm) const {
    std::unique_ptr<TrainingStage>& held = made(algorithm);
    if (!held) {
      const bool bf16 = precision() == Precision::kBf16;
      std::unique_ptr<Stage> fresh =
          algorithm == Algorithm::kFp32Recurrences
              ? (bf16 ? fp32_recurrences::make_bf16() : fp32_recurrences::make())
          : algorithm == Algorithm::kPersistent
              ? (bf16 ? persistent::make_bf16() : persistent::make())
              : (bf16 ? gemms::make_bf16() : gemms::make());
      if (fresh->kind() != StageKind::kTraining)
        throw std::logic_error("training stage 44: a stage it runs is not a training stage");
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

  std::string algorithm_name_ = "auto";  // --algorithm
  std::string precision_name_;           // --precision: fp16 or bf16
  bool verbose_ = false;                 // --verbose
  mutable std::unique_ptr<TrainingStage> fp32_recurrences_, persistent_, gemms_;  // by stage()
  TrainingStage* active_ = nullptr;  // the one prepare() chose: runs forward() and backward()
};

}  // namespace

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<AlgorithmByShape>("fp16");
}

/// The BF16 stage: the registry entry training/44_fp32_recurrences_at_batch_one_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<AlgorithmByShape>("bf16");
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
