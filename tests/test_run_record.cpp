// A run's record and console line carry what the implementation computed and in which
// precision; nothing says fp32 unless it is FP32.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "core/environment.h"
#include "core/run_record.h"

namespace lstm {
namespace {

RunRecord training_fp16_record() {
  RunRecord record;
  record.stage = "training/03_example";
  record.series = "training";
  record.kind = StageKind::kTraining;
  record.precision = Precision::kFp16;
  record.size = ProblemSize{64, 32, 4, 10, 2};
  record.timing = summarize_runs({3.0, 1.0, 2.0});
  record.forward = summarize_runs({1.0, 1.0, 1.0});
  record.backward = summarize_runs({2.0, 2.0, 2.0});
  CheckReport check;
  TensorCheck dx;
  dx.name = "dx";
  dx.bound = Tolerance{2e-3, 5e-3};
  dx.compared = 10;
  dx.passed = true;
  check.tensors.push_back(dx);
  record.check = check;
  return record;
}

TEST(RunRecord, JsonCarriesSeriesKindPrecisionPhasesAndBounds) {
  const nlohmann::json j =
      nlohmann::json::parse(json_record(training_fp16_record(), Environment{}));
  EXPECT_EQ(j["stage"], "training/03_example");
  EXPECT_EQ(j["series"], "training");
  EXPECT_EQ(j["kind"], "training");
  EXPECT_EQ(j["precision"], "fp16");
  EXPECT_FALSE(j.contains("dtype"));
  EXPECT_DOUBLE_EQ(j["flop"].get<double>(), (ProblemSize{64, 32, 4, 10, 2}).training_flop_count());
  EXPECT_DOUBLE_EQ(j["ms"]["median"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["phases"]["forward"]["median"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["phases"]["backward"]["median"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["check"]["tensors"]["dx"]["bound"]["relative_norm"].get<double>(), 2e-3);
  EXPECT_EQ(j["check"]["worst_tensor"], "dx");
}

TEST(RunRecord, ConsoleSaysKindAndPrecisionNotFp32) {
  std::ostringstream out;
  Environment env;
  env.gpu_name = "a GPU";
  print_summary(out, training_fp16_record(), env);
  EXPECT_NE(out.str().find("training fp16"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("fp32"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("backward median 2.000 ms"), std::string::npos) << out.str();
}

TEST(RunRecord, ForwardRecordHasNoPhases) {
  RunRecord record = training_fp16_record();
  record.kind = StageKind::kForward;
  record.precision = Precision::kFp32;
  record.forward.reset();
  record.backward.reset();
  const nlohmann::json j = nlohmann::json::parse(json_record(record, Environment{}));
  EXPECT_EQ(j["kind"], "forward");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_FALSE(j.contains("phases"));
  EXPECT_DOUBLE_EQ(j["flop"].get<double>(), record.size.flop_count());
}

TEST(Environment, FolderNamesOfTheGpus) {
  EXPECT_EQ(gpu_folder_name("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(gpu_folder_name("NVIDIA H100 PCIe"), "h100-pcie");
  EXPECT_EQ(gpu_folder_name("NVIDIA H100 NVL"), "h100-nvl");
  EXPECT_EQ(gpu_folder_name("NVIDIA H200"), "h200");
  EXPECT_EQ(gpu_folder_name("NVIDIA GH200 480GB"), "gh200-480gb");  // not an H200's results
  EXPECT_EQ(gpu_folder_name("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
  EXPECT_EQ(gpu_folder_name("  --  "), "unknown-gpu");
}

}  // namespace
}  // namespace lstm
