// lstm_reference: the CPU reference as a program, with the shared flags. It runs anywhere (no
// GPU), prints its time and the outputs' norms, and writes files for outside checkers such as
// baselines/pytorch:
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
  std::filesystem::create_directories(dir);
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
    bool no_reference = false;
    const lstm::RunOptions options = lstm::parse_command_line(
        argc, argv, "lstm_reference",
        "The CPU reference LSTM forward pass in double precision (no GPU "
        "needed).",
        [&](CLI::App& app) {
          app.add_option("--save-inputs", save_dir,
                         "write the inputs and parameters (x, h0, c0, weights, biases; the "
                         "--load layout) into DIR");
          app.add_flag("--no-reference", no_reference,
                       "do not compute the reference (e.g. only --save-inputs)");
        });
    const lstm::LstmParams params = options.load_dir.empty()
                                        ? lstm::generate_params(options.size, options.seed)
                                        : lstm::load_params(options.load_dir, options.given);
    if (!save_dir.empty()) {
      save_inputs(save_dir, params);
      std::cout << "save-inputs: x, h0, c0, weights and biases (" << params.size.describe()
                << ") written to " << save_dir << "\n";
    }
    if (no_reference) {
      if (!options.dump_dir.empty()) std::cout << "dump: skipped (--no-reference)\n";
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    const lstm::ReferenceOutputs out = lstm::reference_forward(params);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "reference (CPU, double)  " << params.size.describe() << "  "
              << params.size.flop_count() / 1e9 << " GFLOP in " << seconds << " s  ("
              << params.size.flop_count() / seconds / 1e9 << " GFLOP/s)\n"
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
  } catch (const std::exception& error) {
    std::cerr << "lstm_reference: error: " << error.what() << "\n";
    return 1;
  }
}
