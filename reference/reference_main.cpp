// lstm_reference: the CPU reference as a program, with the shared size, seed and data flags (not
// the timing, check and JSON flags, which would mean nothing here). It runs anywhere (no GPU),
// prints its progress, its time and the outputs' norms, and writes files for outside checkers
// such as baselines/pytorch:
//   --save-inputs DIR  the problem's inputs and parameters in the --load layout (PyTorch names)
//   --dump DIR         the reference outputs y.npy, hy.npy, cy.npy (float32)
//   --no-reference     skip the reference itself (just save the inputs), for big sweeps
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "core/command_line.h"
#include "core/npy.h"
#include "lstm_reference.h"

namespace {

double rms(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values)
    sum += v * v;
  return values.empty() ? 0.0 : std::sqrt(sum / values.size());
}

std::vector<float> to_float(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

/// Writes x, h0, c0 and every layer's weights and biases into `dir`, as `--load DIR` reads them.
void save_inputs(const std::string& dir, const lstm::LstmParams& params) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error(dir + ": cannot create the folder: " + error.message());
  const lstm::ProblemSize& s = params.size;
  const std::size_t T = s.seq_len, B = s.batch, I = s.input_size, H = s.hidden, L = s.layers;
  auto write = [&dir](const std::string& name, const std::vector<std::size_t>& shape,
                      const std::vector<float>& data) {
    lstm::write_npy((std::filesystem::path(dir) / (name + ".npy")).string(), shape, data.data());
  };
  write("x", {T, B, I}, params.x);
  write("h0", {L, B, H}, params.h0);
  write("c0", {L, B, H}, params.c0);
  for (int k = 0; k < s.layers; ++k) {
    const std::string suffix = "_l" + std::to_string(k);
    const lstm::LayerWeights& w = params.layers[k];
    write("weight_ih" + suffix, {4 * H, std::size_t(s.layer_input_size(k))}, w.w_ih);
    write("weight_hh" + suffix, {4 * H, H}, w.w_hh);
    write("bias_ih" + suffix, {4 * H}, w.b_ih);
    write("bias_hh" + suffix, {4 * H}, w.b_hh);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string save_dir;
    bool save_given = false, no_reference = false;
    lstm::SharedFlags flags;
    flags.timing = flags.check = flags.json = false;  // nothing is timed, checked or recorded
    const lstm::RunOptions options = lstm::parse_command_line(
        argc, argv, "lstm_reference",
        "The CPU reference LSTM forward pass in double precision (no GPU needed): prints its "
        "time and the outputs' norms; --save-inputs and --dump write files for outside "
        "checkers.\nExample: lstm_reference --hidden 64 --batch 8 --seq 20 --layers 2 "
        "--save-inputs /tmp/problem --dump /tmp/problem",
        [&](CLI::App& app) {
          app.add_option("--save-inputs", save_dir,
                         "write the inputs and parameters (x, h0, c0, weights, biases; the "
                         "--load layout) into DIR")
              ->option_text("DIR")
              ->each([&save_given](const std::string&) { save_given = true; });
          app.add_flag("--no-reference", no_reference,
                       "do not compute the reference (e.g. only --save-inputs)");
        },
        flags);
    if (save_given) lstm::require_output_dir("lstm_reference", "--save-inputs", save_dir);
    if (no_reference && !options.dump_dir.empty()) {
      std::cerr << "lstm_reference: --dump needs the reference; it cannot go with --no-reference\n";
      return 2;
    }
    if (!options.load_dir.empty() && options.seed_given) {
      std::cerr << "lstm_reference: --seed " << options.seed
                << " has no effect: the data come from " << options.load_dir
                << " (leave --seed out, or --load out)\n";
      return 2;
    }
    if (!options.load_dir.empty()) std::cout << "load: reading " << options.load_dir << " ...\n";
    const lstm::LstmParams params = options.load_dir.empty()
                                        ? lstm::generate_params(options.size, options.seed)
                                        : lstm::load_params(options.load_dir, options.given);
    if (!save_dir.empty()) {
      save_inputs(save_dir, params);
      std::cout << "save-inputs: x, h0, c0, weights and biases (" << params.size.describe()
                << ") written to " << save_dir << "\n";
    }
    if (no_reference) return 0;
    const lstm::ProblemSize& size = params.size;
    std::cout << "reference (CPU, double): " << size.describe() << ", " << size.flop_count() / 1e9
              << " GFLOP, " << size.layers << " layer(s) ..." << std::endl;
    const auto start = std::chrono::steady_clock::now();
    auto seconds_since_start = [&start] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    const lstm::ReferenceOutputs out = lstm::reference_forward(params, 0, [&](int layer) {
      std::cout << "reference: layer " << layer + 1 << " of " << size.layers << " done ("
                << seconds_since_start() << " s)" << std::endl;
    });
    const double seconds = seconds_since_start();
    std::cout << "reference (CPU, double)  " << size.describe() << "  " << size.flop_count() / 1e9
              << " GFLOP in " << seconds << " s  (" << size.flop_count() / seconds / 1e9
              << " GFLOP/s)\n"
              << "rms of y " << rms(out.y) << ", hy " << rms(out.hy) << ", cy " << rms(out.cy)
              << "\n";
    if (!options.dump_dir.empty()) {
      lstm::dump_outputs(options.dump_dir, params.size,
                         {to_float(out.y), to_float(out.hy), to_float(out.cy)});
      std::cout << "dump: y.npy, hy.npy, cy.npy written to " << options.dump_dir << "\n";
    }
    return 0;
  } catch (const lstm::CliExit& exit) {
    (exit.code() == 0 ? std::cout : std::cerr) << exit.message() << "\n";
    return exit.code();
  } catch (const lstm::FlagDisagreement& error) {
    std::cerr << "lstm_reference: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "lstm_reference: error: " << error.what() << "\n";
    return 1;
  }
}
