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

// ---- The forward kernels (forward stage 12's, plan.cpp: make_forward_plan)

/// Most threads per block of the shared-memory kernel: 16 warps, up to 128 registers each
/// without spilling.
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

/// Who computes the register kernel's input parts W_ih · x_t.
enum class InputParts {
  kAuto = 0,  ///< the kernel where the work is small enough to hide (kMaxInputWorkPerLane)
  kGemm,      ///< one cuBLAS GEMM for all steps before the launch
  kKernel     ///< the kernel, while the first loads of h_{t-1} fly (if W_ih fits on chip)
};

/// The register kernel computes the input parts itself where a lane's share of them is at most
/// this many multiply-adds per gate (input rows x batch columns): then they hide in the L2 round
/// trip of the first loads of h_{t-1} (measured on the H100 in forward stage 12: a gain at
/// H = 512, B = 1; a loss at B >= 2 or H = 1024, where the work outlasts the round trip).
constexpr int kMaxInputWorkPerLane = 8;

/// Where a forward block keeps its slice of W_hh for the whole sequence.
enum class WeightHome {
  kAuto = 0,     ///< the planner chooses: registers for small batches, where they fit
  kRegisters,    ///< the small-batch kernel: each thread holds 4 x k_per_lane weights
  kSharedMemory  ///< the general kernel: the slice in shared memory, register-tiled product
};

// ---- The backward kernel (plan.cpp: plan_backward)

/// Backward kernel: threads per block (16 warps).
constexpr int kBackwardThreads = 512;
/// Backward kernel: a warp's lanes, 8 along k (16 bytes of dz each) x 4 batch rows; for one or
/// two batch rows 32 x 1 or 16 x 2, so that every lane works (backward_lanes_rows).
constexpr int kLanesRows = 4;
/// Backward kernel: the most batch rows per block (a warp keeps the sums of one row group).
constexpr int kMaxBackwardRows = kBackwardThreads / kWarpSize * kLanesRows;
/// Backward kernel: float4 registers a thread carries dz through, from L2 to shared memory, per
/// chunk.
constexpr int kStageRegistersDz = 8;
/// Backward kernel: the most hidden units a block owns (a thread keeps one sum per unit).
constexpr int kMaxUnitsPerBlock = 16;
/// Backward kernel: what the forward kept, per (unit, batch row) and step, that the cell's
/// backward reads: i, f, g, o, c_t, c_{t-1} and the gradient of h_t from above.
constexpr int kStashFloats = 7;
/// Backward kernel: steps of the stash in shared memory (step t's factors, step t - 1's copies).
constexpr int kStashSteps = 2;
/// Backward kernel: the most float4 of dz a lane loads for its product when it reads dz straight
/// from L2 (one chunk of all 4H gate rows), not through shared memory. One: with 2 and 8 a lane
/// the step was slower than with dz staged (README.md).
constexpr int kDirectFloat4 = 1;

/// What the device offers, as the plans need it (read from cudaDeviceProp).
struct DeviceLimits {
  int sm_count = 0;               ///< multiprocessors: one block each
  std::size_t shared_bytes = 0;   ///< opt-in shared memory per block
  std::string name = "this GPU";  ///< for messages
};

/// What the planner may use of `device`: its SM count, and the shared memory a block may ask for
/// dynamically (the opt-in limit less the kernels' static shared memory). Defined in stage.cu.
DeviceLimits device_limits(const cudaDeviceProp& device);

/// Optional choices for experiments and tests; 0 means "let the planner choose".
struct PlanRequest {
  // The forward (forward stage 12's choices):
  int tile_batch = 0;    ///< batch columns of a thread's register tile: 4, 8 or 16
  int threads = 0;       ///< threads per block: a multiple of 32, 64 to 512
  int batch_groups = 0;  ///< G: blocks that split the batch of one launch
  int group_batch = 0;   ///< rows of the batch per block (forces batch slices if small)
  WeightHome weights = WeightHome::kAuto;  ///< which kernel (pinning tile..rows means shared)
  int k_per_lane = 0;  ///< register kernel: weights per lane and gate, one of kRegisterKPerLane
  InputParts input = InputParts::kAuto;  ///< register kernel: who computes W_ih · x_t
  // The backward:
  int backward_groups = 0;  ///< G, blocks that share the units, each for part of the batch
  int backward_rows = 0;    ///< batch rows per block (fewer: more slices)
  /// The backward: gate rows of dz staged per chunk (a multiple of 4).
  int backward_chunk_rows = 0;

  /// Whether a choice only the forward's shared-memory kernel has is pinned (tile, threads,
  /// groups, rows).
  bool pins_shared_plan() const { return tile_batch || threads || batch_groups || group_batch; }
};

/// The forward's launch plan of one layer (forward stage 12's Plan). Block (u, g) owns hidden
/// units u*J .. u*J+J-1 for the batch rows of group g.
///
/// Shared-memory kernel (weights_in_registers == false): each thread computes a 4 x tile_batch
/// register tile (one unit's four gates x tile_batch batch rows) over a slice of k.
///
/// Register kernel (weights_in_registers == true; one batch group, B <= kMaxRegisterBatch):
/// lane l of a warp works for unit l / phases of the block (lanes_units = J rounded up to a
/// power of two) and k lane l % phases; warp w for slice w of k. The lane holds the four gates'
/// weights at k = w * phases * k_per_lane + i * phases + l % phases, i < k_per_lane, in
/// registers for the whole sequence. tile_batch = padded_batch = B rounded up to 1, 2, 4 or 8.
struct ForwardPlan {
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
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  double cost = 0;  ///< the planner's estimate of one layer (all slices, T steps), SM clocks

  int blocks() const { return unit_blocks * batch_groups; }
  /// One line for logs: "weights=shared J=4 U=128 G=1 Bg=64 tile=4x8 threads=256 ...".
  std::string describe() const;
};

/// The backward kernel's launch of one layer. Block (u, g) owns hidden units u*J .. u*J+J-1 for
/// the batch rows of group g: the columns of W_hh of its units (all 4H rows) stay in its shared
/// memory; it reads all of dz_t for its rows.
struct BackwardPlan {
  int units_per_block = 0;       ///< J = ceil(H / (SMs / G)), at most kMaxUnitsPerBlock
  int unit_quads = 0;            ///< ceil(J / 4): the units in float4 groups
  int unit_blocks = 0;           ///< U = ceil(H / J)
  int batch_groups = 0;          ///< G: blocks = U * G
  int group_rows = 0;            ///< Bg: batch rows per block
  int slices = 0;                ///< launches per layer: ceil(B / (G * Bg))
  int k_slices = 0;              ///< S: warps that share one row quad's dot products
  int lanes_rows = 0;            ///< batch rows of a warp's lanes: 1, 2 or 4
  int stage_threads = 0;         ///< threads that stage one batch row of dz: 512 / pow2 >= Bg
  int chunk_rows = 0;            ///< gate rows of dz per chunk (a multiple of 4; the last: fewer)
  int chunks = 0;                ///< chunks of dz per step: ceil(4H / chunk_rows)
  int direct_float4 = 0;         ///< float4 of dz a lane loads itself (1; 0: staged)
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  double cost = 0;               ///< the planner's estimate of one layer, SM clocks

  int blocks() const { return unit_blocks * batch_groups; }
};

/// Both kernels' plans for one problem size; fits == false: `why` says what does not fit.
struct Plan {
  bool fits = false;
  std::string why;
  ForwardPlan forward;
  BackwardPlan backward;
  /// One line for logs: "forward weights=registers J=4 ... | backward J=16 U=32 G=4 ...".
  std::string describe() const;
};

/// Shared memory a forward block needs for `plan` (the plan's own fields filled in): the layout
/// of kernel_registers.cuh or kernel.cuh.
std::size_t forward_shared_bytes(const ForwardPlan& plan, int hidden);

/// Dynamic shared memory of the backward kernel: W_hh's columns of J units as 4J4 x 4H floats,
/// two chunks of dz (chunk_rows gate rows x `rows`; one where a chunk holds all 4H rows),
/// partial sums, the stash of two steps and dc (the layout of backward_kernel.cuh).
std::size_t backward_shared_bytes(int hidden, int units, int rows, int k_slices, int chunk_rows);

/// The backward kernel's lanes along the batch for blocks of `rows` batch rows: 1, 2 or 4.
int backward_lanes_rows(int rows);

/// The float4 of dz each lane of the backward loads, polls and multiplies itself, with no staging
/// in shared memory (the kernel's instantiation), where one chunk holds all 4H gate rows and a
/// lane's share of a batch row, ceil(H / (lanes along k x k slices)) float4, is at most
/// kDirectFloat4; else 0: dz is staged.
int dz_direct_float4(const BackwardPlan& plan, int hidden);

/// The backward kernel's k slices for blocks of `rows` batch rows: its warps over row quads.
int backward_k_slices(int rows);

/// The forward's register kernel plan for `size`, or one with fits == false and the reason
/// (batch too large, or the k slices of H need more than kMaxRegisterThreads threads).
ForwardPlan make_register_plan(const ProblemSize& size, const DeviceLimits& device,
                               int k_per_lane = 0, InputParts input = InputParts::kAuto);

/// Plans the forward of one layer (forward stage 12's planner): small batches
/// (B <= kMaxRegisterBatch) get the register kernel where it fits; otherwise it searches the
/// shared-memory kernel's tile widths, thread counts and batch groups and returns the plan with
/// the lowest estimated time (or one with fits == false and the reason). `request` pins any
/// forward choice it sets; pinning a tile, threads, groups or rows means the shared-memory kernel.
ForwardPlan make_forward_plan(const ProblemSize& size, const DeviceLimits& device,
                              const PlanRequest& request = {});

/// Plans both kernels of `size` on `device` (the backward's batch groups by a small cost model),
/// or returns fits == false and the reason. `request` pins any choice it sets.
Plan make_plan(const ProblemSize& size, const DeviceLimits& device,
               const PlanRequest& request = {});

/// The largest H that fits at the other sizes of `size` (for the refusal message).
int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device);

/// Builds a PlanRequest from the stage's flags (empty strings = automatic): `plan` for --plan
/// ("tile,threads,groups,rows,backward_groups,backward_rows,backward_chunk", any field 0 or left
/// out = automatic; the first four pin the forward's shared-memory kernel as forward stage 12's
/// --plan does, the last three the backward), `weights` for --weights ("registers", "registers,K"
/// with K weights per lane and gate, or "shared": the forward's kernel) and `input` for --input
/// ("gemm": the register kernel takes its input parts from cuBLAS; "kernel": it computes them).
/// \throws std::invalid_argument naming the flag for a malformed value or a contradiction.
PlanRequest parse_plan_request(const std::string& plan, const std::string& weights = "",
                               const std::string& input = "");

/// The stage's own command-line flags (its executable's --help lists them).
struct StageFlags {
  std::string plan;      ///< --plan tile,threads,groups,rows,backward_groups,backward_rows,BC
  std::string weights;   ///< --weights registers|registers,8|registers,32|shared (the forward)
  std::string input;     ///< --input gemm|kernel (the forward's register kernel)
  bool verbose = false;  ///< --verbose: print the plans
  PlanRequest request;   ///< what plan, weights and input ask for (set when parsing ends)
};

/// Adds the flags of `flags` to `app`; when parsing ends, fills flags.request (a malformed or
/// contradictory value is a usage error naming the flag).
void add_stage_flags(CLI::App& app, StageFlags& flags);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
