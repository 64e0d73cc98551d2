/*! \file
 *  \brief The stage's launch plan: how the hidden units, the batch and the work of a step are
 *         spread over the blocks and threads of the persistent kernel, and what fits on chip.
 *
 * Host code only (no GPU needed), so that the CPU tests can check the limits and the plans.
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
/// Most threads per block: 16 warps, up to 128 registers each without spilling.
constexpr int kMaxThreads = 512;
/// The tensor-core instruction mma.sync.m16n8k16: a 16 x 16 tile of W_hh (16 gate rows, that is
/// four units, x 16 k) times a 16 x 8 tile of h_{t-1} (16 k x 8 batch columns), FP32 sums.
constexpr int kMmaRows = 16;
constexpr int kMmaColumns = 8;
constexpr int kMmaK = 16;
/// Most threads of a block that holds W in registers: 255 registers a thread, one block an SM.
constexpr int kHeldThreads = 256;
/// Most k tiles of W a warp holds in registers: one A fragment (uint4, 4 registers) each.
constexpr int kHeldTiles = 32;
/// float4 registers a thread carries h through, from L2 to shared memory, per chunk.
constexpr int kStageRegisters = 8;
/// Most layers one launch runs as a wavefront (the size of the kernel's array of layer arguments).
constexpr int kMaxLaunchLayers = 8;
/// What the device offers, as the plan needs it (read from cudaDeviceProp).
struct DeviceLimits {
  int sm_count = 0;               ///< multiprocessors: one block each
  std::size_t shared_bytes = 0;   ///< opt-in shared memory per block
  std::string name = "this GPU";  ///< for messages
};

/// What the planner may use of `device`: its SM count, and the shared memory a block may ask for
/// dynamically (the opt-in limit less the kernels' static shared memory). Defined in stage.cu.
DeviceLimits device_limits(const cudaDeviceProp& device);

/// Optional choices for experiments and tests; 0 means "let the plan choose".
struct PlanRequest {
  int tile_batch = 0;    ///< batch columns of a warp's product tile: 8, 16 or 32 (1 to 4 mma)
  int threads = 0;       ///< threads per block: a multiple of 32, 64 to 512
  int batch_groups = 0;  ///< G: blocks that split the batch of one launch
  int group_batch = 0;   ///< rows of the batch per block (forces batch slices if small)
  /// Layers one launch runs as a wavefront, at most (1: one launch per layer, stage 17's path).
  /// 0: the planner's choice (the cheapest split by the cost model).
  int layers_per_launch = 0;
};

/// One layer's launch plan. Block (u, g) owns hidden units u*J .. u*J+J-1 for the batch rows of
/// group g. Each warp computes a 16 x tile_batch tile of the product (four units' gates x
/// tile_batch batch columns) with mma.sync over a slice of k.
struct Plan {
  bool fits = false;        ///< false: `why` says what does not fit
  std::string why;          ///< the reason a shape does not fit
  int units_per_block = 0;  ///< J, a multiple of 4 (16 gate rows: one mma tile)
  int unit_blocks = 0;      ///< U = ceil(H / J)
  int batch_groups = 0;     ///< G: blocks = U * G
  int group_batch = 0;      ///< Bg: batch rows per block
  int padded_batch = 0;     ///< Bg rounded up to 4: the columns of published h (float4 loads)
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
  /// k tiles of W each warp holds in registers (threads at most kHeldThreads; a step's k range
  /// one chunk, or for an upper layer h_{t-1}'s chunk after the layer below's h_t, whose W_ih
  /// stays in shared memory): its share rounded up to 8, 16 or 32 (kHeldTiles), zeros past it;
  /// 0: W in shared memory.
  int held_tiles = 0;
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  double cost = 0;  ///< the planner's estimate of one layer (all slices, T steps), SM clocks
  /// Clocks a step of a slice waits for chunks of h beyond the first, their L2 round trip not
  /// hidden behind the previous chunk's product (weighed only in choosing the split).
  double chunk_wait = 0;

  int blocks() const { return unit_blocks * batch_groups; }
  /// One line for logs: "J=4 U=128 G=1 Bg=64 tile=16x8 threads=256 ...".
  std::string describe() const;
};

/// One launch of the network: layers first_layer .. first_layer + layers.size() - 1, each on its
/// own blocks (in that order), as a wavefront: while the first works on step t, the one i above
/// it works on step t - i. One tile width, thread count, batch groups and batch rows for all.
struct LayerLaunch {
  int first_layer = 0;
  std::vector<Plan> layers;          ///< the plan of each layer of the launch
  double cost = 0;                   ///< the planner's estimate, SM clocks (T + n - 1 steps)
  int blocks() const;                ///< of all the layers
  std::size_t shared_bytes() const;  ///< the most any layer's blocks need
};

/// The launches of the whole network, or fits == false and the reason.
struct NetworkPlan {
  bool fits = false;
  std::string why;
  std::vector<LayerLaunch> launches;
  int layers_per_launch() const;  ///< the most layers of any launch
  /// One line per launch for logs: "launch 0, layers 0-3: [J=32 U=16 ...] [...]".
  std::string describe() const;
};

/// Shared memory a block needs for `plan` (the plan's own fields filled in).
std::size_t shared_bytes_for(const Plan& plan, int hidden);

/// H rounded up to the mma's k (16): the k of the weight fragments, zeros past H.
int padded_hidden(int hidden);

/// Plans one layer of `size` on `device`: searches the kernel's tile widths, thread counts and
/// batch groups, keeps the plans that fit and returns the one with the lowest estimated step
/// time (or one with fits == false and the reason). `request` pins any choice it sets.
Plan make_plan(const ProblemSize& size, const DeviceLimits& device,
               const PlanRequest& request = {});

/// Plans one launch of `count` consecutive layers as a wavefront (the first takes its input parts
/// from cuBLAS, the others multiply [W_ih | W_hh] by [h^{l-1}_t ; h^l_{t-1}] on chip): the blocks
/// of a batch group shared out in proportion to each layer's k range, every layer's fragments in
/// shared memory, or equally, each layer holding W_hh in registers where it can; the cheaper by
/// the cost model. fits == false and the reason where they do not fit.
NetworkPlan make_wavefront_launch(const ProblemSize& size, const DeviceLimits& device,
                                  const PlanRequest& request, int count);

/// Plans the network: the layers split into launches of as equal sizes as possible, n layers
/// each at most, n the cheapest by the cost model among those that fit (request.layers_per_launch
/// pins it; one that does not fit is refused, naming the most that do). n = 1, and L = 1: stage
/// 17's one launch per layer (make_plan).
NetworkPlan make_network_plan(const ProblemSize& size, const DeviceLimits& device,
                              const PlanRequest& request = {});

/// The largest H whose weights fit at the other sizes of `size` (for the refusal message).
int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device);

/// Builds a PlanRequest from the stage's --plan flag (empty = automatic):
/// "tile,threads,groups,rows" (tile: 8, 16 or 32 columns), any field 0 or left out = automatic,
/// and --layers-per-launch (0 = automatic, else 1 to kMaxLaunchLayers).
/// \throws std::invalid_argument naming the flag for a malformed value.
PlanRequest parse_plan_request(const std::string& plan, int layers_per_launch = 0);

/// The stage's own command-line flags (its executable's --help lists them).
struct StageFlags {
  std::string plan;           ///< --plan tile,threads,groups,rows
  int layers_per_launch = 0;  ///< --layers-per-launch N
  bool verbose = false;  ///< --verbose: print the plan
  PlanRequest request;   ///< what --plan asks for (set when parsing ends)
  std::string precision_name = "fp16";      ///< --precision fp16|bf16
  Precision precision = Precision::kFp16;  ///< what --precision asks for (set when parsing ends)
};

/// Adds the flags of `flags` to `app`; when parsing ends, fills flags.request (a malformed value
/// is a usage error naming the flag).
void add_stage_flags(CLI::App& app, StageFlags& flags);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
