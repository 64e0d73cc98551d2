/*! \file report.h
 *  \brief Result reporting: one human-readable summary and, with --json, one JSON record per run
 *         carrying the fields docs/design.md ("Results") lists.
 */
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/environment.h"
#include "core/problem_size.h"
#include "core/timing_stats.h"
#include "core/check.h"

namespace lstm {

/// Everything one run of a stage measured.
struct RunRecord {
  std::string stage;                 ///< "00_naive", "cudnn_standard", ...
  ProblemSize size;                  ///< sizes
  std::string dtype = "fp32";        ///< data and math precision
  std::string data_source;           ///< "generated (seed 1)" or "loaded from DIR"
  int warmup = 0;                    ///< untimed runs before timing
  TimingStats timing;                ///< timed runs
  std::optional<CheckReport> check;  ///< absent with --no-check
};

/// TFLOP/s of a forward pass of `size` taking `ms` (FLOPs as ProblemSize::flop_count()).
double tflops(const ProblemSize& size, double ms);

/// Microseconds per (time step x layer) of a forward pass of `size` taking `ms`.
double us_per_step_layer(const ProblemSize& size, double ms);

/// Writes the summary line(s) of a run: sizes, median/min/max, TFLOP/s, us per step-layer.
void print_summary(std::ostream& out, const RunRecord& record, const Environment& env);

/// The JSON record of a run (one line, no trailing newline).
std::string json_record(const RunRecord& record, const Environment& env);

/// Appends json_record() and a newline to `path` (JSON Lines).
/// \throws std::runtime_error naming `path` if it cannot be written.
void append_json_record(const std::string& path, const RunRecord& record, const Environment& env);

}  // namespace lstm
