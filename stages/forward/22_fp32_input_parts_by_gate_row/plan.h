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
/// Most threads per block for a register tile 4 x `tile_batch` wide: the 8- and 16-wide tiles
/// keep 32 or 64 sums in registers and need more than 128 registers per thread (the limit at
/// 512 threads) not to spill, so at most 256 threads.
constexpr int max_threads_for_tile(int tile_batch) {
  return tile_batch >= 8 ? 256 : kMaxThreads;
}
/// float4 registers a thread carries h through, from L2 to shared memory, per chunk.
constexpr int kStageRegisters = 8;
/// The register kernel (small batches): the widest batch tile it keeps sums for.
constexpr int kMaxRegisterBatch = 8;
/// The register kernel: how many k each lane holds weights for (4 gates x this many floats),
/// tried in this order.
constexpr int kRegisterKPerLane[] = {8, 32};
/// The register kernel's most threads per block: 8 warps, so that each thread may have up to
/// 255 registers (32 k per lane need 128 for the weights alone; 8 batch columns, 32 sums).
constexpr int kMaxRegisterThreads = 256;

/// Most layers one launch runs as a wavefront (the size of the kernel's array of layer arguments).
constexpr int kMaxLaunchLayers = 8;

/// Who computes the register kernel's input parts W_ih · x_t.
enum class InputParts {
  kAuto = 0,  ///< the kernel where the work is small enough to hide (kMaxInputWorkPerLane)
  kGemm,      ///< one cuBLAS GEMM for all steps before the launch
  kKernel     ///< the kernel, while the first loads of h_{t-1} fly (if W_ih fits on chip)
};

/// The register kernel computes the input parts itself where a lane's share of them is at most
/// this many multiply-adds per gate (input rows x batch columns): then they hide in the L2 round
/// trip of the first loads of h_{t-1} (measured on the H100: a gain at H = 512, B = 1; a loss
/// at B >= 2 or H = 1024, where the work outlasts the round trip and a GEMM does it faster).
constexpr int kMaxInputWorkPerLane = 8;

/// Where a block keeps its slice of W_hh for the whole sequence.
enum class WeightHome {
  kAuto = 0,     ///< the planner chooses: registers for small batches, where they fit
  kRegisters,    ///< the small-batch kernel: each thread holds 4 x k_per_lane weights
  kSharedMemory  ///< the general kernel: the slice in shared memory, register-tiled product
};

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
  int tile_batch = 0;    ///< batch columns of a thread's register tile: 4, 8 or 16
  int threads = 0;       ///< threads per block: a multiple of 32, 64 to 512
  int batch_groups = 0;  ///< G: blocks that split the batch of one launch
  int group_batch = 0;   ///< rows of the batch per block (forces batch slices if small)
  WeightHome weights = WeightHome::kAuto;  ///< which kernel (pinning tile..rows means shared)
  int k_per_lane = 0;  ///< register kernel: weights per lane and gate, one of kRegisterKPerLane
  InputParts input = InputParts::kAuto;  ///< register kernel: who computes W_ih · x_t
  /// Layers one launch runs as a wavefront, at most (1: one launch per layer, stage 12's path).
  /// 0: the planner's choice (the most that fit; 1 wherever one of stage 12's choices is pinned).
  int layers_per_launch = 0;

  /// Whether a choice only the shared-memory kernel has is pinned (tile, threads, groups, rows).
  bool pins_shared_plan() const { return tile_batch || threads || batch_groups || group_batch; }
};

/// One layer's launch plan. Block (u, g) owns hidden units u*J .. u*J+J-1 for the batch rows of
/// group g.
///
/// Shared-memory kernel (weights_in_registers == false): each thread computes a 4 x tile_batch
/// register tile (one unit's four gates x tile_batch batch rows) over a slice of k.
///
/// Register kernel (weights_in_registers == true; one batch group, B <= kMaxRegisterBatch):
/// lane l of a warp works for unit l / phases of the block (lanes_units = J rounded up to a
/// power of two) and k lane l % phases; warp w for slice w of k. The lane holds the four gates'
/// weights at k = w * phases * k_per_lane + i * phases + l % phases, i < k_per_lane, in
/// registers for the whole sequence. tile_batch = padded_batch = B rounded up to 1, 2, 4 or 8.
struct Plan {
  bool fits = false;                  ///< false: `why` says what does not fit
  std::string why;                    ///< the reason a shape does not fit
  bool weights_in_registers = false;  ///< which kernel runs (see above)
  int k_per_lane = 0;                 ///< register kernel: k values a lane holds weights for
  /// Register kernel: 0 = the input parts W_ih · x_t come from one cuBLAS GEMM before the
  /// launch; else the kernel computes them itself, W_ih in shared memory, with this many input
  /// rows per lane (the most any layer needs: ceil(I / (k_slices * phases))).
  int input_k_per_lane = 0;
  int units_per_block = 0;  ///< J
  int unit_blocks = 0;      ///< U = ceil(H / J)
  int batch_groups = 0;     ///< G: blocks = U * G
  int group_batch = 0;      ///< Bg: batch rows per block
  int padded_batch = 0;     ///< Bg rounded up to tile_batch: the columns of staged h
  int slices = 0;           ///< launches per layer, each for G * Bg batch rows
  int tile_batch = 0;       ///< columns of a thread's register tile (4, 8 or 16; 1-8 in registers)
  int threads = 0;          ///< threads per block
  int lanes_batch = 0;      ///< lanes of a warp along the batch tiles
  int lanes_units = 0;      ///< lanes of a warp along the units
  int phases = 0;           ///< lanes of a warp along k (reduced with shuffles)
  int tile_groups_units = 0, tile_groups_batch = 0;  ///< tile groups (one warp each) of a block
  int k_slices = 0;    ///< warps along k per tile group or per unit (reduced in shared memory)
  int chunk_rows = 0;  ///< rows of h_{t-1} staged per chunk
  int chunks = 0;      ///< chunks per step
  /// Rows of the layer's input the shared-memory kernel multiplies itself, W_ih's slice beside
  /// W_hh's: 0 (its input parts come from cuBLAS) or H (a wavefront launch's upper layer, whose
  /// input is the h_t that the layer below publishes). Its k range is input_rows + H.
  int input_rows = 0;
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  double cost = 0;  ///< the planner's estimate of one layer (all slices, T steps), SM clocks
  /// Clocks a step of a slice waits for chunks of h beyond the first, their L2 round trip not
  /// hidden behind the previous chunk's product (weighed only in choosing the split).
  double chunk_wait = 0;

  int blocks() const { return unit_blocks * batch_groups; }
  /// One line for logs: "J=4 U=128 G=1 Bg=64 tile=4x8 threads=256 ...".
  std::string describe() const;
};

/// One launch of the network: layers first_layer .. first_layer + layers.size() - 1, each on its
/// own blocks (in that order), as a wavefront: while the first works on step t, the one i above it
/// works on step t - i, its input h_t handed up through the exchange buffer. One layer: stage 12's
/// launch (either kernel). Several: the shared-memory kernel, one batch group, one tile width,
/// thread count and batch slicing for all of them.
struct LayerLaunch {
  int first_layer = 0;
  std::vector<Plan> layers;          ///< the plan of each layer of the launch
  int blocks() const;                ///< of all the layers
  std::size_t shared_bytes() const;  ///< the most any layer's blocks need
};

/// The launches of the whole network, or fits == false and the reason.
struct NetworkPlan {
  bool fits = false;
  std::string why;
  std::vector<LayerLaunch> launches;
  int layers_per_launch() const;  ///< the most layers of any launch
  /// One line for logs: "2 launches of 2 layers: [J=12 U=43 ...] [J=6 U=86 ...]".
  std::string describe() const;
};

/// Shared memory a block needs for `plan` (the plan's own fields filled in).
std::size_t shared_bytes_for(const Plan& plan, int hidden);

/// The register kernel's plan for `size`, or one with fits == false and the reason (batch too
/// large, or the k slices of H need more than kMaxThreads threads).
Plan make_register_plan(const ProblemSize& size, const DeviceLimits& device, int k_per_lane = 0,
                        InputParts input = InputParts::kAuto);

/// Plans one layer of `size` on `device`. Small batches (B <= kMaxRegisterBatch) get the
/// register kernel where it fits; otherwise it searches the shared-memory kernel's tile widths,
/// thread counts and batch groups, keeps the plans that fit and returns the one with the
/// lowest estimated step time (or one with fits == false and the reason). `request` pins any
/// choice it sets; pinning a tile, threads, groups or rows means the shared-memory kernel.
Plan make_plan(const ProblemSize& size, const DeviceLimits& device,
               const PlanRequest& request = {});

/// Plans one launch of `count` consecutive layers as a wavefront (the first takes its input parts
/// from cuBLAS, the others multiply W_ih by the layer below's h_t on chip): the blocks shared out
/// in proportion to each layer's weights, every layer's weights in shared memory. fits == false
/// and the reason (launch.layers then holds the plan that did not fit) where they do not fit.
NetworkPlan make_wavefront_launch(const ProblemSize& size, const DeviceLimits& device,
                                  const PlanRequest& request, int count);

/// Plans the network: the layers split into launches of as equal sizes as possible, each a
/// wavefront of as many layers as fit on chip (request.layers_per_launch at most); where no two
/// fit, or at L = 1, or where a choice of stage 12 is pinned, one launch per layer with stage
/// 12's plan (make_plan). A pinned layers_per_launch that does not fit is refused, naming the
/// most that fit.
NetworkPlan make_network_plan(const ProblemSize& size, const DeviceLimits& device,
                              const PlanRequest& request = {});

/// The largest H whose weights fit at the other sizes of `size` (for the refusal message).
int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device);

/// Builds a PlanRequest from the stage's flags (empty strings = automatic): `plan` for --plan
/// ("tile,threads,groups,rows", any field 0 or left out = automatic; pins the shared-memory
/// kernel), `weights` for --weights ("registers", "registers,K" with K weights per lane and gate,
/// or "shared"), `input` for --input ("gemm": the register kernel takes its input parts from
/// cuBLAS; "kernel": it computes them itself) and `layers_per_launch` for --layers-per-launch
/// (0 = automatic, else 1 to kMaxLaunchLayers).
/// \throws std::invalid_argument naming the flag for a malformed value or a contradiction.
PlanRequest parse_plan_request(const std::string& plan, const std::string& weights,
                               const std::string& input, int layers_per_launch = 0);

/// The stage's own command-line flags (its executable's --help lists them).
struct StageFlags {
  std::string plan;           ///< --plan tile,threads,groups,rows
  std::string weights;        ///< --weights registers|registers,8|registers,32|shared
  std::string input;          ///< --input gemm|kernel
  int layers_per_launch = 0;  ///< --layers-per-launch N
  bool verbose = false;       ///< --verbose: print the plan
  PlanRequest request;        ///< what plan, weights and input ask for (set when parsing ends)
};

/// Adds the flags of `flags` to `app`; when parsing ends, fills flags.request (a malformed or
/// contradictory value is a usage error naming the flag).
void add_stage_flags(CLI::App& app, StageFlags& flags);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
