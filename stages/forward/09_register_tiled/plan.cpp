// The stage's launch planner: which shapes fit on chip, and how to spread a step's work.
#include "plan.h"

#include <algorithm>
#include <sstream>

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

int next_pow2(int n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

/// Fills in the lane layout and shared memory of `plan` (sizes already set); sets plan.fits and
/// plan.why.
void lay_out(Plan& plan, const ProblemSize& s, const DeviceLimits& device) {
  const int H = s.hidden, J = plan.units_per_block;
  const int batch_tiles = plan.padded_batch / plan.tile_batch;
  plan.lanes_batch = std::min(8, next_pow2(batch_tiles));
  plan.lanes_units = std::min(next_pow2(J), kWarpSize / plan.lanes_batch);
  plan.phases = kWarpSize / (plan.lanes_batch * plan.lanes_units);
  plan.tile_groups_units = ceil_div(J, plan.lanes_units);
  plan.tile_groups_batch = ceil_div(batch_tiles, plan.lanes_batch);
  const int warps = plan.threads / kWarpSize;
  const int tile_groups = plan.tile_groups_units * plan.tile_groups_batch;
  std::ostringstream why;
  if (tile_groups > warps) {
    why << J << " units x " << plan.padded_batch << " batch rows need " << tile_groups
        << " warps of register tiles, more than " << warps;
    plan.why = why.str();
    return;
  }
  plan.k_slices = warps / tile_groups;
  // All of h_{t-1} is staged each step: where the partial sums of every warp do not fit beside
  // it and the weights, fewer k slices (the spare warps only stage).
  while (plan.k_slices > 1 && shared_bytes_for(plan, H) > device.shared_bytes)
    --plan.k_slices;
  plan.shared_bytes = shared_bytes_for(plan, H);
  if (plan.shared_bytes > device.shared_bytes) {
    why << "the weight slice (" << kGates * J << " rows x " << H << " floats, "
        << static_cast<std::size_t>(kGates) * J * H * sizeof(float) / 1024 << " KiB) and h_{t-1} ("
        << H << " x " << plan.padded_batch << " floats) need " << plan.shared_bytes / 1024
        << " KiB of shared memory, more than the " << device.shared_bytes / 1024
        << " KiB of a block";
    plan.why = why.str();
    return;
  }
  plan.fits = true;
}

}  // namespace

std::size_t shared_bytes_for(const Plan& p, int hidden) {
  const std::size_t rows = static_cast<std::size_t>(kGates) * p.units_per_block;
  // A row of staged h: the padded batch rounded up to an odd number of float4 (kernel.cuh).
  const std::size_t h_row = static_cast<std::size_t>(p.padded_batch / 4 | 1) * 4;
  const std::size_t floats = rows * hidden     // W_hh slice
                             + h_row * hidden  // h
                             + static_cast<std::size_t>(p.k_slices) * rows * p.padded_batch  // sums
                             + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
                             + rows;  // biases
  return floats * sizeof(float);
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device) {
  Plan plan;
  // A fixed rule: the 4-wide tile and 256 threads (column 4,256,1), the fastest fixed choice at
  // most shapes with one block per unit (git show 068d3be:results/h100-sxm/stage07_tune.txt).
  plan.tile_batch = 4;
  plan.threads = 256;
  plan.units_per_block = ceil_div(s.hidden, device.sm_count);
  plan.unit_blocks = ceil_div(s.hidden, plan.units_per_block);
  // The most batch rows per launch that fit; fewer rows mean more slices (launches).
  int rows = s.batch;
  for (;;) {
    plan.slice_batch = rows;
    plan.padded_batch = ceil_div(rows, plan.tile_batch) * plan.tile_batch;
    plan.slices = ceil_div(s.batch, rows);
    plan.fits = false;
    lay_out(plan, s, device);
    if (plan.fits || rows == 1) return plan;
    rows = ceil_div(rows, 2);
  }
}

int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device) {
  ProblemSize s = size;
  int low = 0, high = size.hidden;  // invariant: low fits (0 = none), high does not
  while (high - low > 1) {
    s.hidden = low + (high - low) / 2;
    if (make_plan(s, device).fits) {
      low = s.hidden;
    } else {
      high = s.hidden;
    }
  }
  return low;
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
