/*! \file run_record.h
 *  \brief Result reporting: one human-readable summary and, with --json, one JSON record per run
 *         carrying the implementation's name, series, kind and precision, the sizes, the times,
 *         the check and the environment.
 */
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/check.h"
#include "core/environment.h"
#include "core/kind_and_precision.h"
#include "core/problem_size.h"
#include "core/timing_stats.h"

namespace lstm {

/// Everything one run of an implementation measured.
struct RunRecord {
  std::string stage;                       ///< "forward/00_naive", "cudnn_standard", ...
  std::string series;                      ///< "forward", "training", or "" for a baseline
  StageKind kind = StageKind::kForward;    ///< what it computed
  Precision precision = Precision::kFp32;  ///< in which precision
  ProblemSize size;                        ///< sizes
  std::string data_source;                 ///< "generated (seed 1)" or "loaded from DIR"
  int warmup = 0;                          ///< untimed runs before timing
  TimingStats timing;                      ///< the whole pass (a training pass: forward + backward)
  std::optional<TimingStats> forward;      ///< a training pass: the forward with its stash alone
  std::optional<TimingStats> backward;     ///< a training pass: the backward alone
  std::optional<CheckReport> check;        ///< absent with --no-check
};

/// FLOPs of one pass of `kind` over `size` (ProblemSize::flop_count or training_flop_count).
double flop_count(const ProblemSize& size, StageKind kind);

/// TFLOP/s of a pass of `kind` over `size` taking `ms`.
double tflops(const ProblemSize& size, StageKind kind, double ms);

/// Microseconds per (time step x layer) of a pass over `size` taking `ms`.
double us_per_step_layer(const ProblemSize& size, double ms);

/// "forward/00_naive  H=512 I=512 B=64 T=100 L=4  forward fp32": who ran what, for the console.
std::string describe_run(const RunRecord& record);

/// Writes the summary line(s) of a run: sizes, median/min/max, TFLOP/s, us per step-layer, and
/// for a training pass the forward and backward apart.
void print_summary(std::ostream& out, const RunRecord& record, const Environment& env);

/// The JSON record of a run (one line, no trailing newline).
std::string json_record(const RunRecord& record, const Environment& env);

/// Appends json_record() and a newline to `path` (JSON Lines).
/// \throws std::runtime_error naming `path` if it cannot be written.
void append_json_record(const std::string& path, const RunRecord& record, const Environment& env);

}  // namespace lstm
