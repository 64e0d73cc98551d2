/*! \file launch_timing.h
 *  \brief The time of one step of a kernel that loops over steps, its launch's own cost removed:
 *         what the grid-barrier and exchange benchmarks report.
 */
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "harness/cuda_utils.h"

namespace lstm::bench {

/// Timed launches per step count, after one warm-up; the fastest is kept.
constexpr int kTimedLaunches = 8;

/// The fastest of kTimedLaunches calls of `launch(steps, start, stop)` in ms, one warm-up first.
/// `launch` records `start`, launches a kernel of `steps` steps and records `stop`.
template <typename Launch>
float fastest_launch_ms(const Launch& launch, int steps) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  for (int run = -1; run < kTimedLaunches; ++run) {  // run -1 warms up
    launch(steps, start, stop);
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (run >= 0) best_ms = std::min(best_ms, ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return best_ms;
}

/// Microseconds per step: the fastest times t(N) of N = `steps` (>= 2) and t(1) of one step give
/// (t(N) - t(1)) / (N - 1).
template <typename Launch>
double us_per_step(const Launch& launch, int steps) {
  const float many_ms = fastest_launch_ms(launch, steps);
  const float one_ms = fastest_launch_ms(launch, 1);
  return (static_cast<double>(many_ms) - one_ms) * 1e3 / (steps - 1);
}

}  // namespace lstm::bench
