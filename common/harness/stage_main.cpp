#include "harness/stage_main.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <future>
#include <iomanip>
#include <iostream>
#include <stdexcept>

#include "core/quantize.h"
#include "core/run_record.h"
#include "harness/checked_run.h"
#include "harness/cuda_utils.h"
#include "harness/device_environment.h"

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

Precision run_precision(const std::vector<Implementation>& implementations) {
  if (implementations.empty()) return Precision::kFp32;
  const Precision precision = implementations.front().stage->precision();
  for (const Implementation& implementation : implementations) {
    if (implementation.stage->precision() != precision) {
      throw std::invalid_argument(
          "one run's implementations share one data set, so they must share a precision: " +
          implementations.front().name + " is " + precision_name(precision) + ", " +
          implementation.name + " is " + precision_name(implementation.stage->precision()));
    }
  }
  return precision;
}

int run_stages(const RunOptions& options, std::vector<Implementation> implementations,
               Unsupported unsupported) {
  const bool training = std::any_of(implementations.begin(), implementations.end(),
                                    [](const Implementation& implementation) {
                                      return implementation.stage->kind() == StageKind::kTraining;
                                    });
  // 1. Files given with --load are read and checked first: a bad file is refused before the GPU
  //    is even looked for. A training run also needs the upstream gradients (loaded when the
  //    folder has them, else generated from the seed).
  std::optional<LstmParams> loaded;
  std::optional<UpstreamGradients> upstream;
  bool upstream_generated = false;
  if (!options.load_dir.empty()) {
    std::cout << "load: reading " << options.load_dir << " ..." << std::endl;
    loaded = load_params(options.load_dir, options.given);
    if (training) {
      upstream_generated = !has_upstream_files(options.load_dir);
      upstream = load_upstream(options.load_dir, loaded->size, options.seed);
    }
    if (options.seed_given && !upstream_generated) {
      std::cerr << "--seed " << options.seed << " has no effect: the data come from "
                << options.load_dir << " (leave --seed out, or --load out)\n";
      return 2;
    }
  }

  // 2. The device, before any data is generated.
  std::string why;
  if (!cuda_device_available(&why)) {
    std::cerr << "no usable CUDA GPU: " << why << "\n";
    return 1;
  }
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));

  // 3. Generated data (no --load), from the seed; then the memory the problem needs.
  if (!loaded) {
    if (options.size.flop_count() > 1e11) {
      std::cout << "data: generating " << options.size.describe() << " from seed " << options.seed
                << " ..." << std::endl;
    }
    loaded = generate_params(options.size, options.seed);
    if (training) upstream = generate_upstream(options.size, options.seed);
  }
  // 3b. A reduced-precision run gets data it can hold exactly: every input rounded once, here,
  //     to its precision; the reference below reads these very values (core/quantize.h).
  const Precision precision = run_precision(implementations);
  quantize_problem(precision, *loaded, upstream ? &*upstream : nullptr);
  const LstmParams& params = *loaded;
  const ProblemSize& size = params.size;
  std::string data_source = options.load_dir.empty()
                                ? "generated (seed " + std::to_string(options.seed) + ")"
                                : "loaded from " + options.load_dir;
  if (upstream_generated)
    data_source += ", dy, dhy, dcy generated (seed " + std::to_string(options.seed) + ")";
  if (precision != Precision::kFp32) {
    data_source += ", rounded to " + std::string(precision_name(precision));
    std::cout << "data: inputs, weights" << (upstream ? " and upstream gradients" : "")
              << " rounded to " << precision_name(precision)
              << " (nearest, ties to even) on the host; the reference reads the same values"
              << std::endl;
  }
  if (!fits_in_memory("the problem", size, DeviceProblem::bytes_needed(size, training))) return 1;
  const Environment env = collect_environment(device);

  // 3. The CPU reference starts now, on another thread, once for every implementation of a kind.
  std::shared_future<ReferenceForCheck> forward_reference, training_reference;
  if (options.check) {
    auto start = [&](StageKind kind) {
      return std::async(std::launch::async,
                        [&params, &upstream, kind] {
                          return compute_reference(params, kind, upstream ? &*upstream : nullptr);
                        })
          .share();
    };
    for (const Implementation& implementation : implementations) {
      const StageKind kind = implementation.stage->kind();
      std::shared_future<ReferenceForCheck>& reference =
          kind == StageKind::kTraining ? training_reference : forward_reference;
      if (!reference.valid()) reference = start(kind);
    }
  }
  DeviceProblem problem(params, upstream ? &*upstream : nullptr);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  int status = 0;
  int ran = 0;  // implementations that were not refused
  std::string fastest;
  double fastest_ms = 0.0;
  for (Implementation& implementation : implementations) {
    Stage& stage = *implementation.stage;
    RunRecord record;
    record.stage = implementation.name;
    record.series = implementation.series;
    record.kind = stage.kind();
    record.precision = stage.precision();
    record.size = size;
    record.data_source = data_source;
    record.warmup = options.warmup;

    const std::string refused = prepare_stage(stage, problem);
    if (!refused.empty()) {
      (unsupported == Unsupported::kError ? std::cerr : std::cout)
          << implementation.name << ": unsupported for " << size.describe() << ": " << refused
          << "\n";
      if (unsupported == Unsupported::kError) status = 1;
      continue;
    }
    ++ran;
    std::cout << describe_run(record) << "  " << data_source << "  on " << env.gpu_name << "\n";

    // 4. The checked run: poisoned outputs, no timing code around it.
    if (options.check || !options.dump_dir.empty()) {
      const std::vector<OutputTensor> outputs = run_for_check(stage, problem, stream);
      if (!options.dump_dir.empty()) {
        const std::string dir =
            implementations.size() == 1
                ? options.dump_dir
                : (std::filesystem::path(options.dump_dir) / implementation.name).string();
        dump_tensors(dir, outputs);
        std::cout << "dump: " << outputs.size() << " tensors (y.npy, hy.npy, cy.npy"
                  << (record.kind == StageKind::kTraining ? ", dx.npy, ... every gradient" : "")
                  << ") written to " << dir << "\n";
      }
      if (options.check) {
        const ReferenceForCheck& reference = record.kind == StageKind::kTraining
                                                 ? training_reference.get()
                                                 : forward_reference.get();
        record.check = check_run(stage, outputs, reference);
        std::cout << record.check->describe();
        if (!record.check->passed()) {
          std::cerr << implementation.name << ": check FAILED against the CPU reference ("
                    << precision_name(record.precision) << " bounds, listed per tensor above)\n"
                    << "Disposition: Failed\n";
          status = 1;
          continue;
        }
      }
    }
    if (!options.check) std::cout << "check: skipped (--no-check)\n";

    // 5. Timed runs.
    StageTimes times = time_stage(stage, problem, stream, options.warmup, options.iters);
    record.timing = std::move(times.total);
    record.forward = std::move(times.forward);
    record.backward = std::move(times.backward);
    print_summary(std::cout, record, env);
    if (!options.json_path.empty()) {
      append_json_record(options.json_path, record, env);
      std::cout << "json: record appended to " << options.json_path << "\n";
    }
    std::cout << "Disposition: " << (options.check ? "Passed" : "Not checked") << "\n";
    if (fastest.empty() || record.timing.median_ms < fastest_ms) {
      fastest = implementation.name;
      fastest_ms = record.timing.median_ms;
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  if (ran == 0) {  // nothing checked or timed is a refused run, whatever `unsupported` says
    std::cerr << "no implementation could run " << size.describe() << ": every one refused it\n";
    return 1;
  }
  if (implementations.size() > 1 && !fastest.empty()) {
    std::cout << "fastest: " << fastest << " (" << std::fixed << std::setprecision(3) << fastest_ms
              << " ms median)\n"
              << std::defaultfloat;
  }
  return status;
}

int harness_main(int argc, char** argv, const std::string& program, const std::string& description,
                 const ExtraOptions& extra,
                 const std::function<std::vector<Implementation>()>& select,
                 Unsupported unsupported) {
  try {
    const RunOptions options = parse_command_line(argc, argv, program, description, extra);
    return run_stages(options, select(), unsupported);
  } catch (const CliExit& exit) {
    (exit.code() == 0 ? std::cout : std::cerr) << exit.message() << "\n";
    return exit.code();
  } catch (const FlagDisagreement& error) {  // a usage error found in the files of --load
    std::cerr << program << ": " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << program << ": error: " << error.what() << "\n";
    return 1;
  }
}

std::string program_name(const std::string& stage_name) {
  std::string program = "lstm_" + stage_name;
  std::replace(program.begin(), program.end(), '/', '_');
  return program;
}

int stage_main(int argc, char** argv, const StageInfo& info) {
  std::unique_ptr<Stage> stage = info.make();
  Stage* instance = stage.get();
  const std::string description =
      std::string("stage ") + info.name + ": an LSTM " +
      (instance->kind() == StageKind::kTraining ? "training pass (forward, then backward)"
                                                : "forward pass") +
      " in " + precision_name(instance->precision()) +
      " (PyTorch nn.LSTM semantics), checked against a CPU reference in double precision, then "
      "timed. Needs an NVIDIA GPU.\nExample: " +
      program_name(info.name) + " --hidden 256 --batch 8 --seq 50 --layers 2 --json results.jsonl";
  return harness_main(
      argc, argv, program_name(info.name), description,
      [instance](CLI::App& app) { instance->add_flags(app); },
      [&] {
        std::vector<Implementation> implementations;
        implementations.push_back({info.name, info.series, std::move(stage)});
        return implementations;
      },
      Unsupported::kError);
}

void apply_stage_flags(Stage& stage, const std::vector<std::string>& flags) {
  CLI::App app{"stage flags", "stage"};
  stage.add_flags(app);
  std::vector<std::string> reversed(flags.rbegin(), flags.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    throw std::invalid_argument(std::string("stage flags: ") + error.what());
  }
}

}  // namespace lstm
