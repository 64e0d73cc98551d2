/*! \file
 *  \brief The stage's launch plans: how the forward and the backward kernel of one layer spread
 *         the hidden units and the batch over the blocks, and what fits on chip. The mapping:
 *         README.md beside this file.
 *
 * Host code only (no GPU needed), so that the CPU tests can check the limits and the plans with
 * a made-up device.
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/kind_and_precision.h"
#include "core/problem_size.h"

struct cudaDeviceProp;
namespace CLI {
class App;
}

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// Gates per hidden unit (i, f, g, o).
constexpr int kGates = 4;
/// Lanes per warp.
constexpr int kWarpSize = 32;

// ---- The forward's tensor-core kernel (forward stage 21's: the layers of a launch as a
// wavefront; plan.cpp: make_forward_plan, make_network_plan)

/// Most threads per block: 16 warps, up to 128 registers each without spilling.
constexpr int kMaxThreads = 512;
/// The tensor-core instruction mma.sync.m16n8k16: a 16 x 16 tile of W_hh (16 gate rows, that is
/// four units, x 16 k) times a 16 x 8 tile of h_{t-1} (16 k x 8 batch columns), FP32 sums.
constexpr int kMmaRows = 16;
constexpr int kMmaColumns = 8;
constexpr int kMmaK = 16;
/// 8-byte registers a thread carries h (four 16-bit values) through, from L2 to shared memory,
/// per chunk.
constexpr int kStageRegisters = 8;
/// Forward: most threads of a block that holds W in registers (255 registers a thread, one
/// block an SM), and most k tiles of W a warp holds (one A fragment, 4 registers, each).
constexpr int kHeldThreads = 256;
constexpr int kHeldTiles = 32;
/// Most layers one forward launch runs as a wavefront (the kernel's array of layer arguments).
constexpr int kMaxLaunchLayers = 8;

// ---- The backward kernel (plan.cpp: plan_backward)

/// Backward kernel: the most threads per block (16 warps).
constexpr int kBackwardThreads = 512;
/// Backward kernel: its threads at small batches (8 warps, so half the k slices): a batch of at
/// most kFewWarpsBatch rows runs that many (README: 7-12% off the backward at B = 1 and 4).
constexpr int kFewBackwardThreads = 256;
constexpr int kFewWarpsBatch = 4;
/// Backward kernel: the most batch rows per block (8 mma column tiles: two warps each along k).
constexpr int kMaxBackwardRows = 64;
/// Backward kernel: 8-byte registers a thread carries dz through (four 16-bit values each), from
/// L2 to shared memory, per chunk.
constexpr int kStageRegistersDz = 16;
/// Backward kernel: the most mma row tiles of W_hhᵀ a block keeps (16 hidden units each). Two:
/// a batch group's blocks halve, and so do the copies of its dz that they read every step.
constexpr int kMaxBackwardRowTiles = 2;
/// Backward kernel: the most hidden units a block owns: two mma row tiles of W_hhᵀ (32 rows).
constexpr int kMaxUnitsPerBlock = kMaxBackwardRowTiles * kMmaRows;
/// Backward kernel: the most blocks of a cluster that split the gate rows (k) of the product
/// between them; a block then keeps the rows of W_hhᵀ of the cluster's units, up to 2 x 32 (four
/// row tiles), for its part of k.
constexpr int kMaxClusterBlocks = 2;
/// Backward kernel: what the forward kept, per (unit, batch row) and step, that the cell's
/// backward reads: i, f, g, o, c_t, c_{t-1} and the gradient of h_t from above.
constexpr int kStashFloats = 7;

// ---- The backward in one cluster (cluster_backward_kernel.cuh; plan.cpp: plan_one_cluster)

/// Blocks of the cluster that runs a batch group's whole backward recurrence (a non-portable
/// cluster size: Hopper schedules 16 blocks of one cluster on one GPC).
constexpr int kOneCluster = 16;
/// Its threads per block: one per (unit, batch row) pair, and 16 warps to share the row tiles.
constexpr int kClusterBackwardThreads = 512;
/// Batch rows per cluster: one mma column tile.
constexpr int kClusterRows = 8;
/// ... or two, where groups of kClusterRows do not all fit on the device at once (README.md).
constexpr int kMaxClusterRows = 2 * kClusterRows;
/// Row tiles (16 units each) a warp multiplies: every unit's partial sum, so H <= 16 x 16 x 3.
constexpr int kMaxClusterTilesPerWarp = 3;
/// The same where a group spans several clusters (the kernel compiled a second time: one kernel
/// for both was 12-17% slower at H = 512, README.md), so H <= 1024.
constexpr int kMaxSpannedTilesPerWarp = 4;
/// The most clusters of 16 that one batch group's backward spans where W_hh does not fit in one:
/// the sums for a unit that another cluster owns cross through L2 (README.md).
constexpr int kMaxSpannedClusters = 4;

/// What the device offers, as the plans need it (read from cudaDeviceProp).
struct DeviceLimits {
  int sm_count = 0;               ///< multiprocessors: one block each
  std::size_t shared_bytes = 0;   ///< opt-in shared memory per block
  int pair_clusters = 0;  ///< clusters of two such blocks that can be resident at once (0: none)
  int whole_clusters = 0;  ///< clusters of 16 blocks of the cluster kernel resident (0: none)
  std::string name = "this GPU";  ///< for messages
};

/// What the planner may use of `device`: its SM count, the shared memory a block may ask for
/// dynamically (the opt-in limit less the kernels' static shared memory), how many clusters of
/// two blocks of that size fit at once. Defined in stage.cu.
DeviceLimits device_limits(const cudaDeviceProp& device);

/// Optional choices for experiments and tests; 0 means "let the planner choose".
struct PlanRequest {
  // The forward (forward stage 17's choices):
  int tile_batch = 0;    ///< batch columns of a warp's product tile: 8, 16 or 32 (1 to 4 mma)
  int threads = 0;       ///< threads per block: a multiple of 32, 64 to 512
  int batch_groups = 0;  ///< G: blocks that split the batch of one launch
  int group_batch = 0;   ///< rows of the batch per block (forces batch slices if small)
  /// Layers one forward launch runs as a wavefront, at most (1: one launch per layer, stage 28's
  /// forward). 0: the planner's choice (the cheapest split by the cost model).
  int layers_per_launch = 0;
  // The backward:
  int backward_groups = 0;  ///< G, blocks that share the units, each for part of the batch
  int backward_rows = 0;    ///< batch rows per block (fewer: more slices)
  /// The backward: gate rows of dz staged per chunk (a multiple of 16).
  int backward_chunk_rows = 0;
  /// The backward: blocks of a cluster that split the gate rows (1 or 2), or kOneCluster.
  int backward_cluster = 0;
  /// The backward in clusters of 16: clusters a batch group spans (1 to kMaxSpannedClusters).
  int backward_span = 0;
};

/// The forward's launch plan of one layer (forward stage 17's Plan). Block (u, g) owns hidden
/// units u*J .. u*J+J-1 for the batch rows of group g. Each warp computes a 16 x tile_batch tile
/// of the product (four units' gates x tile_batch batch columns) with mma.sync over a slice of k.
struct ForwardPlan {
  bool fits = false;        ///< false: `why` says what does not fit
  std::string why;          ///< the reason a shape does not fit
  int units_per_block = 0;  ///< J, a multiple of 4 (16 gate rows: one mma tile)
  int unit_blocks = 0;      ///< U = ceil(H / J)
  int batch_groups = 0;     ///< G: blocks = U * G
  int group_batch = 0;      ///< Bg: batch rows per block
  int padded_batch = 0;     ///< Bg rounded up to 4: the columns of published h (8-byte loads)
  int slices = 0;           ///< launches per layer, each for G * Bg batch rows
  int tile_batch = 0;       ///< columns of a warp's product tile (8, 16 or 32)
  int threads = 0;          ///< threads per block
  int tile_groups_units = 0;  ///< mma row tiles of a block (16 gate rows = 4 units each)
  int tile_groups_batch = 0;  ///< warp tiles along the batch (tile_batch columns each)
  int mma_batch = 0;   ///< columns of the product: padded_batch rounded up to tile_batch
  int h_stride = 0;    ///< 32-bit words (two k of one column) per pair of staged rows of h
  int k_slices = 0;    ///< warps along k per tile group (reduced in shared memory)
  int chunk_rows = 0;  ///< rows of h_{t-1} staged per chunk (a multiple of 16)
  int chunks = 0;      ///< chunks per step
  /// Rows of the layer's input multiplied here, W_ih's slice beside W_hh's in the fragments: 0
  /// (input parts from cuBLAS) or H (a wavefront launch's upper layer, whose input is the h_t the
  /// layer below publishes). The product's k range is input_rows + H.
  int input_rows = 0;
  /// k tiles of W each warp holds in registers (a launch of one layer and one slice, threads at
  /// most kHeldThreads, a step's k range one chunk): its share rounded up to 8, 16 or 32
  /// (kHeldTiles), zeros past it; 0: W in shared memory. Forward stage 23's.
  int held_tiles = 0;
  /// The cell update a thread a gate (kernel.cuh, kByGate): where W is held, one mma column tile
  /// a warp and the block's J x Bg pairs' 4 gates at most its threads. Training stage 45's.
  bool by_gate = false;
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  double cost = 0;  ///< the planner's estimate of one layer (all slices, T steps), SM clocks
  /// Clocks a step of a slice waits for chunks of h beyond the first, their L2 round trip not
  /// hidden behind the previous chunk's product (weighed only in choosing the split).
  double chunk_wait = 0;

  int blocks() const { return unit_blocks * batch_groups; }
  /// One line for logs: "J=4 U=128 G=1 Bg=64 tile=16x8 threads=256 ...".
  std::string describe() const;
};

/// One forward launch: layers first_layer .. first_layer + layers.size() - 1, each on its own
/// blocks (in that order), as a wavefront: while the first works on step t, the one i above it
/// works on step t - i. One tile width, thread count, batch groups and batch rows for all.
struct LayerLaunch {
  int first_layer = 0;
  std::vector<ForwardPlan> layers;   ///< the plan of each layer of the launch
  double cost = 0;                   ///< the planner's estimate, SM clocks (T + n - 1 steps)
  int blocks() const;                ///< of all the layers
  std::size_t shared_bytes() const;  ///< the most any layer's blocks need
};

/// The forward launches of the whole network, or fits == false and the reason.
struct NetworkPlan {
  bool fits = false;
  std::string why;
  std::vector<LayerLaunch> launches;
  int layers_per_launch() const;  ///< the most layers of any launch
};

/// The backward kernel's launch of one layer. Block (u, g) owns hidden units u*J .. u*J+J-1 for
/// the batch rows of group g (their cells). Blocks u .. u + C - 1 (u a multiple of C) form a
/// cluster: block rank r keeps the rows of W_hhᵀ of the cluster's C * J units for gate rows
/// r * k_rows .. + k_rows (the columns of W_hh of those units, in 16 bits as mma row tiles of A
/// fragments) in its shared memory and reads only those rows of dz_t, published in 16 bits, for
/// its batch rows. Warp w multiplies column tile w % batch_tiles (8 batch rows) over k slice
/// w / batch_tiles of those gate rows, for each row tile. C = 1: training stage 22's plan.
/// C = kOneCluster: the backward in one cluster (cluster_backward_kernel.cuh): a batch group's 16
/// blocks are one cluster, block r owns units r*J .. (J a multiple of 4, so 16 J >= H) and keeps
/// the A fragments of W_hhᵀ for every unit (row_tiles = ceil(H / 16)) over its own 4J gate rows
/// (k_rows = 4J); G clusters of Bg <= kMaxClusterRows rows (two column tiles past 8). Where W_hh
/// does not fit in one cluster, a batch group spans `span` clusters: block r of cluster c owns
/// units (16 c + r) J .., and the cluster sums of units owned in another cluster cross through L2.
struct BackwardPlan {
  int units_per_block = 0;       ///< J = ceil(H / (SMs / G)), at most kMaxUnitsPerBlock
  int row_tiles = 0;             ///< mma row tiles of W_hhᵀ: ceil(C * J / 16), 1 to 4
  int unit_blocks = 0;           ///< U = ceil(H / J)
  int batch_groups = 0;          ///< G: blocks = U * G
  int group_rows = 0;            ///< Bg: batch rows per block
  int slices = 0;                ///< launches per layer: ceil(B / (G * Bg))
  int batch_tiles = 0;           ///< mma column tiles: ceil(Bg / 8)
  int threads = 0;               ///< 512, or kFewBackwardThreads where B <= kFewWarpsBatch
  int k_slices = 0;              ///< S = threads / 32 / batch_tiles: warps along k per column tile
  int dz_stride = 0;             ///< 32-bit words per staged batch row of dz (an odd multiple of 4)
  int chunk_rows = 0;            ///< gate rows (k) of dz per chunk, a multiple of 16
  int chunks = 0;                ///< chunks of dz per step: ceil(k_rows / chunk_rows)
  int cluster_blocks = 1;        ///< C: blocks u .. u + C - 1 of a group form a cluster
  int span = 1;                  ///< clusters of kOneCluster blocks a batch group spans
  int k_rows = 0;                ///< gate rows a block of a cluster multiplies (a multiple of 16)
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  double cost = 0;               ///< the planner's estimate of one layer, SM clocks

  int blocks() const { return unit_blocks * batch_groups; }
};

/// Both kernels' plans for one problem size; fits == false: `why` says what does not fit.
struct Plan {
  bool fits = false;
  std::string why;
  ForwardPlan forward;  ///< one layer's forward alone (stage 28's)
  NetworkPlan network;  ///< the forward's launches: the layers split into wavefronts
  BackwardPlan backward;
  /// For logs: the forward's launches, one line each, then "backward J=16 U=32 G=4 ...".
  std::string describe() const;
};

/// Shared memory a forward block needs for `plan` (the plan's own fields filled in, input_rows
/// among them): the layout of kernel.cuh.
std::size_t forward_shared_bytes(const ForwardPlan& plan, int hidden);

/// H rounded up to the mma's k (16): the k of the weight fragments, zeros past H.
int padded_hidden(int hidden);

/// Dynamic shared memory of the backward kernel: W_hhᵀ's rows of the cluster's units as one to
/// four row tiles of A fragments (16 x k_rows each, 16-bit), two chunks of dz (chunk_rows gate
/// rows x `rows` padded to 8, 16-bit; one where a chunk holds all k_rows rows), partial sums, the
/// stash of step t, dc and, in a cluster of C > 1 blocks, two buffers of the cluster's partial
/// sums (the layout of backward_kernel.cuh). C = 1: k_rows = 4H padded to 16.
std::size_t backward_shared_bytes(int hidden, int units, int rows, int chunk_rows,
                                  int cluster_blocks = 1);

/// Dynamic shared memory of the cluster kernel for H units, J units a block and `rows` batch rows
/// a cluster: the A fragments of W_hhᵀ (ceil(H / 16) row tiles x 4J gate rows, 16-bit), dz_t (8
/// columns an mma column tile x 4J gate rows, 16-bit, padded), two buffers of received partial
/// sums (16 x J x received_columns(rows) floats each, for each of the `span` clusters' units) and
/// two mbarriers (the layout of cluster_backward_kernel.cuh).
std::size_t cluster_backward_shared_bytes(int hidden, int units, int rows, int span = 1);
/// The received sums' columns for `rows` batch rows: a multiple of 4, so that the four rows a
/// lane sends at once land 16-byte aligned.
int received_columns(int rows);

/// The gate rows (k) of dz each of the C blocks of a cluster multiplies: 4H split in C, rounded
/// up to the mma's 16.
int backward_k_rows(int hidden, int cluster_blocks);

/// The backward's words per staged row of dz for `chunk_rows` gate rows: two 16-bit values a
/// word, rounded up to an odd multiple of 4, so that a B fragment's 8 columns x 4 k pairs fall
/// in 32 different banks.
int backward_dz_stride(int chunk_rows);

/// Plans the forward of one layer (forward stage 17's planner): searches the tensor-core
/// kernel's tile widths, thread counts and batch groups, keeps the plans that fit and returns the
/// one with the lowest estimated step time (or one with fits == false and the reason). `request`
/// pins any forward choice it sets. `may_hold` (this stage): stage 38's plan (W in shared memory)
/// holds W in registers where it can; where it cannot, the cheapest plan that holds W, if cheaper.
ForwardPlan make_forward_plan(const ProblemSize& size, const DeviceLimits& device,
                              const PlanRequest& request = {}, bool may_hold = true);

/// Plans one forward launch of `count` consecutive layers as a wavefront (forward stage 19's):
/// the first takes its input parts from cuBLAS, the others multiply [W_ih | W_hh] by
/// [h^{l-1}_t ; h^l_{t-1}] on chip; the blocks of a batch group shared out in proportion to each
/// layer's k range, every layer's fragments in shared memory. fits == false and the reason where
/// they do not fit.
NetworkPlan make_wavefront_launch(const ProblemSize& size, const DeviceLimits& device,
                                  const PlanRequest& request, int count);

/// Plans the forward of the network: the layers split into launches of as equal sizes as
/// possible, n layers each at most, n the cheapest by the cost model among those that fit
/// (request.layers_per_launch pins it; one that does not fit is refused, naming the most that
/// do). n = 1, and L = 1: stage 28's one launch per layer (make_forward_plan).
NetworkPlan make_network_plan(const ProblemSize& size, const DeviceLimits& device,
                              const PlanRequest& request = {});

/// Plans both kernels of `size` on `device` (the backward's batch groups by a small cost model),
/// or returns fits == false and the reason. `request` pins any choice it sets.
Plan make_plan(const ProblemSize& size, const DeviceLimits& device,
               const PlanRequest& request = {});

/// Chunks of steps a layer's input and weight gradients are split into where they trail the
/// backward recurrence (stage 43): T / kTrailingChunks steps each, rounded up.
constexpr int kTrailingChunks = 4;

/// A chunk's weight GEMMs read and write all of a layer's FP32 dW_ih and dW_hh, whatever its
/// columns (T / kTrailingChunks * B): where dW_hh takes at least kOneChunkWeightBytes (H >= 1024)
/// and a chunk has fewer than kNarrowChunkColumns columns, those memory-bound rewrites slow the
/// recurrence beside them and the last one runs after it: one GEMM after it costs less.
constexpr std::size_t kOneChunkWeightBytes = std::size_t{16} << 20;
constexpr int kNarrowChunkColumns = 1024;

/// The steps of one such chunk: ceil(T / kTrailingChunks) where the recurrence's blocks (one a
/// SM) leave at least a quarter of `sm_count` to the GEMMs and the chunks would not rewrite a
/// large dW in narrow slices, else T: one chunk, after the recurrence, as in stage 41 (beside 128
/// blocks of 132 the chunks' GEMMs measured slower).
int trailing_chunk_steps(const ProblemSize& size, const BackwardPlan& backward, int sm_count);

/// The largest H that fits at the other sizes of `size` (for the refusal message).
int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device);

/// Builds a PlanRequest from the stage's --plan flag (empty = automatic):
/// "tile,threads,groups,rows,backward_groups,backward_rows,backward_chunk,backward_cluster,span",
/// any field 0 or left out = automatic; the first four pin the forward's kernel as forward stage
/// 17's --plan does (tile: 8, 16 or 32 columns), the others the backward (cluster: 1, 2 or 16;
/// span: the clusters of 16 a batch group spans, 1 to kMaxSpannedClusters);
/// and --layers-per-launch (0 = automatic, else 1 to kMaxLaunchLayers).
/// \throws std::invalid_argument naming the flag for a malformed value.
PlanRequest parse_plan_request(const std::string& plan, int layers_per_launch = 0);

/// The stage's own command-line flags (its executable's --help lists them).
struct StageFlags {
  std::string plan;  ///< --plan tile,threads,groups,rows,backward_groups,backward_rows,BC,C,S
  int layers_per_launch = 0;  ///< --layers-per-launch N
  bool verbose = false;  ///< --verbose: print the plans
  PlanRequest request;   ///< what --plan asks for (set when parsing ends)
  std::string precision_name = "fp16";     ///< --precision fp16|bf16
  Precision precision = Precision::kFp16;  ///< what --precision asks for (set when parsing ends)
};

/// Adds the flags of `flags` to `app`; when parsing ends, fills flags.request and
/// flags.precision (a malformed value is a usage error naming the flag).
void add_stage_flags(CLI::App& app, StageFlags& flags);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
