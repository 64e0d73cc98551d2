// The stage's launch planner: which shapes fit on chip, how to spread a step's work, and which
// layers share a launch as a wavefront (README.md beside this file).
#include "plan.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// The cost model's rates, per SM and per clock (H100: datasheet figures and estimates):
constexpr double kMmaFmaPerClock = 1024;      // FP16/BF16 mma.sync, half the dense datasheet rate
constexpr double kMmaLatency = 300;  // a warp's k tile: fragments from shared memory, one mma
                                     // after the one it accumulates onto (fitted, see README)
constexpr double kHeldMmaLatency = 42;    // the same with W in registers (measured: 1 344
                                          // clocks for 32 k tiles, see README)
constexpr double kSliceClocks = 350; // one more k slice in the reduction (fitted, see README)
constexpr double kHeldSliceClocks = 50;   // the same for a plan that holds W (measured: the
                                          // reduction +41 clocks from 2 to 4 slices, see README)
constexpr double kInputTileClocks = 60;   // a held layer's k tile of W_ih from shared memory
                                          // (stage 21's product: 1 937 clocks, 32 tiles; README)
constexpr double kSharedBytesPerClock = 128;  // shared-memory bandwidth
constexpr double kL2BytesPerClockPerSm = 48;  // what one SM pulls from L2
constexpr double kL2BytesPerClock = 3000;     // what the whole L2 delivers (~5 TB/s)
constexpr double kStepLatency = 1500;         // publish h, see it elsewhere, reduce, update c
constexpr double kLaunchClocks = 15000;       // launch, weights into shared memory (~8 µs)
constexpr double kChunkRoundTrip = 2400;      // a chunk of published h from L2 and its barrier,
                                              // ~1.4 µs (the split's estimate only, see README)
constexpr double kParentMargin = 0.95;  // a split of layers must look 5% cheaper than stage 17's

/// Staged h holds two k of one column per 32-bit word, rows of `columns` words; lanes of a
/// B fragment read words (k pair 0..3, column 0..7): a row stride of 8 or 24 words mod 32 puts
/// the four k pairs in different banks.
int bank_free_stride(int columns) {
  int stride = columns;
  while (stride % 32 != 8 && stride % 32 != 24)
    stride += kMmaColumns;
  return stride;
}

/// A warp's share of k tiles held in registers, rounded up to a held kernel's: 8, 16 or 32.
int held_tiles_for(int share) {
  return share <= 8 ? 8 : share <= 16 ? 16 : kHeldTiles;
}

/// An upper layer of a wavefront that holds W_hh: [h^{l-1}_t ; h^l_{t-1}] staged as chunks of
/// H rows (padded to 16), the layer below's h_t first, multiplied by W_ih's fragments from shared
/// memory, h_{t-1} last, by W_hh's from the warps' registers. False where that does not fit.
bool hold_w_hh(Plan& plan, const ProblemSize& s, const DeviceLimits& device, int by_registers) {
  const int K = s.hidden + plan.input_rows;
  plan.chunk_rows = padded_hidden(plan.input_rows);
  plan.chunks = ceil_div(K, plan.chunk_rows);
  const int share = ceil_div(ceil_div(K - (plan.chunks - 1) * plan.chunk_rows, kMmaK),
                             plan.k_slices);  // a warp's k tiles of the last chunk
  plan.held_tiles = held_tiles_for(share);
  plan.shared_bytes = shared_bytes_for(plan, s.hidden);
  if (plan.slices == 1 && plan.threads <= kHeldThreads && share <= kHeldTiles &&
      plan.chunk_rows <= by_registers && plan.shared_bytes <= device.shared_bytes)
    return true;
  plan.held_tiles = 0;
  return false;
}

/// Fills in the warp layout, shared memory and cost of `plan` (sizes already set); sets
/// plan.fits and plan.why. `may_hold`: W may be held in registers (a launch of one layer, or
/// the equal shares of a wavefront launch).
void lay_out(Plan& plan, const ProblemSize& s, const DeviceLimits& device, bool may_hold) {
  const int H = s.hidden, J = plan.units_per_block;
  const int K = H + plan.input_rows;  // the k range: the layer's input rows, then h's
  plan.tile_groups_units = ceil_div(kGates * J, kMmaRows);
  plan.tile_groups_batch = ceil_div(plan.padded_batch, plan.tile_batch);
  plan.mma_batch = plan.tile_groups_batch * plan.tile_batch;
  plan.h_stride = bank_free_stride(plan.mma_batch);
  const int warps = plan.threads / kWarpSize;
  const int tile_groups = plan.tile_groups_units * plan.tile_groups_batch;
  std::ostringstream why;
  if (tile_groups > warps) {
    why << J << " units x " << plan.padded_batch << " batch rows need " << tile_groups
        << " warps of mma tiles, more than " << warps;
    plan.why = why.str();
    return;
  }
  plan.k_slices = warps / tile_groups;
  // Everything but the staged h, then as many rows of h as fit twice (double buffering).
  plan.held_tiles = 0;  // sized with W in shared memory (held below where it can be)
  plan.chunk_rows = 0;
  const std::size_t fixed = shared_bytes_for(plan, H);
  const std::size_t row_bytes = static_cast<std::size_t>(plan.h_stride) * 2;  // 16-bit values
  const std::size_t room = device.shared_bytes > fixed ? device.shared_bytes - fixed : 0;
  const int by_room = static_cast<int>(std::min<std::size_t>(room / (2 * row_bytes), 1 << 20));
  const int by_registers = kStageRegisters * plan.threads * 4 / plan.padded_batch;
  const bool upper_held =
      may_hold && plan.input_rows > 0 && hold_w_hh(plan, s, device, by_registers);
  if (!upper_held)
    plan.chunk_rows = std::min({padded_hidden(K), by_room, by_registers}) / kMmaK * kMmaK;
  if (plan.chunk_rows < kMmaK) {
    const std::size_t rows = static_cast<std::size_t>(plan.tile_groups_units) * kMmaRows;
    why << "the weight slice (" << rows << " rows x " << padded_hidden(K) << " 16-bit values, "
        << rows * padded_hidden(K) * 2 / 1024 << " KiB) leaves no room in "
        << device.shared_bytes / 1024 << " KiB of shared memory for "
        << "h_{t-1} and the partial sums";
    plan.why = why.str();
    return;
  }
  if (!upper_held) plan.chunks = ceil_div(K, plan.chunk_rows);
  // W in the warps' registers where the kernel can hold a warp's share of the one chunk of a
  // step (8, 16 or 32 k tiles), else in shared memory. Only in launches of one layer and one
  // slice of the batch: a wavefront's layers or batch slices holding W measured slower (README).
  const int share = ceil_div(ceil_div(K, kMmaK), plan.k_slices);
  if (may_hold && plan.input_rows == 0 && plan.slices == 1 && plan.threads <= kHeldThreads &&
      plan.chunks == 1 && share <= kHeldTiles)
    plan.held_tiles = held_tiles_for(share);
  plan.shared_bytes = shared_bytes_for(plan, H);
  if (plan.shared_bytes > device.shared_bytes) {  // cannot happen after the sizing above
    plan.why = "shared memory";
    return;
  }
  plan.fits = true;

  // Estimated clocks of one step: a fixed latency (publish h, see it elsewhere, reduce), then
  // the largest of the arithmetic, the chain of dependent mma of a warp, the shared-memory
  // traffic and the L2 traffic.
  const double rows = plan.tile_groups_units * kMmaRows, k = padded_hidden(K);
  const double fma = rows * k * plan.mma_batch / kMmaFmaPerClock;
  const double k_shared = plan.held_tiles > 0 ? (plan.chunks - 1.0) * plan.chunk_rows : k;
  const double chain = plan.held_tiles > 0
                           ? plan.held_tiles * kHeldMmaLatency +
                                 std::ceil(k_shared / kMmaK / plan.k_slices) * kInputTileClocks
                           : std::ceil(k / kMmaK / plan.k_slices) * kMmaLatency;
  const double shared = (2.0 * rows * k_shared * plan.tile_groups_batch +
                         2.0 * plan.mma_batch * k * plan.tile_groups_units) /
                        kSharedBytesPerClock;
  const double h_bytes = 4.0 * plan.padded_batch * K;
  const double l2 =
      std::max(h_bytes / kL2BytesPerClockPerSm, h_bytes * plan.blocks() / kL2BytesPerClock);
  const double product = std::max({fma, chain, shared, l2});
  const double slice = plan.held_tiles > 0 ? kHeldSliceClocks : kSliceClocks;
  const double step = kStepLatency + slice * plan.k_slices + 100.0 * plan.chunks + product;
  plan.cost = plan.slices * (s.seq_len * step + kLaunchClocks);
  // An upper layer holding W_hh waits for h_{t-1} once, as a layer of one chunk does (in
  // kStepLatency): the layer below's h_t, its first chunk, was published a step earlier.
  plan.chunk_wait =
      upper_held ? 0.0 : (plan.chunks - 1) * std::max(0.0, kChunkRoundTrip - product / plan.chunks);
}

}  // namespace

std::string Plan::describe() const {
  std::ostringstream out;
  out << "weights=" << (held_tiles > 0 ? "registers" : "shared") << " J=" << units_per_block
      << " U=" << unit_blocks << " G=" << batch_groups << " Bg=" << group_batch
      << " slices=" << slices << " tile=16x" << tile_batch << " threads=" << threads
      << " mma_tiles(rows,batch)=" << tile_groups_units << "," << tile_groups_batch
      << " k_slices=" << k_slices << " chunk=" << chunk_rows << "x" << chunks
      << " smem=" << shared_bytes / 1024 << "KiB";
  if (input_rows > 0) out << " input_rows=" << input_rows;
  if (held_tiles > 0) out << " held_tiles=" << held_tiles;
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
  for (const LayerLaunch& launch : launches) {
    out << "\n  launch of layers " << launch.first_layer << "-"
        << launch.first_layer + launch.layers.size() - 1 << ":";
    for (const Plan& p : launch.layers)
      out << " [" << p.describe() << "]";
  }
  return out.str();
}

int padded_hidden(int hidden) {
  return ceil_div(hidden, kMmaK) * kMmaK;
}

std::size_t shared_bytes_for(const Plan& p, int hidden) {
  const std::size_t rows = static_cast<std::size_t>(kGates) * p.units_per_block;
  const std::size_t mma_rows = static_cast<std::size_t>(p.tile_groups_units) * kMmaRows;
  const std::size_t halves =
      (p.held_tiles > 0 ? mma_rows * (p.chunks - 1) * p.chunk_rows  // held: W_ih's chunks
                        : mma_rows * padded_hidden(hidden + p.input_rows))  // [W_ih |] W_hh
      + 2 * static_cast<std::size_t>(p.chunk_rows) * p.h_stride;                // h
  const std::size_t floats =
      static_cast<std::size_t>(p.k_slices) * mma_rows * p.mma_batch   // sums
      + (p.input_rows == 0 ? rows * p.padded_batch : 0)               // input parts (cuBLAS's)
      + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
      + rows;                                                         // biases
  return halves * 2 + floats * sizeof(float);
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device, const PlanRequest& request) {
  std::vector<int> tiles = {8, 16, 32}, threads = {256, 512}, groups = {1, 2, 4, 8, 16, 32};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  if (request.batch_groups) groups = {request.batch_groups};
  Plan best, first_refusal;
  best.cost = std::numeric_limits<double>::infinity();
  for (int tile : tiles) {
    for (int thread_count : threads) {
      for (int g : groups) {
        if (g > device.sm_count || g > s.batch) continue;
        Plan plan;
        plan.tile_batch = tile;
        plan.threads = thread_count;
        plan.batch_groups = g;
        // Whole mma row tiles: 16 gate rows, four units.
        plan.units_per_block = ceil_div(ceil_div(s.hidden, device.sm_count / g), 4) * 4;
        plan.unit_blocks = ceil_div(s.hidden, plan.units_per_block);
        // The most batch rows per block that fit; fewer rows mean more slices (launches).
        int rows = request.group_batch ? request.group_batch : ceil_div(s.batch, g);
        for (;;) {
          plan.group_batch = rows;
          plan.padded_batch = ceil_div(rows, 4) * 4;
          plan.slices = ceil_div(s.batch, g * rows);
          plan.fits = false;
          lay_out(plan, s, device, true);
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
  // The most warps first: a refusal then names the weights, not a lack of warps.
  std::vector<int> tiles = {8, 16, 32}, threads = {512, 256}, groups = {1, 2, 4, 8, 16, 32};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  if (request.batch_groups) groups = {request.batch_groups};
  // A batch group's blocks are shared out in proportion to each layer's k range (the first H, an
  // upper one 2H), W in shared memory; or equally, each layer holding W_hh in registers where it
  // can (an upper layer's W_ih in shared memory). The step of the wavefront is as long as its
  // slowest layer's.
  const int total_k = (2 * count - 1) * s.hidden;
  LayerLaunch best, first_refusal;
  best.cost = std::numeric_limits<double>::infinity();
  for (const bool hold : {false, true})
  for (int tile : tiles) {
    for (int thread_count : threads) {
      for (int g : groups) {
        if (g > device.sm_count || g > s.batch) continue;
        // The most batch rows per block that fit every layer; fewer rows mean more slices.
        for (int rows = request.group_batch ? request.group_batch : ceil_div(s.batch, g);;
             rows = ceil_div(rows, 2)) {
          LayerLaunch launch;
          bool fits = true;
          for (int i = 0; i < count && fits; ++i) {
            Plan plan;
            plan.input_rows = i == 0 ? 0 : s.hidden;
            const int share = hold ? device.sm_count / g / count
                                   : device.sm_count / g * (s.hidden + plan.input_rows) / total_k;
            plan.tile_batch = tile;
            plan.threads = thread_count;
            plan.batch_groups = g;
            plan.units_per_block = ceil_div(ceil_div(s.hidden, std::max(share, 1)), 4) * 4;
            plan.unit_blocks = ceil_div(s.hidden, plan.units_per_block);
            plan.group_batch = rows;
            plan.padded_batch = ceil_div(rows, 4) * 4;
            plan.slices = ceil_div(s.batch, g * rows);
            if (share < 1) {
              plan.why = "no SM left for a layer";
            } else {
              lay_out(plan, s, device, hold);
            }
            fits = plan.fits;
            launch.cost = std::max(launch.cost, plan.cost);
            launch.layers.push_back(plan);
          }
          // T + count - 1 steps of the wavefront, each as long as the slowest layer's.
          launch.cost *= static_cast<double>(s.seq_len + count - 1) / s.seq_len;
          if (fits && launch.cost < best.cost) best = launch;
          const bool last_try = fits || rows == 1 || request.group_batch;
          if (!fits && last_try && first_refusal.layers.empty()) first_refusal = launch;
          if (last_try) break;
        }
      }
    }
  }
  NetworkPlan result;
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
  const Plan single = make_plan(s, device, request);  // stage 17's plan of one layer
  result.why = single.why;
  if (!single.fits) return result;
  // Splits the layers into ceil(L / n) launches of sizes that differ by one at most, the larger
  // ones first; a launch of one layer is stage 17's.
  const auto split = [&](int n) {
    NetworkPlan network{true, "", {}};
    const int launches = ceil_div(s.layers, n);
    for (int i = 0, layer = 0; i < launches && network.fits; ++i) {
      const int count = s.layers / launches + (i < s.layers % launches ? 1 : 0);
      LayerLaunch launch{layer, {single}, single.cost};
      if (count > 1) {
        const NetworkPlan wave = make_wavefront_launch(s, device, request, count);
        network.fits = wave.fits;
        network.why = wave.why;
        if (wave.fits) launch = wave.launches.front();
      }
      launch.first_layer = layer;
      network.launches.push_back(launch);
      layer += count;
    }
    return network;
  };
  // Each launch's estimate, plus its slowest layer's waits for chunks over T + n - 1 steps.
  const auto cost = [&](const NetworkPlan& network) {
    double sum = 0;
    for (const LayerLaunch& launch : network.launches) {
      double wait = 0;
      for (const Plan& p : launch.layers)
        wait = std::max(wait, p.slices * p.chunk_wait);
      sum += launch.cost + (s.seq_len + launch.layers.size() - 1) * wait;
    }
    return sum;
  };
  const int asked = request.layers_per_launch;
  if (asked > 1 && s.layers > 1) {  // pinned: refused where it does not fit, naming what does
    const int wanted = std::min(asked, s.layers);
    NetworkPlan network = split(wanted);
    if (network.fits) return network;
    int most = wanted - 1;
    while (most > 1 && !make_wavefront_launch(s, device, request, most).fits)
      --most;
    std::ostringstream why;
    why << wanted << " layers do not fit in one launch (" << network.why << "); "
        << (most > 1 ? "at most " + std::to_string(most) + " do at this size"
                     : std::string("not even 2 do at this size: --layers-per-launch 1 runs one "
                                   "launch per layer"));
    network.fits = false;
    network.why = why.str();
    return network;
  }
  // Automatic: the cheapest n by the cost model (n = 1 at L = 1, or where asked); stage 17's
  // launches unless a split looks clearly cheaper.
  NetworkPlan best = split(1);
  double best_cost = kParentMargin * cost(best);
  for (int n = 2; asked == 0 && n <= std::min(s.layers, kMaxLaunchLayers); ++n) {
    const NetworkPlan network = split(n);
    if (!network.fits) break;  // more layers than n fit nowhere either
    const double network_cost = cost(network);
    if (network_cost < best_cost) best = network, best_cost = network_cost;
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

PlanRequest parse_plan_request(const std::string& value, int layers_per_launch) {
  PlanRequest request;
  if (layers_per_launch < 0 || layers_per_launch > kMaxLaunchLayers)
    throw std::invalid_argument("--layers-per-launch " + std::to_string(layers_per_launch) +
                                ": expected 1 to " + std::to_string(kMaxLaunchLayers) +
                                " (0: automatic)");
  request.layers_per_launch = layers_per_launch;
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
  if (request.tile_batch != 0 && request.tile_batch != 8 && request.tile_batch != 16 &&
      request.tile_batch != 32)
    throw std::invalid_argument("--plan: the tile width must be 8, 16 or 32");
  if (request.threads != 0 &&
      (request.threads % kWarpSize != 0 || request.threads > kMaxThreads || request.threads < 64))
    throw std::invalid_argument("--plan: threads must be a multiple of 32, 64 to 512");
  return request;
}

void add_stage_flags(CLI::App& app, StageFlags& flags) {
  app.add_option("--plan", flags.plan,
                 "pin the kernel's plan: tile,threads,groups,rows (0 or left out = automatic), "
                 "e.g. 16,256,2")
      ->option_text("T,N,G,R");
  app.add_option("--layers-per-launch", flags.layers_per_launch,
                 "run at most N layers in one launch, as a wavefront (1: one launch per layer) "
                 "[default: the planner's choice]")
      ->option_text("N");
  app.add_flag("--verbose", flags.verbose, "print the plan of each launch");
  app.add_option("--precision", flags.precision_name,
                 "the 16-bit type of W_hh and h_{t-1} on the tensor cores (FP32 sums); every "
                 "input is rounded to it on the host first, and the reference reads the rounded "
                 "values")
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->capture_default_str();
  app.final_callback([&flags] {
    try {
      flags.request = parse_plan_request(flags.plan, flags.layers_per_launch);
    } catch (const std::invalid_argument& error) {
      throw CLI::ValidationError(error.what());
    }
    flags.precision = flags.precision_name == "bf16" ? Precision::kBf16 : Precision::kFp16;
  });
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
