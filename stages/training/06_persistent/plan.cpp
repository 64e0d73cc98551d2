// The stage's launch planner: which shapes fit on chip, and how the two kernels spread a layer
// over the blocks. The mapping and the cost model's numbers: README.md beside this file.
#include "plan.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// The backward's cost model, per SM and per clock (H100: datasheet figures and estimates, as in
// forward stage 09's planner):
constexpr double kFmaPerClock = 128 * 0.75;   // FP32 FMA lanes, at the 75% a tuned loop reaches
constexpr double kL2BytesPerClockPerSm = 48;  // what one SM pulls from L2
constexpr double kL2BytesPerClock = 3000;     // what the whole L2 delivers (~5 TB/s)
constexpr double kL2RoundTrip = 800;          // one round of loads in flight, under load
constexpr double kStepLatency = 2000;         // publish dz, see it elsewhere, reduce, cell backward
constexpr double kLaunchClocks = 15000;       // launch, W_hh's columns into shared memory
constexpr int kLoadsInFlight = 8;             // backward: float4 loads of dz per thread at once
constexpr int kBackwardWarps = kBackwardThreads / kWarpSize;

std::string kib(std::size_t bytes) {
  return std::to_string((bytes + 1023) / 1024) + " KiB";
}

/// The forward's launch (forward stage 08's sizing): J = ceil(H / SMs) units per block, as many
/// batch rows per launch as fit beside the weights (or `pinned_rows`). Returns "" or the reason.
std::string plan_forward(const ProblemSize& s, const DeviceLimits& device, int pinned_rows,
                         ForwardPlan& f) {
  const int H = s.hidden, J = ceil_div(H, device.sm_count);
  f.units_per_block = J;
  f.blocks = ceil_div(H, J);
  const auto slices = [&](int rows) {
    return std::clamp(kForwardThreads / (J * rows), 1, std::min(kMaxKSlices, H));
  };
  const auto bytes = [&](int rows) { return forward_shared_bytes(H, J, rows, slices(rows)); };
  // Without batch rows, and the least a row adds (S = 1: its partial sums, h and c).
  const std::size_t fixed = forward_shared_bytes(H, J, 0, 0);
  const std::size_t per_row = forward_shared_bytes(H, J, 1, 1) - fixed;
  int rows = 0;
  if (pinned_rows > 0) {
    rows = std::min(pinned_rows, s.batch);
    if (bytes(rows) > device.shared_bytes) rows = 0;
  } else if (fixed < device.shared_bytes) {
    rows =
        static_cast<int>(std::min<std::size_t>(s.batch, (device.shared_bytes - fixed) / per_row));
    while (rows > 0 && bytes(rows) > device.shared_bytes)
      --rows;
  }
  if (rows == 0) {
    std::ostringstream why;
    why << "the forward's slice of W_hh (" << kGates * J << " rows x " << H << " floats) and "
        << std::max(pinned_rows, 1) << " batch row(s) of h need "
        << kib(bytes(std::max(1, std::min(pinned_rows, s.batch)))) << " of shared memory, more "
        << "than the " << kib(device.shared_bytes) << " of a block";
    return why.str();
  }
  f.rows = rows;
  f.slices = ceil_div(s.batch, rows);
  f.k_slices = slices(rows);
  f.shared_bytes = bytes(rows);
  return {};
}

/// Estimated clocks of one backward layer with plan `b` (sizes set): per step a fixed latency,
/// then the largest of the FMAs, the L2 traffic of one SM and of all, and the rounds of loads.
double backward_cost(const BackwardPlan& b, const ProblemSize& s) {
  const double H = s.hidden, rows = b.group_rows;
  const int row_quads = ceil_div(b.group_rows, kLanesRows);
  const int items_per_warp = ceil_div(row_quads * b.k_slices, kBackwardWarps);
  const int steps_per_item = ceil_div(ceil_div(s.hidden, kLanesK), b.k_slices);
  const double rounds = items_per_warp * ceil_div(steps_per_item, kLoadsInFlight);
  const double fma = kGates * H * 4.0 * b.unit_quads * kLanesRows * row_quads / kFmaPerClock;
  const double dz_bytes = rows * kGates * H * sizeof(float);  // what one block reads per step
  const double l2 =
      std::max(dz_bytes / kL2BytesPerClockPerSm, dz_bytes * b.blocks() / kL2BytesPerClock);
  const double step = kStepLatency + std::max({fma, l2, rounds * kL2RoundTrip});
  return b.slices * (s.seq_len * step + kLaunchClocks);
}

/// The backward's launch with G batch groups (and `pinned_rows` rows per block, if set).
/// Returns "" or the reason.
std::string plan_backward(const ProblemSize& s, const DeviceLimits& device, int groups,
                          int pinned_rows, BackwardPlan& b) {
  const int H = s.hidden, J = ceil_div(H, device.sm_count / groups);
  b.units_per_block = J;
  b.unit_quads = ceil_div(J, 4);
  b.unit_blocks = ceil_div(H, J);
  b.batch_groups = groups;
  std::ostringstream why;
  if (J > kMaxUnitsPerBlock) {
    why << "the backward's " << device.sm_count / groups << " blocks per batch group would own "
        << J << " hidden units each, more than the kernel's " << kMaxUnitsPerBlock;
    return why.str();
  }
  int rows = pinned_rows > 0 ? pinned_rows : ceil_div(s.batch, groups);
  for (;;) {
    b.group_rows = rows;
    b.k_slices = backward_k_slices(rows);
    b.shared_bytes = backward_shared_bytes(H, J, rows, b.k_slices);
    if (b.shared_bytes <= device.shared_bytes) break;
    if (rows == 1 || pinned_rows > 0) {
      why << "the backward's columns of W_hh for " << J << " hidden units (" << kGates * H << " x "
          << 4 * b.unit_quads << " floats, " << kib(backward_shared_bytes(H, J, 0, 0)) << ") and "
          << rows << " batch row(s) need " << kib(b.shared_bytes)
          << " of shared memory, more than the " << kib(device.shared_bytes) << " of a block";
      return why.str();
    }
    rows = ceil_div(rows, 2);
  }
  b.slices = ceil_div(s.batch, groups * rows);
  b.cost = backward_cost(b, s);
  return {};
}

}  // namespace

std::size_t forward_shared_bytes(int hidden, int units, int rows, int k_slices) {
  const std::size_t pairs = static_cast<std::size_t>(units) * rows;
  const std::size_t floats = static_cast<std::size_t>(kGates) * units * hidden      // W_hh rows
                             + kGates * static_cast<std::size_t>(k_slices) * pairs  // sums
                             + rows * (static_cast<std::size_t>(hidden) + 4)  // h_{t-1}, padded
                             + pairs                                          // c
                             + kGates * static_cast<std::size_t>(units);      // biases
  return floats * sizeof(float);
}

std::size_t backward_shared_bytes(int hidden, int units, int rows, int k_slices) {
  const std::size_t quads = ceil_div(units, 4), pairs = static_cast<std::size_t>(units) * rows;
  const std::size_t floats = 16 * quads * hidden  // W_hh's columns: [4 * quads][H] float4
                             + 4 * quads * static_cast<std::size_t>(k_slices) * rows  // sums
                             + kStashFloats * pairs  // the step's stash
                             + pairs;                // dc
  return floats * sizeof(float);
}

int backward_k_slices(int rows) {
  return std::max(1, kBackwardWarps / ceil_div(std::max(rows, 1), kLanesRows));
}

std::string Plan::describe() const {
  std::ostringstream out;
  out << "forward J=" << forward.units_per_block << " U=" << forward.blocks
      << " rows=" << forward.rows << " slices=" << forward.slices
      << " k_slices=" << forward.k_slices << " smem=" << forward.shared_bytes / 1024
      << "KiB | backward J=" << backward.units_per_block << " U=" << backward.unit_blocks
      << " G=" << backward.batch_groups << " Bg=" << backward.group_rows
      << " slices=" << backward.slices << " k_slices=" << backward.k_slices
      << " smem=" << backward.shared_bytes / 1024 << "KiB";
  return out.str();
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device, const PlanRequest& request) {
  Plan plan;
  plan.why = plan_forward(s, device, request.forward_rows, plan.forward);
  if (!plan.why.empty()) return plan;
  std::vector<int> groups = {1, 2, 4, 8, 16, 32};
  if (request.backward_groups) groups = {request.backward_groups};
  BackwardPlan best;
  best.cost = std::numeric_limits<double>::infinity();
  std::string first_refusal;
  for (int g : groups) {
    if (g > device.sm_count || (g > s.batch && !request.backward_groups)) continue;
    BackwardPlan candidate;
    const std::string why = plan_backward(s, device, g, request.backward_rows, candidate);
    if (why.empty() && candidate.cost < best.cost) best = candidate;
    if (!why.empty() && first_refusal.empty()) first_refusal = why;
  }
  if (best.unit_blocks == 0) {
    plan.why = first_refusal.empty() ? "no backward plan matches the request" : first_refusal;
    return plan;
  }
  plan.backward = best;
  plan.fits = true;
  return plan;
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

PlanRequest parse_plan_request(const std::string& value) {
  PlanRequest request;
  if (value.empty()) return request;
  int* fields[] = {&request.forward_rows, &request.backward_groups, &request.backward_rows};
  std::istringstream in(value);
  std::string field;
  int count = 0;
  for (; std::getline(in, field, ','); ++count) {
    std::size_t used = 0;
    int parsed = 0;
    try {
      if (!field.empty()) parsed = std::stoi(field, &used);
    } catch (const std::exception&) {
      used = field.size() + 1;
    }
    if (count >= 3 || used != field.size() || parsed < 0) {
      throw std::invalid_argument(
          "--plan \"" + value +
          "\": expected forward_rows,groups,backward_rows (integers, 0 = automatic)");
    }
    *fields[count] = parsed;
  }
  return request;
}

void add_stage_flags(CLI::App& app, StageFlags& flags) {
  app.add_option("--plan", flags.plan,
                 "pin the kernels' plans: forward batch rows per launch, backward batch groups, "
                 "backward batch rows per block (0 or left out = automatic), e.g. 0,2")
      ->option_text("F,G,R");
  app.add_flag("--verbose", flags.verbose, "print the plans");
  app.final_callback([&flags] {
    try {
      flags.request = parse_plan_request(flags.plan);
    } catch (const std::invalid_argument& error) {
      throw CLI::ValidationError(error.what());
    }
  });
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
