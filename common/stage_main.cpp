#include "stage_main.h"

#include <future>
#include <iomanip>
#include <iostream>

#include "config.h"
#include "cuda_utils.h"
#include "device_problem.h"
#include "environment.h"
#include "report.h"

namespace lstm {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int run(const RunOptions& options, const StageInfo& info) {
  // 1. Data: generated from the seed, or loaded (sizes then come from the files).
  const LstmParams params = options.load_dir.empty() ? generate_params(options.size, options.seed)
                                                     : load_params(options.load_dir, options.given);
  const ProblemSize& size = params.size;
  const std::string data_source = options.load_dir.empty()
                                      ? "generated (seed " + std::to_string(options.seed) + ")"
                                      : "loaded from " + options.load_dir;

  // 2. The device, the stage's limits and the memory it all needs, before allocating anything.
  std::string why;
  if (!cuda_device_available(&why)) {
    std::cerr << info.name << ": no usable CUDA GPU (" << why << "); the stages need one.\n";
    return 1;
  }
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::unique_ptr<Stage> stage = info.make();
  const std::string unsupported = stage->unsupported_reason(size, prop);
  if (!unsupported.empty()) {
    std::cerr << info.name << ": cannot run " << size.describe() << ": " << unsupported << "\n";
    return 1;
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  device_memory(&free_bytes, &total_bytes);
  const std::size_t needed = count_tensors(size).bytes + stage->workspace_bytes(size);
  if (needed > free_bytes) {
    std::cerr << std::fixed << std::setprecision(2) << info.name << ": " << size.describe()
              << " needs " << needed / kGiB << " GiB of device memory; " << free_bytes / kGiB
              << " GiB of " << total_bytes / kGiB << " GiB are free on " << prop.name << "\n";
    return 1;
  }
  const Environment env = collect_environment(device);
  std::cout << info.name << "  " << size.describe() << "  fp32  " << data_source << "  on "
            << env.gpu_name << "\n";

  // 3. Upload, then the stage's one-time preparation (outside every timed region).
  DeviceProblem problem(params);
  stage->prepare(problem.tensors());
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // 4. The checked run: poisoned outputs, no timing code around it. The CPU reference runs
  //    meanwhile on another thread.
  RunRecord record;
  record.stage = info.name;
  record.size = size;
  record.data_source = data_source;
  record.warmup = options.warmup;
  if (options.check || !options.dump_dir.empty()) {
    std::future<ReferenceOutputs> reference;
    const int steps = reference_steps(size);
    if (options.check) {
      reference = std::async(std::launch::async, [&] { return reference_forward(params, steps); });
    }
    const LstmOutputs outputs = run_forward_for_check(*stage, problem, stream);
    if (!options.dump_dir.empty()) {
      dump_outputs(options.dump_dir, size, outputs);
      std::cout << "dump: y.npy, hy.npy, cy.npy written to " << options.dump_dir << "\n";
    }
    if (options.check) {
      record.check = compare_with_reference(size, outputs, reference.get());
      std::cout << record.check->describe();
      if (!record.check->passed()) {
        std::cerr << info.name << ": check FAILED against the CPU reference (FP32 bounds: "
                  << "rel-norm 1e-5, max-abs 1e-4)\nDisposition: Failed\n";
        CUDA_CHECK(cudaStreamDestroy(stream));
        return 1;
      }
    }
  }
  if (!options.check) std::cout << "check: skipped (--no-check)\n";

  // 5. Timed runs.
  record.timing = time_forward([&](cudaStream_t s) { stage->forward(problem.tensors(), s); },
                               stream, options.warmup, options.iters);
  CUDA_CHECK(cudaStreamDestroy(stream));
  print_summary(std::cout, record, env);
  if (!options.json_path.empty()) {
    append_json_record(options.json_path, record, env);
    std::cout << "json: record appended to " << options.json_path << "\n";
  }
  std::cout << "Disposition: " << (options.check ? "Passed" : "Not checked") << "\n";
  return 0;
}

}  // namespace

int stage_main(int argc, char** argv, const StageInfo& info) {
  try {
    const RunOptions options = parse_command_line(argc, argv, std::string("lstm_") + info.name);
    return run(options, info);
  } catch (const CliExit& exit) {
    (exit.code() == 0 ? std::cout : std::cerr) << exit.message() << "\n";
    return exit.code();
  } catch (const std::exception& error) {
    std::cerr << "lstm_" << info.name << ": error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace lstm
