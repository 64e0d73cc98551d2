// Training stage 06 on the GPU with its plans pinned, so that every path of the two persistent
// kernels runs: forward and backward batch slices, batch groups (one partly filled, one empty),
// a last block with fewer units, units not a multiple of 4, one batch row per block. Each case
// is checked against the CPU reference on every gradient and must repeat bit for bit. Also: a
// hidden size too large for the chip is refused before launch, saying why and what fits.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "persistent_stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // training stage 06's, as its build names it
namespace {

struct PinnedCase {
  const char* label;
  ProblemSize size;
  PlanRequest request;
};

PlanRequest pin(int forward_rows, int groups, int backward_rows) {
  PlanRequest r;
  r.forward_rows = forward_rows;
  r.backward_groups = groups;
  r.backward_rows = backward_rows;
  return r;
}

const std::vector<PinnedCase>& cases() {
  static const std::vector<PinnedCase> list = {
      {"forward_slices", ProblemSize{48, 20, 5, 4, 2}, pin(2, 0, 0)},
      {"groups2_slices_short_group", ProblemSize{70, 33, 7, 5, 2}, pin(0, 2, 2)},
      {"groups3_empty_groups", ProblemSize{40, 16, 4, 3, 2}, pin(0, 3, 1)},
      {"units_not_multiple_of_4", ProblemSize{301, 40, 6, 3, 1}, pin(0, 2, 0)},
      {"one_row_per_block", ProblemSize{64, 64, 3, 3, 2}, pin(1, 1, 1)},
      {"groups4_B64", ProblemSize{128, 32, 64, 3, 1}, pin(0, 4, 0)},
      {"auto_large_batch", ProblemSize{96, 40, 300, 3, 1}, pin(0, 0, 0)},
  };
  return list;
}

class Training06Pinned : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Training06Pinned, MatchesTheCpuReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const PinnedCase& c = cases()[GetParam()];
  const LstmParams params = generate_params(c.size, 7);
  const UpstreamGradients upstream = generate_upstream(c.size, 8);
  std::unique_ptr<Stage> stage = make_with_plan(c.request);
  const auto first = testing::run_twice(*stage, params, c.label, &upstream);
  const CheckReport report = testing::check_against_reference(*stage, params, first, &upstream);
  EXPECT_TRUE(report.passed()) << c.label << " " << c.size.describe() << "\n" << report.describe();
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Plans, Training06Pinned, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

TEST(Training06Limits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why =
      make_with_plan({})->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

TEST(Training06Flags, PinThePlanLikeTheFactory) {
  SKIP_WITHOUT_GPU();
  // The executable's --plan reaches the same plans as a pinned request.
  std::unique_ptr<Stage> stage = make();
  apply_stage_flags(*stage, {"--plan", "2,2,3"});
  const ProblemSize size{130, 20, 10, 5, 2};
  const LstmParams params = generate_params(size, 11);
  const UpstreamGradients upstream = generate_upstream(size, 12);
  const auto outputs = testing::run_twice(*stage, params, "flags --plan 2,2,3", &upstream);
  EXPECT_TRUE(testing::check_against_reference(*stage, params, outputs, &upstream).passed());
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "x"}), std::invalid_argument);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
