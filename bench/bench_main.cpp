// lstm_bench: every stage and every cuDNN algorithm over the standard configs (docs/design.md), in
// one process, so that the ratios between them come from the same run on the same GPU.
//
//   build/bin/lstm_bench --benchmark_out=results/h100-sxm/bench.json --benchmark_out_format=json
//   build/bin/lstm_bench --benchmark_filter='canonical'        # one group
//
// Benchmark names: <implementation>/<group>/H:<H>/I:<I>/B:<B>/T:<T>/L:<L>. Each times one forward
// pass per iteration with CUDA events (manual time) and reports counters: the sizes, median_ms,
// min_ms, max_ms, tflops (from the median) and us_per_step_layer. An implementation that refuses
// a shape (a stated limit, or cuDNN refusing an algorithm) is skipped with its message. Before
// timing, one forward pass runs on poisoned outputs and must write finite values everywhere; the
// full check against the reference is scripts/gpu_check.sh's job.
#include <benchmark/benchmark.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/checked_run.h"
#include "harness/device_environment.h"
#include "fp32_peak.h"
#include "grid_barrier.h"
#include "core/run_record.h"
#include "harness/stage_registry.h"
#include "harness/event_timing.h"
#ifdef LSTM_BENCH_HAVE_CUDNN
#include "cudnn_lstm.h"
#endif

namespace lstm::bench {
namespace {

constexpr int kIterations = 20;  // timed forward passes per benchmark
constexpr int kWarmup = 3;       // untimed forward passes before them
constexpr std::uint64_t kSeed = 1;
constexpr int kGridSyncThreads = 128;     // threads per block of the grid barrier benchmark
constexpr int kGridSyncBarriers = 10000;  // grid barriers per timed launch
constexpr int kH100SmCount = 132;         // grid barrier block counts listed without a GPU

struct Config {
  std::string group;
  ProblemSize size;
};

/// The standard configurations (docs/design.md).
std::vector<Config> standard_configs() {
  std::vector<Config> configs = {{"canonical", ProblemSize{512, 512, 64, 100, 4}}};
  for (int hidden : {512, 1024}) {
    for (int batch : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      configs.push_back({"batch_sweep", ProblemSize{hidden, hidden, batch, 100, 1}});
    }
  }
  for (int hidden : {256, 512, 1024, 2048}) {
    configs.push_back({"hidden_sweep", ProblemSize{hidden, hidden, 64, 100, 4}});
  }
  return configs;
}

std::string config_name(const Config& c) {
  const ProblemSize& s = c.size;
  return c.group + "/H:" + std::to_string(s.hidden) + "/I:" + std::to_string(s.input_size) +
         "/B:" + std::to_string(s.batch) + "/T:" + std::to_string(s.seq_len) +
         "/L:" + std::to_string(s.layers);
}

/// Every implementation the benchmark times: the stages, then the cuDNN algorithms.
std::vector<StageInfo> implementations() {
  std::vector<StageInfo> list = all_stages();
#ifdef LSTM_BENCH_HAVE_CUDNN
  for (baseline_cudnn::Algo algo : baseline_cudnn::all_algos()) {
    list.push_back(baseline_cudnn::stage_info(algo));
  }
#endif
  return list;
}

/// The data of one configuration, on the device; one at a time (benchmarks run in the order
/// they are registered, configuration by configuration).
class ProblemCache {
 public:
  DeviceProblem& get(const Config& config) {
    const std::string key = config_name(config);
    if (key != key_) {
      problem_.reset();  // free the previous configuration's memory first
      std::cerr << "[lstm_bench] data for " << key << "\n";
      problem_ = std::make_unique<DeviceProblem>(generate_params(config.size, kSeed));
      key_ = key;
    }
    return *problem_;
  }

 private:
  std::string key_;
  std::unique_ptr<DeviceProblem> problem_;
};

ProblemCache& cache() {
  static ProblemCache instance;
  return instance;
}

void skip(benchmark::State& state, const std::string& message) {
#ifdef LSTM_BENCH_HAVE_SKIP_WITH_MESSAGE
  state.SkipWithMessage(message);
#else
  state.SkipWithError(message.c_str());
#endif
}

void bench_forward(benchmark::State& state, const StageInfo& info, const Config& config) {
  const ProblemSize& size = config.size;
  std::unique_ptr<Stage> stage = info.make();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string refused = stage->unsupported_reason(size, prop);
  if (!refused.empty()) return skip(state, "unsupported: " + refused);
  DeviceProblem& problem = cache().get(config);
  std::size_t free_bytes = 0, total_bytes = 0;
  device_memory(&free_bytes, &total_bytes);
  if (stage->workspace_bytes(size) > free_bytes) {
    return skip(state, "unsupported: not enough free device memory for the workspace");
  }
  try {
    stage->prepare(problem.tensors());
  } catch (const UnsupportedError& error) {
    return skip(state, std::string("unsupported: ") + error.what());
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // A forward pass on poisoned outputs must write every element with a finite value.
  const LstmOutputs outputs = run_forward_for_check(*stage, problem, stream);
  for (const std::vector<float>* tensor : {&outputs.y, &outputs.hy, &outputs.cy}) {
    for (float value : *tensor) {
      if (!std::isfinite(value)) {
        CUDA_CHECK(cudaStreamDestroy(stream));
        state.SkipWithError("the forward pass left NaN/Inf or unwritten elements");
        return;
      }
    }
  }

  for (int i = 0; i < kWarmup; ++i)
    stage->forward(problem.tensors(), stream);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> runs_ms;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    stage->forward(problem.tensors(), stream);
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms * 1e-3);
    runs_ms.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaStreamDestroy(stream));

  const TimingStats stats = summarize_runs(runs_ms);
  state.counters["hidden"] = size.hidden;
  state.counters["input_size"] = size.input_size;
  state.counters["batch"] = size.batch;
  state.counters["seq_len"] = size.seq_len;
  state.counters["layers"] = size.layers;
  state.counters["median_ms"] = stats.median_ms;
  state.counters["min_ms"] = stats.min_ms;
  state.counters["max_ms"] = stats.max_ms;
  state.counters["tflops"] = tflops(size, stats.median_ms);
  state.counters["us_per_step_layer"] = us_per_step_layer(size, stats.median_ms);
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

void bench_grid_sync(benchmark::State& state, int blocks) {
  double us = 0.0;
  for (auto _ : state) {
    try {
      us = measure_grid_sync_us(blocks, kGridSyncThreads, kGridSyncBarriers);
    } catch (const CudaError&) {
      throw;
    } catch (const std::runtime_error& error) {  // the blocks cannot all be resident at once
      skip(state, std::string("unsupported: ") + error.what());
      break;
    }
    state.SetIterationTime(us * 1e-6);
  }
  state.counters["us_per_barrier"] = us;
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
  benchmark::AddCustomContext("iterations_per_benchmark", std::to_string(kIterations));
  benchmark::AddCustomContext("warmup_per_benchmark", std::to_string(kWarmup));
}

}  // namespace
}  // namespace lstm::bench

int main(int argc, char** argv) {
  using namespace lstm;
  using namespace lstm::bench;
  bool list_only = false;  // --benchmark_list_tests works without a GPU
  for (int i = 1; i < argc; ++i) {
    list_only = list_only || std::string(argv[i]).rfind("--benchmark_list_tests", 0) == 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
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
    for (int blocks : grid_sync_blocks) {
      benchmark::RegisterBenchmark(
          ("grid_sync/blocks:" + std::to_string(blocks)).c_str(),
          [blocks](benchmark::State& state) { bench_grid_sync(state, blocks); })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMicrosecond);
    }
    // Configuration-major order: each configuration's data is generated once for all of them.
    static const std::vector<Config> configs = standard_configs();
    static const std::vector<StageInfo> impls = implementations();
    for (const Config& config : configs) {
      for (const StageInfo& impl : impls) {
        benchmark::RegisterBenchmark(
            (impl.name + "/" + config_name(config)).c_str(),
            [&impl, &config](benchmark::State& state) { bench_forward(state, impl, config); })
            ->UseManualTime()
            ->Iterations(kIterations)
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
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "lstm_bench: error: " << error.what() << "\n";
    return 1;
  }
}
