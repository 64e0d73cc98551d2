/*! \file stage_main.h
 *  \brief The shared main() of every stage and baseline: parse, prepare data, prepare the stage
 *         outside the timed region, checked run, timed runs, report. A stage provides only its
 *         implementation.
 */
#pragma once

#include <functional>
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

/// Runs `stages` one after another on the same data: each is prepared, checked against the CPU
/// reference (computed once), timed and reported. With several, the fastest is named at the end.
/// \return 0 if every stage that ran passed; 1 otherwise (and for a refused stage with kError).
int run_stages(const RunOptions& options, const std::vector<StageInfo>& stages,
               Unsupported unsupported);

/// A program's main(): parses the shared flags and `extra` ones, then runs the implementations
/// that `select` returns (called after parsing, so it can read the extra flags).
/// \return as run_stages; 2 for a usage error; 0 after --help.
int harness_main(int argc, char** argv, const std::string& program, const ExtraOptions& extra,
                 const std::function<std::vector<StageInfo>()>& select, Unsupported unsupported);

/// The main() of a stage executable: harness_main with the shared flags only.
int stage_main(int argc, char** argv, const StageInfo& stage);

}  // namespace lstm
