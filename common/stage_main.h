/*! \file stage_main.h
 *  \brief The shared main() of every stage: parse, prepare data, prepare the stage outside the
 *         timed region, checked run, timed runs, report. A stage provides only its implementation.
 */
#pragma once

#include "stage.h"

namespace lstm {

/// Runs `stage` as a command-line program with the shared flags (config.h).
/// \return 0 on success; 1 for a failed check, an unsupported size or a CUDA error; 2 for a
///         usage error. Every failure prints why on stderr.
int stage_main(int argc, char** argv, const StageInfo& stage);

}  // namespace lstm
