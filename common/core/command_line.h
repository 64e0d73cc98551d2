/*! \file command_line.h
 *  \brief The command line every stage, baseline and the PyTorch script share (the data contract
 *         of docs/design.md), parsed with CLI11.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "core/lstm_data.h"
#include "core/problem_size.h"

namespace CLI {
class App;
}

namespace lstm {

/// What one run of a stage executable is asked to do.
struct RunOptions {
  ProblemSize size;         ///< sizes (defaults: the canonical config H=512 B=64 T=100 L=4, I=H)
  SizeFlags given;          ///< the sizes given explicitly (with --load they must match the files)
  int iters = 20;           ///< timed passes
  int warmup = 3;           ///< untimed passes before them
  std::uint64_t seed = 1;   ///< seed of the generated data
  bool seed_given = false;  ///< --seed was given (with --load it must be used, or it is refused)
  bool check = true;        ///< compare with the CPU reference (false with --no-check)
  std::string load_dir;     ///< --load DIR, empty if not given
  std::string dump_dir;     ///< --dump DIR, empty if not given
  std::string json_path;    ///< --json FILE, empty if not given
};

/// Parsing stopped: print `message` and exit with `code` (0 after --help, 2 for a usage error).
class CliExit : public std::exception {
 public:
  CliExit(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

/// Adds a program's own flags to the shared ones (e.g. the cuDNN baseline's --algo).
using ExtraOptions = std::function<void(CLI::App&)>;

/// Which of the shared flags a program offers (a program offers none it would ignore).
struct SharedFlags {
  bool timing = true;  ///< --iters, --warmup
  bool check = true;   ///< --no-check
  bool json = true;    ///< --json
};

/// Parses the shared command line of `program` (a stage or a baseline), plus `extra` flags;
/// `description` heads --help. Sizes and counts must be plain decimal integers; output paths are
/// checked before any work (a folder that can be created or written, a file that can be
/// appended to), so a bad one costs nothing and writes nothing.
/// \throws CliExit for --help (code 0) and for any bad flag or value (code 2, one line naming
///         the flag, the value and what is allowed).
RunOptions parse_command_line(int argc, const char* const* argv, const std::string& program,
                              const std::string& description, const ExtraOptions& extra = {},
                              const SharedFlags& flags = {});

/// Refuses (CliExit, code 2) an output folder `path` given to `flag` that cannot be written into
/// or created, saying why; creates nothing.
void require_output_dir(const std::string& program, const std::string& flag,
                        const std::string& path);

/// Refuses (CliExit, code 2) an output file `path` given to `flag` that cannot be appended to or
/// created, saying why; creates nothing.
void require_output_file(const std::string& program, const std::string& flag,
                         const std::string& path);

}  // namespace lstm
