/*! \file timing.h
 *  \brief CUDA-event timing of a forward pass: warm-up, then the median, min and max of N runs.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

namespace lstm {

/// Times of the timed runs, in milliseconds.
struct TimingStats {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
  std::vector<double> runs_ms;  ///< every timed run, in order
};

/// Runs `forward(stream)` `warmup` times untimed, then `iters` times, each between two CUDA
/// events recorded on `stream` and waited for before the next run.
TimingStats time_forward(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                         int warmup, int iters);

/// Median, min and max of `runs_ms` (non-empty).
TimingStats summarize_runs(std::vector<double> runs_ms);

}  // namespace lstm
