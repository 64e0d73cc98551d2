#include "core/command_line.h"

#include <CLI/CLI.hpp>

#include <sstream>

namespace lstm {

RunOptions parse_command_line(int argc, const char* const* argv, const std::string& program,
                              const std::string& description, const ExtraOptions& extra) {
  RunOptions options;
  int hidden = 0, input_size = 0, batch = 0, seq_len = 0, layers = 0;

  CLI::App app{description, program};
  app.add_option("--hidden", hidden, "H, hidden units per layer [default 512]")
      ->check(CLI::PositiveNumber);
  app.add_option("--input-size", input_size, "I, input features of layer 0 [default: H]")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "B, batch size [default 64]")->check(CLI::PositiveNumber);
  app.add_option("--seq", seq_len, "T, time steps [default 100]")->check(CLI::PositiveNumber);
  app.add_option("--layers", layers, "L, stacked layers [default 4]")->check(CLI::PositiveNumber);
  app.add_option("--iters", options.iters, "timed passes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", options.warmup, "untimed passes before timing")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the generated parameters and inputs")
      ->capture_default_str();
  bool no_check = false;
  app.add_flag("--no-check", no_check, "skip the comparison with the CPU reference");
  app.add_option("--load", options.load_dir,
                 "read parameters and inputs (.npy, PyTorch names) from DIR; sizes come from "
                 "the files")
      ->check(CLI::ExistingDirectory);
  app.add_option("--dump", options.dump_dir,
                 "write y.npy, hy.npy, cy.npy (and, for a training pass, every gradient) into DIR");
  app.add_option("--json", options.json_path, "append one JSON result record to FILE");
  if (extra) extra(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    throw CliExit(0, app.help());
  } catch (const CLI::ParseError& error) {
    throw CliExit(2, program + ": " + error.what() + "\nRun with --help for the flags.");
  }

  options.check = !no_check;
  if (app.count("--hidden")) options.given.hidden = hidden;
  if (app.count("--input-size")) options.given.input_size = input_size;
  if (app.count("--batch")) options.given.batch = batch;
  if (app.count("--seq")) options.given.seq_len = seq_len;
  if (app.count("--layers")) options.given.layers = layers;

  ProblemSize& size = options.size;
  size.hidden = options.given.hidden.value_or(size.hidden);
  size.input_size = options.given.input_size.value_or(size.hidden);
  size.batch = options.given.batch.value_or(size.batch);
  size.seq_len = options.given.seq_len.value_or(size.seq_len);
  size.layers = options.given.layers.value_or(size.layers);
  if (options.load_dir.empty()) {
    try {
      validate_problem_size(size);
    } catch (const std::exception& error) {
      throw CliExit(2, program + ": " + error.what());
    }
  }
  return options;
}

}  // namespace lstm
