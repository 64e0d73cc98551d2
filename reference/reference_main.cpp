// lstm_reference: the CPU reference as a program, with the shared size, seed and data flags (not
// the timing, check and JSON flags, which would mean nothing here). It runs anywhere (no GPU),
// prints its progress, its time and the outputs' norms, and writes files for outside checkers
// such as baselines/pytorch:
//   --save-inputs DIR  the problem's inputs and parameters in the --load layout (PyTorch names)
//   --dump DIR         the reference outputs y.npy, hy.npy, cy.npy (float32)
//   --no-reference     skip the reference itself (just save the inputs), for big sweeps
//   --training         the training pass: forward, then BPTT with the upstream gradients dy, dhy,
//                      dcy (loaded, or generated from the seed); --save-inputs then also writes
//                      dy, dhy, dcy and --dump every gradient (docs/design.md, "Data contract")
//   --fits-budget      say whether the reference of this problem fits the FLOP budget the
//                      checks keep to (kReferenceFlopBudget), compute nothing: for scripts
// It computes whatever it is asked, also over that budget, and then says so.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/command_line.h"
#include "core/named_tensor.h"
#include "core/npy.h"
#include "core/quantize.h"
#include "lstm_reference.h"
#include "lstm_reference_backward.h"

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

/// Writes x, h0, c0 and every layer's weights and biases into `dir`, as `--load DIR` reads them,
/// and for a training problem also dy, dhy and dcy.
void save_inputs(const std::string& dir, const lstm::LstmParams& params,
                 const lstm::UpstreamGradients* upstream) {
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
  if (upstream != nullptr) {
    write("dy", {T, B, H}, upstream->dy);
    write("dhy", {L, B, H}, upstream->dhy);
    write("dcy", {L, B, H}, upstream->dcy);
  }
}

/// Whether the reference of `size` (a training pass, or the forward) fits kReferenceFlopBudget,
/// and a sentence saying so.
bool within_budget(const lstm::ProblemSize& size, bool training, std::string* sentence) {
  std::ostringstream text;
  const double flop = training ? size.training_flop_count() : size.flop_count();
  const bool fits =
      training ? lstm::training_reference_fits(size) : lstm::reference_steps(size) == size.seq_len;
  text << "the " << (training ? "training" : "forward") << " reference of " << size.describe()
       << " is " << flop << " FLOP, " << (fits ? "within" : "over")
       << " the CPU reference's budget of " << lstm::kReferenceFlopBudget
       << " FLOP that the checks keep to";
  if (!fits) {
    text << (training ? " (a training check over it compares no gradient)"
                      : " (a forward check over it compares the first " +
                            std::to_string(lstm::reference_steps(size)) + " of " +
                            std::to_string(size.seq_len) + " steps of y only)");
  }
  *sentence = text.str();
  return fits;
}

/// The forward reference: progress per layer, time, norms; --dump writes y, hy and cy.
void run_forward(const lstm::LstmParams& params, const std::string& dump_dir) {
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
  if (!dump_dir.empty()) {
    lstm::dump_outputs(dump_dir, params.size,
                       {to_float(out.y), to_float(out.hy), to_float(out.cy)});
    std::cout << "dump: y.npy, hy.npy, cy.npy written to " << dump_dir << "\n";
  }
}

/// The training reference (forward keeping the activations, then BPTT): time, norms; --dump
/// writes y, hy, cy and every gradient with PyTorch's names.
void run_training(const lstm::LstmParams& params, const lstm::UpstreamGradients& upstream,
                  const std::string& dump_dir) {
  const lstm::ProblemSize& size = params.size;
  const double flop = size.training_flop_count();
  std::cout << "reference (CPU, double): training pass (forward, then BPTT) of " << size.describe()
            << ", " << flop / 1e9 << " GFLOP ..." << std::endl;
  const auto start = std::chrono::steady_clock::now();
  std::vector<lstm::ReferenceTensor> tensors =
      lstm::training_tensors(size, lstm::reference_training(params, upstream));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "reference (CPU, double)  training " << size.describe() << "  " << flop / 1e9
            << " GFLOP in " << seconds << " s  (" << flop / seconds / 1e9 << " GFLOP/s)\nrms of";
  for (std::size_t i = 0; i < tensors.size() && i < 6; ++i)  // y, hy, cy, dx, dh0, dc0
    std::cout << (i ? ", " : " ") << tensors[i].name << " " << rms(tensors[i].values);
  std::cout << "\n";
  if (!dump_dir.empty()) {
    std::vector<lstm::OutputTensor> outputs;
    for (lstm::ReferenceTensor& tensor : tensors) {
      outputs.push_back({std::move(tensor.name), std::move(tensor.shape), std::move(tensor.axes),
                         to_float(tensor.values)});
      tensor.values = {};  // the double copy is no longer needed
    }
    lstm::dump_tensors(dump_dir, outputs);
    std::cout << "dump: " << outputs.size()
              << " tensors (y.npy, hy.npy, cy.npy, dx.npy, dh0.npy, dc0.npy and every "
                 "grad_*_l{k}.npy) written to "
              << dump_dir << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string save_dir;
    bool save_given = false, no_reference = false, training = false, fits_budget = false;
    std::string precision_text = "fp32";
    lstm::SharedFlags flags;
    flags.timing = flags.check = flags.json = false;  // nothing is timed, checked or recorded
    const lstm::RunOptions options = lstm::parse_command_line(
        argc, argv, "lstm_reference",
        "The CPU reference LSTM in double precision (no GPU needed), the forward pass or with "
        "--training the training pass: prints its time and the outputs' norms; --save-inputs "
        "and --dump write files for outside checkers.\nExample: lstm_reference --hidden 64 "
        "--batch 8 --seq 20 --layers 2 [--training] --save-inputs /tmp/problem --dump "
        "/tmp/problem",
        [&](CLI::App& app) {
          app.add_option("--save-inputs", save_dir,
                         "write the inputs and parameters (x, h0, c0, weights, biases; the "
                         "--load layout; with --training also dy, dhy, dcy) into DIR")
              ->option_text("DIR")
              ->each([&save_given](const std::string&) { save_given = true; });
          app.add_flag("--no-reference", no_reference,
                       "do not compute the reference (e.g. only --save-inputs)");
          app.add_flag("--training", training,
                       "the training pass: the forward, then back-propagation through time with "
                       "the upstream gradients dy, dhy, dcy (from the --load folder, or generated "
                       "from the seed when it has none); --save-inputs also writes dy, dhy, dcy, "
                       "--dump also dx, dh0, dc0 and every grad_{weight,bias}_{ih,hh}_l{k}");
          app.add_option("--precision", precision_text,
                         "fp32, or fp16 or bf16: round every input (x, h0, c0, weights, biases; "
                         "with --training dy, dhy, dcy) to that precision (nearest, ties to even) "
                         "first, as the harness does for such an implementation: --save-inputs "
                         "writes the rounded values and the reference is theirs (for "
                         "lstm_pytorch.py --precision)")
              ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
              ->capture_default_str();
          app.add_flag("--fits-budget", fits_budget,
                       "print \"yes: ...\" if the reference of this problem (with --training: the "
                       "training reference) fits the FLOP budget the checks keep to, else "
                       "\"no: ...\"; computes and writes nothing (for scripts)");
        },
        flags);
    if (save_given) lstm::require_output_dir("lstm_reference", "--save-inputs", save_dir);
    if (fits_budget && (save_given || no_reference || !options.dump_dir.empty())) {
      std::cerr << "lstm_reference: --fits-budget computes and writes nothing; it cannot go with "
                   "--save-inputs, --dump or --no-reference\n";
      return 2;
    }
    if (no_reference && !options.dump_dir.empty()) {
      std::cerr << "lstm_reference: --dump needs the reference; it cannot go with --no-reference\n";
      return 2;
    }
    if (no_reference && !save_given) {
      std::cerr << "lstm_reference: --no-reference computes nothing, so without --save-inputs it "
                   "would do nothing\n";
      return 2;
    }
    // --seed with --load is refused unless it generates something: a training run's upstream
    // gradients, where the folder has none of them.
    const bool loading = !options.load_dir.empty();
    const bool upstream_generated =
        training && (!loading || !lstm::has_upstream_files(options.load_dir));
    if (loading && options.seed_given && !upstream_generated) {
      std::cerr << "lstm_reference: --seed " << options.seed
                << " has no effect: the data come from " << options.load_dir
                << (training ? " (dy, dhy and dcy too)" : "")
                << " (leave --seed out, or --load out)\n";
      return 2;
    }
    if (fits_budget) {  // the answer alone, on one line
      const lstm::ProblemSize size =
          loading ? lstm::load_params(options.load_dir, options.given).size : options.size;
      std::string sentence;
      const bool fits = within_budget(size, training, &sentence);
      std::cout << (fits ? "yes: " : "no: ") << sentence << "\n";
      return 0;
    }
    if (loading) std::cout << "load: reading " << options.load_dir << " ..." << std::endl;
    lstm::LstmParams params = !loading ? lstm::generate_params(options.size, options.seed)
                                       : lstm::load_params(options.load_dir, options.given);
    const lstm::ProblemSize& size = params.size;
    // The upstream gradients: read (and checked) before anything is written.
    std::optional<lstm::UpstreamGradients> upstream;
    if (training) {
      upstream = loading ? lstm::load_upstream(options.load_dir, size, options.seed)
                         : lstm::generate_upstream(size, options.seed);
      if (upstream_generated) {
        std::cout << "upstream: dy, dhy, dcy generated from seed " << options.seed << "\n";
      }
    }
    const lstm::Precision precision = precision_text == "fp16"   ? lstm::Precision::kFp16
                                      : precision_text == "bf16" ? lstm::Precision::kBf16
                                                                 : lstm::Precision::kFp32;
    if (precision != lstm::Precision::kFp32) {
      lstm::quantize_problem(precision, params, upstream ? &*upstream : nullptr);
      std::cout << "precision: every input rounded to " << lstm::precision_name(precision)
                << " (nearest, ties to even); the reference is of the rounded values\n";
    }
    // The --dump folder is made before --save-inputs writes anything: a folder that cannot be
    // made (a check by permissions does not see every reason) leaves nothing behind.
    if (!save_dir.empty() && !options.dump_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(options.dump_dir, error);
      if (error)
        throw std::runtime_error(options.dump_dir + ": cannot create the folder: " +
                                 error.message() + " (nothing was written)");
    }
    if (!save_dir.empty()) {
      save_inputs(save_dir, params, upstream ? &*upstream : nullptr);
      std::cout << "save-inputs: x, h0, c0, weights and biases"
                << (upstream ? ", dy, dhy, dcy" : "") << " (" << size.describe() << ") written to "
                << save_dir << "\n";
    }
    if (no_reference) return 0;
    std::string sentence;
    if (!within_budget(size, training, &sentence)) {
      std::cout << "note: " << sentence << "; computing all of it anyway, as asked (this may "
                << "take a while)" << std::endl;
    }
    if (training) {
      run_training(params, *upstream, options.dump_dir);
    } else {
      run_forward(params, options.dump_dir);
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
