// Every stage of the registry against the CPU reference on odd shapes, and on the PyTorch fixture
// through --load's reader. These tests need a CUDA GPU and are skipped, with the reason, without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "device_problem.h"
#include "gpu_test_support.h"
#include "stage_registry.h"

namespace lstm {
namespace {

using testing::Shape;

const std::vector<Shape>& shapes() {
  return testing::odd_shapes();
}

/// Runs `info` on `params` twice (the second run must repeat the first bit for bit: a stage must
/// not depend on state left by an earlier forward) and returns the outputs.
LstmOutputs run_stage(const StageInfo& info, const LstmParams& params) {
  std::unique_ptr<Stage> stage = info.make();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string unsupported = stage->unsupported_reason(params.size, prop);
  EXPECT_EQ(unsupported, "") << info.name << " refuses " << params.size.describe();
  DeviceProblem problem(params);
  stage->prepare(problem.tensors());
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const LstmOutputs first = run_forward_for_check(*stage, problem, stream);
  const LstmOutputs second = run_forward_for_check(*stage, problem, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  EXPECT_EQ(0, std::memcmp(first.y.data(), second.y.data(), first.y.size() * sizeof(float)))
      << info.name << ": a second forward pass gave different y";
  EXPECT_EQ(0, std::memcmp(first.cy.data(), second.cy.data(), first.cy.size() * sizeof(float)))
      << info.name << ": a second forward pass gave different cy";
  return first;
}

class StageVsReference : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(StageVsReference, MatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const StageInfo& info = all_stages()[std::get<0>(GetParam())];
  const Shape& shape = shapes()[std::get<1>(GetParam())];
  const LstmParams params = generate_params(shape.size, 42);
  const LstmOutputs outputs = run_stage(info, params);
  const CheckReport report = check_against_reference(params, outputs, shape.size.seq_len);
  EXPECT_TRUE(report.passed()) << info.name << " " << shape.size.describe() << "\n"
                               << report.describe();
  EXPECT_EQ(report.tensors.size(), 3u);  // y, hy and cy all compared
}

std::string case_name(const ::testing::TestParamInfo<StageVsReference::ParamType>& info) {
  return "stage_" + all_stages()[std::get<0>(info.param)].name + "_" +
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
  const LstmParams params = load_params(dir, {});
  const LstmOutputs torch = load_outputs(dir, params.size);
  const LstmOutputs outputs = run_stage(info, params);
  // PyTorch's outputs (float64, stored as float32) play the reference here.
  const std::vector<double> y(torch.y.begin(), torch.y.end());
  const std::vector<double> hy(torch.hy.begin(), torch.hy.end());
  const std::vector<double> cy(torch.cy.begin(), torch.cy.end());
  const ProblemSize& s = params.size;
  const CheckReport report = check_outputs(s.batch, s.hidden, s.layers, s.seq_len, s.seq_len,
                                           outputs.y, outputs.hy, outputs.cy, y, hy, cy);
  EXPECT_TRUE(report.passed()) << info.name << " vs PyTorch\n" << report.describe();
}

INSTANTIATE_TEST_SUITE_P(AllStages, StageVsPyTorch,
                         ::testing::Range<std::size_t>(0, all_stages().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return "stage_" + all_stages()[info.param].name;
                         });

}  // namespace
}  // namespace lstm
