/*! \file event_timing.h
 *  \brief CUDA-event timing of enqueued work: warm-up, then the median, min and max of N runs.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "core/timing_stats.h"

namespace lstm {

/// Runs `work(stream)` `warmup` times untimed, then `iters` times, each between two CUDA
/// events recorded on `stream` and waited for before the next run.
TimingStats time_on_stream(const std::function<void(cudaStream_t)>& work, cudaStream_t stream,
                           int warmup, int iters);

}  // namespace lstm
