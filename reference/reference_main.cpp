// lstm_reference: the CPU reference as a program, with the shared flags. It runs anywhere (no
// GPU), prints its time and the outputs' norms, and with --dump writes y.npy, hy.npy and cy.npy
// (float32) for outside checkers such as baselines/pytorch.
#include <chrono>
#include <cmath>
#include <iostream>

#include "config.h"
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

}  // namespace

int main(int argc, char** argv) {
  try {
    const lstm::RunOptions options = lstm::parse_command_line(argc, argv, "lstm_reference");
    const lstm::LstmParams params = options.load_dir.empty()
                                        ? lstm::generate_params(options.size, options.seed)
                                        : lstm::load_params(options.load_dir, options.given);
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
