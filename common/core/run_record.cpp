#include "core/run_record.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace lstm {
namespace {

nlohmann::json times_json(const TimingStats& t) {
  return {{"median", t.median_ms}, {"min", t.min_ms}, {"max", t.max_ms}};
}

}  // namespace

double flop_count(const ProblemSize& size, StageKind kind) {
  return kind == StageKind::kTraining ? size.training_flop_count() : size.flop_count();
}

double tflops(const ProblemSize& size, StageKind kind, double ms) {
  return flop_count(size, kind) / (ms * 1e-3) / 1e12;
}

double us_per_step_layer(const ProblemSize& size, double ms) {
  return ms * 1e3 / (static_cast<double>(size.seq_len) * size.layers);
}

std::string describe_run(const RunRecord& record) {
  return record.stage + "  " + record.size.describe() + "  " + kind_name(record.kind) + " " +
         precision_name(record.precision);
}

void print_summary(std::ostream& out, const RunRecord& record, const Environment& env) {
  const TimingStats& t = record.timing;
  out << std::fixed << std::setprecision(3) << "time " << describe_run(record) << "  median "
      << t.median_ms << " ms (min " << t.min_ms << ", max " << t.max_ms << ", " << t.runs_ms.size()
      << " runs)  " << std::setprecision(2) << tflops(record.size, record.kind, t.median_ms)
      << " TFLOP/s  " << std::setprecision(2) << us_per_step_layer(record.size, t.median_ms)
      << " us/step-layer  on " << env.gpu_name << "\n";
  if (record.forward && record.backward) {
    out << std::setprecision(3) << "  of which forward (keeping what backward needs) median "
        << record.forward->median_ms << " ms, backward median " << record.backward->median_ms
        << " ms (each timed on its own)\n";
  }
  out << std::defaultfloat;
}

std::string json_record(const RunRecord& record, const Environment& env) {
  using nlohmann::json;
  const ProblemSize& s = record.size;
  const TimingStats& t = record.timing;
  json j;
  j["stage"] = record.stage;
  j["series"] = record.series;
  j["kind"] = kind_name(record.kind);
  j["precision"] = precision_name(record.precision);
  j["hidden"] = s.hidden;
  j["input_size"] = s.input_size;
  j["batch"] = s.batch;
  j["seq_len"] = s.seq_len;
  j["layers"] = s.layers;
  j["data"] = record.data_source;
  j["flop"] = flop_count(s, record.kind);
  j["warmup"] = record.warmup;
  j["iters"] = t.runs_ms.size();
  j["ms"] = times_json(t);
  j["runs_ms"] = t.runs_ms;
  if (record.forward && record.backward) {
    j["phases"] = {{"forward", times_json(*record.forward)},
                   {"backward", times_json(*record.backward)}};
  }
  j["tflops"] = tflops(s, record.kind, t.median_ms);
  j["us_per_step_layer"] = us_per_step_layer(s, t.median_ms);
  if (record.check) {
    json tensors = json::object();
    for (const TensorCheck& c : record.check->tensors) {
      tensors[c.name] = {
          {"relative_norm", c.relative_norm},
          {"max_absolute", c.max_absolute},
          {"nonfinite", c.nonfinite},
          {"missing", c.missing},
          {"passed", c.passed},
          {"bound",
           {{"relative_norm", c.bound.max_relative_norm}, {"max_absolute", c.bound.max_absolute}}}};
    }
    const TensorCheck* worst = record.check->worst();
    j["check"] = {{"performed", true},
                  {"passed", record.check->passed()},
                  {"not_checked", record.check->not_checked},
                  {"worst_tensor", worst ? worst->name : ""},
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
  if (!file) {
    throw std::runtime_error(
        path + ": cannot open for appending the JSON record: " + std::strerror(errno));
  }
  file << json_record(record, env) << "\n";
  if (!file) {
    throw std::runtime_error(path + ": cannot write the JSON record: " + std::strerror(errno));
  }
}

}  // namespace lstm
