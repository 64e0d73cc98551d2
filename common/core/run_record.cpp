#include "core/run_record.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iomanip>
#include <stdexcept>

namespace lstm {

double tflops(const ProblemSize& size, double ms) {
  return size.flop_count() / (ms * 1e-3) / 1e12;
}

double us_per_step_layer(const ProblemSize& size, double ms) {
  return ms * 1e3 / (static_cast<double>(size.seq_len) * size.layers);
}

void print_summary(std::ostream& out, const RunRecord& record, const Environment& env) {
  const TimingStats& t = record.timing;
  out << std::fixed << std::setprecision(3) << "time " << record.stage << "  "
      << record.size.describe() << "  " << record.dtype << "  median " << t.median_ms << " ms (min "
      << t.min_ms << ", max " << t.max_ms << ", " << t.runs_ms.size() << " runs)  "
      << std::setprecision(2) << tflops(record.size, t.median_ms) << " TFLOP/s  "
      << std::setprecision(2) << us_per_step_layer(record.size, t.median_ms)
      << " us/step-layer  on " << env.gpu_name << std::defaultfloat << "\n";
}

std::string json_record(const RunRecord& record, const Environment& env) {
  using nlohmann::json;
  const ProblemSize& s = record.size;
  const TimingStats& t = record.timing;
  json j;
  j["stage"] = record.stage;
  j["hidden"] = s.hidden;
  j["input_size"] = s.input_size;
  j["batch"] = s.batch;
  j["seq_len"] = s.seq_len;
  j["layers"] = s.layers;
  j["dtype"] = record.dtype;
  j["data"] = record.data_source;
  j["flop"] = s.flop_count();
  j["warmup"] = record.warmup;
  j["iters"] = t.runs_ms.size();
  j["ms"] = {{"median", t.median_ms}, {"min", t.min_ms}, {"max", t.max_ms}};
  j["runs_ms"] = t.runs_ms;
  j["tflops"] = tflops(s, t.median_ms);
  j["us_per_step_layer"] = us_per_step_layer(s, t.median_ms);
  if (record.check) {
    json tensors = json::object();
    for (const TensorCheck& c : record.check->tensors) {
      tensors[c.name] = {{"relative_norm", c.relative_norm},
                         {"max_absolute", c.max_absolute},
                         {"nonfinite", c.nonfinite},
                         {"passed", c.passed}};
    }
    j["check"] = {{"performed", true},
                  {"passed", record.check->passed()},
                  {"steps_checked", record.check->steps_checked},
                  {"steps_total", record.check->steps_total},
                  {"tensors", tensors}};
  } else {
    j["check"] = {{"performed", false}};
  }
  j["env"] = {{"gpu", env.gpu_name},
              {"compute_capability", env.compute_capability},
              {"sm_count", env.sm_count},
              {"l2_bytes", env.l2_bytes},
              {"memory_bytes", env.memory_bytes},
              {"sm_clock_max_mhz", env.sm_clock_max_mhz},
              {"memory_clock_max_mhz", env.memory_clock_max_mhz},
              {"clocks", env.clocks_now},
              {"driver", env.driver},
              {"cuda_runtime", env.cuda_runtime},
              {"cuda_driver_api", env.cuda_driver_api},
              {"cublas", env.cublas},
              {"cudnn", env.cudnn},
              {"git_commit", env.git_commit},
              {"date_utc", env.date_utc}};
  return j.dump();
}

void append_json_record(const std::string& path, const RunRecord& record, const Environment& env) {
  std::ofstream file(path, std::ios::app);
  if (!file) throw std::runtime_error(path + ": cannot open for appending the JSON record");
  file << json_record(record, env) << "\n";
  if (!file) throw std::runtime_error(path + ": cannot write the JSON record");
}

}  // namespace lstm
