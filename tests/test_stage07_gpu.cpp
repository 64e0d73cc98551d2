// Stage 07 on the GPU with its plan pinned, so that every path of the persistent kernel runs:
// all register-tile widths, 64 to 512 threads, several chunks of h per step, several batch
// groups, batch slices with a partly empty last group, H not a multiple of 4. Each case is
// checked against the CPU reference and must repeat bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "device_problem.h"
#include "gpu_test_support.h"
#include "persistent_stage.h"

namespace lstm::stage_07_persistent {
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
  using testing::make_size;
  static const std::vector<PinnedCase> list = {
      {"tile4_chunks", make_size(300, 50, 64, 6, 2), pin(4, 64, 1, 0)},
      {"tile8_chunks", make_size(300, 50, 64, 6, 2), pin(8, 64, 1, 0)},
      {"groups2_slices", make_size(130, 20, 10, 5, 2), pin(4, 128, 2, 3)},
      {"groups3_tile8_odd_h", make_size(257, 31, 7, 4, 1), pin(8, 256, 3, 0)},
      {"one_row_per_block", make_size(66, 66, 5, 3, 2), pin(4, 96, 1, 1)},
      {"threads512_B1", make_size(64, 64, 1, 3, 3), pin(4, 512, 1, 0)},
      {"tile16_groups2", make_size(200, 40, 70, 5, 2), pin(16, 128, 2, 0)},
      {"tile16_chunks_slices", make_size(520, 30, 40, 4, 1), pin(16, 64, 1, 20)},
      {"auto_large_batch", make_size(96, 40, 300, 3, 1), pin(0, 0, 0, 0)},
  };
  return list;
}

class Stage07Pinned : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Stage07Pinned, MatchesTheCpuReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const PinnedCase& c = cases()[GetParam()];
  const LstmParams params = generate_params(c.size, 7);
  std::unique_ptr<Stage> stage = make_with_plan(c.request);
  const LstmOutputs first = testing::run_twice(*stage, params, c.label);
  const CheckReport report = check_against_reference(params, first, c.size.seq_len);
  EXPECT_TRUE(report.passed()) << c.label << " " << c.size.describe() << "\n" << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Plans, Stage07Pinned, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

TEST(Stage07Limits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why =
      make_with_plan({})->unsupported_reason(testing::make_size(4000, 4000, 64, 10, 1), prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

}  // namespace
}  // namespace lstm::stage_07_persistent
