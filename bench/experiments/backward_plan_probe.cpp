// Issue 25 (session 76): the backward plans of training 52's planner with the H100's limits
// (tests/h100_limits.h), no GPU needed: how many clusters of 16 a layer's backward recurrence
// takes at the multi-layer shapes, against the clusters of 16 the H100 holds at once. Build and
// run from the repository root:
//   S=stages/training/52_large_weight_gradients_in_one_chunk
//   g++ -std=c++17 -DLSTM_STAGE_NAMESPACE=stage_training_52_large_weight_gradients_in_one_chunk \
//     -I$S -Icommon -Itests bench/experiments/backward_plan_probe.cpp $S/plan.cpp \
//     common/core/problem_size.cpp common/core/kind_and_precision.cpp -o probe
//   ./probe
#include <cstdio>

#include "h100_limits.h"
#include "plan.h"

using namespace lstm;
using namespace lstm::LSTM_STAGE_NAMESPACE;

int main() {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>();
  std::printf("clusters of 16 resident at once: %d; SMs: %d\n", h100.whole_clusters, h100.sm_count);
  const int shapes[][4] = {{512, 64, 100, 4}, {512, 32, 100, 4}, {512, 16, 100, 4},
                           {256, 64, 100, 4}, {1024, 4, 100, 4}, {1024, 64, 100, 4}};
  for (const auto& v : shapes) {
    const ProblemSize s{v[0], v[0], v[1], v[2], v[3]};
    const Plan plan = make_plan(s, h100);
    if (!plan.fits) {
      std::printf("H=%d B=%d L=%d: does not fit: %s\n", v[0], v[1], v[3], plan.why.c_str());
      continue;
    }
    const BackwardPlan& b = plan.backward;
    std::printf(
        "H=%d B=%d L=%d: backward %d blocks (%d groups of %d rows, span %d, clusters of %d, "
        "%d slice(s))\n",
        v[0], v[1], v[3], b.blocks(), b.batch_groups, b.group_rows, b.span, b.cluster_blocks,
        b.slices);
  }
}
