/*! \file
 *  \brief The stage's launch plan: how the hidden units, the batch and the work of a step are
 *         spread over the blocks and threads of the persistent kernel, and what fits on chip.
 *
 * Host code only (no GPU needed), so that the CPU tests can check the limits and the plans.
 */
#pragma once

#include <cstddef>
#include <string>

#include "core/problem_size.h"

struct cudaDeviceProp;

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
/// What the device offers, as the plan needs it (read from cudaDeviceProp).
struct DeviceLimits {
  int sm_count = 0;               ///< multiprocessors: one block each
  std::size_t shared_bytes = 0;   ///< opt-in shared memory per block
  std::string name = "this GPU";  ///< for messages
};

/// What the planner may use of `device`: its SM count, and the shared memory a block may ask for
/// dynamically (the opt-in limit less the kernels' static shared memory). Defined in stage.cu.
DeviceLimits device_limits(const cudaDeviceProp& device);

/// One layer's launch plan. Block u owns hidden units u*J .. u*J+J-1 for the batch rows of the
/// launch. Each thread computes a 4 x tile_batch register tile (one unit's four gates x
/// tile_batch batch rows) over a slice of k.
struct Plan {
  bool fits = false;        ///< false: `why` says what does not fit
  std::string why;          ///< the reason a shape does not fit
  int units_per_block = 0;  ///< J
  int unit_blocks = 0;      ///< U = ceil(H / J): the blocks
  int slice_batch = 0;      ///< batch rows per launch (a slice of the batch)
  int padded_batch = 0;     ///< slice_batch rounded up to tile_batch: the columns of staged h
  int slices = 0;           ///< launches per layer, each for slice_batch batch rows
  int tile_batch = 0;       ///< columns of a thread's register tile (4 by this stage's rule)
  int threads = 0;          ///< threads per block
  int lanes_batch = 0;      ///< lanes of a warp along the batch tiles
  int lanes_units = 0;      ///< lanes of a warp along the units
  int phases = 0;           ///< lanes of a warp along k (reduced with shuffles)
  int tile_groups_units = 0, tile_groups_batch = 0;  ///< tile groups (one warp each) of a block
  int k_slices = 0;    ///< warps along k per tile group or per unit (reduced in shared memory)
  int chunk_rows = 0;  ///< rows of h_{t-1} staged per chunk
  int chunks = 0;      ///< chunks per step
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block

  int blocks() const { return unit_blocks; }
};

/// Shared memory a block needs for `plan` (the plan's own fields filled in).
std::size_t shared_bytes_for(const Plan& plan, int hidden);

/// Plans one layer of `size` on `device` by a fixed rule: the 4 x 4 register tile, 256 threads,
/// as many batch rows per launch as fit (or one with fits == false and the reason).
Plan make_plan(const ProblemSize& size, const DeviceLimits& device);

/// The largest H whose weights fit at the other sizes of `size` (for the refusal message).
int largest_hidden_that_fits(const ProblemSize& size, const DeviceLimits& device);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
