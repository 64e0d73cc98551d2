/*! \file stages/training/06_persistent/plan.h
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

namespace CLI {
class App;
}

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// Gates per hidden unit (i, f, g, o).
constexpr int kGates = 4;
/// Lanes per warp.
constexpr int kWarpSize = 32;

/// Forward kernel: threads per block.
constexpr int kForwardThreads = 256;
/// Forward kernel: at most this many threads share one dot product.
constexpr int kMaxKSlices = 32;

/// Backward kernel: threads per block (16 warps).
constexpr int kBackwardThreads = 512;
/// Backward kernel: a warp's lanes, 8 along k (16 bytes of dz each) x 4 batch rows.
constexpr int kLanesK = 8;
constexpr int kLanesRows = kWarpSize / kLanesK;
/// Backward kernel: the most hidden units a block owns (a thread keeps one sum per unit).
constexpr int kMaxUnitsPerBlock = 16;
/// Backward kernel: what the forward kept, per (unit, batch row) and step, that the cell's
/// backward reads: i, f, g, o, c_t, c_{t-1} and the gradient of h_t from above.
constexpr int kStashFloats = 7;

/// What the device offers, as the plans need it (read from cudaDeviceProp).
struct DeviceLimits {
  int sm_count = 0;               ///< multiprocessors: one block each
  std::size_t shared_bytes = 0;   ///< opt-in shared memory per block
  std::string name = "this GPU";  ///< for messages
};

/// Optional choices for experiments and tests; 0 means "let the planner choose".
struct PlanRequest {
  int forward_rows = 0;  ///< forward: batch rows per launch (fewer: more slices)
  int backward_groups =
      0;                  ///< backward: G, blocks that share the units, each for part of the batch
  int backward_rows = 0;  ///< backward: batch rows per block (fewer: more slices)
};

/// The forward kernel's launch of one layer. Block u owns hidden units u*J .. u*J+J-1: their four
/// rows of W_hh stay in its shared memory; a launch computes `rows` batch rows.
struct ForwardPlan {
  int units_per_block = 0;       ///< J = ceil(H / SMs)
  int blocks = 0;                ///< U = ceil(H / J)
  int rows = 0;                  ///< batch rows per launch
  int slices = 0;                ///< launches per layer: ceil(B / rows)
  int k_slices = 0;              ///< S: threads per dot product
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
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
  /// One line for logs: "forward J=4 U=128 rows=64 ... | backward J=16 U=32 G=4 ...".
  std::string describe() const;
};

/// Dynamic shared memory of the forward kernel: W_hh's rows of J units, partial sums, h_{t-1}
/// of `rows` batch rows, c and the biases (the layout of forward_kernel.cuh).
std::size_t forward_shared_bytes(int hidden, int units, int rows, int k_slices);

/// Dynamic shared memory of the backward kernel: W_hh's columns of J units as 4J4 x 4H floats,
/// partial sums, the stash of step t and dc (the layout of backward_kernel.cuh).
std::size_t backward_shared_bytes(int hidden, int units, int rows, int k_slices);

/// The backward kernel's k slices for blocks of `rows` batch rows: its warps over row quads.
int backward_k_slices(int rows);

/// Plans both kernels of `size` on `device` (the backward's batch groups by a small cost model),
/// or returns fits == false and the reason. `request` pins any choice it sets.
Plan make_plan(const ProblemSize& size, const DeviceLimits& device,
               const PlanRequest& request = {});

/// The largest H that fits at the other sizes of `size` (for the refusal message).
int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device);

/// Builds a PlanRequest from the stage's --plan flag: "forward_rows,groups,backward_rows", any
/// field 0 or left out = automatic.
/// \throws std::invalid_argument naming the flag for a malformed value.
PlanRequest parse_plan_request(const std::string& plan);

/// The stage's own command-line flags (its executable's --help lists them).
struct StageFlags {
  std::string plan;      ///< --plan forward_rows,groups,backward_rows
  bool verbose = false;  ///< --verbose: print the plan
  PlanRequest request;   ///< what --plan asks for (set when parsing ends)
};

/// Adds the flags of `flags` to `app`; when parsing ends, fills flags.request (a malformed value
/// is a usage error naming the flag).
void add_stage_flags(CLI::App& app, StageFlags& flags);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
