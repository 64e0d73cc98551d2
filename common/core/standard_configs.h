/*! \file standard_configs.h
 *  \brief The standard configurations (canonical, batch sweep, hidden sweep), defined once in
 *         common/standard_configs.json and compiled in; the bench, scripts/bench.sh (through
 *         lstm_configs), the plots and the tests all read that one file.
 */
#pragma once

#include <string>
#include <vector>

#include "core/problem_size.h"

namespace lstm {

/// One standard configuration: its group ("canonical", "batch_sweep", ...) and sizes.
struct StandardConfig {
  std::string group;
  ProblemSize size;
};

/// Expands the text of a standard-configurations file: each group is the product of its lists
/// (hidden outermost, then batch, seq_len, layers; input_size = hidden unless listed).
/// \throws std::invalid_argument naming what is malformed.
std::vector<StandardConfig> parse_standard_configs(const std::string& json_text);

/// The configurations of common/standard_configs.json as built in, in the file's order.
const std::vector<StandardConfig>& standard_configs();

/// "canonical/H:512/I:512/B:64/T:100/L:4": the configuration's part of a benchmark name.
std::string config_name(const StandardConfig& config);

}  // namespace lstm
