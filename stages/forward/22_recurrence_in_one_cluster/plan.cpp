// The stage's launch planner: which shapes fit on chip, and how to spread a step's work.
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
constexpr double kSliceClocks = 350; // one more k slice in the reduction (fitted, see README)
constexpr double kSharedBytesPerClock = 128;  // shared-memory bandwidth
constexpr double kL2BytesPerClockPerSm = 48;  // what one SM pulls from L2
constexpr double kL2BytesPerClock = 3000;     // what the whole L2 delivers (~5 TB/s)
constexpr double kStepLatency = 1500;         // publish h, see it elsewhere, reduce, update c
constexpr double kLaunchClocks = 15000;       // launch, weights into shared memory (~8 µs)

/// Staged h holds two k of one column per 32-bit word, rows of `columns` words; lanes of a
/// B fragment read words (k pair 0..3, column 0..7): a row stride of 8 or 24 words mod 32 puts
/// the four k pairs in different banks.
int bank_free_stride(int columns) {
  int stride = columns;
  while (stride % 32 != 8 && stride % 32 != 24)
    stride += kMmaColumns;
  return stride;
}

/// Fills in the warp layout, shared memory and cost of `plan` (sizes already set); sets
/// plan.fits and plan.why.
void lay_out(Plan& plan, const ProblemSize& s, const DeviceLimits& device) {
  const int H = s.hidden, J = plan.units_per_block;
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
  plan.chunk_rows = 0;
  const std::size_t fixed = shared_bytes_for(plan, H);
  const std::size_t row_bytes = static_cast<std::size_t>(plan.h_stride) * 2;  // 16-bit values
  const std::size_t room = device.shared_bytes > fixed ? device.shared_bytes - fixed : 0;
  const int by_room = static_cast<int>(std::min<std::size_t>(room / (2 * row_bytes), 1 << 20));
  const int by_registers = kStageRegisters * plan.threads * 4 / plan.padded_batch;
  plan.chunk_rows = std::min({padded_hidden(H), by_room, by_registers}) / kMmaK * kMmaK;
  if (plan.chunk_rows < kMmaK) {
    const std::size_t rows = static_cast<std::size_t>(plan.tile_groups_units) * kMmaRows;
    why << "the weight slice (" << rows << " rows x " << padded_hidden(H) << " 16-bit values, "
        << rows * padded_hidden(H) * 2 / 1024 << " KiB) leaves no room in "
        << device.shared_bytes / 1024 << " KiB of shared memory for "
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

  // Estimated clocks of one step: a fixed latency (publish h, see it elsewhere, reduce), then
  // the largest of the arithmetic, the chain of dependent mma of a warp, the shared-memory
  // traffic and the L2 traffic.
  const double rows = plan.tile_groups_units * kMmaRows, k = padded_hidden(H);
  const double fma = rows * k * plan.mma_batch / kMmaFmaPerClock;
  const double chain = std::ceil(k / kMmaK / plan.k_slices) * kMmaLatency;
  const double shared = (2.0 * rows * k * plan.tile_groups_batch +
                         2.0 * plan.mma_batch * k * plan.tile_groups_units) /
                        kSharedBytesPerClock;
  const double h_bytes = 4.0 * plan.padded_batch * H;
  const double l2 =
      std::max(h_bytes / kL2BytesPerClockPerSm, h_bytes * plan.blocks() / kL2BytesPerClock);
  const double step = kStepLatency + kSliceClocks * plan.k_slices + 100.0 * plan.chunks +
                      std::max({fma, chain, shared, l2});
  plan.cost = plan.slices * (s.seq_len * step + kLaunchClocks);
}

}  // namespace

std::string Plan::describe() const {
  std::ostringstream out;
  if (one_cluster) {
    out << "recurrence=one cluster of " << unit_blocks << " J=" << units_per_block
        << " G=" << batch_groups << " Bg=" << group_batch << " threads=" << threads
        << " row_tiles=" << tile_groups_units << " k_slices=" << k_slices
        << " smem=" << shared_bytes / 1024 << "KiB";
    return out.str();
  }
  out << "weights=shared J=" << units_per_block << " U=" << unit_blocks << " G=" << batch_groups
      << " Bg=" << group_batch << " slices=" << slices << " tile=16x" << tile_batch
      << " threads=" << threads << " mma_tiles(rows,batch)=" << tile_groups_units << ","
      << tile_groups_batch << " k_slices=" << k_slices << " chunk=" << chunk_rows << "x" << chunks
      << " smem=" << shared_bytes / 1024 << "KiB";
  return out.str();
}

int padded_hidden(int hidden) {
  return ceil_div(hidden, kMmaK) * kMmaK;
}

std::size_t shared_bytes_for(const Plan& p, int hidden) {
  const std::size_t rows = static_cast<std::size_t>(kGates) * p.units_per_block;
  const std::size_t mma_rows = static_cast<std::size_t>(p.tile_groups_units) * kMmaRows;
  const std::size_t halves = mma_rows * padded_hidden(hidden)                      // W_hh slice
                             + 2 * static_cast<std::size_t>(p.chunk_rows) * p.h_stride;  // h
  const std::size_t floats =
      static_cast<std::size_t>(p.k_slices) * mma_rows * p.mma_batch  // sums
      + rows * p.padded_batch                                         // input parts
      + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
      + rows;                                                         // biases
  return halves * 2 + floats * sizeof(float);
}

std::size_t cluster_shared_bytes(int hidden, int units, int k_slices) {
  const std::size_t k = padded_hidden(hidden), rows = static_cast<std::size_t>(kGates) * units;
  const std::size_t halves = rows * k                                           // W_hh slice
                             + 2 * kClusterRows * (k + 8)                       // h: two buffers
                             + static_cast<std::size_t>(kClusterRows) * units;  // h_t to send
  const std::size_t floats = k_slices * rows * kClusterRows                     // sums
                             + 2 * rows * kClusterRows  // input parts, two steps
                             + rows;                    // biases
  return halves * 2 + floats * sizeof(float) + 16;                              // two mbarriers
}

Plan plan_one_cluster(const ProblemSize& s, const DeviceLimits& device) {
  Plan plan;
  plan.one_cluster = true;
  const int H = s.hidden, J = ceil_div(ceil_div(H, kOneCluster), 8) * 8;  // 16-byte messages
  plan.units_per_block = J;
  plan.unit_blocks = kOneCluster;
  plan.batch_groups = ceil_div(s.batch, kClusterRows);
  plan.group_batch = ceil_div(s.batch, plan.batch_groups);
  plan.padded_batch = plan.mma_batch = plan.tile_batch = kClusterRows;
  plan.slices = 1;
  plan.threads = kClusterThreads;
  plan.tile_groups_units = kGates * J / kMmaRows;
  plan.tile_groups_batch = 1;
  // k slices: the fewest mma a warp chains, plus one addition a slice for the cell.
  const int k_tiles = padded_hidden(H) / kMmaK, warps = kClusterThreads / kWarpSize;
  int best = std::numeric_limits<int>::max();
  for (int slices = 1; slices <= std::min(warps, k_tiles); ++slices) {
    if (cluster_shared_bytes(H, J, slices) > device.shared_bytes) break;
    const int chain = ceil_div(plan.tile_groups_units * slices, warps) * ceil_div(k_tiles, slices);
    if (chain + slices < best) best = chain + slices, plan.k_slices = slices;
  }
  plan.shared_bytes = cluster_shared_bytes(H, J, std::max(plan.k_slices, 1));
  std::ostringstream why;
  if (plan.k_slices == 0) {
    why << "W_hh in 16 blocks of one cluster: " << kGates * J << " rows x " << padded_hidden(H)
        << " 16-bit values and h need " << plan.shared_bytes / 1024 << " KiB a block, more than "
        << device.shared_bytes / 1024 << " KiB";
  } else if (device.whole_clusters < 1) {  // more groups than resident clusters run in waves
    why << "no cluster of " << kOneCluster << " such blocks can be resident on " << device.name;
  }
  plan.why = why.str();
  plan.fits = plan.why.empty();
  return plan;
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device, const PlanRequest& request) {
  const bool pinned =
      request.tile_batch || request.threads || request.batch_groups || request.group_batch;
  if (!pinned) {  // a pinned plan is the grid kernel's
    const Plan cluster = plan_one_cluster(s, device);
    if (cluster.fits) return cluster;
  }
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
  app.add_flag("--verbose", flags.verbose, "print the plan of each launch");
  app.add_option("--precision", flags.precision_name,
                 "the 16-bit type of W_hh and h_{t-1} on the tensor cores (FP32 sums); every "
                 "input is rounded to it on the host first, and the reference reads the rounded "
                 "values")
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->capture_default_str();
  app.final_callback([&flags] {
    try {
      flags.request = parse_plan_request(flags.plan);
    } catch (const std::invalid_argument& error) {
      throw CLI::ValidationError(error.what());
    }
    flags.precision = flags.precision_name == "bf16" ? Precision::kBf16 : Precision::kFp16;
  });
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
