// The stage's launch planner: which shapes fit on chip, how to spread a step's work, and which
// layers share a launch as a wavefront (README.md beside this file).
#include "plan.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

int next_pow2(int n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

// The cost model's rates, per SM and per clock (H100: datasheet figures and estimates):
constexpr double kFmaPerClock = 128 * 0.75;   // FP32 FMA lanes, at the 75% a tuned loop reaches
constexpr double kSharedBytesPerClock = 128;  // shared-memory bandwidth
constexpr double kL2BytesPerClockPerSm = 48;  // what one SM pulls from L2
constexpr double kL2BytesPerClock = 3000;     // what the whole L2 delivers (~5 TB/s)
constexpr double kStepLatency = 1500;         // publish h, see it elsewhere, reduce, update c
constexpr double kLaunchClocks = 15000;       // launch, weights into shared memory (~8 µs)
constexpr double kChunkRoundTrip = 2400;      // a chunk of published h from L2 and its barrier,
                                              // ~1.4 µs (the split's estimate only, see README)
constexpr double kParentMargin = 0.95;  // a split of layers must look 5% cheaper than stage 12's

/// Fills in the lane layout, shared memory and cost of `plan` (sizes already set); sets
/// plan.fits and plan.why.
void lay_out(Plan& plan, const ProblemSize& s, const DeviceLimits& device) {
  const int J = plan.units_per_block;
  const int K = s.hidden + plan.input_rows;  // the k range: the layer's input rows, then h's
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
  const std::size_t fixed = shared_bytes_for(plan, s.hidden);
  const std::size_t row_bytes = static_cast<std::size_t>(plan.padded_batch) * sizeof(float);
  const std::size_t room = device.shared_bytes > fixed ? device.shared_bytes - fixed : 0;
  const int by_room = static_cast<int>(std::min<std::size_t>(room / (2 * row_bytes), 1 << 20));
  const int by_registers = kStageRegisters * plan.threads * 4 / plan.padded_batch;
  plan.chunk_rows = std::min({K, by_room, by_registers});
  if (plan.chunk_rows < std::min(K, 4)) {
    why << "the weight slice (" << kGates * J << " rows x " << K << " floats, "
        << static_cast<std::size_t>(kGates) * J * K * sizeof(float) / 1024
        << " KiB) leaves no room in " << device.shared_bytes / 1024 << " KiB of shared memory for "
        << "h_{t-1} and the partial sums";
    plan.why = why.str();
    return;
  }
  plan.chunks = ceil_div(K, plan.chunk_rows);
  plan.shared_bytes = shared_bytes_for(plan, s.hidden);
  if (plan.shared_bytes > device.shared_bytes) {  // cannot happen after the sizing above
    plan.why = "shared memory";
    return;
  }
  plan.fits = true;

  // Estimated clocks of one step: a fixed latency (publish h, see it elsewhere, reduce), then
  // the largest of the arithmetic, the shared-memory traffic and the L2 traffic.
  const double padded = plan.padded_batch;
  const double fma = kGates * J * static_cast<double>(K) * padded / kFmaPerClock;
  const double shared =
      (16.0 * J * K * plan.tile_groups_batch + 4.0 * padded * K * plan.tile_groups_units) /
      kSharedBytesPerClock;
  const double h_bytes = 4.0 * padded * K;
  const double l2 =
      std::max(h_bytes / kL2BytesPerClockPerSm, h_bytes * plan.blocks() / kL2BytesPerClock);
  const double product = std::max({fma, shared, l2});
  const double step = kStepLatency + 30.0 * plan.k_slices + 100.0 * plan.chunks + product;
  plan.cost = plan.slices * (s.seq_len * step + kLaunchClocks);
  plan.chunk_wait = (plan.chunks - 1) * std::max(0.0, kChunkRoundTrip - product / plan.chunks);
}

}  // namespace

std::string Plan::describe() const {
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
  if (input_rows > 0) out << " input_rows=" << input_rows;
  return out.str();
}

int LayerLaunch::blocks() const {
  int sum = 0;
  for (const Plan& p : layers)
    sum += p.blocks();
  return sum;
}

std::size_t LayerLaunch::shared_bytes() const {
  std::size_t most = 0;
  for (const Plan& p : layers)
    most = std::max(most, p.shared_bytes);
  return most;
}

int NetworkPlan::layers_per_launch() const {
  std::size_t most = 0;
  for (const LayerLaunch& launch : launches)
    most = std::max(most, launch.layers.size());
  return static_cast<int>(most);
}

std::string NetworkPlan::describe() const {
  std::ostringstream out;
  out << launches.size() << " launch(es), at most " << layers_per_launch() << " layer(s) each:";
  for (const Plan& p : launches.empty() ? std::vector<Plan>{} : launches.front().layers)
    out << " [" << p.describe() << "]";
  return out.str();
}

std::size_t shared_bytes_for(const Plan& p, int hidden) {
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
  const std::size_t floats = rows * (p.input_rows + hidden)  // W_ih's and W_hh's slices
                             + 2 * static_cast<std::size_t>(p.chunk_rows) * p.padded_batch   // h
                             + static_cast<std::size_t>(p.k_slices) * rows * p.padded_batch  // sums
                             + rows * p.padded_batch  // input parts
                             + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
                             + rows;  // biases
  return floats * sizeof(float);
}

Plan make_register_plan(const ProblemSize& s, const DeviceLimits& device, int k_per_lane_pin,
                        InputParts input) {
  Plan plan;
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
    if (shared_bytes_for(plan, s.hidden) > device.shared_bytes ||
        (input == InputParts::kAuto &&
         plan.input_k_per_lane * plan.tile_batch > kMaxInputWorkPerLane))
      plan.input_k_per_lane = 0;
  }
  plan.shared_bytes = shared_bytes_for(plan, s.hidden);
  if (plan.shared_bytes > device.shared_bytes) {
    plan.why = "shared memory for h_{t-1}";
    return plan;
  }
  plan.fits = true;
  // The same kind of estimate as the shared-memory kernel's, for logs: latency plus FMAs.
  const double fma = kGates * plan.units_per_block * static_cast<double>(s.hidden) *
                     plan.tile_batch / kFmaPerClock;
  plan.cost = s.seq_len * (kStepLatency + fma) + kLaunchClocks;
  return plan;
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device, const PlanRequest& request) {
  const bool shared_pinned =
      request.pins_shared_plan() || request.weights == WeightHome::kSharedMemory;
  if (!shared_pinned) {
    Plan registers = make_register_plan(s, device, request.k_per_lane, request.input);
    if (registers.fits || request.weights == WeightHome::kRegisters) return registers;
  }
  std::vector<int> tiles = {4, 8, 16}, threads = {256, 512}, groups = {1, 2, 4, 8, 16, 32};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  if (request.batch_groups) groups = {request.batch_groups};
  Plan best, first_refusal;
  best.cost = std::numeric_limits<double>::infinity();
  for (int tile : tiles) {
    for (int thread_count : threads) {
      for (int g : groups) {
        if (g > device.sm_count || g > s.batch) continue;
        if (thread_count > max_threads_for_tile(tile)) continue;
        Plan plan;
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
  if (first_refusal.why.empty()) first_refusal.why = "no plan matches the request";
  return first_refusal;
}

NetworkPlan make_wavefront_launch(const ProblemSize& s, const DeviceLimits& device,
                                  const PlanRequest& request, int count) {
  NetworkPlan result;
  LayerLaunch best, first_refusal;
  double best_cost = std::numeric_limits<double>::infinity();
  if (request.batch_groups > 1) {
    result.why = "a wavefront launch has one batch group (--plan's third field)";
    return result;
  }
  std::vector<int> tiles = {4, 8, 16}, threads = {256, 512};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  // The blocks are shared out in proportion to each layer's weights (its k range): the step of
  // the wavefront is as long as its slowest layer's.
  const int total_k = count * s.hidden + (count - 1) * s.hidden;
  for (int tile : tiles) {
    for (int thread_count : threads) {
      if (thread_count > max_threads_for_tile(tile)) continue;
      // The most batch rows per block that fit every layer; fewer rows mean more slices.
      for (int rows = request.group_batch ? request.group_batch : s.batch;;
           rows = ceil_div(rows, 2)) {
        LayerLaunch launch;
        bool fits = true;
        double cost = 0;
        for (int i = 0; i < count && fits; ++i) {
          Plan plan;
          plan.input_rows = i == 0 ? 0 : s.hidden;
          const int share = device.sm_count * (s.hidden + plan.input_rows) / total_k;
          plan.tile_batch = tile;
          plan.threads = thread_count;
          plan.batch_groups = 1;
          plan.units_per_block = ceil_div(s.hidden, std::max(share, 1));
          plan.unit_blocks = ceil_div(s.hidden, plan.units_per_block);
          plan.group_batch = rows;
          plan.padded_batch = ceil_div(rows, tile) * tile;
          plan.slices = ceil_div(s.batch, rows);
          if (share < 1) {
            plan.why = "no SM left for a layer";
          } else {
            lay_out(plan, s, device);
          }
          fits = plan.fits;
          cost = std::max(cost, plan.cost);
          launch.layers.push_back(plan);
        }
        // T + count - 1 steps of the wavefront, each as long as the slowest layer's.
        cost *= static_cast<double>(s.seq_len + count - 1) / s.seq_len;
        if (fits && cost < best_cost) best = launch, best_cost = cost;
        if (!fits && first_refusal.layers.empty()) first_refusal = launch;
        if (fits || rows == 1 || request.group_batch) break;
      }
    }
  }
  if (!best.layers.empty()) {
    result.fits = true;
    result.launches = {best};
    return result;
  }
  result.launches = {first_refusal};
  result.why = first_refusal.layers.empty() ? "no plan matches the request"
                                            : first_refusal.layers.back().why;
  return result;
}

NetworkPlan make_network_plan(const ProblemSize& s, const DeviceLimits& device,
                              const PlanRequest& request) {
  NetworkPlan result;
  const Plan single = make_plan(s, device, request);
  result.why = single.why;
  if (!single.fits) return result;
  // The most layers that fit in one launch; 1 (stage 12's path) where nothing is to be
  // overlapped, where one of stage 12's choices is pinned, or (unless asked) where its register
  // kernel runs.
  const bool pins_stage12 = request.pins_shared_plan() || request.weights != WeightHome::kAuto ||
                            request.input != InputParts::kAuto;
  const int asked = request.layers_per_launch;
  int most = 1;
  if (s.layers > 1 &&
      (asked > 1 || (asked == 0 && !pins_stage12 && !single.weights_in_registers))) {
    const int wanted = std::min({asked ? asked : kMaxLaunchLayers, s.layers, kMaxLaunchLayers});
    const NetworkPlan all = make_wavefront_launch(s, device, request, wanted);
    for (most = wanted; most > 1 && !make_wavefront_launch(s, device, request, most).fits;)
      --most;
    if (asked > 1 && most < wanted) {  // pinned: refused, naming the most that fit
      std::ostringstream why;
      why << wanted << " layers do not fit in one launch (" << all.why << "); ";
      if (most > 1) {
        why << "at most " << most << " do at this size";
      } else {
        why << "not even 2 do at this size: --layers-per-launch 1 runs one launch per layer";
      }
      result.why = why.str();
      return result;
    }
  }
  // ceil(L / n) launches, of sizes that differ by one at most, the larger ones first; and their
  // estimate: each launch T + count - 1 steps of its slowest layer, the chunks' waits included.
  const auto split = [&](int n, double* cost) {
    NetworkPlan network{true, "", {}};
    const int launches = ceil_div(s.layers, n);
    *cost = 0;
    for (int i = 0, layer = 0; i < launches && network.fits; ++i) {
      const int count = s.layers / launches + (i < s.layers % launches ? 1 : 0);
      const NetworkPlan launch = count == 1 ? NetworkPlan{true, "", {LayerLaunch{0, {single}}}}
                                            : make_wavefront_launch(s, device, request, count);
      network.fits = launch.fits;  // fewer layers than `most` fit whenever `most` do
      network.why = launch.why;
      if (!launch.fits) break;
      network.launches.push_back(launch.launches.front());
      network.launches.back().first_layer = layer;
      layer += count;
      double slowest = 0;
      for (const Plan& p : launch.launches.front().layers)
        slowest = std::max(slowest, p.cost + s.seq_len * p.slices * p.chunk_wait);
      *cost += slowest * (s.seq_len + count - 1) / s.seq_len;
    }
    return network;
  };
  // Pinned: `most` layers per launch. Automatic: the cheapest n up to `most`, stage 12's launches
  // unless a split looks clearly cheaper.
  double cost = 0, best_cost = 0;
  NetworkPlan best = split(asked ? most : 1, &best_cost);
  best_cost *= kParentMargin;
  for (int n = 2; asked == 0 && n <= most; ++n) {
    const NetworkPlan network = split(n, &cost);
    if (network.fits && cost < best_cost) best = network, best_cost = cost;
  }
  return best;
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

/// The --plan value alone.
static PlanRequest parse_shared_plan(const std::string& value) {
  PlanRequest request;
  if (value.empty()) return request;
  int* fields[] = {&request.tile_batch, &request.threads, &request.batch_groups,
                   &request.group_batch};
  std::istringstream in(value);
  std::string field;
  int count = 0;
  for (; std::getline(in, field, ','); ++count) {
    std::size_t used = 0;
    int parsed = -1;
    try {
      parsed = field.empty() ? 0 : std::stoi(field, &used);
      if (field.empty()) used = 0;
    } catch (const std::exception&) {
      used = field.size() + 1;
    }
    if (count >= 4 || used != field.size() || parsed < 0) {
      throw std::invalid_argument("--plan \"" + value +
                                  "\": expected tile,threads,groups,rows (integers, 0 = auto)");
    }
    *fields[count] = parsed;
  }
  if (request.tile_batch != 0 && request.tile_batch != 4 && request.tile_batch != 8 &&
      request.tile_batch != 16)
    throw std::invalid_argument("--plan: the tile width must be 4, 8 or 16");
  if (request.threads != 0 &&
      (request.threads % kWarpSize != 0 || request.threads > kMaxThreads || request.threads < 64))
    throw std::invalid_argument("--plan: threads must be a multiple of 32, 64 to 512");
  return request;
}

PlanRequest parse_plan_request(const std::string& plan, const std::string& weights,
                               const std::string& input, int layers_per_launch) {
  PlanRequest request = parse_shared_plan(plan);
  if (layers_per_launch < 0 || layers_per_launch > kMaxLaunchLayers)
    throw std::invalid_argument("--layers-per-launch " + std::to_string(layers_per_launch) +
                                ": expected 1 to " + std::to_string(kMaxLaunchLayers) +
                                " (0: automatic)");
  request.layers_per_launch = layers_per_launch;
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
        "--plan pins the shared-memory kernel; it cannot go with --weights registers");
  if (layers_per_launch > 1 && request.weights == WeightHome::kRegisters)
    throw std::invalid_argument(
        "--layers-per-launch above 1 runs the shared-memory kernel; it cannot go with --weights "
        "registers");
  return request;
}

void add_stage_flags(CLI::App& app, StageFlags& flags) {
  app.add_option("--plan", flags.plan,
                 "pin the shared-memory kernel's plan: tile,threads,groups,rows (0 or left out = "
                 "automatic), e.g. 8,256,2")
      ->option_text("T,N,G,R");
  app.add_option("--weights", flags.weights,
                 "pin where W_hh lives: registers, registers,8, registers,32 (weights per lane "
                 "and gate) or shared [default: the planner's choice]")
      ->option_text("WHERE");
  app.add_option("--input", flags.input,
                 "register kernel: who computes W_ih x_t: gemm (cuBLAS before the launch) or "
                 "kernel [default: the planner's choice]")
      ->option_text("WHO");
  app.add_option("--layers-per-launch", flags.layers_per_launch,
                 "run at most N layers in one launch, as a wavefront (1: one launch per layer) "
                 "[default: as many as fit on chip]")
      ->option_text("N");
  app.add_flag("--verbose", flags.verbose, "print the plan of each launch");
  app.final_callback([&flags] {
    try {
      flags.request =
          parse_plan_request(flags.plan, flags.weights, flags.input, flags.layers_per_launch);
    } catch (const std::invalid_argument& error) {
      throw CLI::ValidationError(error.what());
    }
  });
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
