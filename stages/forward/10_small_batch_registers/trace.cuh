/*! \file
 *  \brief Debug tracing: where block 0's thread 0 spends the phases of a step (clock64()).
 *
 * Compiled in only on request (CMake option LSTM_PERSISTENT_TRACE, which also adds the --trace
 * flag); otherwise every call below is empty and the kernels are what they are without it.
 * Tracing never changes a plan: the planner reserves the trace's shared memory either way.
 */
#pragma once

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// Where block 0's thread 0 spends its steps (--trace): clock64() marks charged to the
/// phases of a step; the sums live in shared memory (the register kernel's weights need every
/// register). A no-op everywhere else, and everywhere when tracing is not compiled in.
struct PhaseTrace {
  long long* spent;  // [kTraceSlots - 1] cycles per phase, shared memory
  bool on;
  long long mark = 0, loop_start = 0;

  /// `out`: where finish() writes (nullptr: tracing not asked for in this run).
  __device__ PhaseTrace(const long long* out, long long* spent_s)
      : spent(spent_s),
        on(kTraceCompiled && out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    if (!on) return;
    for (int i = 0; i < kTraceSlots - 1; ++i)
      spent[i] = 0;
    loop_start = clock64();
  }
  __device__ void start_step() {
    if (on) mark = clock64();
  }
  /// Charges the cycles since the last mark to phase `index`.
  __device__ void phase(int index) {
    if (!on) return;
    const long long now = clock64();
    spent[index] += now - mark;
    mark = now;
  }
  /// Writes the phases' cycles and the whole loop's to `out` (kTraceSlots values).
  __device__ void finish(long long* out) const {
    if (!on) return;
    for (int i = 0; i < kTraceSlots - 1; ++i)
      out[i] = spent[i];
    out[kTraceSlots - 1] = clock64() - loop_start;
  }
};

}  // namespace lstm::LSTM_STAGE_NAMESPACE
