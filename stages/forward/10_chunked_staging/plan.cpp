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
  // Everything but the staged h, then as many rows of h as fit twice (double buffering).
  plan.chunk_rows = 0;
  const std::size_t fixed = shared_bytes_for(plan, H);
  const std::size_t row_bytes = static_cast<std::size_t>(plan.padded_batch) * sizeof(float);
  const std::size_t room = device.shared_bytes > fixed ? device.shared_bytes - fixed : 0;
  const int by_room = static_cast<int>(std::min<std::size_t>(room / (2 * row_bytes), 1 << 20));
  const int by_registers = kStageRegisters * plan.threads * 4 / plan.padded_batch;
  plan.chunk_rows = std::min({H, by_room, by_registers});
  if (plan.chunk_rows < std::min(H, 4)) {
    why << "the weight slice (" << kGates * J << " rows x " << H << " floats, "
        << static_cast<std::size_t>(kGates) * J * H * sizeof(float) / 1024
        << " KiB) leaves no room in " << device.shared_bytes / 1024 << " KiB of shared memory for "
        << "h_{t-1} and the partial sums";
    plan.why = why.str();
    return;
  }
  plan.chunks = ceil_div(H, plan.chunk_rows);
  plan.shared_bytes = shared_bytes_for(plan, H);
  if (plan.shared_bytes > device.shared_bytes) {  // cannot happen after the sizing above
    plan.why = "shared memory";
    return;
  }
  plan.fits = true;
}

}  // namespace

std::size_t shared_bytes_for(const Plan& p, int hidden) {
  const std::size_t rows = static_cast<std::size_t>(kGates) * p.units_per_block;
  const std::size_t floats = rows * hidden  // W_hh slice
                             + 2 * static_cast<std::size_t>(p.chunk_rows) * p.padded_batch   // h
                             + static_cast<std::size_t>(p.k_slices) * rows * p.padded_batch  // sums
                             + rows * p.padded_batch  // input parts
                             + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
                             + rows;  // biases
  return floats * sizeof(float);
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device) {
  Plan plan;
  // A fixed rule: the 4-wide tile and 256 threads, of the fixed choices the fastest at most
  // shapes measured with one block per unit (results/h100-sxm/stage07_tune.txt, column 4,256,1).
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
