// lstm_bench: every stage and every cuDNN algorithm over the standard configurations
// (common/standard_configs.json), in one process, so that the ratios between them come from the
// same run on the same GPU.
//
//   build/bin/lstm_bench --precisions=fp32 --benchmark_filter=-training
//                        --benchmark_out=DIR/bench.json
//   build/bin/lstm_bench --precisions=fp16,bf16 --benchmark_filter=training
//                        --benchmark_out=DIR/bench_training_reduced.json
//   build/bin/lstm_bench --benchmark_filter='canonical'      # one group, every precision
// (scripts/bench.sh runs the four parts: forward and training, each in FP32 and in 16 bits.)
//
// Benchmark names: <implementation>/<group>/H:<H>/I:<I>/B:<B>/T:<T>/L:<L>, where the implementation
// is a stage ("forward/00_naive") or a baseline ("cudnn_standard"); the label says
// "series=... kind=... precision=...".
//
// Noise is handled by Google Benchmark: unless the command line says otherwise, every benchmark
// runs kRepetitions times (--benchmark_repetitions) and the repetitions of all benchmarks run in a
// random order (--benchmark_enable_random_interleaving), so that a slow spell of the GPU (clocks,
// temperature, a neighbour) spreads over many implementations instead of landing on one. Each
// repetition is one entry of the JSON (run_type "iteration", grouped by run_name, with its
// repetition_index), beside Google Benchmark's aggregates over them; a table takes the median of
// the repetitions' medians, a plot their spread.
//
// One repetition goes through the harness's sequence (harness/checked_run.h): prepare (again in
// every repetition, unless the preparation took over kKeepPreparedSeconds: then the prepared
// implementation is kept for the next ones, e.g. cuDNN's PERSIST_DYNAMIC, which compiles a kernel),
// the first time only a pass on poisoned outputs that must write finite values everywhere (the
// full check against the reference is scripts/gpu_check.sh's job), then the warm-up and timed
// passes with CUDA events (manual time): kForwardPasses for a forward pass, kTrainingPasses for a
// training pass, whose whole pass, forward and backward are each timed on their own. Counters of a
// repetition: the sizes, median_ms, min_ms, max_ms (of its timed passes), tflops (from the median,
// FLOPs of the implementation's kind) and us_per_step_layer; a training pass also forward_ms and
// backward_ms (medians). An implementation that refuses a shape (a stated limit, or cuDNN refusing
// an algorithm) is skipped with its message. The data of every configuration stays generated and
// on the device across benchmarks while device memory allows (DataCache).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/run_record.h"
#include "core/standard_configs.h"
#include "exchange.h"
#include "fp32_peak.h"
#include "grid_barrier.h"
#include "harness/checked_run.h"
#include "harness/cuda_utils.h"
#include "harness/device_environment.h"
#include "harness/stage_registry.h"
#ifdef LSTM_BENCH_HAVE_CUDNN
#include "cudnn_lstm.h"
#endif

namespace lstm::bench {
namespace {

// Chosen so that a part fits one 10-minute GPU session on an H100: when the stages were half as
// many, the medians of results/h100-sxm added up to 3.5 s per pass of every forward benchmark and
// 12.8 s per pass of every training one with its three timings, so 5 x (2 + 10) x 3.5 s = 3.5
// minutes of forward passes and 5 x (1 + 3) x 12.8 s = 4.3 minutes of training passes, plus
// preparation; the parts are now split by precision as well (--precisions) to stay within it.
/// Repetitions of every benchmark, and random interleaving, unless the command line sets them.
constexpr int kRepetitions = 5;
/// Passes of one repetition: untimed warm-up, then timed.
struct Passes {
  int warmup;
  int timed;
};
constexpr Passes kForwardPasses{2, 10};
/// Of each of the three timings of a training pass: the whole pass, its forward, its backward.
constexpr Passes kTrainingPasses{1, 3};
/// A preparation that took longer is not repeated: the prepared implementation is kept.
constexpr double kKeepPreparedSeconds = 0.2;
constexpr std::uint64_t kSeed = 1;
constexpr int kGridSyncThreads = 128;     // threads per block of the grid barrier benchmark
constexpr int kGridSyncBarriers = 10000;  // grid barriers per timed launch
constexpr int kExchangeSteps = 10000;     // steps per timed launch of the exchange benchmarks
constexpr int kH100SmCount = 132;         // grid barrier block counts listed without a GPU

Passes passes_of(StageKind kind) {
  return kind == StageKind::kTraining ? kTrainingPasses : kForwardPasses;
}

/// An implementation the benchmark times, with its kind (asked once, at start-up).
struct Implementation {
  StageInfo info;
  StageKind kind;
};

/// Every implementation the benchmark times: the stages, then the cuDNN algorithms' forward
/// passes in FP32, FP16 and BF16 ("cudnn_standard", "cudnn_standard_fp16", ...), then their
/// training passes ("cudnn_standard_training", "cudnn_standard_bf16_training", ...): forward
/// before training, so that a configuration's data are made once per kind. The precision is in
/// the name and in the label (precision=...). The FP16/BF16 stages round the float32 data as they
/// convert it (the bench checks only that every output is finite).
/// Only those whose precision is in `precisions` (lstm_bench --precisions), each with its kind
/// (one object made per implementation to ask, which does no CUDA work before prepare()).
std::vector<Implementation> implementations(const std::vector<Precision>& precisions) {
  std::vector<StageInfo> list = all_stages();
  // The multigpu series is measured by scripts/scaling.sh, at every GPU count the machine has.
  list.erase(std::remove_if(list.begin(), list.end(),
                            [](const StageInfo& info) { return info.series == "multigpu"; }),
             list.end());
#ifdef LSTM_BENCH_HAVE_CUDNN
  for (Precision precision : baseline_cudnn::all_precisions()) {
    for (baseline_cudnn::Algo algo : baseline_cudnn::all_algos()) {
      list.push_back(baseline_cudnn::stage_info(algo, precision));
    }
  }
  for (Precision precision : baseline_cudnn::all_precisions()) {
    for (baseline_cudnn::Algo algo : baseline_cudnn::all_algos()) {
      list.push_back(baseline_cudnn::training_stage_info(algo, precision));
    }
  }
#endif
  std::vector<Implementation> kept;
  for (StageInfo& info : list) {
    const std::unique_ptr<Stage> stage = info.make();
    if (std::find(precisions.begin(), precisions.end(), stage->precision()) != precisions.end())
      kept.push_back({std::move(info), stage->kind()});
  }
  return kept;
}

/// The precisions of `--precisions=fp32,fp16,...` (every one where the flag is absent), the flag
/// removed from `args` (Google Benchmark would reject it). Throws std::invalid_argument on a value
/// that names no precision, an empty list or a precision named twice.
std::vector<Precision> take_precisions(std::vector<char*>& args) {
  const std::string flag = "--precisions";
  std::vector<Precision> precisions;
  std::string value;
  bool given = false;
  for (auto it = args.begin(); it != args.end();) {
    const std::string text(*it);
    if (text == flag || text.rfind(flag + "=", 0) == 0) {
      if (text == flag)
        throw std::invalid_argument(flag + " needs a value, e.g. --precisions=fp32");
      value = text.substr(flag.size() + 1);
      given = true;
      it = args.erase(it);
    } else {
      ++it;
    }
  }
  if (!given) return {Precision::kFp32, Precision::kFp16, Precision::kBf16};
  std::istringstream items(value);
  std::string item;
  while (std::getline(items, item, ',')) {
    Precision precision;
    try {
      precision = precision_from_name(item);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(flag + " takes fp32, fp16 and bf16, comma-separated (got '" +
                                  value + "')");
    }
    if (std::find(precisions.begin(), precisions.end(), precision) != precisions.end())
      throw std::invalid_argument(flag + " names " + item + " twice (got '" + value + "')");
    precisions.push_back(precision);
  }
  if (precisions.empty() || value.back() == ',')
    throw std::invalid_argument(flag + " takes fp32, fp16 and bf16, comma-separated (got '" +
                                value + "')");
  return precisions;
}

std::string gib(std::size_t bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return text.str();
}

/// Everything kept across benchmarks. Under random interleaving the configuration changes at
/// nearly every repetition, so each configuration's data stays: its parameters on the host
/// (generated once: slow for the largest), its problem on the device (a training problem, with
/// upstream gradients and gradient buffers, also serves the forward implementations; a forward
/// problem is replaced by one when a training implementation first needs it), the implementations
/// whose preparation was slow, prepared, and what each benchmark's check pass found. Before
/// anything is allocated, device memory (cudaMemGetInfo) must hold it with headroom to spare;
/// if not, the least recently used prepared implementations, then problems, are freed.
class DataCache {
 public:
  /// The device problem of `config` (a training one when `training`).
  DeviceProblem& problem(const StandardConfig& config, bool training) {
    const std::string key = config_name(config);
    ConfigData& data = configs_[key];
    data.last_use = ++clock_;
    if (data.problem && (data.problem->is_training() || !training)) return *data.problem;
    if (data.problem) {  // a forward problem, and a training one is needed: replace it
      drop_stages_of(key);
      data.problem.reset();
    }
    if (!data.params) {
      std::cerr << "[lstm_bench] generating the data of " << key << "\n";
      data.params = std::make_unique<LstmParams>(generate_params(config.size, kSeed));
    }
    if (training && !data.upstream) {
      data.upstream = std::make_unique<UpstreamGradients>(generate_upstream(config.size, kSeed));
    }
    make_room(DeviceProblem::bytes_needed(config.size, training), key, "");
    data.problem =
        std::make_unique<DeviceProblem>(*data.params, training ? data.upstream.get() : nullptr);
    return *data.problem;
  }

  /// Frees least recently used prepared implementations, then problems, but not those of
  /// `keep_config` nor the prepared `keep_benchmark`, until `bytes` and the headroom are free.
  void make_room(std::size_t bytes, const std::string& keep_config,
                 const std::string& keep_benchmark) {
    std::size_t free_bytes = 0, total_bytes = 0;
    device_memory(&free_bytes, &total_bytes);
    const std::size_t headroom = std::max<std::size_t>(std::size_t{2} << 30, total_bytes / 10);
    while (free_bytes < bytes + headroom) {
      std::cerr << "[lstm_bench] device memory: " << gib(free_bytes) << " free, " << gib(bytes)
                << " needed and " << gib(headroom) << " to spare\n";
      if (!evict_one(keep_config, keep_benchmark)) break;
      device_memory(&free_bytes, &total_bytes);
    }
  }

  /// The prepared implementation kept for `benchmark`, or nullptr.
  Stage* kept(const std::string& benchmark) {
    auto found = stages_.find(benchmark);
    if (found == stages_.end()) return nullptr;
    found->second.last_use = ++clock_;
    return found->second.stage.get();
  }

  /// Keeps `stage`, prepared on the problem of `config`, for the next repetitions of `benchmark`.
  void keep(const std::string& benchmark, const std::string& config, std::unique_ptr<Stage> stage) {
    stages_[benchmark] = {config, std::move(stage), ++clock_};
  }

  /// What the check pass of `benchmark` found ("" passed), or nullptr before it ran.
  const std::string* checked(const std::string& benchmark) const {
    auto found = checks_.find(benchmark);
    return found == checks_.end() ? nullptr : &found->second;
  }
  void set_checked(const std::string& benchmark, const std::string& failure) {
    checks_[benchmark] = failure;
  }

  /// One stream for every benchmark.
  cudaStream_t stream() {
    if (stream_ == nullptr) CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return stream_;
  }

  /// Frees everything on the device (before the process ends).
  void clear() {
    stages_.clear();
    configs_.clear();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

 private:
  struct ConfigData {
    std::unique_ptr<LstmParams> params;
    std::unique_ptr<UpstreamGradients> upstream;
    std::unique_ptr<DeviceProblem> problem;
    std::uint64_t last_use = 0;
  };
  struct KeptStage {
    std::string config;  // whose problem it was prepared on
    std::unique_ptr<Stage> stage;
    std::uint64_t last_use = 0;
  };

  void drop_stages_of(const std::string& config) {
    for (auto it = stages_.begin(); it != stages_.end();) {
      it = it->second.config == config ? stages_.erase(it) : std::next(it);
    }
  }

  bool evict_one(const std::string& keep_config, const std::string& keep_benchmark) {
    auto oldest_stage = stages_.end();
    for (auto it = stages_.begin(); it != stages_.end(); ++it) {
      if (it->first == keep_benchmark) continue;
      if (oldest_stage == stages_.end() || it->second.last_use < oldest_stage->second.last_use) {
        oldest_stage = it;
      }
    }
    if (oldest_stage != stages_.end()) {
      std::cerr << "[lstm_bench]   releasing the prepared " << oldest_stage->first << "\n";
      stages_.erase(oldest_stage);
      return true;
    }
    auto oldest = configs_.end();
    for (auto it = configs_.begin(); it != configs_.end(); ++it) {
      if (it->first == keep_config || !it->second.problem) continue;
      if (oldest == configs_.end() || it->second.last_use < oldest->second.last_use) oldest = it;
    }
    if (oldest == configs_.end()) return false;
    std::cerr << "[lstm_bench]   releasing the problem of " << oldest->first << "\n";
    drop_stages_of(oldest->first);
    oldest->second.problem.reset();  // its host parameters stay
    return true;
  }

  std::map<std::string, ConfigData> configs_;
  std::map<std::string, KeptStage> stages_;
  std::map<std::string, std::string> checks_;
  cudaStream_t stream_ = nullptr;
  std::uint64_t clock_ = 0;
};

DataCache& cache() {
  static DataCache instance;
  return instance;
}

void skip(benchmark::State& state, const std::string& message) {
#ifdef LSTM_BENCH_HAVE_SKIP_WITH_MESSAGE
  state.SkipWithMessage(message);
#else
  state.SkipWithError(message.c_str());
#endif
}

/// The pass on poisoned outputs: "" when every element was written with a finite value.
std::string check_pass(Stage& stage, DeviceProblem& problem, cudaStream_t stream) {
  for (const OutputTensor& tensor : run_for_check(stage, problem, stream)) {
    for (float value : tensor.values) {
      if (!std::isfinite(value)) {
        return "the pass left NaN/Inf or unwritten elements in " + tensor.name;
      }
    }
  }
  return {};
}

/// One repetition of `info` at `config` (the benchmark `name`).
void bench_implementation(benchmark::State& state, const StageInfo& info,
                          const StandardConfig& config, const std::string& name) {
  const ProblemSize& size = config.size;
  const std::string config_key = config_name(config);
  std::unique_ptr<Stage> fresh = info.make();  // no CUDA work before prepare()
  const StageKind kind = fresh->kind();
  state.SetLabel(std::string("series=") + (info.series.empty() ? "none" : info.series) +
                 " kind=" + kind_name(kind) + " precision=" + precision_name(fresh->precision()));
  static const cudaDeviceProp prop = [] {
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    return p;
  }();
  const std::string refused = fresh->unsupported_reason(size, prop);  // before any allocation
  if (!refused.empty()) return skip(state, "unsupported: " + refused);
  const std::string* failed_before = cache().checked(name);
  if (failed_before != nullptr && !failed_before->empty()) {
    state.SkipWithError(failed_before->c_str());
    return;
  }
  DeviceProblem& problem = cache().problem(config, kind == StageKind::kTraining);
  Stage* stage = cache().kept(name);  // prepared in an earlier repetition, or else prepared now
  double prepare_seconds = 0.0;
  if (stage == nullptr) {
    stage = fresh.get();
    cache().make_room(stage->workspace_bytes(size), config_key, name);
    const auto start = std::chrono::steady_clock::now();
    const std::string unprepared = prepare_stage(*stage, problem);
    if (!unprepared.empty()) return skip(state, "unsupported: " + unprepared);
    prepare_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const cudaStream_t stream = cache().stream();

  if (failed_before == nullptr) {  // the first repetition: a pass on poisoned outputs
    const std::string failure = check_pass(*stage, problem, stream);
    cache().set_checked(name, failure);
    if (!failure.empty()) {
      state.SkipWithError(failure.c_str());
      return;
    }
  }

  const Passes passes = passes_of(kind);
  const StageTimes times = time_stage(*stage, problem, stream, passes.warmup, passes.timed);
  std::size_t run = 0;
  for (auto _ : state) {  // Google Benchmark's iterations report the passes timed above
    state.SetIterationTime(times.total.runs_ms[run++ % times.total.runs_ms.size()] * 1e-3);
  }
  if (stage == fresh.get() && prepare_seconds > kKeepPreparedSeconds) {
    std::cerr << "[lstm_bench] keeping " << name << " prepared for its next repetitions (its "
              << "preparation took " << std::fixed << std::setprecision(2) << prepare_seconds
              << " s)\n"
              << std::defaultfloat;
    cache().keep(name, config_key, std::move(fresh));
  }

  const TimingStats& stats = times.total;
  state.counters["hidden"] = size.hidden;
  state.counters["input_size"] = size.input_size;
  state.counters["batch"] = size.batch;
  state.counters["seq_len"] = size.seq_len;
  state.counters["layers"] = size.layers;
  state.counters["median_ms"] = stats.median_ms;
  state.counters["min_ms"] = stats.min_ms;
  state.counters["max_ms"] = stats.max_ms;
  state.counters["tflops"] = tflops(size, kind, stats.median_ms);
  state.counters["us_per_step_layer"] = us_per_step_layer(size, stats.median_ms);
  if (times.forward && times.backward) {
    state.counters["forward_ms"] = times.forward->median_ms;
    state.counters["backward_ms"] = times.backward->median_ms;
  }
}

void bench_fp32_peak(benchmark::State& state) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  double flops = 0.0, best_ms = 0.0;
  for (auto _ : state) {
    best_ms = measure_fp32_fma_ms(prop.multiProcessorCount, &flops);
    state.SetIterationTime(best_ms * 1e-3);
  }
  state.counters["tflops"] = flops / (best_ms * 1e-3) / 1e12;
}

/// A floor of the GPU in microseconds (a grid barrier, one step's exchange): `measure(blocks)`,
/// reported as the manual time and as `counter`; skipped where `measure` refuses (the blocks
/// cannot all be resident at once, or the device has no clusters).
void bench_floor(benchmark::State& state, const char* counter, int blocks,
                 double (*measure)(int blocks)) {
  double us = 0.0;
  for (auto _ : state) {
    try {
      us = measure(blocks);
    } catch (const CudaError&) {
      throw;
    } catch (const std::runtime_error& error) {
      skip(state, std::string("unsupported: ") + error.what());
      return;  // no counters: a refused floor has no value
    }
    state.SetIterationTime(us * 1e-6);
  }
  state.counters[counter] = us;
  state.counters["blocks"] = blocks;
}

void add_environment_context(const Environment& env) {
  benchmark::AddCustomContext("gpu", env.gpu_name);
  benchmark::AddCustomContext("compute_capability", env.compute_capability);
  benchmark::AddCustomContext("sm_count", std::to_string(env.sm_count));
  benchmark::AddCustomContext("l2_bytes", std::to_string(env.l2_bytes));
  benchmark::AddCustomContext("sm_clock_max_mhz", std::to_string(env.sm_clock_max_mhz));
  benchmark::AddCustomContext("clocks", env.clocks_now);
  benchmark::AddCustomContext("driver", env.driver);
  benchmark::AddCustomContext("cuda_runtime", env.cuda_runtime);
  benchmark::AddCustomContext("cuda_driver_api", env.cuda_driver_api);
  benchmark::AddCustomContext("cublas", env.cublas);
  benchmark::AddCustomContext("cudnn", env.cudnn);
  benchmark::AddCustomContext("git_commit", env.git_commit);
  benchmark::AddCustomContext("date_utc", env.date_utc);
}

/// How the run measured: repetitions, interleaving and the passes of one repetition.
void add_method_context(const std::string& repetitions, const std::string& interleaving,
                        const std::vector<Precision>& precisions) {
  std::string names;
  for (Precision precision : precisions)
    names += (names.empty() ? "" : ",") + std::string(precision_name(precision));
  benchmark::AddCustomContext("precisions", names);
  benchmark::AddCustomContext("repetitions", repetitions);
  benchmark::AddCustomContext("random_interleaving", interleaving);
  benchmark::AddCustomContext(
      "passes_per_repetition",
      "forward: " + std::to_string(kForwardPasses.warmup) + " warm-up, " +
          std::to_string(kForwardPasses.timed) +
          " timed; training: " + std::to_string(kTrainingPasses.warmup) + " warm-up, " +
          std::to_string(kTrainingPasses.timed) +
          " timed, of each of the whole pass, its forward and its backward");
}

/// The value of the last `--flag=value` in `args` (Google Benchmark takes the last one), or "".
std::string last_flag_value(const std::vector<char*>& args, const std::string& flag) {
  std::string value;
  for (const char* arg : args) {
    const std::string text(arg);
    if (text == flag) value = "true";  // a bare boolean flag
    if (text.rfind(flag + "=", 0) == 0) value = text.substr(flag.size() + 1);
  }
  return value;
}

void print_help() {
  std::cout
      << "lstm_bench: every stage and every cuDNN algorithm over the standard configurations\n"
         "(Google Benchmark; results/<gpu>/ holds four parts, each one run: bench.json the FP32\n"
         "forward, bench_reduced.json the FP16 and BF16 forward, bench_training.json and\n"
         "bench_training_reduced.json the training passes; scripts/bench.sh runs them).\n\n"
         "  --precisions=LIST  only the implementations of these precisions (fp32, fp16, bf16,\n"
         "                     comma-separated; default all); the FMA-rate, grid-barrier and\n"
         "                     exchange floors only where fp32 is among them\n"
         "Set here unless given on the command line:\n"
         "  --benchmark_repetitions="
      << kRepetitions
      << "  (each repetition is an entry of the JSON; a table takes\n"
         "                              the median of the repetitions' medians)\n"
         "  --benchmark_enable_random_interleaving=true  (the repetitions of all benchmarks\n"
         "                              run in a random order)\n"
         "Passes of one repetition (after preparing, and the first time a check pass):\n"
         "  forward pass:  "
      << kForwardPasses.warmup << " warm-up, " << kForwardPasses.timed
      << " timed (CUDA events; counters: their median, min, max)\n"
         "  training pass: "
      << kTrainingPasses.warmup << " warm-up, " << kTrainingPasses.timed
      << " timed, of each of the whole pass, its forward and its backward\n"
         "The forward part: --benchmark_filter=-training; the training part: "
         "--benchmark_filter=training.\n\n";
  benchmark::PrintDefaultHelp();
}

}  // namespace
}  // namespace lstm::bench

int main(int argc, char** argv) {
  using namespace lstm;
  using namespace lstm::bench;
  // The defaults of the repetitions and the interleaving, before the command line's own flags
  // (the last of a flag wins).
  std::string repetitions_flag = "--benchmark_repetitions=" + std::to_string(kRepetitions);
  std::string interleaving_flag = "--benchmark_enable_random_interleaving=true";
  std::vector<char*> args = {argv[0], repetitions_flag.data(), interleaving_flag.data()};
  args.insert(args.end(), argv + 1, argv + argc);
  const std::string repetitions = last_flag_value(args, "--benchmark_repetitions");
  const std::string interleaving = last_flag_value(args, "--benchmark_enable_random_interleaving");
  std::vector<Precision> precisions;
  try {
    precisions = take_precisions(args);
  } catch (const std::invalid_argument& error) {
    std::cerr << "lstm_bench: " << error.what() << "\n";
    return 2;
  }
  const bool with_fp32 =
      std::find(precisions.begin(), precisions.end(), Precision::kFp32) != precisions.end();
  bool list_only = false;  // --benchmark_list_tests works without a GPU
  for (const char* arg : args) {
    list_only = list_only || std::string(arg).rfind("--benchmark_list_tests", 0) == 0;
  }
  int args_count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&args_count, args.data(), print_help);
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return 2;
  try {
    // The floors (FP32 FMA rate, grid barrier, exchanges) go with the FP32 part.
    if (with_fp32)
      benchmark::RegisterBenchmark("fp32_fma_peak", bench_fp32_peak)
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    int sm_count = kH100SmCount;
    if (cuda_device_available()) {
      CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
    }
    std::vector<int> grid_sync_blocks = {sm_count};
    for (int blocks : {64, 32}) {
      if (blocks != sm_count) grid_sync_blocks.push_back(blocks);
    }
    const auto register_floor = [&](const std::string& name, const char* counter, int blocks,
                                    double (*measure)(int)) {
      if (!with_fp32) return;
      benchmark::RegisterBenchmark(
          (name + "/blocks:" + std::to_string(blocks)).c_str(),
          [=](benchmark::State& state) { bench_floor(state, counter, blocks, measure); })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMicrosecond);
    };
    for (int blocks : grid_sync_blocks)
      register_floor("grid_sync", "us_per_barrier", blocks, [](int n) {
        return measure_grid_sync_us(n, kGridSyncThreads, kGridSyncBarriers);
      });
    // One value a block and step handed to every other block, through global memory or within
    // one thread-block cluster.
    std::vector<int> exchange_blocks = {16, 64};
    if (sm_count != 16 && sm_count != 64) exchange_blocks.push_back(sm_count);
    for (int blocks : exchange_blocks)
      register_floor("exchange_global", "us_per_step", blocks,
                     [](int n) { return measure_global_exchange_us(n, kExchangeSteps); });
    for (int blocks : {2, 8, 16})
      register_floor("exchange_cluster", "us_per_step", blocks,
                     [](int n) { return measure_cluster_exchange_us(n, kExchangeSteps); });
    // Registered configuration by configuration; the run order is Google Benchmark's (random
    // with interleaving), the data stays in DataCache.
    static const std::vector<Implementation> impls = implementations(precisions);
    for (const StandardConfig& config : standard_configs()) {
      for (const Implementation& implementation : impls) {
        const StageInfo& impl = implementation.info;
        const std::string name = impl.name + "/" + config_name(config);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [&impl, &config, name](benchmark::State& state) {
                                       bench_implementation(state, impl, config, name);
                                     })
            ->UseManualTime()
            ->Iterations(passes_of(implementation.kind).timed)
            ->Unit(benchmark::kMillisecond);
      }
    }
    if (!list_only) {
      std::string why;
      if (!cuda_device_available(&why)) {
        std::cerr << "lstm_bench: no usable CUDA GPU (" << why << "); nothing to measure.\n";
        return 1;
      }
      add_environment_context(collect_environment(0));
      add_method_context(repetitions, interleaving, precisions);
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    cache().clear();
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "lstm_bench: error: " << error.what() << "\n";
    return 1;
  }
}
