// Stage 09 on the GPU with its plan pinned, so that every path of the persistent kernel runs:
// all register-tile widths, 64 to 512 threads, several chunks of h per step, several batch
// groups, batch slices with a partly empty last group, H not a multiple of 4. Each case is
// checked against the CPU reference and must repeat bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "persistent_stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage 09's, as its build names it
namespace {

struct PinnedCase {
  const char* label;
  ProblemSize size;
  PlanRequest request;
};

PlanRequest pin(int tile, int threads, int groups, int rows) {
  PlanRequest r;
  r.tile_batch = tile;
  r.threads = threads;
  r.batch_groups = groups;
  r.group_batch = rows;
  return r;
}

const std::vector<PinnedCase>& cases() {
  static const std::vector<PinnedCase> list = {
      {"tile4_chunks", ProblemSize{300, 50, 64, 6, 2}, pin(4, 64, 1, 0)},
      {"tile8_chunks", ProblemSize{300, 50, 64, 6, 2}, pin(8, 64, 1, 0)},
      {"groups2_slices", ProblemSize{130, 20, 10, 5, 2}, pin(4, 128, 2, 3)},
      {"groups3_tile8_odd_h", ProblemSize{257, 31, 7, 4, 1}, pin(8, 256, 3, 0)},
      {"one_row_per_block", ProblemSize{66, 66, 5, 3, 2}, pin(4, 96, 1, 1)},
      {"threads512_B1", ProblemSize{64, 64, 1, 3, 3}, pin(4, 512, 1, 0)},
      {"tile16_groups2", ProblemSize{200, 40, 70, 5, 2}, pin(16, 128, 2, 0)},
      {"tile16_chunks_slices", ProblemSize{520, 30, 40, 4, 1}, pin(16, 64, 1, 20)},
      {"auto_large_batch", ProblemSize{96, 40, 300, 3, 1}, pin(0, 0, 0, 0)},
  };
  return list;
}

class Stage09Pinned : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Stage09Pinned, MatchesTheCpuReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const PinnedCase& c = cases()[GetParam()];
  const LstmParams params = generate_params(c.size, 7);
  std::unique_ptr<Stage> stage = make_with_plan(c.request);
  const auto first = testing::run_twice(*stage, params, c.label);
  const CheckReport report = testing::check_against_reference(*stage, params, first);
  EXPECT_TRUE(report.passed()) << c.label << " " << c.size.describe() << "\n" << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Plans, Stage09Pinned, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

TEST(Stage09Limits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why =
      make_with_plan({})->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

TEST(Stage09Flags, PinThePlanLikeTheFactory) {
  SKIP_WITHOUT_GPU();
  // The executable's --plan reaches the same plan as a pinned request.
  std::unique_ptr<Stage> stage = make();
  apply_stage_flags(*stage, {"--plan", "8,128,2,3"});
  const ProblemSize size{130, 20, 10, 5, 2};
  const LstmParams params = generate_params(size, 11);
  const auto outputs = testing::run_twice(*stage, params, "flags --plan 8,128,2,3");
  EXPECT_TRUE(testing::check_against_reference(*stage, params, outputs).passed());
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "5"}), std::invalid_argument);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
