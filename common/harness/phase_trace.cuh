/*! \file
 *  \brief Debug tracing of the persistent kernels: where block 0's thread 0 spends the phases of
 *         a step (clock64()), and the --trace flag that prints it.
 *
 * Compiled in only on request (CMake option LSTM_PERSISTENT_TRACE, which also adds --trace);
 * otherwise every device call below is empty and the kernels are what they are without it. A
 * kernel's static shared memory holds the sums either way, so tracing never changes a plan.
 */
#pragma once

#include <string>
#include <utility>

namespace CLI {
class App;
}

namespace lstm {

#ifndef LSTM_PERSISTENT_TRACE
#define LSTM_PERSISTENT_TRACE 0  // 1: the phase tracing (--trace) is compiled in
#endif
/// Whether debug tracing is compiled in (CMake option LSTM_PERSISTENT_TRACE).
constexpr bool kTraceCompiled = LSTM_PERSISTENT_TRACE != 0;
/// What a trace records: block 0's cycles waiting for h_{t-1}, in the product, the reduction, the
/// cell update, and the whole loop.
constexpr int kTraceSlots = 5;

#ifdef __CUDACC__
/// Where block 0's thread 0 spends its steps: clock64() marks charged to the phases of a step;
/// the sums live in shared memory. A no-op everywhere else, and everywhere when tracing is not
/// compiled in.
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
#endif

/// The host side of --trace: the flag, the device buffer a kernel's PhaseTrace writes, and the
/// report (printed when the recorder is destroyed, for the last launch).
class PhaseTraceRecorder {
 public:
  explicit PhaseTraceRecorder(std::string stage) : stage_(std::move(stage)) {}
  PhaseTraceRecorder(const PhaseTraceRecorder&) = delete;
  PhaseTraceRecorder& operator=(const PhaseTraceRecorder&) = delete;
  ~PhaseTraceRecorder();

  /// Adds --trace to `app` where tracing is compiled in; nothing otherwise.
  void add_flag(CLI::App& app);
  /// Allocates the buffer if --trace was given, for a sequence of `seq_len` steps.
  void prepare(int seq_len);
  /// What a kernel's PhaseTrace writes to (nullptr: no tracing in this run).
  long long* device() const { return buffer_; }

 private:
  std::string stage_;
  bool asked_ = false;
  int seq_len_ = 0;
  long long* buffer_ = nullptr;
};

}  // namespace lstm
