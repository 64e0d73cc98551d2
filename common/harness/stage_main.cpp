#include "harness/stage_main.h"

#include <filesystem>
#include <future>
#include <iomanip>
#include <iostream>

#include "harness/cuda_utils.h"
#include "harness/checked_run.h"
#include "harness/device_environment.h"
#include "core/run_record.h"

namespace lstm {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// Whether `bytes` more fit in the device's free memory; if not, prints why.
bool fits_in_memory(const std::string& what, const ProblemSize& size, std::size_t bytes) {
  std::size_t free_bytes = 0, total_bytes = 0;
  device_memory(&free_bytes, &total_bytes);
  if (bytes <= free_bytes) return true;
  std::cerr << std::fixed << std::setprecision(2) << what << ": " << size.describe() << " needs "
            << bytes / kGiB << " GiB of device memory; " << free_bytes / kGiB << " GiB of "
            << total_bytes / kGiB << " GiB are free\n"
            << std::defaultfloat;
  return false;
}

}  // namespace

int run_stages(const RunOptions& options, const std::vector<StageInfo>& stages,
               Unsupported unsupported) {
  // 1. Data: generated from the seed, or loaded (sizes then come from the files).
  const LstmParams params = options.load_dir.empty() ? generate_params(options.size, options.seed)
                                                     : load_params(options.load_dir, options.given);
  const ProblemSize& size = params.size;
  const std::string data_source = options.load_dir.empty()
                                      ? "generated (seed " + std::to_string(options.seed) + ")"
                                      : "loaded from " + options.load_dir;

  // 2. The device, and the memory the problem itself needs, before allocating anything.
  std::string why;
  if (!cuda_device_available(&why)) {
    std::cerr << "no usable CUDA GPU (" << why << "); the stages need one.\n";
    return 1;
  }
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (!fits_in_memory("the problem", size, count_tensors(size).bytes)) return 1;
  const Environment env = collect_environment(device);

  // 3. The CPU reference starts now, on another thread, once for every stage.
  std::shared_future<ReferenceOutputs> reference;
  if (options.check) {
    const int steps = reference_steps(size);
    reference = std::async(std::launch::async, [&params, steps] {
                  return reference_forward(params, steps);
                }).share();
  }
  DeviceProblem problem(params);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  int status = 0;
  std::string fastest;
  double fastest_ms = 0.0;
  for (const StageInfo& info : stages) {
    std::unique_ptr<Stage> stage = info.make();
    auto report_unsupported = [&](const std::string& reason) {
      (unsupported == Unsupported::kError ? std::cerr : std::cout)
          << info.name << ": unsupported for " << size.describe() << ": " << reason << "\n";
      if (unsupported == Unsupported::kError) status = 1;
    };
    const std::string refused = stage->unsupported_reason(size, prop);
    if (!refused.empty()) {
      report_unsupported(refused);
      continue;
    }
    if (!fits_in_memory(info.name, size, stage->workspace_bytes(size))) {
      status = 1;
      continue;
    }
    try {
      stage->prepare(problem.tensors());  // one-time work, outside every timed region
    } catch (const UnsupportedError& error) {
      report_unsupported(error.what());
      continue;
    }
    std::cout << info.name << "  " << size.describe() << "  fp32  " << data_source << "  on "
              << env.gpu_name << "\n";

    // 4. The checked run: poisoned outputs, no timing code around it.
    RunRecord record;
    record.stage = info.name;
    record.size = size;
    record.data_source = data_source;
    record.warmup = options.warmup;
    if (options.check || !options.dump_dir.empty()) {
      const LstmOutputs outputs = run_forward_for_check(*stage, problem, stream);
      if (!options.dump_dir.empty()) {
        const std::string dir =
            stages.size() == 1 ? options.dump_dir
                               : (std::filesystem::path(options.dump_dir) / info.name).string();
        dump_outputs(dir, size, outputs);
        std::cout << "dump: y.npy, hy.npy, cy.npy written to " << dir << "\n";
      }
      if (options.check) {
        record.check = compare_with_reference(size, outputs, reference.get());
        std::cout << record.check->describe();
        if (!record.check->passed()) {
          std::cerr << info.name << ": check FAILED against the CPU reference (FP32 bounds: "
                    << "rel-norm 1e-5, max-abs 1e-4)\nDisposition: Failed\n";
          status = 1;
          continue;
        }
      }
    }
    if (!options.check) std::cout << "check: skipped (--no-check)\n";

    // 5. Timed runs.
    record.timing = time_forward([&](cudaStream_t s) { stage->forward(problem.tensors(), s); },
                                 stream, options.warmup, options.iters);
    print_summary(std::cout, record, env);
    if (!options.json_path.empty()) {
      append_json_record(options.json_path, record, env);
      std::cout << "json: record appended to " << options.json_path << "\n";
    }
    std::cout << "Disposition: " << (options.check ? "Passed" : "Not checked") << "\n";
    if (fastest.empty() || record.timing.median_ms < fastest_ms) {
      fastest = info.name;
      fastest_ms = record.timing.median_ms;
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  if (stages.size() > 1 && !fastest.empty()) {
    std::cout << "fastest: " << fastest << " (" << std::fixed << std::setprecision(3) << fastest_ms
              << " ms median)\n"
              << std::defaultfloat;
  }
  return status;
}

int harness_main(int argc, char** argv, const std::string& program, const ExtraOptions& extra,
                 const std::function<std::vector<StageInfo>()>& select, Unsupported unsupported) {
  try {
    const RunOptions options = parse_command_line(argc, argv, program, extra);
    return run_stages(options, select(), unsupported);
  } catch (const CliExit& exit) {
    (exit.code() == 0 ? std::cout : std::cerr) << exit.message() << "\n";
    return exit.code();
  } catch (const std::exception& error) {
    std::cerr << program << ": error: " << error.what() << "\n";
    return 1;
  }
}

int stage_main(int argc, char** argv, const StageInfo& stage) {
  return harness_main(
      argc, argv, "lstm_" + stage.name, {}, [&] { return std::vector{stage}; },
      Unsupported::kError);
}

}  // namespace lstm
