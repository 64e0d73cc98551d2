// Every stage of the registry against the CPU reference on odd shapes, and on the PyTorch fixture
// through --load's reader. These tests need a CUDA GPU and are skipped, with the reason, without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/quantize.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_registry.h"

namespace lstm {
namespace {

using testing::Shape;

/// A stage's name as a test name: "forward/00_naive" -> "forward_00_naive".
std::string safe_name(std::string name) {
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

/// A test case's name where the parameter is a registry index: the stage's name.
std::string stage_test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  return safe_name(all_stages()[info.param].name);
}

/// The registry's indices of the stages of `kind` (a stage's constructor does no GPU work).
std::vector<std::size_t> stages_of_kind(StageKind kind) {
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < all_stages().size(); ++i) {
    if (all_stages()[i].make()->kind() == kind) indices.push_back(i);
  }
  return indices;
}

const std::vector<Shape>& shapes() {
  return testing::odd_shapes();
}

class StageVsReference : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(StageVsReference, MatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const StageInfo& info = all_stages()[std::get<0>(GetParam())];
  const Shape& shape = shapes()[std::get<1>(GetParam())];
  LstmParams params = generate_params(shape.size, 42);
  std::unique_ptr<Stage> stage = info.make();
  UpstreamGradients upstream = generate_upstream(shape.size, 43);
  const bool training = stage->kind() == StageKind::kTraining;
  UpstreamGradients* given = training ? &upstream : nullptr;
  // A reduced-precision stage gets its data rounded once, as the harness does: the reference
  // reads the same values (a no-op in FP32).
  quantize_problem(stage->precision(), params, given);
  const auto outputs = testing::run_twice(*stage, params, info.name, given);
  const CheckReport report = testing::check_against_reference(*stage, params, outputs, given);
  EXPECT_TRUE(report.passed()) << info.name << " " << shape.size.describe() << "\n"
                               << report.describe();
  // every output compared: y, hy and cy (and every gradient of a training pass)
  EXPECT_EQ(report.tensors.size(), output_layouts(shape.size, stage->kind()).size());
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
}

std::string case_name(const ::testing::TestParamInfo<StageVsReference::ParamType>& info) {
  return safe_name(all_stages()[std::get<0>(info.param)].name) + "_" +
         shapes()[std::get<1>(info.param)].label;
}

INSTANTIATE_TEST_SUITE_P(AllStages, StageVsReference,
                         ::testing::Combine(::testing::Range<std::size_t>(0, all_stages().size()),
                                            ::testing::Range<std::size_t>(0, shapes().size())),
                         case_name);

class StageVsPyTorch : public ::testing::TestWithParam<std::size_t> {};

TEST_P(StageVsPyTorch, ReproducesThePyTorchFixture) {
  SKIP_WITHOUT_GPU();
  const StageInfo& info = all_stages()[GetParam()];
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) + "/pytorch_fixture";
  LstmParams params = load_params(dir, {});
  std::unique_ptr<Stage> stage = info.make();
  // PyTorch's outputs (float64, stored as float32) play the reference here; for a
  // reduced-precision stage the fixture is rounded once and the CPU reference of the rounded
  // values plays it (PyTorch's outputs belong to the unrounded ones).
  const bool reduced = stage->precision() != Precision::kFp32;
  quantize_problem(stage->precision(), params, nullptr);
  const auto outputs = testing::run_twice(*stage, params, info.name);
  const CheckReport report =
      reduced ? testing::check_against_reference(*stage, params, outputs)
              : check_run(*stage, outputs, load_reference(dir, params.size, StageKind::kForward));
  EXPECT_TRUE(report.passed()) << info.name << " vs PyTorch\n" << report.describe();
  EXPECT_EQ(report.tensors.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(ForwardStages, StageVsPyTorch,
                         ::testing::ValuesIn(stages_of_kind(StageKind::kForward)), stage_test_name);

class TrainingStageVsPyTorch : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TrainingStageVsPyTorch, ReproducesThePyTorchAutogradFixture) {
  SKIP_WITHOUT_GPU();
  const StageInfo& info = all_stages()[GetParam()];
  std::unique_ptr<Stage> stage = info.make();
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) + "/pytorch_training_fixture";
  LstmParams params = load_params(dir, {});
  UpstreamGradients upstream = load_upstream(dir, params.size, 0);
  // PyTorch's autograd in float64 (stored as float32) plays the reference for every gradient;
  // for a reduced-precision stage the fixture is rounded once and the CPU reference of the
  // rounded values plays it, as for the forward stages above.
  const bool reduced = stage->precision() != Precision::kFp32;
  quantize_problem(stage->precision(), params, &upstream);
  const auto outputs = testing::run_twice(*stage, params, info.name, &upstream);
  const CheckReport report =
      reduced ? testing::check_against_reference(*stage, params, outputs, &upstream)
              : check_run(*stage, outputs, load_reference(dir, params.size, StageKind::kTraining));
  EXPECT_TRUE(report.passed()) << info.name << " vs PyTorch autograd\n" << report.describe();
  EXPECT_EQ(report.tensors.size(), output_layouts(params.size, StageKind::kTraining).size());
}

INSTANTIATE_TEST_SUITE_P(TrainingStages, TrainingStageVsPyTorch,
                         ::testing::ValuesIn(stages_of_kind(StageKind::kTraining)),
                         stage_test_name);

/// A pass may come with other tensors than the ones prepare() saw (the same size, other values):
/// it must read and write those. A stage that records its pass as a CUDA graph, or keeps weights
/// it prepared, has to notice (lstm::same_tensors) and record or prepare again.
class StageReadsTheTensorsOfEachPass : public ::testing::TestWithParam<std::size_t> {};

TEST_P(StageReadsTheTensorsOfEachPass, ASecondProblemGetsItsOwnOutputs) {
  SKIP_WITHOUT_GPU();
  const StageInfo& info = all_stages()[GetParam()];
  std::unique_ptr<Stage> stage = info.make();
  const ProblemSize size = shapes()[0].size;
  const bool training = stage->kind() == StageKind::kTraining;
  LstmParams prepared_params = generate_params(size, 11), other_params = generate_params(size, 12);
  UpstreamGradients prepared_upstream = generate_upstream(size, 13),
                    other_upstream = generate_upstream(size, 14);
  quantize_problem(stage->precision(), prepared_params, training ? &prepared_upstream : nullptr);
  quantize_problem(stage->precision(), other_params, training ? &other_upstream : nullptr);
  DeviceProblem prepared(prepared_params, training ? &prepared_upstream : nullptr),
      other(other_params, training ? &other_upstream : nullptr);
  const std::vector<OutputTensor> outputs = testing::run_second_pass(*stage, prepared, other);
  const CheckReport report = testing::check_against_reference(*stage, other_params, outputs,
                                                              training ? &other_upstream : nullptr);
  EXPECT_TRUE(report.passed()) << info.name << ": the second problem's outputs\n"
                               << report.describe();
}

INSTANTIATE_TEST_SUITE_P(AllStages, StageReadsTheTensorsOfEachPass,
                         ::testing::Range<std::size_t>(0, all_stages().size()), stage_test_name);

/// A pass must end on the caller's stream: work a stage forks to side streams has to be joined
/// back (stage.h). The harness synchronises the whole device after a pass, so a missing join
/// would go unseen there. Stream capture makes it visible: a capture whose forked work is not
/// joined back cannot end (cudaErrorStreamCaptureUnjoined). A stage whose pass is one launch of
/// a CUDA graph it recorded itself cannot be captured (a graph launch is refused in a capturing
/// stream), but its own capture in prepare() could end only if every fork was joined: for it
/// this test checks that the refusal is that one. The captured graph is not launched.
class StageJoinsItsStreams : public ::testing::TestWithParam<std::size_t> {};

TEST_P(StageJoinsItsStreams, APassCapturedFromTheCallersStreamEndsThere) {
  SKIP_WITHOUT_GPU();
  const StageInfo& info = all_stages()[GetParam()];
  std::unique_ptr<Stage> stage = info.make();
  const ProblemSize size = shapes()[0].size;
  const LstmParams params = generate_params(size, 42);
  const UpstreamGradients upstream = generate_upstream(size, 43);
  auto* training = dynamic_cast<TrainingStage*>(stage.get());
  DeviceProblem problem(params, training ? &upstream : nullptr);
  ASSERT_EQ(prepare_stage(*stage, problem), "") << info.name;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  run_for_check(*stage, problem, stream);  // a pass outside capture first: lazy set-up happens

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string thrown;
  try {
    stage->forward(problem.tensors(), stream);
    if (training) training->backward(problem.tensors(), stream);
  } catch (const std::exception& error) {
    thrown = error.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);  // ends the capture in any case
  // A pass that is a graph launch of the stage's own: refused here, its join checked when the
  // stage recorded it.
  const bool own_graph = thrown.find("cudaGraphLaunch") != std::string::npos &&
                         thrown.find("cudaErrorStreamCaptureUnsupported") != std::string::npos;
  if (own_graph) {
    EXPECT_EQ(ended, cudaErrorStreamCaptureInvalidated) << info.name;
  } else {
    EXPECT_EQ(thrown, "") << info.name << ": a call of the pass failed under stream capture";
    EXPECT_EQ(ended, cudaSuccess)
        << info.name << ": the capture of a pass could not end: " << cudaGetErrorName(ended)
        << (ended == cudaErrorStreamCaptureUnjoined
                ? " (work on a side stream is not joined back into the caller's stream)"
                : "");
  }
  if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
  (void)cudaGetLastError();  // a failed capture leaves its error behind: not this test's next
  CUDA_CHECK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(AllStages, StageJoinsItsStreams,
                         ::testing::Range<std::size_t>(0, all_stages().size()), stage_test_name);

}  // namespace
}  // namespace lstm
