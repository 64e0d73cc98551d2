// Every stage of the registry against the CPU reference on odd shapes, and on the PyTorch fixture
// through --load's reader. These tests need a CUDA GPU and are skipped, with the reason, without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/checked_run.h"
#include "gpu_test_support.h"
#include "harness/stage_registry.h"

namespace lstm {
namespace {

using testing::Shape;

const std::vector<Shape>& shapes() {
  return testing::odd_shapes();
}

/// Runs `info` on `params` twice (testing::run_twice) and returns the outputs.
LstmOutputs run_stage(const StageInfo& info, const LstmParams& params) {
  std::unique_ptr<Stage> stage = info.make();
  return testing::run_twice(*stage, params, info.name);
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
