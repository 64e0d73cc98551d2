// Stage 11 on the GPU with its plan pinned through its own flags (--plan, as its executable takes
// them), so that every path of the persistent kernel runs: all register-tile widths, 64 to 512
// threads, several chunks of h per step, several batch groups, batch slices with a partly empty
// last group, H not a multiple of 4. Each case is checked against the CPU reference and must
// repeat bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage 11's, as its build names it
std::unique_ptr<Stage> make();

namespace {

struct PinnedCase {
  const char* label;
  ProblemSize size;
  const char* flags;  ///< the stage's flags: --plan tile,threads,groups,rows
};

const std::vector<PinnedCase>& cases() {
  static const std::vector<PinnedCase> list = {
      {"tile4_chunks", ProblemSize{300, 50, 64, 6, 2}, "--plan 4,64,1"},
      {"tile8_chunks", ProblemSize{300, 50, 64, 6, 2}, "--plan 8,64,1"},
      {"groups2_slices", ProblemSize{130, 20, 10, 5, 2}, "--plan 4,128,2,3"},
      {"groups2_slices_tile8", ProblemSize{130, 20, 10, 5, 2}, "--plan 8,128,2,3"},
      {"groups3_tile8_odd_h", ProblemSize{257, 31, 7, 4, 1}, "--plan 8,256,3"},
      {"one_row_per_block", ProblemSize{66, 66, 5, 3, 2}, "--plan 4,96,1,1"},
      {"threads512_B1", ProblemSize{64, 64, 1, 3, 3}, "--plan 4,512,1"},
      {"tile16_groups2", ProblemSize{200, 40, 70, 5, 2}, "--plan 16,128,2"},
      {"tile16_chunks_slices", ProblemSize{520, 30, 40, 4, 1}, "--plan 16,64,1,20"},
      {"auto_large_batch", ProblemSize{96, 40, 300, 3, 1}, ""},
  };
  return list;
}

class Stage11Pinned : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Stage11Pinned, MatchesTheCpuReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const PinnedCase& c = cases()[GetParam()];
  const std::vector<std::string> flags = testing::words(c.flags);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  // The plan the flags give fits (a case that stopped fitting would test the refusal instead).
  const PlanRequest request = testing::parse_stage_flags<StageFlags>(flags).request;
  const Plan plan = make_plan(c.size, device_limits(prop), request);
  ASSERT_TRUE(plan.fits) << c.flags << ": " << plan.why;
  const LstmParams params = generate_params(c.size, 7);
  std::unique_ptr<Stage> stage = testing::make_with_flags(make, flags);
  ASSERT_TRUE(stage);
  const auto first = testing::run_twice(*stage, params, c.label);
  const CheckReport report = testing::check_against_reference(*stage, params, first);
  EXPECT_TRUE(report.passed()) << c.label << " " << c.size.describe() << " " << c.flags << " ("
                               << plan.describe() << ")\n"
                               << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Plans, Stage11Pinned, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

TEST(Stage11Limits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why = make()->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

TEST(Stage11Flags, TheStageRefusesABadPlan) {  // no GPU needed: refused before anything runs
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "5"}), std::invalid_argument);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
