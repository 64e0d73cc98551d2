// The persistent stages (every forward stage numbered 07 and up but 20) through the registry: a
// hidden size too large for the chip is refused before launch, saying why and what fits; a batch
// too large for one launch runs as several launches (slices of the batch), checked against the CPU
// reference and repeated bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/quantize.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_registry.h"

namespace lstm {
namespace {

/// The first forward stage that keeps W_hh on chip; every later one does too, but those below.
constexpr int kFirstPersistentStage = 7;
/// Later forward stages that keep no weights on chip: 20 is stage 06's GEMMs on tensor cores.
bool is_gemm_stage(int number) {
  return number == 20;
}

/// The number of a forward stage's registry name ("forward/07_persistent_barrier": 7), or -1.
int forward_stage_number(const std::string& name) {
  const std::string series = "forward/";
  if (name.rfind(series, 0) != 0) return -1;
  const std::size_t digits = name.find_first_not_of("0123456789", series.size());
  if (digits == series.size() || digits == std::string::npos || name[digits] != '_') return -1;
  return std::stoi(name.substr(series.size(), digits - series.size()));
}

/// The registry's indices of the forward stages that keep W_hh on chip (07 and up, but 20).
std::vector<std::size_t> persistent_stages() {
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < all_stages().size(); ++i) {
    const int number = forward_stage_number(all_stages()[i].name);
    if (number >= kFirstPersistentStage && !is_gemm_stage(number)) indices.push_back(i);
  }
  return indices;
}

TEST(PersistentStages, AreTheForwardStagesFrom07OnButTheGemmStage) {  // no GPU needed
  EXPECT_EQ(forward_stage_number("forward/07_persistent_barrier"), 7);
  EXPECT_EQ(forward_stage_number("forward/12_small_batch_registers"), 12);
  EXPECT_EQ(forward_stage_number("forward/06_cuda_graph"), 6);
  EXPECT_EQ(forward_stage_number("training/06_persistent"), -1);
  EXPECT_EQ(forward_stage_number("forward/naive"), -1);
  const std::vector<std::size_t> indices = persistent_stages();
  ASSERT_GE(indices.size(), 4u);  // 07, 08 and the two of 11 and 12 at least
  bool has_07 = false, has_12 = false, has_20 = false;
  for (std::size_t i : indices) {
    has_07 = has_07 || all_stages()[i].name.rfind("forward/07_", 0) == 0;
    has_12 = has_12 || all_stages()[i].name.rfind("forward/12_", 0) == 0;
    has_20 = has_20 || all_stages()[i].name.rfind("forward/20_", 0) == 0;
  }
  EXPECT_TRUE(has_07 && has_12);
  EXPECT_FALSE(has_20);
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
  // only a few batch rows per launch and run B = 9 as several launches (the later stages plan
  // their own slices or groups).
  // B = 64 at the same H is sliced by the stages from 10 on (stage 10 in two slices of 32).
  const StageInfo& info = all_stages()[GetParam()];
  for (const ProblemSize& size :
       {ProblemSize{1300, 64, 9, 3, 2}, ProblemSize{1300, 64, 64, 3, 1}}) {
    LstmParams params = generate_params(size, 5);
    std::unique_ptr<Stage> stage = info.make();
    quantize_problem(stage->precision(), params);  // a reduced-precision stage's data, rounded
    const auto outputs = testing::run_twice(*stage, params, info.name);
    const CheckReport report = testing::check_against_reference(*stage, params, outputs);
    EXPECT_TRUE(report.passed()) << info.name << " " << size.describe() << "\n"
                                 << report.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Forward, PersistentStage, ::testing::ValuesIn(persistent_stages()),
                         test_name);

}  // namespace
}  // namespace lstm
