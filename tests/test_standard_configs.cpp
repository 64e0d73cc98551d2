// The standard configurations are defined once, in common/standard_configs.json: the compiled-in
// copy must equal the file, and the file must hold the configurations the results are named by.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/standard_configs.h"
#include "lstm_reference.h"

namespace lstm {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(StandardConfigs, CompiledInCopyEqualsTheFile) {
  const std::vector<StandardConfig> from_file = parse_standard_configs(
      read_file(std::string(LSTM_SOURCE_DIR) + "/common/standard_configs.json"));
  ASSERT_EQ(from_file.size(), standard_configs().size());
  for (std::size_t i = 0; i < from_file.size(); ++i)
    EXPECT_EQ(config_name(from_file[i]), config_name(standard_configs()[i]));
}

TEST(StandardConfigs, HoldTheCanonicalConfigAndTheSweeps) {
  const std::vector<StandardConfig>& configs = standard_configs();
  ASSERT_FALSE(configs.empty());
  EXPECT_EQ(config_name(configs.front()), "canonical/H:512/I:512/B:64/T:100/L:4");
  int batch_sweep = 0, hidden_sweep = 0;
  for (const StandardConfig& c : configs) {
    batch_sweep += c.group == "batch_sweep";
    hidden_sweep += c.group == "hidden_sweep";
  }
  EXPECT_EQ(batch_sweep, 18);  // B = 1 .. 256 at H = 512 and 1024
  EXPECT_EQ(hidden_sweep, 4);
}

TEST(StandardConfigs, ProductOrderAndInputSize) {
  const auto configs = parse_standard_configs(
      R"({"groups": [{"name": "g", "hidden": [8, 16], "batch": [1, 2], "seq_len": [3],
                      "layers": [1], "input_size": [5]}]})");
  ASSERT_EQ(configs.size(), 4u);
  EXPECT_EQ(config_name(configs[0]), "g/H:8/I:5/B:1/T:3/L:1");
  EXPECT_EQ(config_name(configs[1]), "g/H:8/I:5/B:2/T:3/L:1");
  EXPECT_EQ(config_name(configs[3]), "g/H:16/I:5/B:2/T:3/L:1");
}

TEST(StandardConfigs, MalformedFilesAreRefused) {
  for (
      const char* bad :
      {"", "[]", R"({"groups": []})", R"({"groups": [{"hidden": [1]}]})",
       R"({"groups": [{"name": "g", "hidden": [0], "batch": [1], "seq_len": [1], "layers": [1]}]})",
       R"({"groups": [{"name": "g", "hidden": [4], "batch": ["2"], "seq_len": [1], "layers": [1]}]})",
       R"({"groups": [{"name": "g", "hidden": [4], "batch": [2], "seq_len": [1]}]})"}) {
    EXPECT_THROW(parse_standard_configs(bad), std::invalid_argument) << bad;
  }
}

TEST(ReferenceBudget, OneBudgetDecidesPrefixesAndTrainingChecks) {
  const ProblemSize canonical{512, 512, 64, 100, 4};  // 1.07e11 FLOP: within the budget
  EXPECT_EQ(reference_steps(canonical), 100);
  const ProblemSize big{2048, 2048, 64, 100, 4};  // 1.7e12 FLOP: a prefix
  EXPECT_LT(reference_steps(big), 100);
  EXPECT_GE(reference_steps(big), 1);
  EXPECT_LE(big.flop_count() * reference_steps(big) / 100, kReferenceFlopBudget);
  EXPECT_FALSE(training_reference_fits(canonical));  // 3.2e11 > 2.5e11
  EXPECT_TRUE(training_reference_fits(ProblemSize{256, 256, 64, 100, 2}));
}

TEST(FlopCount, CountsTheInputWidthOfLayerZero) {
  const ProblemSize size{100, 30, 2, 5, 3};  // I != H
  const double per_layer_rest = 2.0 * 5 * 2 * 4 * 100 * (100 + 100);
  EXPECT_DOUBLE_EQ(size.flop_count(), 2.0 * 5 * 2 * 4 * 100 * (30 + 100) + 2 * per_layer_rest);
  EXPECT_DOUBLE_EQ(size.training_flop_count(), 3 * size.flop_count());
}

}  // namespace
}  // namespace lstm
