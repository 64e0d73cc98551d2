// The harness holds more than one function and precision: two test-only stages (tests/stages/),
// a training pass of a second series and an FP16 forward pass, both copies of the CPU reference,
// go through the real harness (flags, data, checked run, check, timing, JSON record). The
// harness must check each against its own tensors and bounds, fail the tensor a stage breaks,
// and record kind and precision. Skipped without a GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/quantize.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"

namespace lstm::stage_selftest_00_oracle_training {
std::unique_ptr<Stage> make();
}
namespace lstm::stage_selftest_01_oracle_fp16 {
std::unique_ptr<Stage> make();
}

namespace lstm {
namespace {

const ProblemSize kSize{21, 13, 3, 6, 2};  // I != H, H odd, L = 2

/// Runs `stage` through run_stages with `flags` and returns its exit status and the JSON record
/// it appended (null when it wrote none).
std::pair<int, nlohmann::json> run_through_harness(std::unique_ptr<Stage> stage,
                                                   const std::string& name,
                                                   const std::vector<std::string>& flags) {
  apply_stage_flags(*stage, flags);
  const std::string json_path = (std::filesystem::temp_directory_path() /
                                 ("lstm_harness_test_" + std::to_string(::getpid()) + ".jsonl"))
                                    .string();
  std::remove(json_path.c_str());
  RunOptions options;
  options.size = kSize;
  options.iters = 3;
  options.warmup = 1;
  options.seed = 5;
  options.json_path = json_path;
  std::vector<Implementation> implementations;
  implementations.push_back({name, "selftest", std::move(stage)});
  const int status = run_stages(options, std::move(implementations), Unsupported::kError);
  nlohmann::json record;
  std::ifstream file(json_path);
  std::string line;
  while (std::getline(file, line))
    record = nlohmann::json::parse(line);
  std::remove(json_path.c_str());
  return {status, record};
}

/// The check of `stage` (flags applied) against the CPU reference, through checked_run.h.
CheckReport check_in_process(std::unique_ptr<Stage> stage, const std::vector<std::string>& flags) {
  apply_stage_flags(*stage, flags);
  LstmParams params = generate_params(kSize, 5);
  UpstreamGradients upstream = generate_upstream(kSize, 5);
  quantize_problem(stage->precision(), params, &upstream);  // as run_stages does
  const bool training = stage->kind() == StageKind::kTraining;
  const auto outputs = testing::run_twice(*stage, params, "oracle", training ? &upstream : nullptr);
  return testing::check_against_reference(*stage, params, outputs, training ? &upstream : nullptr);
}

TEST(HarnessSecondSeries, TrainingStageIsCheckedOnEveryGradientAndRecordedAsTraining) {
  SKIP_WITHOUT_GPU();
  const auto [status, record] = run_through_harness(stage_selftest_00_oracle_training::make(),
                                                    "selftest/00_oracle_training", {});
  ASSERT_EQ(status, 0);
  ASSERT_FALSE(record.is_null());
  EXPECT_EQ(record["stage"], "selftest/00_oracle_training");
  EXPECT_EQ(record["series"], "selftest");
  EXPECT_EQ(record["kind"], "training");
  EXPECT_EQ(record["precision"], "fp32");
  EXPECT_DOUBLE_EQ(record["flop"].get<double>(), kSize.training_flop_count());
  EXPECT_TRUE(record.contains("phases") && record["phases"].contains("forward") &&
              record["phases"].contains("backward"));
  const nlohmann::json& tensors = record["check"]["tensors"];
  EXPECT_EQ(tensors.size(), output_layouts(kSize, StageKind::kTraining).size());  // 3 + 3 + 4L
  for (const char* name : {"y", "cy", "dx", "dh0", "dc0", "grad_weight_ih_l0", "grad_weight_hh_l1",
                           "grad_bias_ih_l1", "grad_bias_hh_l0"}) {
    ASSERT_TRUE(tensors.contains(name)) << name;
    EXPECT_TRUE(tensors[name]["passed"].get<bool>()) << name;
    EXPECT_EQ(tensors[name]["bound"]["relative_norm"], 1e-5) << name;
  }
}

TEST(HarnessSecondSeries, ABrokenGradientFailsAndIsTheWorstTensor) {
  SKIP_WITHOUT_GPU();
  for (const char* broken : {"grad_weight_hh_l1", "dc0", "grad_bias_ih_l0", "hy"}) {
    const CheckReport report =
        check_in_process(stage_selftest_00_oracle_training::make(), {"--perturb", broken});
    EXPECT_FALSE(report.passed()) << broken;
    ASSERT_NE(report.worst(), nullptr);
    EXPECT_EQ(report.worst()->name, broken) << report.describe();
  }
  const auto [status, record] =
      run_through_harness(stage_selftest_00_oracle_training::make(), "selftest/00_oracle_training",
                          {"--perturb", "dx"});
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(record.is_null()) << "a failed run must not append a record";
}

TEST(HarnessOtherPrecision, Fp16StageIsCheckedWithItsOwnBoundAndRecordedAsFp16) {
  SKIP_WITHOUT_GPU();
  const auto [status, record] =
      run_through_harness(stage_selftest_01_oracle_fp16::make(), "selftest/01_oracle_fp16", {});
  ASSERT_EQ(status, 0);
  ASSERT_FALSE(record.is_null());
  EXPECT_EQ(record["kind"], "forward");
  EXPECT_EQ(record["precision"], "fp16");
  // run_stages rounded the data to FP16 (the oracle refuses anything else) and says so.
  EXPECT_NE(record["data"].get<std::string>().find("rounded to fp16"), std::string::npos)
      << record["data"];
  EXPECT_EQ(record["check"]["tensors"]["y"]["bound"]["relative_norm"], 1e-3);
  EXPECT_EQ(record["check"]["tensors"]["cy"]["bound"]["max_absolute"], 4e-3);
  // Its errors are those of FP16 rounding: the FP32 bound would fail them.
  const double y_error = record["check"]["tensors"]["y"]["relative_norm"].get<double>();
  EXPECT_GT(y_error, default_tolerance(Precision::kFp32).max_relative_norm);
  EXPECT_LT(y_error, 1e-3);
}

TEST(HarnessOtherPrecision, ABrokenFp16OutputFails) {
  SKIP_WITHOUT_GPU();
  const CheckReport report =
      check_in_process(stage_selftest_01_oracle_fp16::make(), {"--perturb", "y"});
  EXPECT_FALSE(report.passed());
  ASSERT_NE(report.worst(), nullptr);
  EXPECT_EQ(report.worst()->name, "y");
  EXPECT_FALSE(check_in_process(stage_selftest_01_oracle_fp16::make(), {}).tensors.empty());
}

// One run has one data set, rounded for one precision: implementations of two precisions cannot
// share it (no GPU needed).
TEST(HarnessOtherPrecision, OneRunHasOnePrecision) {
  std::vector<Implementation> mixed;
  mixed.push_back({"selftest/01_oracle_fp16", "selftest", stage_selftest_01_oracle_fp16::make()});
  EXPECT_EQ(run_precision(mixed), Precision::kFp16);
  mixed.push_back(
      {"selftest/00_oracle_training", "selftest", stage_selftest_00_oracle_training::make()});
  try {
    run_precision(mixed);
    ADD_FAILURE() << "an FP16 and an FP32 implementation were accepted in one run";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("selftest/00_oracle_training is fp32"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(run_precision({}), Precision::kFp32);
}

}  // namespace
}  // namespace lstm
