/*! \file checked_run.h
 *  \brief The one sequence every run goes through (the stage executables, the bench and the
 *         tests): refuse or prepare, a checked run on poisoned outputs with no timing code around
 *         it, the check against the reference, then the timed runs.
 */
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/lstm_data.h"
#include "core/named_tensor.h"
#include "core/timing_stats.h"
#include "harness/device_tensors.h"
#include "harness/stage.h"

namespace lstm {

/// What the implementations of one run are checked against: the reference's tensors, and what
/// the reference did not cover (said on every report).
struct ReferenceForCheck {
  std::vector<ReferenceTensor> tensors;
  std::vector<std::string> not_checked;
};

/// Runs the CPU reference for implementations of `kind`: the forward (y of all steps or of a
/// prefix within the budget; hy and cy only with every step), and for a training pass the
/// gradients too (`upstream` required) where the whole training reference fits the budget.
ReferenceForCheck compute_reference(const LstmParams& params, StageKind kind,
                                    const UpstreamGradients* upstream = nullptr);

/// The reference tensors of a saved result (e.g. PyTorch's fixture): `<dir>/<name>.npy` for
/// every output of `kind`.
ReferenceForCheck load_reference(const std::string& dir, const ProblemSize& size, StageKind kind);

/// Asks `stage` whether it can run on `problem` here, checks the device memory it needs, and
/// prepares it (outside every timed region). Returns "" when prepared, else why not (a stated
/// limit, not enough memory, or UnsupportedError from prepare()).
std::string prepare_stage(Stage& stage, const DeviceProblem& problem);

/// One pass for checking: poisons the outputs, enqueues forward (and backward for a training
/// stage) on `stream`, waits for the device (no events, no timing code), checks for errors and
/// downloads the outputs the stage's kind writes.
std::vector<OutputTensor> run_for_check(Stage& stage, DeviceProblem& problem, cudaStream_t stream);

/// Compares `outputs` with `reference`, each tensor against stage.tolerance(name).
CheckReport check_run(const Stage& stage, const std::vector<OutputTensor>& outputs,
                      const ReferenceForCheck& reference);

/// Times of one implementation: the whole pass, and for a training stage its forward (with what
/// backward needs) and its backward, each timed on its own.
struct StageTimes {
  TimingStats total;
  std::optional<TimingStats> forward;
  std::optional<TimingStats> backward;
};

/// Times `stage` on `problem` (warm-up, then `iters` runs between CUDA events on `stream`).
StageTimes time_stage(Stage& stage, DeviceProblem& problem, cudaStream_t stream, int warmup,
                      int iters);

}  // namespace lstm
