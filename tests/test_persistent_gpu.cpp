// The persistent stages (forward 07-10) through the registry: a hidden size too large for the
// chip is refused before launch, saying why and what fits; a batch too large for one launch runs
// as several launches (slices of the batch), checked against the CPU reference and repeated bit
// for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_registry.h"

namespace lstm {
namespace {

/// The registry's indices of the forward stages that keep W_hh on chip.
std::vector<std::size_t> persistent_stages() {
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < all_stages().size(); ++i) {
    const std::string& name = all_stages()[i].name;
    for (const char* stage : {"forward/07_", "forward/08_", "forward/09_", "forward/10_"})
      if (name.rfind(stage, 0) == 0) indices.push_back(i);
  }
  return indices;
}

std::string test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name = all_stages()[info.param].name;
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

class PersistentStage : public ::testing::TestWithParam<std::size_t> {};

TEST_P(PersistentStage, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why =
      all_stages()[GetParam()].make()->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

TEST_P(PersistentStage, ABatchTooLargeForOneLaunchRunsInSlices) {
  SKIP_WITHOUT_GPU();
  // H = 1300: a block's slice of W_hh takes ~200 of the H100's 227 KiB, so stages 07 and 08 fit
  // only a few batch rows per launch and run B = 9 as several launches.
  const StageInfo& info = all_stages()[GetParam()];
  const ProblemSize size{1300, 64, 9, 3, 2};
  const LstmParams params = generate_params(size, 5);
  std::unique_ptr<Stage> stage = info.make();
  const auto outputs = testing::run_twice(*stage, params, info.name);
  const CheckReport report = testing::check_against_reference(*stage, params, outputs);
  EXPECT_TRUE(report.passed()) << info.name << " " << size.describe() << "\n" << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Forward, PersistentStage, ::testing::ValuesIn(persistent_stages()),
                         test_name);

}  // namespace
}  // namespace lstm
