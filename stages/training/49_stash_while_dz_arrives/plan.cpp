// The stage's launch planner: which shapes fit on chip, and how the two kernels spread a layer
// over the blocks. The forward's part is forward stage 12's planner (both of its kernels); the
// backward's is this stage's own. The mapping and the cost model's numbers: README.md beside
// this file.
#include "plan.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// Both cost models, per SM and per clock (H100: datasheet figures and estimates, as in forward
// stages 09 and 10):
constexpr double kFmaPerClock = 128 * 0.75;   // FP32 FMA lanes, at the 75% a tuned loop reaches
constexpr double kSharedBytesPerClock = 128;  // shared-memory bandwidth
constexpr double kL2BytesPerClockPerSm = 48;  // what one SM pulls from L2
constexpr double kL2BytesPerClock = 3000;     // what the whole L2 delivers (~5 TB/s)
constexpr double kLaunchClocks = 15000;       // launch, weights into shared memory (~8 µs)
// The forward's (forward stage 12's):
constexpr double kForwardStepLatency = 1500;  // publish h, see it elsewhere, reduce, update c
// The backward's:
constexpr double kL2RoundTrip = 800;   // one round of loads in flight, under load
constexpr double kStepLatency = 2000;  // publish dz, see it elsewhere, reduce, cell backward
constexpr double kChunkClocks = 100;   // backward: a chunk's stores into shared memory, a barrier
constexpr int kBackwardWarps = kBackwardThreads / kWarpSize;

int next_pow2(int n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

std::string kib(std::size_t bytes) {
  return std::to_string((bytes + 1023) / 1024) + " KiB";
}

/// Fills in the lane layout, shared memory and cost of the forward's shared-memory kernel plan
/// `plan` (sizes already set); sets plan.fits and plan.why. Forward stage 12's.
void lay_out(ForwardPlan& plan, const ProblemSize& s, const DeviceLimits& device) {
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
  const std::size_t fixed = forward_shared_bytes(plan, H);
  const std::size_t row_bytes = static_cast<std::size_t>(plan.padded_batch) * sizeof(float);
  const std::size_t room = device.shared_bytes > fixed ? device.shared_bytes - fixed : 0;
  const int by_room = static_cast<int>(std::min<std::size_t>(room / (2 * row_bytes), 1 << 20));
  const int by_registers = kStageRegisters * plan.threads * 4 / plan.padded_batch;
  plan.chunk_rows = std::min({H, by_room, by_registers});
  if (plan.chunk_rows < std::min(H, 4)) {
    why << "the forward's weight slice (" << kGates * J << " rows x " << H << " floats, "
        << static_cast<std::size_t>(kGates) * J * H * sizeof(float) / 1024
        << " KiB) leaves no room in " << device.shared_bytes / 1024 << " KiB of shared memory for "
        << "h_{t-1} and the partial sums";
    plan.why = why.str();
    return;
  }
  plan.chunks = ceil_div(H, plan.chunk_rows);
  plan.shared_bytes = forward_shared_bytes(plan, H);
  if (plan.shared_bytes > device.shared_bytes) {  // cannot happen after the sizing above
    plan.why = "shared memory";
    return;
  }
  plan.fits = true;

  // Estimated clocks of one step: a fixed latency (publish h, see it elsewhere, reduce), then
  // the largest of the arithmetic, the shared-memory traffic and the L2 traffic.
  const double padded = plan.padded_batch;
  const double fma = kGates * J * static_cast<double>(H) * padded / kFmaPerClock;
  const double shared =
      (16.0 * J * H * plan.tile_groups_batch + 4.0 * padded * H * plan.tile_groups_units) /
      kSharedBytesPerClock;
  const double h_bytes = 4.0 * padded * H;
  const double l2 =
      std::max(h_bytes / kL2BytesPerClockPerSm, h_bytes * plan.blocks() / kL2BytesPerClock);
  const double step = kForwardStepLatency + 30.0 * plan.k_slices + 100.0 * plan.chunks +
                      std::max({fma, shared, l2});
  plan.cost = plan.slices * (s.seq_len * step + kLaunchClocks);
}

/// Estimated clocks of one backward layer with plan `b` (sizes set): per step a fixed latency and
/// the chunks' barriers, then the largest of the FMAs, the L2 traffic of one SM and of all, and
/// one round trip per chunk (the next chunk's in flight during this chunk's product).
double backward_cost(const BackwardPlan& b, const ProblemSize& s) {
  const double H = s.hidden, rows = b.group_rows;
  const int row_groups = ceil_div(b.group_rows, b.lanes_rows);
  const double fma = kGates * H * 4.0 * b.unit_quads * b.lanes_rows * row_groups / kFmaPerClock;
  const double dz_bytes = rows * kGates * H * sizeof(float);  // what one block reads per step
  const double l2 =
      std::max(dz_bytes / kL2BytesPerClockPerSm, dz_bytes * b.blocks() / kL2BytesPerClock);
  const double step =
      kStepLatency + kChunkClocks * b.chunks + std::max({fma, l2, b.chunks * kL2RoundTrip});
  return b.slices * (s.seq_len * step + kLaunchClocks);
}

/// The backward's launch with G batch groups (and `pinned_rows` rows per block, `pinned_chunk`
/// gate rows per chunk of dz, if set). Returns "" or the reason.
std::string plan_backward(const ProblemSize& s, const DeviceLimits& device, int groups,
                          int pinned_rows, int pinned_chunk, BackwardPlan& b) {
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
  if (pinned_rows > kMaxBackwardRows) {
    why << "the backward's " << pinned_rows << " batch rows per block are more than the kernel's "
        << kMaxBackwardRows;
    return why.str();
  }
  int rows = pinned_rows > 0 ? pinned_rows : std::min(ceil_div(s.batch, groups), kMaxBackwardRows);
  for (;;) {
    b.group_rows = rows;
    b.k_slices = backward_k_slices(rows);
    b.lanes_rows = backward_lanes_rows(rows);
    b.stage_threads = kBackwardThreads / next_pow2(rows);
    // dz in chunks of gate rows: all 4H rows in one buffer where they fit (and a thread's
    // registers carry its share), else two buffers of as many rows as fit beside the rest.
    const std::size_t beside = backward_shared_bytes(H, J, rows, b.k_slices, 0);
    const std::size_t room = beside < device.shared_bytes ? device.shared_bytes - beside : 0;
    const int carried = kStageRegistersDz * b.stage_threads;  // float4 per batch row
    const bool whole = H <= carried && room >= 16u * rows * H;
    const int fit = whole ? H : static_cast<int>(room / (32 * rows));
    const int quads = pinned_chunk > 0 ? std::min(pinned_chunk / 4, H) : std::min(carried, fit);
    b.chunk_rows = 4 * std::max(quads, 1);
    b.chunks = ceil_div(kGates * H, b.chunk_rows);
    b.shared_bytes = backward_shared_bytes(H, J, rows, b.k_slices, b.chunk_rows);
    b.direct_float4 = dz_direct_float4(b, H);
    if (quads <= carried && b.shared_bytes <= device.shared_bytes) break;
    if (quads > carried && (rows == 1 || pinned_rows > 0)) {
      why << "the backward's chunk of " << 4 * quads << " gate rows of dz x " << rows
          << " batch row(s) is more than its threads carry (" << kStageRegistersDz
          << " float4 each: " << 4 * carried << " gate rows per row)";
      return why.str();
    }
    if (rows == 1 || pinned_rows > 0) {
      why << "the backward's columns of W_hh for " << J << " hidden units (" << kGates * H << " x "
          << 4 * b.unit_quads << " floats, " << kib(backward_shared_bytes(H, J, 0, 0, 0)) << "), "
          << rows << " batch row(s) and " << (b.chunks > 1 ? "two chunks" : "one chunk") << " of "
          << b.chunk_rows << " gate rows of dz need " << kib(b.shared_bytes)
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

std::size_t forward_shared_bytes(const ForwardPlan& p, int hidden) {
  const std::size_t rows = static_cast<std::size_t>(kGates) * p.units_per_block;
  if (p.weights_in_registers) {  // W_ih and two steps of x (if the kernel computes the input
                                 // parts), h_{t-1} over the padded k range, two steps' partial
                                 // sums, input parts and biases
    const std::size_t padded_k = static_cast<std::size_t>(p.k_slices) * p.phases * p.k_per_lane;
    const std::size_t values = static_cast<std::size_t>(kGates) * p.tile_batch;
    const std::size_t input_slots = static_cast<std::size_t>(p.k_slices) * p.input_k_per_lane;
    return (input_slots * kWarpSize * kGates + 2 * input_slots * p.phases * p.tile_batch +
            padded_k * p.tile_batch +
            2 * static_cast<std::size_t>(p.k_slices) * p.lanes_units * values +
            p.units_per_block * values + rows) *
           sizeof(float);
  }
  const std::size_t floats = rows * hidden  // W_hh slice
                             + 2 * static_cast<std::size_t>(p.chunk_rows) * p.padded_batch   // h
                             + static_cast<std::size_t>(p.k_slices) * rows * p.padded_batch  // sums
                             + rows * p.padded_batch  // input parts
                             + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
                             + rows;  // biases
  return floats * sizeof(float);
}

std::size_t backward_shared_bytes(int hidden, int units, int rows, int k_slices, int chunk_rows) {
  const std::size_t quads = ceil_div(units, 4), pairs = static_cast<std::size_t>(units) * rows;
  // dz: [2][Bg][chunk_rows], one buffer where one chunk holds all 4H gate rows
  const std::size_t staged = (chunk_rows < kGates * hidden ? 2u : 1u) * chunk_rows * rows;
  const std::size_t floats = 16 * quads * hidden  // W_hh's columns: [4 * quads][H] float4
                             + staged             // dz
                             + 4 * quads * static_cast<std::size_t>(k_slices) * rows  // sums
                             + kStashSteps * kStashFloats * pairs                     // the stash
                             + pairs;                                                 // dc
  return floats * sizeof(float);
}

int backward_k_slices(int rows) {
  return std::max(1, kBackwardWarps / ceil_div(std::max(rows, 1), kLanesRows));
}

int backward_lanes_rows(int rows) {
  return std::min(kLanesRows, next_pow2(std::max(rows, 1)));
}

int dz_direct_float4(const BackwardPlan& plan, int hidden) {
  const int per_pass = (kWarpSize / plan.lanes_rows) * plan.k_slices;  // float4 a row's lanes cover
  const int share = ceil_div(hidden, per_pass);
  return plan.chunks == 1 && share <= kDirectFloat4 ? share : 0;
}

std::string ForwardPlan::describe() const {
  std::ostringstream out;
  if (weights_in_registers) {
    out << "weights=registers J=" << units_per_block << " U=" << unit_blocks << " B=" << group_batch
        << " tile=" << tile_batch << " threads=" << threads << " lanes(j,k)=" << lanes_units << ","
        << phases << " k_slices=" << k_slices << " k_per_lane=" << k_per_lane
        << " inputs=" << (input_k_per_lane > 0 ? "kernel" : "gemm")
        << " smem=" << shared_bytes / 1024 << "KiB";
    return out.str();
  }
  out << "weights=shared J=" << units_per_block << " U=" << unit_blocks << " G=" << batch_groups
      << " Bg=" << group_batch << " slices=" << slices << " tile=4x" << tile_batch
      << " threads=" << threads << " lanes(b,j,k)=" << lanes_batch << "," << lanes_units << ","
      << phases << " k_slices=" << k_slices << " chunk=" << chunk_rows << "x" << chunks
      << " smem=" << shared_bytes / 1024 << "KiB";
  return out.str();
}

std::string Plan::describe() const {
  std::ostringstream out;
  out << "forward " << forward.describe() << " | backward J=" << backward.units_per_block
      << " U=" << backward.unit_blocks << " G=" << backward.batch_groups
      << " Bg=" << backward.group_rows << " slices=" << backward.slices
      << " k_slices=" << backward.k_slices << " chunk=" << backward.chunk_rows << "x"
      << backward.chunks << (backward.direct_float4 > 0 ? " dz=direct" : " dz=staged")
      << " smem=" << backward.shared_bytes / 1024 << "KiB";
  return out.str();
}

ForwardPlan make_register_plan(const ProblemSize& s, const DeviceLimits& device, int k_per_lane_pin,
                               InputParts input) {
  ForwardPlan plan;
  plan.weights_in_registers = true;
  std::ostringstream why;
  if (s.batch > kMaxRegisterBatch) {
    why << "B = " << s.batch << " is more than the register kernel's " << kMaxRegisterBatch
        << " batch rows";
    plan.why = why.str();
    return plan;
  }
  plan.units_per_block = ceil_div(s.hidden, device.sm_count);
  plan.unit_blocks = ceil_div(s.hidden, plan.units_per_block);
  plan.batch_groups = 1;
  plan.slices = 1;
  plan.group_batch = s.batch;
  plan.tile_batch = plan.padded_batch = next_pow2(s.batch);
  // Lanes of a warp: the block's units (rounded up to a power of two) x lanes along k.
  plan.lanes_units = next_pow2(plan.units_per_block);
  if (plan.lanes_units > kWarpSize) {
    why << plan.units_per_block << " units per block are more than the " << kWarpSize
        << " lanes of a warp";
    plan.why = why.str();
    return plan;
  }
  plan.phases = kWarpSize / plan.lanes_units;
  plan.lanes_batch = 1;
  // The fewest weights per lane whose k slices (one warp each) fit in a block.
  for (int k_per_lane : kRegisterKPerLane) {
    if (k_per_lane_pin != 0 && k_per_lane != k_per_lane_pin) continue;
    plan.k_per_lane = k_per_lane;
    plan.k_slices = ceil_div(s.hidden, plan.phases * k_per_lane);
    plan.threads = kWarpSize * plan.k_slices;
    if (plan.threads <= kMaxRegisterThreads) break;
  }
  if (plan.threads > kMaxRegisterThreads) {
    why << "H = " << s.hidden << " needs " << plan.k_slices << " k slices of " << plan.phases
        << " x " << plan.k_per_lane << " rows = " << plan.k_slices
        << " warps per block in the register kernel, more than " << kMaxRegisterThreads / kWarpSize
        << " (" << plan.k_per_lane << " weights per lane and gate)";
    plan.why = why.str();
    return plan;
  }
  if (plan.units_per_block * plan.tile_batch > plan.threads) {
    why << plan.units_per_block << " units x " << plan.tile_batch
        << " batch columns need more cell-update threads than the " << plan.threads
        << " of a block";
    plan.why = why.str();
    return plan;
  }
  if (input != InputParts::kGemm) {  // the kernel computes the input parts itself where W_ih
                                     // fits on chip and (unless asked to) the work is small
    const int rows_per_slot = plan.k_slices * plan.phases;
    plan.input_k_per_lane = ceil_div(s.input_size, rows_per_slot);
    if (s.layers > 1)
      plan.input_k_per_lane = std::max(plan.input_k_per_lane, ceil_div(s.hidden, rows_per_slot));
    if (forward_shared_bytes(plan, s.hidden) > device.shared_bytes ||
        (input == InputParts::kAuto &&
         plan.input_k_per_lane * plan.tile_batch > kMaxInputWorkPerLane))
      plan.input_k_per_lane = 0;
  }
  plan.shared_bytes = forward_shared_bytes(plan, s.hidden);
  if (plan.shared_bytes > device.shared_bytes) {
    plan.why = "shared memory for h_{t-1}";
    return plan;
  }
  plan.fits = true;
  // The same kind of estimate as the shared-memory kernel's, for logs: latency plus FMAs.
  const double fma = kGates * plan.units_per_block * static_cast<double>(s.hidden) *
                     plan.tile_batch / kFmaPerClock;
  plan.cost = s.seq_len * (kForwardStepLatency + fma) + kLaunchClocks;
  return plan;
}

ForwardPlan make_forward_plan(const ProblemSize& s, const DeviceLimits& device,
                              const PlanRequest& request) {
  const bool shared_pinned =
      request.pins_shared_plan() || request.weights == WeightHome::kSharedMemory;
  if (!shared_pinned) {
    ForwardPlan registers = make_register_plan(s, device, request.k_per_lane, request.input);
    if (registers.fits || request.weights == WeightHome::kRegisters) return registers;
  }
  std::vector<int> tiles = {4, 8, 16}, threads = {256, 512}, groups = {1, 2, 4, 8, 16, 32};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  if (request.batch_groups) groups = {request.batch_groups};
  ForwardPlan best, first_refusal;
  best.cost = std::numeric_limits<double>::infinity();
  for (int tile : tiles) {
    for (int thread_count : threads) {
      for (int g : groups) {
        if (g > device.sm_count || g > s.batch) continue;
        if (thread_count > max_threads_for_tile(tile)) continue;
        ForwardPlan plan;
        plan.tile_batch = tile;
        plan.threads = thread_count;
        plan.batch_groups = g;
        plan.units_per_block = ceil_div(s.hidden, device.sm_count / g);
        plan.unit_blocks = ceil_div(s.hidden, plan.units_per_block);
        // The most batch rows per block that fit; fewer rows mean more slices (launches).
        int rows = request.group_batch ? request.group_batch : ceil_div(s.batch, g);
        for (;;) {
          plan.group_batch = rows;
          plan.padded_batch = ceil_div(rows, tile) * tile;
          plan.slices = ceil_div(s.batch, g * rows);
          plan.fits = false;
          lay_out(plan, s, device);
          if (plan.fits || rows == 1 || request.group_batch) break;
          rows = ceil_div(rows, 2);
        }
        if (plan.fits && plan.cost < best.cost) best = plan;
        if (!plan.fits && first_refusal.why.empty()) first_refusal = plan;
      }
    }
  }
  if (best.fits) return best;
  if (first_refusal.why.empty()) first_refusal.why = "no forward plan matches the request";
  return first_refusal;
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device, const PlanRequest& request) {
  Plan plan;
  plan.forward = make_forward_plan(s, device, request);
  if (!plan.forward.fits) {
    plan.why = plan.forward.why;
    return plan;
  }
  std::vector<int> groups = {1, 2, 4, 8, 16, 32};
  if (request.backward_groups) groups = {request.backward_groups};
  BackwardPlan best;
  best.cost = std::numeric_limits<double>::infinity();
  std::string first_refusal;
  for (int g : groups) {
    if (g > device.sm_count || (g > s.batch && !request.backward_groups)) continue;
    BackwardPlan candidate;
    const std::string why =
        plan_backward(s, device, g, request.backward_rows, request.backward_chunk_rows, candidate);
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

PlanRequest parse_plan_request(const std::string& plan, const std::string& weights,
                               const std::string& input) {
  PlanRequest request;
  int* fields[] = {&request.tile_batch,         &request.threads,         &request.batch_groups,
                   &request.group_batch,        &request.backward_groups, &request.backward_rows,
                   &request.backward_chunk_rows};
  constexpr int kFields = sizeof(fields) / sizeof(fields[0]);
  std::istringstream in(plan);
  std::string field;
  for (int count = 0; !plan.empty() && std::getline(in, field, ','); ++count) {
    std::size_t used = 0;
    int parsed = 0;
    try {
      if (!field.empty()) parsed = std::stoi(field, &used);
    } catch (const std::exception&) {
      used = field.size() + 1;
    }
    if (count >= kFields || used != field.size() || parsed < 0) {
      throw std::invalid_argument("--plan \"" + plan +
                                  "\": expected tile,threads,groups,rows,backward_groups,"
                                  "backward_rows,backward_chunk (integers, 0 = automatic)");
    }
    *fields[count] = parsed;
  }
  if (request.tile_batch != 0 && request.tile_batch != 4 && request.tile_batch != 8 &&
      request.tile_batch != 16)
    throw std::invalid_argument("--plan: the forward's tile width must be 4, 8 or 16");
  if (request.threads != 0 &&
      (request.threads % kWarpSize != 0 || request.threads > kMaxThreads || request.threads < 64))
    throw std::invalid_argument(
        "--plan: the forward's threads must be a multiple of 32, 64 to 512");
  if (request.backward_chunk_rows % 4 != 0)
    throw std::invalid_argument("--plan: the backward's chunk must be a multiple of 4 gate rows");
  if (weights.empty()) {
    // automatic
  } else if (weights == "registers") {
    request.weights = WeightHome::kRegisters;
  } else if (weights == "registers,8" || weights == "registers,32") {
    request.weights = WeightHome::kRegisters;
    request.k_per_lane = std::stoi(weights.substr(weights.find(',') + 1));
  } else if (weights == "shared") {
    request.weights = WeightHome::kSharedMemory;
  } else {
    throw std::invalid_argument(
        "--weights \"" + weights +
        "\": expected \"registers\", \"registers,8\", \"registers,32\" or \"shared\"");
  }
  if (!input.empty()) {
    if (input != "gemm" && input != "kernel")
      throw std::invalid_argument("--input \"" + input + "\": expected \"gemm\" or \"kernel\"");
    request.input = input == "gemm" ? InputParts::kGemm : InputParts::kKernel;
  }
  if (request.weights == WeightHome::kRegisters && request.pins_shared_plan())
    throw std::invalid_argument(
        "--plan pins the forward's shared-memory kernel; it cannot go with --weights registers");
  return request;
}

void add_stage_flags(CLI::App& app, StageFlags& flags) {
  app.add_option("--plan", flags.plan,
                 "pin the plans: the forward's shared-memory kernel (tile,threads,groups,rows) "
                 "and the backward (batch groups, batch rows per block, gate rows of dz per "
                 "chunk); 0 or left out = automatic, e.g. 8,256,2 or 0,0,0,0,2,0,256")
      ->option_text("T,N,G,R,BG,BR,BC");
  app.add_option("--weights", flags.weights,
                 "pin where the forward keeps W_hh: registers, registers,8, registers,32 (weights "
                 "per lane and gate) or shared [default: the planner's choice]")
      ->option_text("WHERE");
  app.add_option("--input", flags.input,
                 "forward register kernel: who computes W_ih x_t: gemm (cuBLAS before the "
                 "launch) or kernel [default: the planner's choice]")
      ->option_text("WHO");
  app.add_flag("--verbose", flags.verbose, "print the plans");
  app.final_callback([&flags] {
    try {
      flags.request = parse_plan_request(flags.plan, flags.weights, flags.input);
    } catch (const std::invalid_argument& error) {
      throw CLI::ValidationError(error.what());
    }
  });
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
