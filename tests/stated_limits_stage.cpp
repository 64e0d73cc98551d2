// One stage's planner on the H100, for tests/stated_limits.cpp: compiled once per stage, in the
// stage's namespace beside its plan.h (tests/stated_limits.cmake).
#include <cstddef>

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

// The cluster counts where the stage's DeviceLimits has them: on the H100 66 pairs of blocks and
// 7 clusters of 16, as cudaOccupancyMaxActiveClusters reports.
template <class Limits>
auto set_pairs(Limits& limits, int) -> decltype(limits.pair_clusters, void()) {
  limits.pair_clusters = 66;
}
template <class Limits>
void set_pairs(Limits&, long) {}
template <class Limits>
auto set_wholes(Limits& limits, int) -> decltype(limits.whole_clusters, void()) {
  limits.whole_clusters = 7;
}
template <class Limits>
void set_wholes(Limits&, long) {}

}  // namespace

/// The largest H this stage's planner fits on the H100 (132 SMs, 227 KiB a block) at this batch.
int largest_on_h100(int batch) {
  DeviceLimits h100;
  h100.sm_count = 132;
  h100.shared_bytes = std::size_t{227} * 1024;
  h100.name = "H100";
  set_pairs(h100, 0);
  set_wholes(h100, 0);
  return largest_hidden_that_fits(ProblemSize{4096, 4096, batch, 100, 1}, h100);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
