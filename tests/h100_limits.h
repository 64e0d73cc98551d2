// The H100's limits for the planner tests that run without a GPU (test_plan.cpp, the tensor-core
// training tests, stated_limits_stage.cpp): the figures written once, in each stage's own
// DeviceLimits type.
#pragma once

#include <cstddef>

namespace lstm::testing {
namespace detail {

template <class Limits>
auto set_pair_clusters(Limits& limits, int count, int) -> decltype(limits.pair_clusters, void()) {
  limits.pair_clusters = count;
}
template <class Limits>
void set_pair_clusters(Limits&, int, long) {}  // a stage without clusters of two
template <class Limits>
auto set_whole_clusters(Limits& limits, int count, int) -> decltype(limits.whole_clusters, void()) {
  limits.whole_clusters = count;
}
template <class Limits>
void set_whole_clusters(Limits&, int, long) {}  // a stage without clusters of 16

}  // namespace detail

/// Which of the H100's cluster counts are set (where a stage's limits have them); one left at 0
/// is the planner's "no such clusters on this device", as on a GPU without them.
enum class Clusters { kAll, kPairsOnly, kNone };

/// The H100 SXM in the stage's `Limits` (its plan.h DeviceLimits): 132 SMs, 227 KiB of shared
/// memory a block and, where the type has the fields, 66 clusters of two blocks (not with
/// Clusters::kNone) and 7 clusters of 16 (only with Clusters::kAll) resident at once, as
/// cudaOccupancyMaxActiveClusters reports for the stages' cluster kernels on the H100.
template <class Limits>
Limits h100_limits(Clusters clusters = Clusters::kAll) {
  Limits limits;
  limits.sm_count = 132;
  limits.shared_bytes = std::size_t{227} * 1024;
  limits.name = "H100";
  detail::set_pair_clusters(limits, clusters == Clusters::kNone ? 0 : 66, 0);
  detail::set_whole_clusters(limits, clusters == Clusters::kAll ? 7 : 0, 0);
  return limits;
}

}  // namespace lstm::testing
