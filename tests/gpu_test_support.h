// What the GPU test suites share: the odd shapes every implementation is checked on, a stage
// made with its flags applied, and the skip where there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/problem_size.h"
#include "flag_test_support.h"
#include "harness/checked_run.h"
#include "harness/cuda_utils.h"
#include "harness/stage_main.h"

namespace lstm::testing {

/// A problem size with a name for the test's label.
struct Shape {
  const char* label;
  ProblemSize size;
};

/// Odd shapes: I != H with L = 3, B = 1, T = 1, H not a multiple of 32 (and H = 1), I > H, and
/// T not a multiple of the stages' 10-step chunks.
inline const std::vector<Shape>& odd_shapes() {
  static const std::vector<Shape> list = {
      {"I_ne_H_L3", ProblemSize{37, 19, 3, 7, 3}},
      {"B1", ProblemSize{64, 64, 1, 9, 2}},
      {"T1", ProblemSize{50, 30, 5, 1, 1}},
      {"H1", ProblemSize{1, 3, 2, 4, 2}},
      {"I_gt_H", ProblemSize{45, 100, 6, 5, 2}},
      {"medium", ProblemSize{256, 128, 16, 20, 2}},
      {"T23_short_last_chunk", ProblemSize{48, 20, 2, 23, 3}},
  };
  return list;
}

/// A stage made by its factory `make` with `flags` applied as its executable applies them (its
/// Stage::add_flags on a CLI::App, then the parse), e.g. {"--weights", "registers,8"}: how a test
/// pins a stage's plan. Flags the stage refuses fail the calling test with CLI11's message, and
/// the result is null (ASSERT_TRUE on it).
inline std::unique_ptr<Stage> make_with_flags(std::unique_ptr<Stage> (*make)(),
                                              const std::vector<std::string>& flags) {
  std::unique_ptr<Stage> stage = make();
  try {
    apply_stage_flags(*stage, flags);
  } catch (const std::invalid_argument& error) {
    ADD_FAILURE() << "the stage refuses the flags " << joined(flags) << ": " << error.what();
    return nullptr;
  }
  return stage;
}

/// Prepares `stage` for `params` (a training problem with `upstream`) and runs it twice through
/// the harness's checked run; the second run must repeat the first bit for bit in every output
/// (a stage must not depend on state left by an earlier pass, and its reduction order must be
/// fixed). Returns the outputs of the first run.
inline std::vector<OutputTensor> run_twice(Stage& stage, const LstmParams& params,
                                           const std::string& name,
                                           const UpstreamGradients* upstream = nullptr) {
  DeviceProblem problem(params, upstream);
  const std::string refused = prepare_stage(stage, problem);
  EXPECT_EQ(refused, "") << name << " refuses " << params.size.describe();
  if (!refused.empty()) return {};
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::vector<OutputTensor> first = run_for_check(stage, problem, stream);
  const std::vector<OutputTensor> second = run_for_check(stage, problem, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(first[i].values.data(), second[i].values.data(),
                             first[i].values.size() * sizeof(float)))
        << name << ": a second pass gave a different " << first[i].name;
  }
  return first;
}

/// Prepares `stage` for `first`, runs a pass on it, then one on `second` (a problem of the same
/// size, other tensors or other values) and returns the second pass's outputs: a pass must read
/// and write its own tensors, whatever prepare() or an earlier pass saw. Empty if refused.
inline std::vector<OutputTensor> run_second_pass(Stage& stage, DeviceProblem& first,
                                                 DeviceProblem& second) {
  const std::string refused = prepare_stage(stage, first);
  EXPECT_EQ(refused, "");
  if (!refused.empty()) return {};
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  run_for_check(stage, first, stream);
  std::vector<OutputTensor> outputs = run_for_check(stage, second, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  return outputs;
}

/// Runs the CPU reference for `stage`'s kind and checks `outputs` against it with the stage's
/// bounds.
inline CheckReport check_against_reference(const Stage& stage, const LstmParams& params,
                                           const std::vector<OutputTensor>& outputs,
                                           const UpstreamGradients* upstream = nullptr) {
  return check_run(stage, outputs, compute_reference(params, stage.kind(), upstream));
}

/// The outputs of one checked pass of `stage` on `params` (and, for a training stage, `upstream`)
/// on a stream of its own; none, and a test failure, where the stage refuses the shape.
inline std::vector<OutputTensor> one_checked_pass(Stage& stage, const LstmParams& params,
                                                  const UpstreamGradients* upstream = nullptr) {
  DeviceProblem problem(params, upstream);
  const std::string refused = prepare_stage(stage, problem);
  EXPECT_EQ(refused, "");
  if (!refused.empty()) return {};
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<OutputTensor> outputs = run_for_check(stage, problem, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  return outputs;
}

/// Expects `got` to be `want`, every tensor bit for bit; `what` names the case in a failure.
inline void expect_same_bits(const std::vector<OutputTensor>& got,
                             const std::vector<OutputTensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].values.size(), want[i].values.size()) << what << ": " << got[i].name;
    EXPECT_EQ(0, std::memcmp(got[i].values.data(), want[i].values.data(),
                             got[i].values.size() * sizeof(float)))
        << what << ": " << got[i].name << " differs";
  }
}

/// The layers whose gradients a training stage reports ready through its hook (stage.h) in one
/// checked pass, sorted: every layer once, for a stage that calls the hook.
inline std::vector<int> layers_reported_ready(Stage& stage, const LstmParams& params,
                                              const UpstreamGradients* upstream) {
  auto& training = static_cast<TrainingStage&>(stage);
  std::vector<int> layers;
  training.set_gradients_ready_hook([&](int layer, cudaStream_t) { layers.push_back(layer); });
  one_checked_pass(stage, params, upstream);
  training.set_gradients_ready_hook({});
  std::sort(layers.begin(), layers.end());
  return layers;
}

}  // namespace lstm::testing

/// Skips the calling test, saying why, where no GPU is present (a macro: GTEST_SKIP returns
/// from the function it is written in).
#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why_;                                                            \
    if (!::lstm::cuda_device_available(&why_)) {                                 \
      GTEST_SKIP() << "no CUDA GPU (" << why_ << "): this GPU test was not run"; \
    }                                                                            \
  } while (0)
