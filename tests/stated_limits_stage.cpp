// One stage's planner on the H100, for tests/stated_limits.cpp: compiled once per stage, in the
// stage's namespace beside its plan.h (tests/stated_limits.cmake).
#include "h100_limits.h"
#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {

/// The largest H this stage's planner fits on the H100 (132 SMs, 227 KiB a block) at this batch.
int largest_on_h100(int batch) {
  return largest_hidden_that_fits(ProblemSize{4096, 4096, batch, 100, 1},
                                  testing::h100_limits<DeviceLimits>());
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
