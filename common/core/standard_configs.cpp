#include "core/standard_configs.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace lstm {

const char* standard_configs_json();  // generated from common/standard_configs.json

namespace {

std::vector<int> positive_list(const nlohmann::json& group, const char* key,
                               const std::string& name) {
  if (!group.contains(key) || !group[key].is_array() || group[key].empty()) {
    throw std::invalid_argument("standard configs: group \"" + name +
                                "\" needs a non-empty list \"" + key + "\"");
  }
  std::vector<int> values;
  for (const nlohmann::json& value : group[key]) {
    if (!value.is_number_integer() || value.get<long long>() <= 0 ||
        value.get<long long>() > 1 << 30) {
      throw std::invalid_argument("standard configs: group \"" + name + "\", \"" + key +
                                  "\" holds " + value.dump() + ", not an integer from 1 to " +
                                  std::to_string(1 << 30));
    }
    values.push_back(value.get<int>());
  }
  return values;
}

}  // namespace

std::vector<StandardConfig> parse_standard_configs(const std::string& json_text) {
  nlohmann::json file;
  try {
    file = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("standard configs: not JSON: ") + error.what());
  }
  if (!file.is_object() || !file.contains("groups") || !file["groups"].is_array()) {
    throw std::invalid_argument("standard configs: expected an object with a list \"groups\"");
  }
  std::vector<StandardConfig> configs;
  for (const nlohmann::json& group : file["groups"]) {
    if (!group.is_object() || !group.contains("name") || !group["name"].is_string()) {
      throw std::invalid_argument("standard configs: every group needs a \"name\"");
    }
    const std::string name = group["name"].get<std::string>();
    const std::vector<int> hidden = positive_list(group, "hidden", name);
    const std::vector<int> batch = positive_list(group, "batch", name);
    const std::vector<int> seq_len = positive_list(group, "seq_len", name);
    const std::vector<int> layers = positive_list(group, "layers", name);
    const std::vector<int> input_size = group.contains("input_size")
                                            ? positive_list(group, "input_size", name)
                                            : std::vector<int>{0};
    for (int h : hidden)
      for (int i : input_size)
        for (int b : batch)
          for (int t : seq_len)
            for (int l : layers)
              configs.push_back({name, ProblemSize{h, i == 0 ? h : i, b, t, l}});
  }
  if (configs.empty()) throw std::invalid_argument("standard configs: no configuration");
  return configs;
}

const std::vector<StandardConfig>& standard_configs() {
  static const std::vector<StandardConfig> configs =
      parse_standard_configs(standard_configs_json());
  return configs;
}

std::string config_name(const StandardConfig& c) {
  const ProblemSize& s = c.size;
  return c.group + "/H:" + std::to_string(s.hidden) + "/I:" + std::to_string(s.input_size) +
         "/B:" + std::to_string(s.batch) + "/T:" + std::to_string(s.seq_len) +
         "/L:" + std::to_string(s.layers);
}

}  // namespace lstm
