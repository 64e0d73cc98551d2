/*! \file stage_main.h
 *  \brief The shared main() of every stage and baseline: parse, prepare the data, then for each
 *         implementation the sequence of checked_run.h (prepare, checked run, check, timed runs)
 *         and the report. A stage provides only its implementation (and its own flags).
 */
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/command_line.h"
#include "harness/stage.h"

namespace lstm {

/// What to do with an implementation that refuses the problem size (Stage::unsupported_reason).
enum class Unsupported {
  kError,  ///< print why and exit non-zero (a stage asked for explicitly)
  kSkip,   ///< report it as unsupported and go on (e.g. a cuDNN algorithm that refuses a shape)
};

/// An implementation ready to run: its name, series and instance (flags already applied).
struct Implementation {
  std::string name;              ///< "forward/00_naive", "cudnn_standard", ...
  std::string series;            ///< "forward", "training", or "" for a baseline
  std::unique_ptr<Stage> stage;  ///< the instance
};

/// The precision every one of `implementations` computes in (FP32 for none).
/// \throws std::invalid_argument naming two that differ: one run has one data set, quantised
///         for one precision.
Precision run_precision(const std::vector<Implementation>& implementations);

/// Runs `implementations` one after another on the same data: each is prepared, checked against
/// the CPU reference (computed once), timed and reported. With several, the fastest is named.
/// For a reduced precision (run_precision), every input, generated or loaded, is first rounded
/// to it on the host (quantize_problem), and the reference is computed from those values.
/// \return 0 if every implementation that ran passed and at least one ran; 1 otherwise (and for
///         a refused one with kError).
int run_stages(const RunOptions& options, std::vector<Implementation> implementations,
               Unsupported unsupported);

/// A program's main(): parses the shared flags and `extra` ones (described by `description` in
/// --help), then runs what `select` returns (called after parsing, so it can read the flags).
/// \return as run_stages; 2 for a usage error; 0 after --help.
int harness_main(int argc, char** argv, const std::string& program, const std::string& description,
                 const ExtraOptions& extra,
                 const std::function<std::vector<Implementation>()>& select,
                 Unsupported unsupported);

/// The main() of a stage executable (lstm_<series>_<NN_slug>): the shared flags and the stage's
/// own (Stage::add_flags).
int stage_main(int argc, char** argv, const StageInfo& stage);

/// "lstm_forward_00_naive" for "forward/00_naive": the executable of a stage.
std::string program_name(const std::string& stage_name);

/// Applies command-line flags to `stage` as its executable would (its add_flags), e.g.
/// {"--weights", "registers"}: for tests and tools that pin a stage's knobs.
/// \throws std::invalid_argument with CLI11's message for an unknown flag or a bad value.
void apply_stage_flags(Stage& stage, const std::vector<std::string>& flags);

}  // namespace lstm
