/*! \file timing_stats.h
 *  \brief The statistics of timed runs (median, min, max), as every report carries them.
 */
#pragma once

#include <vector>

namespace lstm {

/// Times of the timed runs, in milliseconds.
struct TimingStats {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
  std::vector<double> runs_ms;  ///< every timed run, in order
};

/// Median, min and max of `runs_ms` (non-empty).
TimingStats summarize_runs(std::vector<double> runs_ms);

}  // namespace lstm
