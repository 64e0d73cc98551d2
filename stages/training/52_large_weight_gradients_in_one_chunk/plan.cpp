// The stage's launch planner: which shapes fit on chip, and how the two kernels spread a layer
// over the blocks. The forward's part is forward stage 17's planner (the tensor-core kernel),
// with forward stage 19's split of the layers into wavefront launches;
// the backward's is training stage 07's, its kernel's tiles and shared memory those of mma (W_hhᵀ
// as one to four row tiles of 16 units, dz in 16 bits), its gate rows split over a cluster of
// one or two blocks. The mapping and the cost model's numbers: README.md beside this file.
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

// Both cost models, per SM and per clock (H100: datasheet figures and estimates, as in forward
// stages 10 and 13):
constexpr double kMmaFmaPerClock = 1024;      // FP16/BF16 mma.sync, half the dense datasheet rate
constexpr double kSharedBytesPerClock = 128;  // shared-memory bandwidth
constexpr double kL2BytesPerClockPerSm = 48;  // what one SM pulls from L2
constexpr double kL2BytesPerClock = 3000;     // what the whole L2 delivers (~5 TB/s)
constexpr double kLaunchClocks = 15000;       // launch, weights into shared memory (~8 µs)
// The forward's (forward stage 17's; the mma's and the k slices' also the backward's):
constexpr double kForwardStepLatency = 1500;  // publish h, see it elsewhere, reduce, update c
constexpr double kMmaLatency = 300;           // a warp's k tile: fragments, one dependent mma
// The forward's chain, refitted to its phase timers (README): a k tile costs ~150 clocks, not 300.
constexpr double kForwardMmaLatency = 150;
// With W held in registers (forward stage 23's, measured on its phase trace): a k tile of the
// chain 42 clocks, a k slice 50.
constexpr double kHeldMmaLatency = 42;
constexpr double kHeldSliceClocks = 50;
constexpr double kSliceClocks = 350;  // one more k slice in the reduction
// The forward's split into wavefront launches (forward stage 19's figures):
constexpr double kChunkRoundTrip = 2400;  // a chunk of published h from L2 and its barrier
constexpr double kParentMargin = 0.95;    // a split of layers must look 5% cheaper than stage 28's
// The backward's, fitted to stage 12's step measured with phase timers (README, "Prediction"):
constexpr double kL2RoundTrip = 800;       // one round of loads in flight, under load
constexpr double kStepLatency = 4700;      // publish dz, see it elsewhere, stage, the cell
constexpr double kDzBytesPerClock = 1270;  // polled 16-bit dz reaching all blocks (~2.3 TB/s)
constexpr double kMmaIssue = 64;           // one more row tile's mma in a k tile (no dependency)
// A chunk's stores into shared memory, its barrier and the round trip its loads wait for: 100
// clocks (stage 22's figure) let the planner take clusters of two with sixteen chunks of dz at
// H = 768, B = 64, 58% slower than C = 1; refitted to C = 1 / C = 2 pinned at nine shapes (README).
constexpr double kChunkClocks = 1000;
// A cluster's exchange of partial sums and what the model's halved chain of mma promises but a
// step does not get: stage 23 fitted 4600 clocks with a cluster barrier; st.async on an mbarrier
// measured ~0.5 µs (~900 clocks) a step less (README).
constexpr double kClusterExchange = 3700;
constexpr int kBackwardWarps = kBackwardThreads / kWarpSize;  // the most: shared memory's sums

std::string kib(std::size_t bytes) {
  return std::to_string((bytes + 1023) / 1024) + " KiB";
}

/// Staged h holds two k of one column per 32-bit word, rows of `columns` words; lanes of a
/// B fragment read words (k pair 0..3, column 0..7): a row stride of 8 or 24 words mod 32 puts
/// the four k pairs in different banks.
int bank_free_stride(int columns) {
  int stride = columns;
  while (stride % 32 != 8 && stride % 32 != 24)
    stride += kMmaColumns;
  return stride;
}

/// Fills in the warp layout, shared memory and cost of the forward's plan `plan` (sizes already
/// set); sets plan.fits and plan.why. Forward stage 17's; `may_hold`: W may be held in
/// registers (a launch of one layer), forward stage 23's.
void lay_out(ForwardPlan& plan, const ProblemSize& s, const DeviceLimits& device, bool may_hold) {
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
  const std::size_t fixed = forward_shared_bytes(plan, H);
  const std::size_t row_bytes = static_cast<std::size_t>(plan.h_stride) * 2;  // 16-bit values
  const std::size_t room = device.shared_bytes > fixed ? device.shared_bytes - fixed : 0;
  const int by_room = static_cast<int>(std::min<std::size_t>(room / (2 * row_bytes), 1 << 20));
  const int by_registers = kStageRegisters * plan.threads * 4 / plan.padded_batch;
  plan.chunk_rows = std::min({padded_hidden(K), by_room, by_registers}) / kMmaK * kMmaK;
  if (plan.chunk_rows < kMmaK) {
    const std::size_t rows = static_cast<std::size_t>(plan.tile_groups_units) * kMmaRows;
    why << "the forward's weight slice (" << rows << " rows x " << padded_hidden(K)
        << " 16-bit values, " << rows * padded_hidden(K) * 2 / 1024 << " KiB) leaves no room in "
        << device.shared_bytes / 1024 << " KiB of shared memory for "
        << "h_{t-1} and the partial sums";
    plan.why = why.str();
    return;
  }
  plan.chunks = ceil_div(K, plan.chunk_rows);
  // W in the warps' registers where the kernel can hold a warp's share of the one chunk of a
  // step (8, 16 or 32 k tiles), else in shared memory; only in launches of one layer and one
  // slice of the batch (forward stage 23's README).
  const int share = ceil_div(ceil_div(K, kMmaK), plan.k_slices);
  if (may_hold && plan.slices == 1 && plan.threads <= kHeldThreads && plan.chunks == 1 &&
      share <= kHeldTiles)
    plan.held_tiles = share <= 8 ? 8 : share <= 16 ? 16 : kHeldTiles;
  plan.by_gate = plan.held_tiles > 0 && plan.tile_batch == kMmaColumns &&
                 J * plan.group_batch * kGates <= plan.threads;
  plan.shared_bytes = forward_shared_bytes(plan, H);
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
  const double chain = plan.held_tiles > 0
                           ? plan.held_tiles * kHeldMmaLatency
                           : std::ceil(k / kMmaK / plan.k_slices) * kForwardMmaLatency;
  const double shared = ((plan.held_tiles > 0 ? 0.0 : 2.0 * rows * k * plan.tile_groups_batch) +
                         2.0 * plan.mma_batch * k * plan.tile_groups_units) /
                        kSharedBytesPerClock;
  const double h_bytes = 4.0 * plan.padded_batch * K;
  const double l2 =
      std::max(h_bytes / kL2BytesPerClockPerSm, h_bytes * plan.blocks() / kL2BytesPerClock);
  const double product = std::max({fma, chain, shared, l2});
  const double slice = plan.held_tiles > 0 ? kHeldSliceClocks : kSliceClocks;
  const double step = kForwardStepLatency + slice * plan.k_slices + 100.0 * plan.chunks + product;
  plan.cost = plan.slices * (s.seq_len * step + kLaunchClocks);
  plan.chunk_wait = (plan.chunks - 1) * std::max(0.0, kChunkRoundTrip - product / plan.chunks);
}

/// Estimated clocks of one backward layer with plan `b` (sizes set): per step a fixed latency and
/// the chunks' barriers, the larger of the mma work and a warp's chain of dependent mma, and the
/// polled dz that every block of a group reads (U copies of each batch row's dz a step: what two
/// row tiles halve), or one SM's share of it, or a round trip per chunk, whichever is largest.
double backward_cost(const BackwardPlan& b, const ProblemSize& s) {
  const double k = b.k_rows;  // a block's part of the gate rows
  const double fma = kMmaRows * b.row_tiles * k * kMmaColumns * b.batch_tiles / kMmaFmaPerClock;
  const double chain =
      std::ceil(k / kMmaK / b.k_slices) * (kMmaLatency + (b.row_tiles - 1) * kMmaIssue);
  const double dz_bytes = 2.0 * b.group_rows * k;  // 16-bit dz, per block and step
  const double l2 = std::max({dz_bytes * b.blocks() / kDzBytesPerClock,
                              dz_bytes / kL2BytesPerClockPerSm, b.chunks * kL2RoundTrip});
  const double exchange = b.cluster_blocks > 1 ? kClusterExchange : 0.0;
  const double step = kStepLatency + kChunkClocks * b.chunks + std::max(fma, chain) + l2 + exchange;
  return b.slices * (s.seq_len * step + kLaunchClocks);
}

/// The backward's launch with G batch groups in clusters of C blocks (and `pinned_rows` rows per
/// block, `pinned_chunk` gate rows per chunk of dz, if set). Returns "" or the reason.
std::string plan_backward(const ProblemSize& s, const DeviceLimits& device, int groups,
                          int cluster, int pinned_rows, int pinned_chunk, BackwardPlan& b) {
  const int H = s.hidden, J = ceil_div(H, device.sm_count / groups);
  const int padded_k = backward_k_rows(H, cluster);  // the mma's k: a block's gate rows
  b.units_per_block = J;
  b.row_tiles = ceil_div(cluster * J, kMmaRows);
  b.unit_blocks = ceil_div(ceil_div(H, J), cluster) * cluster;  // whole clusters in a group
  b.batch_groups = groups;
  b.cluster_blocks = cluster;
  b.k_rows = padded_k;
  std::ostringstream why;
  if (cluster > 1) {
    if ((cluster - 1) * padded_k >= kGates * H) {
      why << "the backward's " << kGates * H << " gate rows are too few to split over "
          << cluster << " blocks of a cluster (" << padded_k << " each, a multiple of 16)";
      return why.str();
    }
    if (b.blocks() > device.sm_count || b.blocks() / cluster > device.pair_clusters) {
      why << "the backward's " << b.blocks() << " blocks in clusters of " << cluster
          << " cannot all be resident at once (" << device.pair_clusters << " clusters of two fit)";
      return why.str();
    }
  }
  if (J > kMaxUnitsPerBlock) {
    why << "the backward's " << device.sm_count / groups << " blocks per batch group would own "
        << J << " hidden units each, more than the kernel's " << kMaxUnitsPerBlock
        << " (two mma row tiles)";
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
    b.batch_tiles = ceil_div(rows, kMmaColumns);
    // Fewer warps at small batches: fewer k slices to poll dz and to sum, longer mma chains.
    b.threads = s.batch <= kFewWarpsBatch ? kFewBackwardThreads : kBackwardThreads;
    b.k_slices = b.threads / kWarpSize / b.batch_tiles;
    // dz in chunks of gate rows: all 4H rows in one buffer where they fit (and the threads'
    // registers carry them), else two buffers of as many rows as fit beside the rest.
    const int carried = kStageRegistersDz * 4 * b.threads / rows / kMmaK * kMmaK;
    const std::size_t beside = backward_shared_bytes(H, J, rows, 0);
    const std::size_t room = beside < device.shared_bytes ? device.shared_bytes - beside : 0;
    const std::size_t column_bytes = static_cast<std::size_t>(b.batch_tiles) * kMmaColumns * 4;
    const bool whole =
        padded_k <= carried &&
        room >= column_bytes * static_cast<std::size_t>(backward_dz_stride(padded_k));
    const int fit =
        whole ? padded_k
              : std::max(static_cast<int>(room / (2 * column_bytes)) - 8, 0) * 2 / kMmaK * kMmaK;
    const int chunk = pinned_chunk > 0 ? std::min(pinned_chunk, padded_k) : std::min(carried, fit);
    b.chunk_rows = std::max(chunk, kMmaK);
    b.chunks = ceil_div(padded_k, b.chunk_rows);
    b.dz_stride = backward_dz_stride(b.chunk_rows);
    b.shared_bytes = backward_shared_bytes(H, J, rows, b.chunk_rows, cluster);
    if (b.chunk_rows <= carried && b.shared_bytes <= device.shared_bytes) break;
    if (b.chunk_rows > carried && (rows == 1 || pinned_rows > 0)) {
      why << "the backward's chunk of " << b.chunk_rows << " gate rows of dz x " << rows
          << " batch row(s) is more than its threads carry (" << kStageRegistersDz
          << " x 8 bytes each: " << carried << " gate rows per row)";
      return why.str();
    }
    if (rows == 1 || pinned_rows > 0) {
      why << "the backward's rows of W_hhᵀ for " << J << " hidden units (" << kMmaRows * b.row_tiles
          << " x " << padded_k << " 16-bit values, " << kib(2u * kMmaRows * b.row_tiles * padded_k)
          << "), " << rows << " batch row(s) and " << (b.chunks > 1 ? "two chunks" : "one chunk")
          << " of " << b.chunk_rows << " gate rows of dz need " << kib(b.shared_bytes)
          << " of shared memory, more than the " << kib(device.shared_bytes) << " of a block";
      return why.str();
    }
    rows = ceil_div(rows, 2);
  }
  b.slices = ceil_div(s.batch, groups * rows);
  b.cost = backward_cost(b, s);
  return {};
}

/// The backward in `span` clusters of 16 per batch group: J units a block, a multiple of 4 (whole
/// mma k tiles of gate rows) with 16 span J >= H; as many groups as the batch needs in rows of at
/// most `most_rows` (and one thread a pair) and the device holds at once (or `pinned_groups` of
/// `pinned_rows`, if set). Returns "" or the reason it does not fit.
std::string plan_span(const ProblemSize& s, const DeviceLimits& device, int span, int pinned_groups,
                      int pinned_rows, int most_rows, BackwardPlan& b) {
  const int H = s.hidden, J = ceil_div(ceil_div(H, kOneCluster * span), 4) * 4;
  b = BackwardPlan{};
  b.units_per_block = J;
  b.row_tiles = ceil_div(H, kMmaRows);
  b.unit_blocks = kOneCluster * span;
  b.cluster_blocks = kOneCluster;
  b.span = span;
  b.k_rows = b.chunk_rows = kGates * J;
  b.chunks = b.batch_tiles = b.k_slices = 1;
  b.threads = kClusterBackwardThreads;
  b.dz_stride = backward_dz_stride(b.k_rows);
  std::ostringstream why;
  if (device.whole_clusters < span) {
    why << "no " << span << " cluster(s) of " << kOneCluster
        << " backward blocks can be resident on this device";
    return why.str();
  }
  // Every cluster owns units, so block r of the first owns some: no block receives nothing.
  if (span > 1 && kOneCluster * J * (span - 1) >= H) {
    why << "H = " << H << " does not need " << span << " clusters of " << kOneCluster << " blocks ("
        << J << " units a block)";
    return why.str();
  }
  const int most_units = (span > 1 ? kMaxSpannedTilesPerWarp : kMaxClusterTilesPerWarp) *
                         kClusterBackwardThreads / kWarpSize * kMmaRows;
  if (H > most_units) {
    why << "the backward in " << (span == 1 ? "one cluster" : "clusters of 16")
        << " multiplies at most " << most_units << " units (H = " << H << ")";
    return why.str();
  }
  const int fit_rows = std::min(kMaxClusterRows, kClusterBackwardThreads / J);  // a thread a pair
  most_rows = std::min(most_rows, fit_rows);
  if (pinned_rows > fit_rows) {
    why << "the backward in clusters of 16 takes at most " << fit_rows
        << " batch rows a cluster here (two mma column tiles, and " << J
        << " units a block times the rows at most " << kClusterBackwardThreads << " threads)";
    return why.str();
  }
  b.batch_groups = pinned_groups > 0
                       ? pinned_groups
                       : std::min(device.whole_clusters / span, ceil_div(s.batch, most_rows));
  // The clusters of a group wait for each other through L2: all of them resident at once.
  if (span > 1 && b.batch_groups * span > device.whole_clusters) {
    why << "the backward's " << b.batch_groups << " group(s) of " << span << " clusters of "
        << kOneCluster << " cannot all be resident at once (" << device.whole_clusters << " fit)";
    return why.str();
  }
  b.group_rows =
      pinned_rows > 0 ? pinned_rows : std::min(most_rows, ceil_div(s.batch, b.batch_groups));
  b.slices = ceil_div(s.batch, b.batch_groups * b.group_rows);
  b.shared_bytes = cluster_backward_shared_bytes(H, J, b.group_rows, span);
  if (b.shared_bytes > device.shared_bytes) {
    why << "the backward in " << (span == 1 ? "one cluster" : std::to_string(span) + " clusters")
        << " of 16: the rows of W_hh of " << J << " units for all " << H << " units ("
        << kib(2u * kMmaRows * b.row_tiles * b.k_rows) << ") and " << b.group_rows
        << " batch row(s) need " << kib(b.shared_bytes) << " of shared memory, more than the "
        << kib(device.shared_bytes) << " of a block";
    return why.str();
  }
  return {};
}

/// The backward in clusters of 16: pinned_span; else one cluster a group if its plan fits and
/// takes the batch in one launch, else the most clusters a group that do (a block's fewer gate
/// rows: measured as fast or faster, README.md); else one cluster a group of up to 16 rows if that
/// takes the batch in one launch (over several clusters 16 rows were slower than stage 30's
/// backward, README.md); else one cluster's plan or refusal.
std::string plan_one_cluster(const ProblemSize& s, const DeviceLimits& device, int pinned_groups,
                             int pinned_rows, int pinned_span, BackwardPlan& b) {
  if (pinned_span > 0)
    return plan_span(s, device, pinned_span, pinned_groups, pinned_rows, kClusterRows, b);
  const std::string one = plan_span(s, device, 1, pinned_groups, pinned_rows, kClusterRows, b);
  if (one.empty() && b.slices == 1) return one;
  for (int span = kMaxSpannedClusters; span > 1; --span) {  // the most: shorter chains of mma
    BackwardPlan wider;
    if (plan_span(s, device, span, pinned_groups, pinned_rows, kClusterRows, wider).empty() &&
        wider.slices == 1) {
      b = wider;
      return {};
    }
  }
  BackwardPlan sixteen;  // two column tiles a cluster
  if (plan_span(s, device, 1, pinned_groups, pinned_rows, kMaxClusterRows, sixteen).empty() &&
      sixteen.slices == 1) {
    b = sixteen;
    return {};
  }
  return one;  // b: one cluster's plan (several slices), or the reason it does not fit
}

}  // namespace

int padded_hidden(int hidden) {
  return ceil_div(hidden, kMmaK) * kMmaK;
}

std::size_t forward_shared_bytes(const ForwardPlan& p, int hidden) {
  const std::size_t rows = static_cast<std::size_t>(kGates) * p.units_per_block;
  const std::size_t mma_rows = static_cast<std::size_t>(p.tile_groups_units) * kMmaRows;
  const std::size_t halves =
      (p.held_tiles > 0 ? 0 : mma_rows * padded_hidden(hidden + p.input_rows))  // [W_ih |] W_hh
      + 2 * static_cast<std::size_t>(p.chunk_rows) * p.h_stride;                // h
  const std::size_t floats =
      static_cast<std::size_t>(p.k_slices) * mma_rows * p.mma_batch  // sums
      + (p.input_rows == 0 ? rows * p.padded_batch : 0)               // input parts (cuBLAS's)
      + static_cast<std::size_t>(p.units_per_block) * p.padded_batch  // c
      + rows;                                                         // biases
  return halves * 2 + floats * sizeof(float);
}

int backward_k_rows(int hidden, int cluster_blocks) {
  return ceil_div(ceil_div(kGates * hidden, kMmaK), cluster_blocks) * kMmaK;
}

std::size_t backward_shared_bytes(int hidden, int units, int rows, int chunk_rows,
                                  int cluster_blocks) {
  const std::size_t padded_k = backward_k_rows(hidden, cluster_blocks);
  const int tiles = ceil_div(std::max(rows, 1), kMmaColumns);
  const std::size_t columns = static_cast<std::size_t>(tiles) * kMmaColumns;
  const std::size_t pairs = static_cast<std::size_t>(units) * rows;
  const std::size_t mma_rows =
      static_cast<std::size_t>(ceil_div(cluster_blocks * units, kMmaRows)) * kMmaRows;
  // dz: [2][columns][dz_stride] words, one buffer where one chunk holds all the block's gate rows
  const std::size_t buffers = chunk_rows == 0 ? 0 : (chunk_rows < static_cast<int>(padded_k) ? 2 : 1);
  const std::size_t words = buffers * columns * backward_dz_stride(chunk_rows);
  const std::size_t floats =
      static_cast<std::size_t>(kBackwardWarps / tiles) * mma_rows * columns  // partial sums
      + kStashFloats * pairs + pairs                                         // the step's stash, dc
      + (cluster_blocks > 1 ? 2 * cluster_blocks * static_cast<std::size_t>(units) * columns + 6
                            : 0);  // + two mbarriers, 8-aligned
  return 2 * mma_rows * padded_k + (words + floats) * 4;  // W_hhᵀ's fragments in 16 bits
}

int backward_dz_stride(int chunk_rows) {
  int words = chunk_rows / 2;  // two 16-bit values of dz a word
  while (words % 8 != 4)
    ++words;
  return words;
}

int received_columns(int rows) {
  return (rows + 3) / 4 * 4;
}

std::size_t cluster_backward_shared_bytes(int hidden, int units, int rows, int span) {
  const std::size_t k_rows = static_cast<std::size_t>(kGates) * units;
  const std::size_t fragments = 2u * kMmaRows * ceil_div(hidden, kMmaRows) * k_rows;  // 16-bit
  const std::size_t dz = 4u * ceil_div(std::max(rows, 1), kMmaColumns) * kMmaColumns *
                         backward_dz_stride(static_cast<int>(k_rows));
  const std::size_t received = 4u * 2 * span * kOneCluster * units * received_columns(rows);
  return fragments + dz + received + 16 + 8;  // + two mbarriers, 8-aligned
}

std::string ForwardPlan::describe() const {
  std::ostringstream out;
  out << "J=" << units_per_block << " U=" << unit_blocks << " G=" << batch_groups
      << " Bg=" << group_batch << " slices=" << slices << " tile=16x" << tile_batch
      << " threads=" << threads << " mma_tiles(rows,batch)=" << tile_groups_units << ","
      << tile_groups_batch << " k_slices=" << k_slices << " chunk=" << chunk_rows << "x" << chunks
      << " smem=" << shared_bytes / 1024 << "KiB";
  if (input_rows > 0) out << " input_rows=" << input_rows;
  if (held_tiles > 0) out << " held_tiles=" << held_tiles;
  if (by_gate) out << " by_gate";
  return out.str();
}

int LayerLaunch::blocks() const {
  int sum = 0;
  for (const ForwardPlan& p : layers)
    sum += p.blocks();
  return sum;
}

std::size_t LayerLaunch::shared_bytes() const {
  std::size_t most = 0;
  for (const ForwardPlan& p : layers)
    most = std::max(most, p.shared_bytes);
  return most;
}

int NetworkPlan::layers_per_launch() const {
  std::size_t most = 0;
  for (const LayerLaunch& launch : launches)
    most = std::max(most, launch.layers.size());
  return static_cast<int>(most);
}

std::string Plan::describe() const {
  std::ostringstream out;
  for (const LayerLaunch& launch : network.launches) {
    out << "\n  forward launch of layers " << launch.first_layer << "-"
        << launch.first_layer + launch.layers.size() - 1 << ":";
    for (const ForwardPlan& p : launch.layers)
      out << " [" << p.describe() << "]";
  }
  out << "\n  backward J=" << backward.units_per_block
      << " row_tiles=" << backward.row_tiles << " U=" << backward.unit_blocks
      << " G=" << backward.batch_groups << " Bg=" << backward.group_rows
      << " slices=" << backward.slices << " C=" << backward.cluster_blocks
      << " span=" << backward.span
      << " k_rows=" << backward.k_rows << " threads=" << backward.threads
      << " mma_tiles(batch)=" << backward.batch_tiles
      << " k_slices=" << backward.k_slices << " chunk=" << backward.chunk_rows << "x"
      << backward.chunks << " smem=" << backward.shared_bytes / 1024 << "KiB";
  return out.str();
}

ForwardPlan make_forward_plan(const ProblemSize& s, const DeviceLimits& device,
                              const PlanRequest& request, bool may_hold) {
  std::vector<int> tiles = {8, 16, 32}, threads = {128, 256, 512}, groups = {1, 2, 4, 8, 16, 32};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  if (request.batch_groups) groups = {request.batch_groups};
  ForwardPlan best, first_refusal;
  best.cost = std::numeric_limits<double>::infinity();
  for (int tile : tiles) {
    for (int thread_count : threads) {
      for (int g : groups) {
        if (g > device.sm_count || g > s.batch) continue;
        ForwardPlan plan;
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
          lay_out(plan, s, device, may_hold);
          if (plan.fits || rows == 1 || request.group_batch) break;
          rows = ceil_div(rows, 2);
        }
        if (plan.fits && plan.cost < best.cost) best = plan;
        if (!plan.fits && first_refusal.why.empty()) first_refusal = plan;
      }
    }
  }
  if (!best.fits) {
    if (first_refusal.why.empty()) first_refusal.why = "no forward plan matches the request";
    return first_refusal;
  }
  if (!may_hold) return best;
  // Measured (README): a plan chosen for holding W, with more batch groups than stage 38's, ran
  // slower in training than stage 38's plan holding W. So stage 38's, held where it can be.
  ForwardPlan kept = make_forward_plan(s, device, request, false);
  lay_out(kept, s, device, true);
  return kept.held_tiles > 0 ? kept : best;
}

NetworkPlan make_wavefront_launch(const ProblemSize& s, const DeviceLimits& device,
                                  const PlanRequest& request, int count) {
  // The most warps first: a refusal then names the weights, not a lack of warps.
  std::vector<int> tiles = {8, 16, 32}, threads = {512, 256}, groups = {1, 2, 4, 8, 16, 32};
  if (request.tile_batch) tiles = {request.tile_batch};
  if (request.threads) threads = {request.threads};
  if (request.batch_groups) groups = {request.batch_groups};
  // A batch group's blocks are shared out in proportion to each layer's k range (the first H, an
  // upper one 2H): the step of the wavefront is as long as its slowest layer's.
  const int total_k = (2 * count - 1) * s.hidden;
  LayerLaunch best, first_refusal;
  best.cost = std::numeric_limits<double>::infinity();
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
            ForwardPlan plan;
            plan.input_rows = i == 0 ? 0 : s.hidden;
            const int share = device.sm_count / g * (s.hidden + plan.input_rows) / total_k;
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
              lay_out(plan, s, device, false);
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
  // The split as stage 38 chooses it, W in shared memory; then held in its launches of one layer.
  const ForwardPlan single = make_forward_plan(s, device, request, false);  // stage 28's, one layer
  const ForwardPlan held = make_forward_plan(s, device, request);
  const auto hold = [&](NetworkPlan network) {
    for (LayerLaunch& launch : network.launches)
      if (launch.layers.size() == 1) launch.layers.front() = held, launch.cost = held.cost;
    return network;
  };
  result.why = single.why;
  if (!single.fits) return result;
  // Splits the layers into ceil(L / n) launches of sizes that differ by one at most, the larger
  // ones first; a launch of one layer is stage 28's.
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
      for (const ForwardPlan& p : launch.layers)
        wait = std::max(wait, p.slices * p.chunk_wait);
      sum += launch.cost + (s.seq_len + launch.layers.size() - 1) * wait;
    }
    return sum;
  };
  const int asked = request.layers_per_launch;
  if (asked > 1 && s.layers > 1) {  // pinned: refused where it does not fit, naming what does
    const int wanted = std::min(asked, s.layers);
    NetworkPlan network = split(wanted);
    if (network.fits) return hold(network);
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
  // Automatic: the cheapest n by the cost model (n = 1 at L = 1, or where asked); stage 28's
  // launches unless a split looks clearly cheaper.
  NetworkPlan best = split(1);
  double best_cost = kParentMargin * cost(best);
  for (int n = 2; asked == 0 && n <= std::min(s.layers, kMaxLaunchLayers); ++n) {
    const NetworkPlan network = split(n);
    if (!network.fits) break;  // more layers than n fit nowhere either
    const double network_cost = cost(network);
    if (network_cost < best_cost) best = network, best_cost = network_cost;
  }
  return hold(best);
}

int trailing_chunk_steps(const ProblemSize& s, const BackwardPlan& backward, int sm_count) {
  const bool room = backward.blocks() <= sm_count - sm_count / 4;
  const int steps = ceil_div(s.seq_len, kTrailingChunks);
  const std::size_t dw_hh_bytes =
      sizeof(float) * kGates * static_cast<std::size_t>(s.hidden) * s.hidden;
  const bool rewrites =
      dw_hh_bytes >= kOneChunkWeightBytes && steps * s.batch < kNarrowChunkColumns;
  return room && !rewrites ? steps : s.seq_len;
}

Plan make_plan(const ProblemSize& s, const DeviceLimits& device, const PlanRequest& request) {
  Plan plan;
  plan.forward = make_forward_plan(s, device, request);
  if (!plan.forward.fits) {
    plan.why = plan.forward.why;
    return plan;
  }
  plan.network = make_network_plan(s, device, request);
  if (!plan.network.fits) {
    plan.why = plan.network.why;
    return plan;
  }
  // The backward in one cluster where it fits and takes the batch in one launch (or where --plan
  // asks for it); else stage 30's search.
  if (request.backward_cluster == 0 || request.backward_cluster == kOneCluster) {
    BackwardPlan one;
    const std::string why = plan_one_cluster(s, device, request.backward_groups,
                                             request.backward_rows, request.backward_span, one);
    if (why.empty() && (one.slices == 1 || request.backward_cluster == kOneCluster)) {
      plan.backward = one;
      plan.fits = true;
      return plan;
    }
    if (request.backward_cluster == kOneCluster) {
      plan.why = why;
      return plan;
    }
  }
  std::vector<int> groups = {1, 2, 4, 8, 16, 32}, clusters = {1, 2};
  if (request.backward_groups) groups = {request.backward_groups};
  if (request.backward_cluster) clusters = {request.backward_cluster};
  BackwardPlan best;
  best.cost = std::numeric_limits<double>::infinity();
  std::string first_refusal;
  for (int c : clusters) {
    for (int g : groups) {
      if (g > device.sm_count || (g > s.batch && !request.backward_groups)) continue;
      BackwardPlan candidate;
      const std::string why = plan_backward(s, device, g, c, request.backward_rows,
                                            request.backward_chunk_rows, candidate);
      if (why.empty() && candidate.cost < best.cost) best = candidate;
      if (!why.empty() && first_refusal.empty()) first_refusal = why;
    }
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

PlanRequest parse_plan_request(const std::string& plan, int layers_per_launch) {
  PlanRequest request;
  if (layers_per_launch < 0 || layers_per_launch > kMaxLaunchLayers)
    throw std::invalid_argument("--layers-per-launch " + std::to_string(layers_per_launch) +
                                ": expected 1 to " + std::to_string(kMaxLaunchLayers) +
                                " (0: automatic)");
  request.layers_per_launch = layers_per_launch;
  int* fields[] = {&request.tile_batch,          &request.threads,          &request.batch_groups,
                   &request.group_batch,         &request.backward_groups,  &request.backward_rows,
                   &request.backward_chunk_rows, &request.backward_cluster, &request.backward_span};
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
                                  "backward_rows,backward_chunk,backward_cluster,backward_span "
                                  "(integers, 0 = automatic)");
    }
    *fields[count] = parsed;
  }
  if (request.tile_batch != 0 && request.tile_batch != 8 && request.tile_batch != 16 &&
      request.tile_batch != 32)
    throw std::invalid_argument("--plan: the forward's tile width must be 8, 16 or 32");
  if (request.threads != 0 &&
      (request.threads % kWarpSize != 0 || request.threads > kMaxThreads || request.threads < 64))
    throw std::invalid_argument(
        "--plan: the forward's threads must be a multiple of 32, 64 to 512");
  if (request.backward_chunk_rows % kMmaK != 0)
    throw std::invalid_argument("--plan: the backward's chunk must be a multiple of 16 gate rows");
  if (request.backward_cluster > kMaxClusterBlocks && request.backward_cluster != kOneCluster)
    throw std::invalid_argument("--plan: the backward's cluster must be 1, 2 or 16 blocks");
  if (request.backward_span > kMaxSpannedClusters ||
      (request.backward_span > 0 && request.backward_cluster != kOneCluster))
    throw std::invalid_argument("--plan: the backward's span must be 1 to " +
                                std::to_string(kMaxSpannedClusters) +
                                " clusters, with clusters of 16 blocks");
  return request;
}

void add_stage_flags(CLI::App& app, StageFlags& flags) {
  app.add_option("--plan", flags.plan,
                 "pin the plans: the forward's tensor-core kernel (tile,threads,groups,rows) "
                 "and the backward (batch groups, batch rows per block, gate rows of dz per "
                 "chunk, blocks per cluster: 1, 2, or 16 for the backward in clusters of 16, "
                 "clusters of 16 a batch group spans: 1 to 4); 0 or left out = automatic, "
                 "e.g. 16,256,2 or 0,0,0,0,2,0,256,2 or 0,0,0,0,0,0,0,16,4")
      ->option_text("T,N,G,R,BG,BR,BC,C,S");
  app.add_option("--layers-per-launch", flags.layers_per_launch,
                 "run at most N layers in one forward launch, as a wavefront (1: one launch per "
                 "layer) [default: the planner's choice]")
      ->option_text("N");
  app.add_flag("--verbose", flags.verbose, "print the plans");
  app.add_option("--precision", flags.precision_name,
                 "the 16-bit type of the forward's tensor-core operands and of the GEMMs' "
                 "operands (FP32 sums); every input is rounded to it on the host first, and the "
                 "reference reads the rounded values")
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
