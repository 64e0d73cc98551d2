// lstm_bench: every stage and every cuDNN algorithm over the standard configurations
// (common/standard_configs.json), in one process, so that the ratios between them come from the
// same run on the same GPU.
//
//   build/bin/lstm_bench --benchmark_out=results/h100-sxm/bench.json --benchmark_out_format=json
//   build/bin/lstm_bench --benchmark_filter='canonical'        # one group
//
// Benchmark names: <implementation>/<group>/H:<H>/I:<I>/B:<B>/T:<T>/L:<L>, where the implementation
// is a stage ("forward/00_naive") or a baseline ("cudnn_standard"); the label says
// "series=... kind=... precision=...". Each goes through the harness's sequence
// (harness/checked_run.h): prepare, one pass on poisoned outputs that must write finite values
// everywhere (the full check against the reference is scripts/gpu_check.sh's job), then the timed
// passes with CUDA events (manual time). Counters: the sizes, median_ms, min_ms, max_ms, tflops
// (from the median, FLOPs of the implementation's kind) and us_per_step_layer; a training pass
// also forward_ms and backward_ms (medians, each timed on its own). An implementation that
// refuses a shape (a stated limit, or cuDNN refusing an algorithm) is skipped with its message.
#include <benchmark/benchmark.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/run_record.h"
#include "core/standard_configs.h"
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

constexpr int kIterations = 20;  // timed forward passes per benchmark
constexpr int kWarmup = 3;       // untimed forward passes before them
constexpr std::uint64_t kSeed = 1;
constexpr int kGridSyncThreads = 128;     // threads per block of the grid barrier benchmark
constexpr int kGridSyncBarriers = 10000;  // grid barriers per timed launch
constexpr int kH100SmCount = 132;         // grid barrier block counts listed without a GPU

/// Every implementation the benchmark times: the stages, then the cuDNN algorithms' forward
/// passes in FP32, FP16 and BF16 ("cudnn_standard", "cudnn_standard_fp16", ...), then their
/// training passes ("cudnn_standard_training", "cudnn_standard_bf16_training", ...): forward
/// before training, so that a configuration's data are made once per kind. The precision is in
/// the name and in the label (precision=...). The FP16/BF16 stages round the float32 data as they
/// convert it (the bench checks only that every output is finite).
std::vector<StageInfo> implementations() {
  std::vector<StageInfo> list = all_stages();
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
  return list;
}

/// The data of one configuration, on the device; one at a time (benchmarks run in the order
/// they are registered, configuration by configuration). A training problem (upstream gradients
/// and gradient buffers) is made when an implementation of that kind first needs it.
class ProblemCache {
 public:
  DeviceProblem& get(const StandardConfig& config, bool training) {
    const std::string key = config_name(config) + (training ? " training" : "");
    if (key != key_) {
      problem_.reset();  // free the previous configuration's memory first
      std::cerr << "[lstm_bench] data for " << key << "\n";
      const LstmParams params = generate_params(config.size, kSeed);
      if (training) {
        const UpstreamGradients upstream = generate_upstream(config.size, kSeed);
        problem_ = std::make_unique<DeviceProblem>(params, &upstream);
      } else {
        problem_ = std::make_unique<DeviceProblem>(params);
      }
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

void bench_implementation(benchmark::State& state, const StageInfo& info,
                          const StandardConfig& config) {
  const ProblemSize& size = config.size;
  std::unique_ptr<Stage> stage = info.make();
  const StageKind kind = stage->kind();
  state.SetLabel(std::string("series=") + (info.series.empty() ? "none" : info.series) +
                 " kind=" + kind_name(kind) + " precision=" + precision_name(stage->precision()));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string refused = stage->unsupported_reason(size, prop);  // before any allocation
  if (!refused.empty()) return skip(state, "unsupported: " + refused);
  DeviceProblem& problem = cache().get(config, kind == StageKind::kTraining);
  const std::string unprepared = prepare_stage(*stage, problem);
  if (!unprepared.empty()) return skip(state, "unsupported: " + unprepared);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // A pass on poisoned outputs must write every element with a finite value.
  for (const OutputTensor& tensor : run_for_check(*stage, problem, stream)) {
    for (float value : tensor.values) {
      if (!std::isfinite(value)) {
        CUDA_CHECK(cudaStreamDestroy(stream));
        state.SkipWithError(
            ("the pass left NaN/Inf or unwritten elements in " + tensor.name).c_str());
        return;
      }
    }
  }

  const StageTimes times = time_stage(*stage, problem, stream, kWarmup, kIterations);
  CUDA_CHECK(cudaStreamDestroy(stream));
  std::size_t run = 0;
  for (auto _ : state) {  // Google Benchmark's iterations report the passes timed above
    state.SetIterationTime(times.total.runs_ms[run++ % times.total.runs_ms.size()] * 1e-3);
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
    static const std::vector<StageInfo> impls = implementations();
    for (const StandardConfig& config : standard_configs()) {
      for (const StageInfo& impl : impls) {
        benchmark::RegisterBenchmark((impl.name + "/" + config_name(config)).c_str(),
                                     [&impl, &config](benchmark::State& state) {
                                       bench_implementation(state, impl, config);
                                     })
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
