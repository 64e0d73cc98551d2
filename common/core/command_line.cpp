#include "core/command_line.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

namespace lstm {
namespace {

/// `text` as a message quotes it: at most 20 characters, so no value floods a message.
std::string shown(const std::string& text) {
  return "\"" + (text.size() > 20 ? text.substr(0, 20) + "..." : text) + "\"";
}

/// Parses a plain decimal integer (digits only: no sign, no spaces, no 0x) into `value`.
bool parse_decimal(const std::string& text, unsigned long long* value) {
  if (text.empty() || text.size() > 20) return false;
  unsigned long long result = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const unsigned digit = static_cast<unsigned>(c - '0');
    if (result > (std::numeric_limits<unsigned long long>::max() - digit) / 10) return false;
    result = result * 10 + digit;
  }
  *value = result;
  return true;
}

/// An int flag's value from `text`, at least `minimum`.
/// \throws CliExit(2) naming the flag, the value and what is allowed.
int int_flag(const std::string& program, const std::string& flag, const std::string& text,
             int minimum) {
  unsigned long long value = 0;
  if (!parse_decimal(text, &value) || value < static_cast<unsigned long long>(minimum) ||
      value > static_cast<unsigned long long>(INT_MAX)) {
    const std::string what = minimum > 0 ? "a positive integer" : "a non-negative integer";
    throw CliExit(2, program + ": " + flag + " must be " + what + " (at most " +
                         std::to_string(INT_MAX) + "), got " + shown(text));
  }
  return static_cast<int>(value);
}

std::string system_reason() {
  return std::strerror(errno);
}

}  // namespace

void require_output_dir(const std::string& program, const std::string& flag,
                        const std::string& path) {
  namespace fs = std::filesystem;
  auto refuse = [&](const std::string& why) {
    throw CliExit(2, program + ": " + flag + " " + shown(path) + ": " + why);
  };
  if (path.empty()) refuse("needs a folder name, got an empty one");
  std::error_code error;
  if (fs::exists(path, error)) {
    if (!fs::is_directory(path, error)) refuse("exists and is not a folder");
    if (::access(path.c_str(), W_OK | X_OK) != 0)
      refuse("cannot write into it: " + system_reason());
    return;
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  // The folder is created when the outputs are written; its nearest existing ancestor must allow
  // it.
  while (!fs::exists(parent, error) && parent.has_parent_path() && parent != parent.parent_path())
    parent = parent.parent_path();
  if (!fs::is_directory(parent, error))
    refuse("its parent " + parent.string() + " is not a folder");
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    refuse("cannot create it in " + parent.string() + ": " + system_reason());
  }
}

void require_output_file(const std::string& program, const std::string& flag,
                         const std::string& path) {
  namespace fs = std::filesystem;
  auto refuse = [&](const std::string& why) {
    throw CliExit(2, program + ": " + flag + " " + shown(path) + ": " + why);
  };
  if (path.empty()) refuse("needs a file name, got an empty one");
  std::error_code error;
  if (fs::exists(path, error)) {
    if (fs::is_directory(path, error)) refuse("is a folder, not a file");
    if (::access(path.c_str(), W_OK) != 0) refuse("cannot write to it: " + system_reason());
    return;
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, error)) refuse("its folder " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    refuse("cannot create it in " + parent.string() + ": " + system_reason());
  }
}

RunOptions parse_command_line(int argc, const char* const* argv, const std::string& program,
                              const std::string& description, const ExtraOptions& extra,
                              const SharedFlags& flags) {
  RunOptions options;
  std::string hidden, input_size, batch, seq_len, layers, iters, warmup, seed;

  CLI::App app{description, program};
  app.footer(
      "Exit status: 0 success, 1 a failed or refused run (a check that failed, a size the "
      "implementation cannot run, bad input files, no GPU), 2 a usage error.");
  app.add_option("--hidden", hidden, "H, hidden units per layer [default 512]")->option_text("N");
  app.add_option("--input-size", input_size, "I, input features of layer 0 [default: H]")
      ->option_text("N");
  app.add_option("--batch", batch, "B, batch size [default 64]")->option_text("N");
  app.add_option("--seq", seq_len, "T, time steps [default 100]")->option_text("N");
  app.add_option("--layers", layers, "L, stacked layers [default 4]")->option_text("N");
  if (flags.timing) {
    app.add_option("--iters", iters, "timed passes [default 20]")->option_text("N");
    app.add_option("--warmup", warmup, "untimed passes before timing [default 3]")
        ->option_text("N");
  }
  app.add_option("--seed", seed,
                 "seed of the generated parameters and inputs [default 1]; not with --load")
      ->option_text("S");
  bool no_check = false;
  if (flags.check) {
    app.add_flag("--no-check", no_check, "skip the comparison with the CPU reference");
  }
  app.add_option("--load", options.load_dir,
                 "read parameters and inputs (.npy, PyTorch names) from DIR; sizes come from "
                 "the files")
      ->option_text("DIR");
  app.add_option("--dump", options.dump_dir,
                 "write y.npy, hy.npy, cy.npy (and, for a training pass, every gradient) into DIR")
      ->option_text("DIR");
  if (flags.json) {
    app.add_option("--json", options.json_path, "append one JSON result record to FILE")
        ->option_text("FILE");
  }
  if (extra) extra(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    throw CliExit(0, app.help());
  } catch (const CLI::ParseError& error) {
    std::string message = error.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    throw CliExit(2, program + ": " + message + " (run with --help for the flags)");
  }

  options.check = !no_check;
  auto size_flag = [&](const char* flag, const std::string& text, std::optional<int>* given) {
    if (app.count(flag)) *given = int_flag(program, flag, text, 1);
  };
  size_flag("--hidden", hidden, &options.given.hidden);
  size_flag("--input-size", input_size, &options.given.input_size);
  size_flag("--batch", batch, &options.given.batch);
  size_flag("--seq", seq_len, &options.given.seq_len);
  size_flag("--layers", layers, &options.given.layers);
  if (flags.timing && app.count("--iters")) options.iters = int_flag(program, "--iters", iters, 1);
  if (flags.timing && app.count("--warmup")) {
    options.warmup = int_flag(program, "--warmup", warmup, 0);
  }
  if (app.count("--seed")) {
    unsigned long long value = 0;
    if (!parse_decimal(seed, &value)) {
      throw CliExit(2, program + ": --seed must be an integer from 0 to " +
                           std::to_string(std::numeric_limits<std::uint64_t>::max()) + ", got " +
                           shown(seed));
    }
    options.seed = value;
    options.seed_given = true;
  }

  // Paths: checked now, before any work, so that a bad one costs nothing and writes nothing.
  if (app.count("--load")) {
    if (options.load_dir.empty()) throw CliExit(2, program + ": --load needs a folder, got \"\"");
    if (!std::filesystem::is_directory(options.load_dir)) {
      throw CliExit(2, program + ": --load " + shown(options.load_dir) + ": " +
                           (std::filesystem::exists(options.load_dir) ? "is not a folder"
                                                                      : "no such folder"));
    }
  }
  if (app.count("--dump")) require_output_dir(program, "--dump", options.dump_dir);
  if (flags.json && app.count("--json")) require_output_file(program, "--json", options.json_path);

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
