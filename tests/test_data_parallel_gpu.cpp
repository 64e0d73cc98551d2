// Multi-GPU stage 00 on the GPU (stages/multigpu/00_data_parallel): data-parallel training at
// G = 1 and at every G up to the GPUs visible (a G over them is skipped, saying so), on shapes
// whose batch each G splits unevenly and on one row per GPU, with the default inner stage (which
// announces each layer's gradients: the all-reduces overlap the backward) and with one that does
// not (training/05_layer_wavefront: every all-reduce after the backward). Every output and
// gradient is checked against the CPU reference, as the harness checks it, and must repeat bit
// for bit. Also the refusals: more GPUs than visible, more GPUs than batch rows. Skipped
// without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "harness/checked_run.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // the stage's, as its build names it
std::unique_ptr<Stage> make();

namespace {

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

/// Runs the stage with `flags` on `size` twice and checks every tensor against the reference.
void check_with_flags(const ProblemSize& size, const std::vector<std::string>& flags) {
  std::unique_ptr<Stage> stage = testing::make_with_flags(&make, flags);
  ASSERT_TRUE(stage);
  const LstmParams params = generate_params(size, 42);
  const UpstreamGradients upstream = generate_upstream(size, 43);
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME) + " " + testing::joined(flags);
  const auto outputs = testing::run_twice(*stage, params, name, &upstream);
  ASSERT_FALSE(outputs.empty()) << name << " refused " << size.describe();
  const CheckReport report = testing::check_against_reference(*stage, params, outputs, &upstream);
  EXPECT_TRUE(report.passed()) << name << " " << size.describe() << "\n" << report.describe();
  EXPECT_EQ(report.tensors.size(), output_layouts(size, StageKind::kTraining).size());
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
}

struct SplitCase {
  const char* label;
  ProblemSize size;   // {H, I, B, T, L}
  const char* inner;  // "" = the stage's default
};

const std::vector<SplitCase>& cases() {
  static const std::vector<SplitCase> list = {
      {"I_ne_H_L3_B9", ProblemSize{37, 19, 9, 7, 3}, ""},
      {"medium_B16", ProblemSize{256, 128, 16, 20, 2}, ""},
      {"H1_B11_T1", ProblemSize{1, 3, 11, 1, 2}, ""},
      {"I_gt_H_B13_no_hook", ProblemSize{45, 100, 13, 5, 2}, "training/05_layer_wavefront"},
      {"B10_inner_06", ProblemSize{64, 64, 10, 9, 2}, "training/06_persistent"},
  };
  return list;
}

class DataParallel : public ::testing::TestWithParam<std::tuple<int, std::size_t>> {};

TEST_P(DataParallel, MatchesTheCpuReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const int gpus = std::get<0>(GetParam());
  if (gpus > visible_gpus()) {
    GTEST_SKIP() << "--gpus " << gpus << " needs " << gpus << " GPUs; " << visible_gpus()
                 << " visible here: not run";
  }
  const SplitCase& c = cases()[std::get<1>(GetParam())];
  std::vector<std::string> flags = {"--gpus", std::to_string(gpus)};
  if (*c.inner) flags.insert(flags.end(), {"--inner", c.inner});
  check_with_flags(c.size, flags);
}

INSTANTIATE_TEST_SUITE_P(Gpus, DataParallel,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Range<std::size_t>(0, cases().size())),
                         [](const ::testing::TestParamInfo<DataParallel::ParamType>& info) {
                           return "G" + std::to_string(std::get<0>(info.param)) + "_" +
                                  cases()[std::get<1>(info.param)].label;
                         });

// One batch row per GPU, at every G the machine has (skipped, saying so, where it has one: G = 1
// alone is not what the test is for).
TEST(DataParallelRows, OneRowPerGpu) {
  SKIP_WITHOUT_GPU();
  if (visible_gpus() < 2)
    GTEST_SKIP() << "needs 2 GPUs or more; " << visible_gpus() << " visible here: not run";
  for (int gpus = 1; gpus <= std::min(visible_gpus(), 8); ++gpus) {
    SCOPED_TRACE("G = " + std::to_string(gpus));
    check_with_flags(ProblemSize{50, 30, gpus, 4, 2}, {"--gpus", std::to_string(gpus)});
  }
}

/// The harness's refusal of `size` with `flags` ("" when prepared).
std::string refusal(const ProblemSize& size, const std::vector<std::string>& flags) {
  std::unique_ptr<Stage> stage = testing::make_with_flags(&make, flags);
  if (!stage) return "flags refused";
  const LstmParams params = generate_params(size, 1);
  const UpstreamGradients upstream = generate_upstream(size, 2);
  DeviceProblem problem(params, &upstream);
  return prepare_stage(*stage, problem);
}

TEST(DataParallelRefusals, MoreGpusThanVisible) {
  SKIP_WITHOUT_GPU();
  const int gpus = visible_gpus() + 1;
  EXPECT_EQ(refusal(ProblemSize{16, 16, 64, 2, 1}, {"--gpus", std::to_string(gpus)}),
            "--gpus " + std::to_string(gpus) + " asks for more GPUs than the " +
                std::to_string(visible_gpus()) +
                " visible here (CUDA_VISIBLE_DEVICES sets which are)");
}

TEST(DataParallelRefusals, MoreGpusThanBatchRows) {
  SKIP_WITHOUT_GPU();
  if (visible_gpus() < 2)
    GTEST_SKIP() << "needs 2 GPUs to split 1 batch row over; " << visible_gpus()
                 << " visible here: not run";
  EXPECT_EQ(refusal(ProblemSize{16, 16, 1, 2, 1}, {"--gpus", "2"}),
            "--gpus 2 splits a batch of 1 rows: every GPU needs at least one row (at most "
            "--gpus 1)");
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
