// A persistent stage's launch planner (host code, no GPU): what fits on the H100's chip and on
// made-up other ones, what is refused and why, what the stage's flags pin, and the invariants the
// kernels rely on, over many shapes. One source for every stage with a planner (plan.h,
// plan.cpp): tests/CMakeLists.txt compiles it once per stage, in the stage's namespace beside its
// plan.h, and says which parts its planner has:
//   LSTM_PLAN_HAS_REGISTER_KERNEL  the forward's small-batch register kernel (--weights, --input)
//   LSTM_PLAN_HAS_BACKWARD         a backward plan beside the forward's (Plan::forward and
//                                  Plan::backward, --plan's last two fields)
//   LSTM_PLAN_HAS_BACKWARD_CHUNKS  the backward stages dz in chunks of gate rows (--plan's
//                                  seventh field)
//   LSTM_PLAN_HAS_BACKWARD_TILES   the backward's product is register-tiled over the batch rows
//   LSTM_PLAN_HAS_BACKWARD_REGISTERS  the backward's small-batch register kernel
//                                  (--backward-weights)
//   LSTM_PLAN_HAS_PARTIAL_SUMS     the backward publishes partial sums of dh, each block reading
//                                  its own units' (no k slices, no limit on units but room)
//   LSTM_PLAN_HAS_WAVEFRONT        several layers in one launch (make_network_plan,
//                                  --layers-per-launch)
//   LSTM_PLAN_HAS_STASH_AHEAD      the forward stashes two steps ahead (kStashSteps)
//   LSTM_PLAN_HAS_DIRECT_DZ        the backward's lanes read dz directly (dz_direct_float4)
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "flag_test_support.h"
#include "h100_limits.h"
#include "plan.h"

#ifndef LSTM_PLAN_HAS_REGISTER_KERNEL
#define LSTM_PLAN_HAS_REGISTER_KERNEL 0
#endif
#ifndef LSTM_PLAN_HAS_BACKWARD
#define LSTM_PLAN_HAS_BACKWARD 0
#endif
#ifndef LSTM_PLAN_HAS_BACKWARD_CHUNKS
#define LSTM_PLAN_HAS_BACKWARD_CHUNKS 0
#endif
#ifndef LSTM_PLAN_HAS_BACKWARD_TILES
#define LSTM_PLAN_HAS_BACKWARD_TILES 0
#endif
#ifndef LSTM_PLAN_HAS_STASH_AHEAD
#define LSTM_PLAN_HAS_STASH_AHEAD 0
#endif
#ifndef LSTM_PLAN_HAS_DIRECT_DZ
#define LSTM_PLAN_HAS_DIRECT_DZ 0
#endif
#ifndef LSTM_PLAN_HAS_WAVEFRONT
#define LSTM_PLAN_HAS_WAVEFRONT 0
#endif
#ifndef LSTM_PLAN_HAS_BACKWARD_REGISTERS
#define LSTM_PLAN_HAS_BACKWARD_REGISTERS 0
#endif
#ifndef LSTM_PLAN_HAS_PARTIAL_SUMS
#define LSTM_PLAN_HAS_PARTIAL_SUMS 0
#endif

namespace lstm::LSTM_STAGE_NAMESPACE {  // the stage's, as its build names it
namespace {

// ---- Where the planners' interfaces differ

#if LSTM_PLAN_HAS_BACKWARD
/// The forward's plan: a training stage's Plan holds it beside the backward's.
const ForwardPlan& forward_of(const Plan& p) {
  return p.forward;
}
std::size_t forward_bytes(const ForwardPlan& p, int hidden) {
  return forward_shared_bytes(p, hidden);
}
// --plan tile,threads,groups,rows,backward_groups,backward_rows[,backward_chunk]
constexpr int kPlanFields = 6 + LSTM_PLAN_HAS_BACKWARD_CHUNKS;
#else
using ForwardPlan = Plan;  // a forward stage's plan is the forward's
const Plan& forward_of(const Plan& p) {
  return p;
}
std::size_t forward_bytes(const Plan& p, int hidden) {
  return shared_bytes_for(p, hidden);
}
constexpr int kPlanFields = 4;  // --plan tile,threads,groups,rows
#endif

/// Whether the forward keeps W_hh in registers (only a planner with that kernel may say so).
bool in_registers(const ForwardPlan& f) {
#if LSTM_PLAN_HAS_REGISTER_KERNEL
  return f.weights_in_registers;
#else
  (void)f;
  return false;
#endif
}

// ---- Devices, sizes and flags

DeviceLimits chip(int sm_count, std::size_t shared_kib, const char* name) {
  DeviceLimits limits;
  limits.sm_count = sm_count;
  limits.shared_bytes = shared_kib * 1024;
  limits.name = name;
  return limits;
}

DeviceLimits h100() {
  return testing::h100_limits<DeviceLimits>();
}

ProblemSize size_of(int hidden, int batch, int seq_len = 100, int layers = 1) {
  return ProblemSize{hidden, hidden, batch, seq_len, layers};  // I = H
}

/// What the stage's flags ask the planner for, as its executable parses them, e.g.
/// {"--plan", "8,256,2"}. Flags the stage refuses fail the test.
PlanRequest pinned(const std::vector<std::string>& flags) {
  return testing::parse_stage_flags<StageFlags>(flags).request;
}

/// The message with which the stage's flags refuse `flags` ("" where they are accepted).
std::string refusal(const std::vector<std::string>& flags) {
  StageFlags parsed;
  CLI::App app{"stage flags", "stage"};
  add_stage_flags(app, parsed);
  return testing::parse_flags(app, flags);
}

#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
/// The request for the backward's shared-memory kernel: the planner's choice where it has no
/// other, else pinned with --backward-weights shared.
PlanRequest shared_backward() {
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
  return pinned({"--backward-weights", "shared"});
#else
  return {};
#endif
}
#endif

/// --plan with the forward's fields `forward` and, where the planner has one, the backward's.
std::string plan_flag(const std::string& forward, const std::string& backward) {
  return LSTM_PLAN_HAS_BACKWARD ? forward + "," + backward : forward;
}

// ---- What the kernels assume of every plan they are given

void expect_shared_kernel_plan(const ForwardPlan& f, const ProblemSize& s) {
  EXPECT_EQ(f.padded_batch % f.tile_batch, 0);
  EXPECT_GE(f.padded_batch, f.group_batch);
  EXPECT_EQ(f.lanes_batch * f.lanes_units * f.phases, kWarpSize);
  EXPECT_LE(f.tile_groups_units * f.tile_groups_batch * f.k_slices, f.threads / kWarpSize);
  EXPECT_GE(f.tile_groups_units * f.lanes_units, f.units_per_block);
  EXPECT_GE(f.tile_groups_batch * f.lanes_batch * f.tile_batch, f.padded_batch);
  EXPECT_LE(f.chunk_rows * f.padded_batch / 4, kStageRegisters * f.threads);
  EXPECT_GE(f.chunk_rows * f.chunks, s.hidden);
  EXPECT_LE(f.threads, max_threads_for_tile(f.tile_batch));
#if LSTM_PLAN_HAS_REGISTER_KERNEL
  EXPECT_EQ(f.input_k_per_lane, 0);  // the shared-memory kernel's input parts: cuBLAS
#endif
}

#if LSTM_PLAN_HAS_REGISTER_KERNEL
void expect_register_kernel_plan(const ForwardPlan& f, const ProblemSize& s) {
  // One warp per k slice; one launch, one batch group.
  EXPECT_EQ(f.threads, kWarpSize * f.k_slices);
  EXPECT_LE(f.threads, kMaxRegisterThreads);
  EXPECT_EQ(f.lanes_units * f.phases, kWarpSize);
  EXPECT_GE(f.lanes_units, f.units_per_block);                      // a group of lanes per unit
  EXPECT_EQ(f.lanes_units & (f.lanes_units - 1), 0);                // a power of two
  EXPECT_GE(f.k_slices * f.phases * f.k_per_lane, s.hidden);        // every k is multiplied
  EXPECT_LT((f.k_slices - 1) * f.phases * f.k_per_lane, s.hidden);  // and no slice is empty
  EXPECT_LE(f.units_per_block * f.tile_batch, f.threads);           // a thread per cell update
  EXPECT_EQ(f.batch_groups, 1);
  EXPECT_EQ(f.slices, 1);
  EXPECT_EQ(f.group_batch, s.batch);
  EXPECT_EQ(f.padded_batch, f.tile_batch);
  EXPECT_GE(f.tile_batch, s.batch);
  EXPECT_LE(f.tile_batch, kMaxRegisterBatch);
  EXPECT_EQ(f.tile_batch & (f.tile_batch - 1), 0);  // 1, 2, 4 or 8
  // The input rows of a kernel that computes the input parts cover every layer's I.
  if (f.input_k_per_lane > 0) {
    EXPECT_GE(f.input_k_per_lane * f.k_slices * f.phases, s.input_size);
    if (s.layers > 1) {
      EXPECT_GE(f.input_k_per_lane * f.k_slices * f.phases, s.hidden);
    }
  }
}
#endif

#if LSTM_PLAN_HAS_BACKWARD
/// The backward kernel's shared memory for plan `b` (with its chunks of dz, where it has them).
std::size_t backward_bytes(const BackwardPlan& b, int hidden) {
#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
  return backward_shared_bytes(hidden, b.units_per_block, b.group_rows, b.k_slices, b.chunk_rows);
#elif LSTM_PLAN_HAS_PARTIAL_SUMS
  return backward_shared_bytes(hidden, b.units_per_block, b.group_rows);
#else
  return backward_shared_bytes(hidden, b.units_per_block, b.group_rows, b.k_slices);
#endif
}

#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
/// What the backward's register kernel assumes: one launch of one batch group of at most 8
/// rows; every gate row of dz covered by the threads' row quads, none of them empty; the block's
/// units in at most kMaxBackwardUnitQuads float4; its shared memory.
void expect_backward_register_plan(const BackwardPlan& b, const ProblemSize& s,
                                   const DeviceLimits& device) {
  EXPECT_LE(b.blocks(), device.sm_count);
  EXPECT_EQ(b.threads, kBackwardRegisterThreads);
  EXPECT_EQ(b.batch_groups, 1);
  EXPECT_EQ(b.slices, 1);
  EXPECT_EQ(b.group_rows, s.batch);
  EXPECT_LE(b.group_rows, kMaxRegisterBatch);
  EXPECT_EQ(b.unit_quads, ceil_div(b.units_per_block, 4));
  EXPECT_LE(b.unit_quads, kMaxBackwardUnitQuads);
  EXPECT_GE(b.units_per_block * b.unit_blocks, s.hidden);
  EXPECT_LT(b.units_per_block * (b.unit_blocks - 1), s.hidden);
  EXPECT_GE(b.row_quads * kBackwardRegisterThreads, s.hidden);  // every float4 of gate rows
  EXPECT_LT((b.row_quads - 1) * kBackwardRegisterThreads, s.hidden);
  EXPECT_LE(b.row_quads, kMaxBackwardRowQuads);
  EXPECT_EQ(b.chunks, 1);
  EXPECT_EQ(b.chunk_rows, kGates * s.hidden);
  EXPECT_EQ(b.shared_bytes, backward_register_shared_bytes(s.hidden, b.units_per_block, s.batch));
  EXPECT_LE(b.shared_bytes, device.shared_bytes);
}
#endif

void expect_backward_plan(const BackwardPlan& b, const ProblemSize& s, const DeviceLimits& device) {
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
  if (b.weights_in_registers) {
    expect_backward_register_plan(b, s, device);
    return;
  }
  EXPECT_EQ(b.threads, kBackwardThreads);
#endif
  EXPECT_LE(b.blocks(), device.sm_count);
  EXPECT_GE(b.units_per_block * b.unit_blocks, s.hidden);
  EXPECT_LT(b.units_per_block * (b.unit_blocks - 1), s.hidden);
  EXPECT_GE(b.group_rows, 1);
  EXPECT_EQ(b.slices, ceil_div(s.batch, b.batch_groups * b.group_rows));
#if LSTM_PLAN_HAS_PARTIAL_SUMS
  // The gather: L threads per pair within the block (or one per pair past 512 pairs), at most one
  // per unit block; Q lanes a power of two, at most L and 32.
  const int pairs = b.units_per_block * b.group_rows, L = b.gather_lanes, Q = b.sum_lanes;
  EXPECT_EQ(L, backward_gather_lanes(b.units_per_block, b.group_rows, b.unit_blocks));
  EXPECT_GE(L, 1);
  EXPECT_LE(L, b.unit_blocks);
  EXPECT_TRUE(L * pairs <= kBackwardThreads || L == 1);
  EXPECT_EQ(Q & (Q - 1), 0);
  EXPECT_LE(Q, std::min(L, kWarpSize));
  EXPECT_GT(2 * Q, std::min(L, kWarpSize));
  EXPECT_LE(b.group_rows, kMaxBackwardRows);
  EXPECT_EQ(b.shared_bytes, backward_bytes(b, s.hidden));
  EXPECT_LE(b.shared_bytes, device.shared_bytes);
#else
  EXPECT_LE(b.units_per_block, kMaxUnitsPerBlock);  // the kernel's sums per thread
  EXPECT_EQ(b.unit_quads, ceil_div(b.units_per_block, 4));
  EXPECT_EQ(b.k_slices, backward_k_slices(b.group_rows));
  // The warps of a block cover its row quads, k slices each (or one slice, several quads each).
#if LSTM_PLAN_HAS_BACKWARD_TILES  // a warp's lanes cover 4 tiles of tile_rows rows each
  EXPECT_EQ(b.tile_rows, backward_tile_rows(b.group_rows));
  const int span = kLanesRows * b.tile_rows;
#else
  const int span = kLanesRows;
#endif
  const int warps = kBackwardThreads / kWarpSize, quads = ceil_div(b.group_rows, span);
  EXPECT_TRUE(quads * b.k_slices <= warps || b.k_slices == 1);
  EXPECT_EQ(b.shared_bytes, backward_bytes(b, s.hidden));
  EXPECT_LE(b.shared_bytes, device.shared_bytes);
#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
  // One row group per warp at most (its sums stay in registers over the chunks); the chunks
  // cover the 4H gate rows, whole float4, the last one not empty; a thread carries its share.
  EXPECT_LE(b.group_rows, kMaxBackwardRows);
  EXPECT_EQ(b.lanes_rows, backward_lanes_rows(b.group_rows));
  EXPECT_LE(ceil_div(b.group_rows, b.lanes_rows * span / kLanesRows) * b.k_slices, warps);
  EXPECT_GE(b.stage_threads * b.group_rows, kBackwardThreads / 2 + 1);  // 512 / pow2 >= rows
  EXPECT_LE(b.stage_threads * b.group_rows, kBackwardThreads);
  EXPECT_EQ(b.chunk_rows % 4, 0);
  EXPECT_GE(b.chunk_rows, 4);
  EXPECT_LE(b.chunk_rows, kGates * s.hidden);
  EXPECT_EQ(b.chunks, ceil_div(kGates * s.hidden, b.chunk_rows));
  EXPECT_LE(b.chunk_rows / 4, kStageRegistersDz * b.stage_threads);
#endif
#endif  // LSTM_PLAN_HAS_PARTIAL_SUMS
}
#endif

/// A plan that fits: all its blocks resident at once (one per SM), every hidden unit and batch
/// row covered, no more shared memory than `device` offers, and what each kernel assumes.
void expect_consistent(const Plan& p, const ProblemSize& s, const DeviceLimits& device) {
  SCOPED_TRACE(s.describe() + " on " + device.name + ": " + p.describe());
  ASSERT_TRUE(p.fits) << p.why;
  const ForwardPlan& f = forward_of(p);
  ASSERT_TRUE(f.fits) << f.why;
  EXPECT_LE(f.blocks(), device.sm_count);
  EXPECT_GE(f.units_per_block * f.unit_blocks, s.hidden);               // every unit has an owner
  EXPECT_LT(f.units_per_block * (f.unit_blocks - 1), s.hidden);         // and no block is empty
  EXPECT_GE(f.slices * f.batch_groups * f.group_batch, s.batch);        // every batch row runs
  EXPECT_LT((f.slices - 1) * f.batch_groups * f.group_batch, s.batch);  // no slice is empty
  EXPECT_EQ(f.shared_bytes, forward_bytes(f, s.hidden));
  EXPECT_LE(f.shared_bytes, device.shared_bytes);
#if LSTM_PLAN_HAS_REGISTER_KERNEL
  if (f.weights_in_registers) {
    expect_register_kernel_plan(f, s);
  } else {
    expect_shared_kernel_plan(f, s);
  }
#else
  expect_shared_kernel_plan(f, s);
#endif
#if LSTM_PLAN_HAS_BACKWARD
  expect_backward_plan(p.backward, s, device);
#endif
}

// ---- Every planner

TEST(Plan, SharedMemoryIsTheKernelsLayout) {
  // kernel.cuh: w [H][J] float4 | h [2][chunk_rows][Bp] | sums [S][J][4][Bp] |
  // input parts [J][Bp][4] | c [J][Bp] | biases [J][4]
  ForwardPlan shared;
  shared.units_per_block = 4;
  shared.padded_batch = 64;
  shared.chunk_rows = 100;
  shared.k_slices = 2;
  EXPECT_EQ(forward_bytes(shared, 512),
            (16u * 512 + 2 * 100 * 64 + 2 * 16 * 64 + 16 * 64 + 4 * 64 + 16) * sizeof(float));
#if LSTM_PLAN_HAS_REGISTER_KERNEL
  // kernel_registers.cuh: W_ih [S][k'][32] float4 | x [2][S][lanes_k * k'][Bt] |
  // h [S * lanes_k * K][Bt] | sums [2][S][lanes_units][4 Bt] | input parts [J * Bt][4] | biases
  ForwardPlan registers;
  registers.weights_in_registers = true;
  registers.units_per_block = 4;
  registers.lanes_units = 4;
  registers.phases = 8;
  registers.k_per_lane = 8;
  registers.k_slices = 8;
  registers.tile_batch = 1;
  registers.input_k_per_lane = 8;
  EXPECT_EQ(
      forward_bytes(registers, 512),
      (8u * 8 * 32 * 4 + 2 * 8 * 8 * 8 * 1 + 512 * 1 + 2 * 8 * 4 * 4 + 4 * 4 + 16) * sizeof(float));
#endif
#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
  // backward_kernel.cuh: w [4 * J4][H] float4 | dz [2][Bg][chunk / 4] float4 (one buffer for
  // one chunk of all 4H rows) | sums [S][Bg][J4] float4 | stash [steps][J * Bg][7] | dc
#if LSTM_PLAN_HAS_STASH_AHEAD
  constexpr unsigned steps = 2;  // training 16: the stash of two steps
#else
  constexpr unsigned steps = 1;
#endif
  EXPECT_EQ(backward_shared_bytes(512, 16, 16, 4, 696),
            (16u * 512 * 4 + 2 * 696 * 16 + 4 * 4 * 4 * 16 + steps * 7 * 16 * 16 + 16 * 16) *
                sizeof(float));
  EXPECT_EQ(
      backward_shared_bytes(100, 5, 3, 16, 200),  // J = 5: two float4 of units
      (16u * 100 * 2 + 2 * 200 * 3 + 4 * 2 * 16 * 3 + steps * 7 * 5 * 3 + 5 * 3) * sizeof(float));
  EXPECT_EQ(backward_shared_bytes(100, 5, 3, 16, 400),  // all 400 gate rows: one buffer
            (16u * 100 * 2 + 400 * 3 + 4 * 2 * 16 * 3 + steps * 7 * 5 * 3 + 5 * 3) * sizeof(float));
  EXPECT_EQ(backward_lanes_rows(1), 1);
  EXPECT_EQ(backward_lanes_rows(2), 2);
  EXPECT_EQ(backward_lanes_rows(3), 4);
  EXPECT_EQ(backward_lanes_rows(64), 4);
#elif LSTM_PLAN_HAS_PARTIAL_SUMS
  // backward_kernel.cuh: w [4J][H] | dz [4J][Bg8] | sums [max(512, P)] | dh [P] | stash [P][7] |
  // dc [P], P = J * Bg pairs
  EXPECT_EQ(backward_shared_bytes(512, 4, 1),
            (16u * 512 + 16 * 8 + 512 + 4 + 7 * 4 + 4) * sizeof(float));
  EXPECT_EQ(backward_shared_bytes(100, 5, 130),  // 650 pairs: more sums than threads
            (20u * 100 + 20 * 136 + 650 + 650 + 7 * 650 + 650) * sizeof(float));
  EXPECT_EQ(backward_gather_lanes(4, 1, 128), 128);  // H = 512, B = 1: one thread per block
  EXPECT_EQ(backward_gather_lanes(8, 4, 128), 16);
  EXPECT_EQ(backward_gather_lanes(16, 64, 32), 1);
#elif LSTM_PLAN_HAS_BACKWARD
  // backward_kernel.cuh: w [4 * J4][H] float4 | sums [S][Bg][J4] float4 | stash [J * Bg][7] | dc
  EXPECT_EQ(backward_shared_bytes(512, 16, 16, 4),
            (16u * 512 * 4 + 4 * 4 * 4 * 16 + 7 * 16 * 16 + 16 * 16) * sizeof(float));
  EXPECT_EQ(backward_shared_bytes(100, 5, 3, 16),  // J = 5: two float4 of units, zeros past 5
            (16u * 100 * 2 + 4 * 2 * 16 * 3 + 7 * 5 * 3 + 5 * 3) * sizeof(float));
#endif
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
  // backward_registers.cuh: dz [B][H] float4 | sums [8 warps][8 rows][4 * J4] | stash [J * B][7]
  // | dc [J * B]
  EXPECT_EQ(backward_register_shared_bytes(1024, 8, 4),
            (4u * 4 * 1024 + 8 * 8 * 8 + 7 * 8 * 4 + 8 * 4) * sizeof(float));
  EXPECT_EQ(backward_register_shared_bytes(130, 1, 3),  // one unit: a float4 of units
            (4u * 3 * 130 + 8 * 8 * 4 + 7 * 1 * 3 + 1 * 3) * sizeof(float));
#endif
#if LSTM_PLAN_HAS_BACKWARD_TILES
  // Tiles of kTileRows (2) rows from 5 rows per block: a warp's 4 row lanes cover 8 rows.
  EXPECT_EQ(backward_tile_rows(1), 1);
  EXPECT_EQ(backward_tile_rows(4), 1);
  EXPECT_EQ(backward_tile_rows(5), kTileRows);
  EXPECT_EQ(backward_tile_rows(64), kTileRows);
  EXPECT_EQ(backward_k_slices(1), 16);
  EXPECT_EQ(backward_k_slices(4), 16);
  EXPECT_EQ(backward_k_slices(5), 16);
  EXPECT_EQ(backward_k_slices(17), 5);
  EXPECT_EQ(backward_k_slices(64), 2);
#elif LSTM_PLAN_HAS_BACKWARD && !LSTM_PLAN_HAS_PARTIAL_SUMS
  EXPECT_EQ(backward_k_slices(1), 16);
  EXPECT_EQ(backward_k_slices(5), 8);
  EXPECT_EQ(backward_k_slices(64), 1);
  EXPECT_EQ(backward_k_slices(100), 1);
#endif
}

TEST(Plan, CanonicalConfigRunsOneLaunchPerLayer) {
  const ProblemSize s = size_of(512, 64, 100, 4);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_EQ(forward_of(p).slices, 1);
#if LSTM_PLAN_HAS_BACKWARD
  EXPECT_EQ(p.backward.slices, 1);
  // Every block reads all of dz_t for its rows: batch groups cut that traffic (README.md).
  EXPECT_GT(p.backward.batch_groups, 1);
#endif
}

TEST(Plan, SmallBatchesUseEverySm) {
  for (int hidden : {512, 1024}) {
    const ProblemSize s = size_of(hidden, 1);
    const Plan p = make_plan(s, h100());
    expect_consistent(p, s, h100());
    EXPECT_GT(forward_of(p).blocks(), 100) << hidden;
#if LSTM_PLAN_HAS_BACKWARD
    EXPECT_EQ(p.backward.batch_groups, 1);
    EXPECT_GT(p.backward.blocks(), 100) << hidden;
#endif
  }
}

TEST(Plan, EveryShapeOfTheSweepsFits) {
  for (int hidden : {256, 512, 1024}) {
    for (int batch : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      const ProblemSize s = size_of(hidden, batch);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Plan, OddShapesAreConsistent) {
  // 1196: near the largest H a forward fits; a training stage's backward fits less.
  const int near_the_limit = LSTM_PLAN_HAS_BACKWARD ? 1000 : 1196;
  for (int hidden : {1, 3, 33, 37, 200, 257, 301, near_the_limit}) {
    for (int batch : {1, 3, 5, 7, 130, 1000, 5000}) {
      const ProblemSize s = size_of(hidden, batch, 7);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Plan, OnOtherChipsAPlanFitsThatChipOrIsRefusedWithTheReason) {
  // Made-up chips between an L4-like and an H100-like one: whatever the planner accepts fits the
  // chip's SMs and shared memory; the largest H it names fits, the next does not.
  for (const DeviceLimits& device :
       {chip(16, 100, "16 SMs, 100 KiB"), chip(58, 99, "58 SMs, 99 KiB"),
        chip(108, 163, "108 SMs, 163 KiB"), chip(132, 227, "132 SMs, 227 KiB")}) {
    for (int hidden : {1, 37, 200, 513, 1000}) {
      for (int batch : {1, 3, 9, 64, 130}) {
        const ProblemSize s = size_of(hidden, batch, 7, 2);
        const Plan p = make_plan(s, device);
        if (p.fits) {
          expect_consistent(p, s, device);
        } else {
          EXPECT_FALSE(p.why.empty()) << s.describe() << " on " << device.name;
        }
      }
    }
    const ProblemSize s = size_of(4000, 9, 7, 2);
    const int largest = largest_hidden_that_fits(s, device);
    ASSERT_GT(largest, 0) << device.name;
    expect_consistent(make_plan(size_of(largest, 9, 7, 2), device), size_of(largest, 9, 7, 2),
                      device);
    EXPECT_FALSE(make_plan(size_of(largest + 1, 9, 7, 2), device).fits) << device.name;
  }
}

TEST(Plan, LargeBatchesRunInSlices) {
  const ProblemSize s = size_of(1024, 5000);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_GT(forward_of(p).slices, 1);
  EXPECT_FALSE(in_registers(forward_of(p)));
#if LSTM_PLAN_HAS_BACKWARD
  EXPECT_GT(p.backward.slices, 1);
#endif
}

TEST(Plan, TooLargeHiddenIsRefusedWithTheReasonAndTheLimit) {
  const ProblemSize s = size_of(2048, 64, 100, 4);
  const Plan p = make_plan(s, h100());
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("shared memory"), std::string::npos) << p.why;
  const int largest = largest_hidden_that_fits(s, h100());
  EXPECT_GE(largest, 1024);
  EXPECT_LT(largest, 2048);
  EXPECT_TRUE(make_plan(size_of(largest, 64), h100()).fits);
  EXPECT_FALSE(make_plan(size_of(largest + 1, 64), h100()).fits);
}

TEST(Plan, ASmallerChipFitsLess) {
  const DeviceLimits small = chip(16, 100, "a small GPU");
  EXPECT_FALSE(make_plan(size_of(1024, 4), small).fits);
  const int largest = largest_hidden_that_fits(size_of(1024, 4), small);
  EXPECT_GT(largest, 0);
  EXPECT_LT(largest, largest_hidden_that_fits(size_of(1024, 4), h100()));
  expect_consistent(make_plan(size_of(largest, 4), small), size_of(largest, 4), small);
}

TEST(Plan, TheFlagsPinTheChoices) {
  const ProblemSize s = size_of(130, 10, 5);
  const Plan p = make_plan(s, h100(), pinned({"--plan", plan_flag("8,128,2,3", "2,3")}));
  expect_consistent(p, s, h100());
  const ForwardPlan& f = forward_of(p);
  EXPECT_FALSE(in_registers(f));  // a pinned tile, threads, groups or rows: the shared kernel
  EXPECT_EQ(f.tile_batch, 8);
  EXPECT_EQ(f.threads, 128);
  EXPECT_EQ(f.batch_groups, 2);
  EXPECT_EQ(f.group_batch, 3);
  EXPECT_EQ(f.slices, 2);  // 10 rows, 2 groups of 3 per launch
#if LSTM_PLAN_HAS_BACKWARD
  EXPECT_EQ(p.backward.batch_groups, 2);
  EXPECT_EQ(p.backward.group_rows, 3);
  EXPECT_EQ(p.backward.slices, 2);  // 10 rows, 2 groups of 3 per launch
  // The forward pinned alone: 10 rows in 2 groups of 2, 3 slices; the backward chooses.
  const Plan q = make_plan(s, h100(), pinned({"--plan", "8,128,2,2"}));
  expect_consistent(q, s, h100());
  EXPECT_EQ(q.forward.slices, 3);
#endif
}

TEST(Plan, SmallStagingForcesSeveralChunks) {
  const ProblemSize s = size_of(300, 64, 6);
  const Plan p = make_plan(s, h100(), pinned({"--plan", "8,64,1"}));
  expect_consistent(p, s, h100());
  EXPECT_GT(forward_of(p).chunks, 2);
}

TEST(Plan, APinnedPlanThatDoesNotFitIsRefusedNotReplaced) {
  // 8 units x 64 rows in 4-wide tiles need 4 warps of tiles, not the 2 of 64 threads.
  const Plan p = make_plan(size_of(1024, 64), h100(), pinned({"--plan", "4,64,0,64"}));
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("warps of register tiles"), std::string::npos) << p.why;
#if LSTM_PLAN_HAS_BACKWARD
  // H = 1024 in 33 blocks per group: 32 units each.
  const Plan q = make_plan(size_of(1024, 8), h100(), pinned({"--plan", "0,0,0,0,4"}));
  EXPECT_FALSE(q.fits);
  EXPECT_NE(q.why.find(LSTM_PLAN_HAS_PARTIAL_SUMS ? "shared memory" : "more than the kernel's 16"),
            std::string::npos)
      << q.why;
#endif
}

TEST(Plan, TheFlagsAreParsedOrRefusedNamingTheFlag) {
  PlanRequest r = pinned({"--plan", "8,256,2"});
  EXPECT_EQ(r.tile_batch, 8);
  EXPECT_EQ(r.threads, 256);
  EXPECT_EQ(r.batch_groups, 2);
  EXPECT_EQ(r.group_batch, 0);
  EXPECT_EQ(pinned({"--plan", "8,,2"}).batch_groups, 2);  // an empty field is automatic
  EXPECT_EQ(pinned({"--plan", "4"}).tile_batch, 4);
  r = pinned({});
  EXPECT_EQ(r.tile_batch, 0);
  EXPECT_EQ(r.threads, 0);
  EXPECT_EQ(r.batch_groups, 0);
  EXPECT_EQ(r.group_batch, 0);
  EXPECT_TRUE(testing::parse_stage_flags<StageFlags>({"--verbose"}).verbose);
  // As many fields as the planner has are accepted; one more is refused.
  std::string all_fields = "4";
  for (int i = 1; i < kPlanFields; ++i)
    all_fields += ",0";
  EXPECT_EQ(pinned({"--plan", all_fields}).tile_batch, 4);
  const std::vector<std::string> bad_plans = {"x", "8,abc", "4,y",    "-1",      "1.5",
                                              "5", "8,100", "4,1024", "8,256,x", all_fields + ",1"};
  for (const std::string& bad : bad_plans) {
    const std::string why = refusal({"--plan", bad});
    EXPECT_NE(why.find("--plan"), std::string::npos) << bad << ": " << why;
  }
  EXPECT_NE(refusal({"--bogus", "3"}).find("--bogus"), std::string::npos);
}

#if LSTM_PLAN_HAS_REGISTER_KERNEL
// ---- The forward's register kernel (small batches)

TEST(Plan, SmallBatchesKeepTheForwardsWeightsInRegisters) {
  // H = 512, B = 1: 128 blocks x 4 units, 8 weights per lane and gate, 256 threads, the input
  // parts computed in the kernel.
  const ProblemSize s512 = size_of(512, 1);
  const Plan p512 = make_plan(s512, h100());
  expect_consistent(p512, s512, h100());
  const ForwardPlan& f512 = forward_of(p512);
  EXPECT_TRUE(f512.weights_in_registers);
  EXPECT_EQ(f512.units_per_block, 4);
  EXPECT_EQ(f512.k_per_lane, 8);
  EXPECT_EQ(f512.threads, 256);
  EXPECT_EQ(f512.tile_batch, 1);
  EXPECT_EQ(f512.input_k_per_lane * f512.k_slices * f512.phases, 512);
  // H = 1024, B = 4: 32 weights per lane (8 would need 1024 threads), input parts from cuBLAS.
  const ProblemSize s1024 = size_of(1024, 4);
  const Plan p1024 = make_plan(s1024, h100());
  expect_consistent(p1024, s1024, h100());
  const ForwardPlan& f1024 = forward_of(p1024);
  EXPECT_TRUE(f1024.weights_in_registers);
  EXPECT_EQ(f1024.k_per_lane, 32);
  EXPECT_EQ(f1024.threads, 256);
  EXPECT_EQ(f1024.tile_batch, 4);
  EXPECT_EQ(f1024.input_k_per_lane, 0);
  // B rounds up to 1, 2, 4 or 8; above 8, the shared-memory kernel.
  EXPECT_EQ(forward_of(make_plan(size_of(512, 3), h100())).tile_batch, 4);
  EXPECT_EQ(forward_of(make_plan(size_of(512, 8), h100())).tile_batch, 8);
  EXPECT_FALSE(forward_of(make_plan(size_of(512, 9), h100())).weights_in_registers);
}

TEST(Plan, TheRegisterKernelComputesItsInputPartsWhereTheyHideInARoundTrip) {
  // H = 512, B = 1: 8 input rows per lane, one batch column: the kernel computes them.
  const ForwardPlan p512 = forward_of(make_plan(size_of(512, 1), h100()));
  EXPECT_EQ(p512.input_k_per_lane * p512.k_slices * p512.phases, 512);
  // B = 2 or H = 1024: more work per lane than a round trip hides: cuBLAS.
  EXPECT_EQ(forward_of(make_plan(size_of(512, 2), h100())).input_k_per_lane, 0);
  EXPECT_EQ(forward_of(make_plan(size_of(1024, 1), h100())).input_k_per_lane, 0);
  // Asked for, the kernel does it wherever W_ih fits; the layout takes the largest I of any
  // layer (layer 0's I may differ from H).
  const PlanRequest kernel = pinned({"--input", "kernel"});
  ProblemSize wide = size_of(512, 1, 100, 2);
  wide.input_size = 1024;
  const Plan p_wide = make_plan(wide, h100(), kernel);
  expect_consistent(p_wide, wide, h100());
  const ForwardPlan& f_wide = forward_of(p_wide);
  EXPECT_GE(f_wide.input_k_per_lane * f_wide.k_slices * f_wide.phases, 1024);
  EXPECT_EQ(forward_of(make_plan(wide, h100())).input_k_per_lane, 0);  // automatic: too much work
  ProblemSize narrow = size_of(512, 1, 100, 2);
  narrow.input_size = 10;
  EXPECT_GE(forward_of(make_plan(narrow, h100())).input_k_per_lane * p512.k_slices * p512.phases,
            512);
  // H = 1024, B = 8: W_ih's slice (128 KiB) and two steps of x do not fit even when asked.
  const ProblemSize big = size_of(1024, 8);
  const Plan p_big = make_plan(big, h100(), kernel);
  expect_consistent(p_big, big, h100());
  EXPECT_EQ(forward_of(p_big).input_k_per_lane, 0);
  EXPECT_GT(forward_of(make_plan(size_of(1024, 4), h100(), kernel)).input_k_per_lane, 0);
  // Asking for the GEMM gives it.
  EXPECT_EQ(
      forward_of(make_plan(size_of(512, 1), h100(), pinned({"--input", "gemm"}))).input_k_per_lane,
      0);
}

TEST(Plan, WhereTheRegisterKernelDoesNotFitTheSharedOneRuns) {
  // H = 1100: 9 units (16 lanes), 2 lanes along k: 18 slices of 2 x 32 rows, more than 8 warps.
  const ProblemSize s = size_of(1100, 1);
  const ForwardPlan registers = make_register_plan(s, h100());
  EXPECT_FALSE(registers.fits);
  EXPECT_NE(registers.why.find("warps per block"), std::string::npos) << registers.why;
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_FALSE(forward_of(p).weights_in_registers);
}

TEST(Plan, TheFlagsPinTheForwardsKernelAndItsInputParts) {
  ProblemSize s = size_of(300, 3, 5, 3);  // I != H: the input rows cover both
  s.input_size = 40;
  Plan p = make_plan(s, h100(), pinned({"--weights", "registers,32", "--input", "kernel"}));
  expect_consistent(p, s, h100());
  EXPECT_TRUE(forward_of(p).weights_in_registers);
  EXPECT_EQ(forward_of(p).k_per_lane, 32);
  EXPECT_GT(forward_of(p).input_k_per_lane, 0);
  p = make_plan(s, h100(), pinned({"--weights", "registers,32", "--input", "gemm"}));
  expect_consistent(p, s, h100());
  EXPECT_EQ(forward_of(p).input_k_per_lane, 0);
  EXPECT_EQ(forward_of(make_plan(size_of(512, 1), h100(), pinned({"--weights", "registers,32"})))
                .k_per_lane,
            32);
  // Registers where they cannot hold the batch: refused with the reason, not replaced.
  const Plan refused = make_plan(size_of(512, 16), h100(), pinned({"--weights", "registers"}));
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("batch rows"), std::string::npos) << refused.why;
  // Shared memory asked for, or any of its choices pinned: the shared-memory kernel, at B = 1.
  const ProblemSize b1 = size_of(512, 1);
  p = make_plan(b1, h100(), pinned({"--weights", "shared"}));
  expect_consistent(p, b1, h100());
  EXPECT_FALSE(forward_of(p).weights_in_registers);
  p = make_plan(b1, h100(), pinned({"--plan", "0,128"}));
  expect_consistent(p, b1, h100());
  EXPECT_FALSE(forward_of(p).weights_in_registers);
}

TEST(Plan, TheKernelFlagsAreParsedOrRefusedNamingTheFlag) {
  PlanRequest r = pinned({});
  EXPECT_EQ(r.weights, WeightHome::kAuto);
  EXPECT_EQ(r.input, InputParts::kAuto);
  EXPECT_EQ(pinned({"--weights", "registers"}).weights, WeightHome::kRegisters);
  r = pinned({"--weights", "registers,32"});
  EXPECT_EQ(r.weights, WeightHome::kRegisters);
  EXPECT_EQ(r.k_per_lane, 32);
  EXPECT_EQ(pinned({"--weights", "registers,8"}).k_per_lane, 8);
  EXPECT_EQ(pinned({"--weights", "shared"}).weights, WeightHome::kSharedMemory);
  EXPECT_EQ(pinned({"--input", "gemm"}).input, InputParts::kGemm);
  EXPECT_EQ(pinned({"--input", "kernel"}).input, InputParts::kKernel);
  EXPECT_NE(refusal({"--weights", "registers,16"}).find("--weights"), std::string::npos);
  EXPECT_NE(refusal({"--weights", "smem"}).find("--weights \"smem\""), std::string::npos);
  EXPECT_NE(refusal({"--input", "cublas"}).find("--input \"cublas\""), std::string::npos);
  // Registers with a pinned shared-memory plan contradict each other; shared with one does not.
  const std::string why = refusal({"--plan", "4,256", "--weights", "registers"});
  EXPECT_NE(why.find("--plan pins"), std::string::npos) << why;
  EXPECT_NE(why.find("--weights registers"), std::string::npos) << why;
  EXPECT_EQ(pinned({"--plan", "4,256", "--weights", "shared"}).tile_batch, 4);
}
#endif  // LSTM_PLAN_HAS_REGISTER_KERNEL

#if LSTM_PLAN_HAS_BACKWARD
// ---- The backward's plan

#if !LSTM_PLAN_HAS_PARTIAL_SUMS  // its units per block are limited by shared memory alone
TEST(Plan, AFewSmsGiveMoreUnitsPerBlockOrARefusal) {
  // 8 SMs: H = 100 needs 13 units per block (fits the kernel's 16), H = 200 needs 25 (refused).
  const DeviceLimits device = chip(8, 227, "8 SMs");
  const ProblemSize fits = size_of(100, 5, 7);
  expect_consistent(make_plan(fits, device), fits, device);
  const Plan refused = make_plan(size_of(200, 5, 7), device);
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("more than the kernel's 16"), std::string::npos) << refused.why;
  EXPECT_EQ(largest_hidden_that_fits(size_of(200, 5, 7), device), 8 * kMaxUnitsPerBlock);
}
#endif

TEST(Plan, TheBackwardsFlagsAreParsed) {
  PlanRequest r = pinned({"--plan", "8,256,2,3,4,5"});
  EXPECT_EQ(r.tile_batch, 8);
  EXPECT_EQ(r.threads, 256);
  EXPECT_EQ(r.batch_groups, 2);
  EXPECT_EQ(r.group_batch, 3);
  EXPECT_EQ(r.backward_groups, 4);
  EXPECT_EQ(r.backward_rows, 5);
  r = pinned({"--plan", "0,0,0,0,2"});
  EXPECT_FALSE(r.pins_shared_plan());  // the backward alone
  EXPECT_EQ(r.backward_groups, 2);
  EXPECT_EQ(r.backward_rows, 0);
  EXPECT_EQ(pinned({"--plan", ",,,,,7"}).backward_rows, 7);  // an empty field is automatic
  EXPECT_EQ(pinned({}).backward_groups, 0);
  // The backward's pins go with the forward's register kernel.
  r = pinned({"--plan", "0,0,0,0,2,3", "--weights", "registers,32", "--input", "kernel"});
  EXPECT_EQ(r.weights, WeightHome::kRegisters);
  EXPECT_EQ(r.k_per_lane, 32);
  EXPECT_EQ(r.input, InputParts::kKernel);
  EXPECT_EQ(r.backward_groups, 2);
  const Plan p = make_plan(size_of(512, 4), h100(), r);
  expect_consistent(p, size_of(512, 4), h100());
  EXPECT_EQ(p.forward.k_per_lane, 32);
  EXPECT_EQ(p.backward.batch_groups, 2);
  EXPECT_EQ(p.backward.group_rows, 3);
}
#endif  // LSTM_PLAN_HAS_BACKWARD

#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
// ---- The backward's chunks of dz

TEST(Plan, DzIsStagedInOneChunkWhereItFitsAndInSeveralOtherwise) {
  // H = 512, B = 1: all 2048 gate rows of dz in one chunk (8 KiB, one buffer), beside 32 KiB of
  // W.
  const ProblemSize b1 = size_of(512, 1);
  const Plan p1 = make_plan(b1, h100(), shared_backward());
  expect_consistent(p1, b1, h100());
  EXPECT_EQ(p1.backward.chunks, 1);
  EXPECT_EQ(p1.backward.chunk_rows, 2048);
  EXPECT_EQ(p1.backward.lanes_rows, 1);  // every lane of a warp along k: none idle
  EXPECT_EQ(p1.backward.stage_threads, kBackwardThreads);
  // The canonical config: 16 rows per block and 128 KiB of W: the rest of the 227 KiB holds
  // two chunks of 696 gate rows; three per step, the last one shorter.
  const ProblemSize canonical = size_of(512, 64, 100, 4);
  const Plan p64 = make_plan(canonical, h100());
  expect_consistent(p64, canonical, h100());
  EXPECT_EQ(p64.backward.group_rows, 16);
#if LSTM_PLAN_HAS_BACKWARD_TILES  // tiles of 2 rows: 8 k slices, not 4, and their sums take room
  EXPECT_EQ(p64.backward.tile_rows, 2);
  EXPECT_EQ(p64.backward.k_slices, 8);
  EXPECT_EQ(p64.backward.chunk_rows, 664);
  EXPECT_EQ(p64.backward.chunks, 4);
#elif LSTM_PLAN_HAS_STASH_AHEAD  // the stash of two steps: 7 KiB more, four chunks
  EXPECT_EQ(p64.backward.chunk_rows, 640);
  EXPECT_EQ(p64.backward.chunks, 4);
#else
  EXPECT_EQ(p64.backward.chunk_rows, 696);
  EXPECT_EQ(p64.backward.chunks, 3);
#endif
  // H = 1024, B = 4: all of dz (64 KiB) in one buffer beside 128 KiB of W; two buffers would not
  // fit.
  const Plan p1024 = make_plan(size_of(1024, 4), h100(), shared_backward());
  expect_consistent(p1024, size_of(1024, 4), h100());
  EXPECT_EQ(p1024.backward.chunk_rows, 4096);
  EXPECT_EQ(p1024.backward.chunks, 1);
}

TEST(Plan, TheBackwardsChunkIsPinnedOrRefusedWithTheReason) {
  PlanRequest r = pinned({"--plan", "0,0,0,0,0,0,256"});
  EXPECT_EQ(r.backward_chunk_rows, 256);
  EXPECT_FALSE(r.pins_shared_plan());
  const ProblemSize s = size_of(300, 5, 7, 2);
  Plan p = make_plan(s, h100(), r);
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.backward.chunk_rows, 256);
  EXPECT_EQ(p.backward.chunks, 5);  // 1200 gate rows: 4 x 256 and 176
  // A chunk larger than dz is all of it.
  p = make_plan(s, h100(), pinned({"--plan", "0,0,0,0,0,0,4000"}));
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.backward.chunks, 1);
  EXPECT_EQ(p.backward.chunk_rows, 1200);
  // Not whole float4 of dz: a usage error naming the flag.
  EXPECT_NE(refusal({"--plan", "0,0,0,0,0,0,6"}).find("multiple of 4 gate rows"),
            std::string::npos);
  // More than the threads carry (64 rows per block: 8 threads a row, 8 float4 each: 256 gate
  // rows), though two such chunks would fit in shared memory.
  const Plan carried = make_plan(size_of(512, 64), h100(), pinned({"--plan", "0,0,0,0,1,64,260"}));
  EXPECT_FALSE(carried.fits);
  EXPECT_NE(carried.why.find("more than its threads carry"), std::string::npos) << carried.why;
  // Two chunks that do not fit beside W (H = 1024: 128 KiB) are refused, not shrunk.
  const Plan big = make_plan(size_of(1024, 4), h100(), pinned({"--plan", "0,0,0,0,1,4,3200"}));
  EXPECT_FALSE(big.fits);
  EXPECT_NE(big.why.find("shared memory"), std::string::npos) << big.why;
  // More rows per block than the warps keep sums for.
  const Plan rows = make_plan(size_of(64, 100), h100(), pinned({"--plan", "0,0,0,0,1,65"}));
  EXPECT_FALSE(rows.fits);
  EXPECT_NE(rows.why.find("more than the kernel's 64"), std::string::npos) << rows.why;
}

#if LSTM_PLAN_HAS_DIRECT_DZ
TEST(Plan, DzIsReadStraightIntoTheLanesWhereOneChunkHoldsItAndALaneTakesOneFloat4) {
  // H = 512, B = 1: 32 lanes along k x 16 k slices cover 512 float4 a pass: one float4 a lane.
  const Plan p1 = make_plan(size_of(512, 1), h100(), shared_backward());
  EXPECT_EQ(p1.backward.chunks, 1);
  EXPECT_EQ(p1.backward.direct_float4, 1);
  EXPECT_EQ(dz_direct_float4(p1.backward, 512), 1);
  BackwardPlan wider = p1.backward;
  wider.k_slices /= 2;  // two float4 a lane: staged
  EXPECT_EQ(dz_direct_float4(wider, 512), 0);
  EXPECT_EQ(dz_direct_float4(p1.backward, 513), 0);  // two float4 for some lanes: staged
  // H = 1024, B = 1 (two float4 a lane) and B = 4 (8 lanes along k x 16 k slices: eight): staged.
  EXPECT_EQ(make_plan(size_of(1024, 1), h100(), shared_backward()).backward.direct_float4, 0);
  const Plan p4 = make_plan(size_of(1024, 4), h100(), shared_backward());
  EXPECT_EQ(p4.backward.chunks, 1);
  EXPECT_EQ(p4.backward.direct_float4, 0);
  // The canonical config stages dz in chunks: staged, as before.
  const Plan p64 = make_plan(size_of(512, 64, 100, 4), h100());
  EXPECT_GT(p64.backward.chunks, 1);
  EXPECT_EQ(p64.backward.direct_float4, 0);
  // A pinned chunk smaller than dz: staged.
  const Plan pinned_chunk =
      make_plan(size_of(512, 1), h100(), pinned({"--plan", "0,0,0,0,0,0,256"}));
  EXPECT_GT(pinned_chunk.backward.chunks, 1);
  EXPECT_EQ(pinned_chunk.backward.direct_float4, 0);
  EXPECT_NE(p1.describe().find("dz=direct"), std::string::npos) << p1.describe();
}
#endif

TEST(Plan, TheStagingBuffersLowerTheLargestHiddenSizeByOne) {
  // H = 1205 filled a block's 227 KiB to the byte without them (training stage 06's limit).
#if LSTM_PLAN_HAS_STASH_AHEAD  // and the second step of the stash by one more
  constexpr int largest = 1203;
#else
  constexpr int largest = 1204;
#endif
  for (int batch : {1, 4, 9, 64, 256})
    EXPECT_EQ(largest_hidden_that_fits(size_of(4000, batch), h100()), largest) << batch;
}
#endif  // LSTM_PLAN_HAS_BACKWARD_CHUNKS

#if LSTM_PLAN_HAS_WAVEFRONT
// ---- Several layers in one launch, as a wavefront (forward 18)

ProblemSize network_of(int hidden, int batch, int layers, int input_size = 0, int seq_len = 100) {
  return ProblemSize{hidden, input_size ? input_size : hidden, batch, seq_len, layers};
}

/// A network plan that fits: every layer in one launch, in order; each launch's blocks all
/// resident at once; each layer's plan consistent; and what the wavefront kernel assumes of the
/// layers it runs together (one tile width, thread count and batch slicing; the input rows of the
/// upper layers; the k range of the chunks).
void expect_consistent(const NetworkPlan& n, const ProblemSize& s, const DeviceLimits& device) {
  SCOPED_TRACE(s.describe() + " on " + device.name + ": " + n.describe());
  ASSERT_TRUE(n.fits) << n.why;
  int next_layer = 0;
  for (const LayerLaunch& launch : n.launches) {
    ASSERT_FALSE(launch.layers.empty());
    ASSERT_LE(launch.layers.size(), static_cast<std::size_t>(kMaxLaunchLayers));
    EXPECT_EQ(launch.first_layer, next_layer);
    next_layer += static_cast<int>(launch.layers.size());
    EXPECT_LE(launch.blocks(), device.sm_count);
    EXPECT_LE(launch.shared_bytes(), device.shared_bytes);
    const Plan& first = launch.layers.front();
    for (std::size_t i = 0; i < launch.layers.size(); ++i) {
      const Plan& p = launch.layers[i];
      expect_consistent(p, s, device);
      if (launch.layers.size() == 1) {
        EXPECT_EQ(p.input_rows, 0);
        continue;
      }
      EXPECT_FALSE(p.weights_in_registers);
      EXPECT_EQ(p.batch_groups, 1);
      EXPECT_EQ(p.tile_batch, first.tile_batch);
      EXPECT_EQ(p.threads, first.threads);
      EXPECT_EQ(p.group_batch, first.group_batch);
      EXPECT_EQ(p.padded_batch, first.padded_batch);
      EXPECT_EQ(p.slices, first.slices);
      EXPECT_EQ(p.input_rows, i == 0 ? 0 : s.hidden);  // an upper layer's input: h of the one below
      EXPECT_GE(p.chunk_rows * p.chunks, s.hidden + p.input_rows);
      EXPECT_LT(p.chunk_rows * (p.chunks - 1), s.hidden + p.input_rows);
    }
  }
  EXPECT_EQ(next_layer, s.layers);
}

TEST(Wavefront, OneLayerRunsStage12sPlan) {
  for (int hidden : {1, 37, 512, 1024}) {
    for (int batch : {1, 4, 9, 64, 256}) {
      const ProblemSize s = network_of(hidden, batch, 1, 7);
      const NetworkPlan n = make_network_plan(s, h100());
      expect_consistent(n, s, h100());
      ASSERT_EQ(n.launches.size(), 1u);
      ASSERT_EQ(n.launches[0].layers.size(), 1u);
      EXPECT_EQ(n.launches[0].layers[0].describe(), make_plan(s, h100()).describe());
    }
  }
}

TEST(Wavefront, TheCanonicalConfigFitsItsLayersInTwoLaunchesOfTwo) {
  // H = 512: W_hh of 4 layers and W_ih of 3 (28 MiB) are more than 132 x 227 KiB of shared
  // memory with h's staging; two layers (12 MiB) fit (README.md, "The on-chip budget"). Asked
  // for the most that fit (unasked, the estimate prefers one launch per layer: below).
  const ProblemSize s = network_of(512, 64, 4);
  const NetworkPlan n = make_network_plan(s, h100(), pinned({"--layers-per-launch", "3"}));
  expect_consistent(n, s, h100());
  ASSERT_EQ(n.launches.size(), 2u);
  for (const LayerLaunch& launch : n.launches) {
    ASSERT_EQ(launch.layers.size(), 2u);
    EXPECT_EQ(launch.layers[0].slices, 1);
    // The blocks in proportion to the weights: the upper layer (W_ih and W_hh) has about twice
    // the blocks of the first (W_hh only).
    EXPECT_GT(launch.layers[1].blocks(), launch.layers[0].blocks() * 3 / 2);
    EXPECT_GT(launch.blocks(), 120);
  }
  EXPECT_FALSE(make_wavefront_launch(s, h100(), {}, 4).fits);
}

TEST(Wavefront, TheSplitIsChosenByItsEstimatedCost) {
  // git show 74e41ca:results/h100-sxm/new_stages_first_runs.txt (H100, call 6): at the canonical
  // config one launch per layer was the fastest (4.619 ms; two per launch 5.298); at H = 256, B =
  // 64 one launch of four (1.617; one per launch 2.026). The estimate prefers stage 12's launches
  // where the wavefront's blocks multiply much larger slices, and keeps the wavefront where the
  // slices stay small.
  const NetworkPlan canonical = make_network_plan(network_of(512, 64, 4), h100());
  expect_consistent(canonical, network_of(512, 64, 4), h100());
  EXPECT_EQ(canonical.layers_per_launch(), 1) << canonical.describe();
  EXPECT_EQ(canonical.launches.size(), 4u);
  const NetworkPlan small = make_network_plan(network_of(256, 64, 4), h100());
  expect_consistent(small, network_of(256, 64, 4), h100());
  EXPECT_EQ(small.layers_per_launch(), 4) << small.describe();
  EXPECT_EQ(small.launches.size(), 1u);
}

TEST(Wavefront, LayersSplitIntoLaunchesOfEqualSizes) {
  // H = 128: 7 layers' weights are 3.5 MiB; all fit in one launch up to kMaxLaunchLayers (asked
  // for: unasked, the estimate may prefer fewer per launch).
  for (int layers = 1; layers <= 2 * kMaxLaunchLayers + 1; ++layers) {
    const ProblemSize s = network_of(128, 64, layers);
    const NetworkPlan n = make_network_plan(
        s, h100(), pinned({"--layers-per-launch", std::to_string(kMaxLaunchLayers)}));
    expect_consistent(n, s, h100());
    EXPECT_EQ(static_cast<int>(n.launches.size()), ceil_div(layers, kMaxLaunchLayers)) << layers;
    for (const LayerLaunch& launch : n.launches)
      EXPECT_LE(n.layers_per_launch() - static_cast<int>(launch.layers.size()), 1) << layers;
  }
}

TEST(Wavefront, OddShapesArePlannedOrRefusedWithTheReason) {
  for (int layers : {2, 3, 4}) {
    for (int hidden : {1, 3, 37, 257, 301}) {
      for (int batch : {1, 3, 7, 64, 130}) {
        for (int per_launch : {0, 2, 3, 4}) {
          const ProblemSize s = network_of(hidden, batch, layers, 7, 9);
          PlanRequest request;
          request.layers_per_launch = per_launch;
          const NetworkPlan n = make_network_plan(s, h100(), request);
          if (n.fits) {
            expect_consistent(n, s, h100());
            if (per_launch) {
              EXPECT_LE(n.layers_per_launch(), per_launch);
            }
          } else {
            EXPECT_NE(n.why.find("do not fit in one launch"), std::string::npos) << n.why;
          }
        }
      }
    }
  }
  // Small enough, all layers go in one launch when asked, at any batch size (in slices).
  for (int batch : {1, 3, 130, 1000}) {
    const ProblemSize s = network_of(37, batch, 4, 7, 9);
    PlanRequest request;
    request.layers_per_launch = 4;
    const NetworkPlan n = make_network_plan(s, h100(), request);
    expect_consistent(n, s, h100());
    EXPECT_EQ(n.layers_per_launch(), 4) << batch;
  }
}

TEST(Wavefront, TooManyLayersForOneLaunchAreRefusedNamingTheMostThatFit) {
  const ProblemSize s = network_of(512, 64, 4);
  PlanRequest request;
  request.layers_per_launch = 4;
  const NetworkPlan n = make_network_plan(s, h100(), request);
  EXPECT_FALSE(n.fits);
  EXPECT_NE(n.why.find("4 layers do not fit in one launch"), std::string::npos) << n.why;
  EXPECT_NE(n.why.find("at most 3 do"), std::string::npos) << n.why;
  // Where not even two fit (H = 1024: W_hh alone is 16 MiB), the refusal says so; unpinned, the
  // layers run one launch each.
  request.layers_per_launch = 2;
  const NetworkPlan big = make_network_plan(network_of(1024, 64, 4), h100(), request);
  EXPECT_FALSE(big.fits);
  EXPECT_NE(big.why.find("not even 2 do"), std::string::npos) << big.why;
  const NetworkPlan unpinned = make_network_plan(network_of(1024, 64, 4), h100());
  expect_consistent(unpinned, network_of(1024, 64, 4), h100());
  EXPECT_EQ(unpinned.layers_per_launch(), 1);
}

TEST(Wavefront, Stage12sPinsAndSmallBatchesKeepOneLaunchPerLayer) {
  const ProblemSize s = network_of(256, 64, 4);
  EXPECT_GT(make_network_plan(s, h100()).layers_per_launch(), 1);
  EXPECT_EQ(make_network_plan(s, h100(), pinned({"--plan", "8,256"})).layers_per_launch(), 1);
  EXPECT_EQ(make_network_plan(s, h100(), pinned({"--weights", "shared"})).layers_per_launch(), 1);
  EXPECT_EQ(make_network_plan(s, h100(), pinned({"--layers-per-launch", "1"})).layers_per_launch(),
            1);
  // The register kernel's batches: one launch per layer unless asked for more.
  const ProblemSize small = network_of(512, 4, 4);
  EXPECT_TRUE(make_network_plan(small, h100()).launches[0].layers[0].weights_in_registers);
  const NetworkPlan asked = make_network_plan(small, h100(), pinned({"--layers-per-launch", "2"}));
  expect_consistent(asked, small, h100());
  EXPECT_EQ(asked.layers_per_launch(), 2);
  // --plan's tile and threads with more layers per launch: the wavefront's.
  const NetworkPlan tiled =
      make_network_plan(s, h100(), pinned({"--plan", "16,256", "--layers-per-launch", "4"}));
  expect_consistent(tiled, s, h100());
  EXPECT_EQ(tiled.launches[0].layers[1].tile_batch, 16);
  EXPECT_EQ(tiled.launches[0].layers[1].threads, 256);
}

TEST(Wavefront, TheFlagIsParsedOrRefusedNamingIt) {
  EXPECT_EQ(pinned({"--layers-per-launch", "3"}).layers_per_launch, 3);
  EXPECT_EQ(pinned({}).layers_per_launch, 0);
  for (const char* bad : {"9", "-1", "x"}) {
    const std::string why = refusal({"--layers-per-launch", bad});
    EXPECT_NE(why.find("--layers-per-launch"), std::string::npos) << bad << ": " << why;
  }
  EXPECT_NE(refusal({"--layers-per-launch", "2", "--weights", "registers"}).find("--layers-per"),
            std::string::npos);
}
#endif  // LSTM_PLAN_HAS_WAVEFRONT
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
// ---- The backward's register kernel (small batches)

TEST(Plan, SmallBatchesKeepTheBackwardsWeightsInRegisters) {
  // H = 512, B = 1: 128 blocks of 4 units, 256 threads with 2 float4 of gate rows each.
  const ProblemSize s512 = size_of(512, 1);
  const Plan p512 = make_plan(s512, h100());
  expect_consistent(p512, s512, h100());
  EXPECT_TRUE(p512.backward.weights_in_registers) << p512.describe();
  EXPECT_EQ(p512.backward.units_per_block, 4);
  EXPECT_EQ(p512.backward.unit_blocks, 128);
  EXPECT_EQ(p512.backward.row_quads, 2);
  EXPECT_EQ(p512.backward.unit_quads, 1);
  // H = 1024, B = 4: 8 units, 4 float4 of gate rows: 128 weights per thread.
  const ProblemSize s1024 = size_of(1024, 4);
  const Plan p1024 = make_plan(s1024, h100());
  expect_consistent(p1024, s1024, h100());
  EXPECT_TRUE(p1024.backward.weights_in_registers) << p1024.describe();
  EXPECT_EQ(p1024.backward.row_quads, 4);
  EXPECT_EQ(p1024.backward.unit_quads, 2);
  // Up to 8 rows and H = 1024; beyond, stage 07's kernel.
  EXPECT_TRUE(make_plan(size_of(1024, 8), h100()).backward.weights_in_registers);
  EXPECT_TRUE(make_plan(size_of(1, 3), h100()).backward.weights_in_registers);
  EXPECT_FALSE(make_plan(size_of(512, 9), h100()).backward.weights_in_registers);
  // H = 512, B = 8: stage 07's plan splits the batch into 4 groups of 2 rows, so that each block
  // reads a quarter of dz; the estimate prefers it to one group of 8 rows. Asked for, the
  // register kernel runs.
  const Plan p512b8 = make_plan(size_of(512, 8), h100());
  expect_consistent(p512b8, size_of(512, 8), h100());
  EXPECT_FALSE(p512b8.backward.weights_in_registers) << p512b8.describe();
  EXPECT_GT(p512b8.backward.batch_groups, 1);
  const Plan forced =
      make_plan(size_of(512, 8), h100(), pinned({"--backward-weights", "registers"}));
  expect_consistent(forced, size_of(512, 8), h100());
  EXPECT_TRUE(forced.backward.weights_in_registers);
  EXPECT_GT(forced.backward.cost, p512b8.backward.cost);
  const Plan p1025 = make_plan(size_of(1025, 1), h100());
  expect_consistent(p1025, size_of(1025, 1), h100());
  EXPECT_FALSE(p1025.backward.weights_in_registers);
}

TEST(Plan, TheBackwardsRegisterKernelIsRefusedWithTheReason) {
  BackwardPlan b;
  EXPECT_NE(plan_backward_registers(size_of(512, 9), h100(), b).find("batch rows"),
            std::string::npos);
  EXPECT_NE(plan_backward_registers(size_of(1025, 1), h100(), b).find("float4 of gate rows"),
            std::string::npos);
  // 264 SMs: H = 1100 in blocks of 5 units would fit the units, not the 5 row quads.
  EXPECT_NE(plan_backward_registers(size_of(1100, 1), chip(264, 227, "264 SMs"), b)
                .find("float4 of gate rows"),
            std::string::npos);
  // 64 SMs: H = 600 needs 10 units per block, more than 8.
  EXPECT_NE(plan_backward_registers(size_of(600, 1), chip(64, 227, "64 SMs"), b)
                .find("more than the backward register kernel's 8"),
            std::string::npos);
  // A chip with 48 KiB per block: dz of 8 rows x 1024 (128 KiB) does not fit.
  EXPECT_NE(
      plan_backward_registers(size_of(1024, 8), chip(132, 48, "48 KiB"), b).find("shared memory"),
      std::string::npos);
  EXPECT_EQ(plan_backward_registers(size_of(1024, 8), h100(), b), "");
}

TEST(Plan, TheFlagsPinTheBackwardsKernel) {
  const ProblemSize s = size_of(300, 3, 5, 2);
  EXPECT_EQ(pinned({}).backward_weights, WeightHome::kAuto);
  EXPECT_EQ(pinned({"--backward-weights", "registers"}).backward_weights, WeightHome::kRegisters);
  Plan p = make_plan(s, h100(), pinned({"--backward-weights", "shared"}));
  expect_consistent(p, s, h100());
  EXPECT_FALSE(p.backward.weights_in_registers);
  p = make_plan(s, h100(), pinned({"--backward-weights", "registers", "--weights", "shared"}));
  expect_consistent(p, s, h100());
  EXPECT_TRUE(p.backward.weights_in_registers);
  EXPECT_FALSE(p.forward.weights_in_registers);
  // Pinning the backward's groups, rows or chunk means its shared-memory kernel.
  for (const char* plan : {"0,0,0,0,1", "0,0,0,0,0,3", "0,0,0,0,0,0,64"}) {
    p = make_plan(s, h100(), pinned({"--plan", plan}));
    expect_consistent(p, s, h100());
    EXPECT_FALSE(p.backward.weights_in_registers) << plan;
  }
  // Registers where they do not fit: refused with the reason, not replaced.
  const Plan refused =
      make_plan(size_of(512, 16), h100(), pinned({"--backward-weights", "registers"}));
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("batch rows"), std::string::npos) << refused.why;
  // Malformed or contradictory: usage errors naming the flag.
  EXPECT_NE(refusal({"--backward-weights", "smem"}).find("--backward-weights \"smem\""),
            std::string::npos);
  const std::string why = refusal({"--plan", "0,0,0,0,2", "--backward-weights", "registers"});
  EXPECT_NE(why.find("--plan pins the backward's"), std::string::npos) << why;
  EXPECT_EQ(pinned({"--plan", "0,0,0,0,2", "--backward-weights", "shared"}).backward_groups, 2);
}
#endif  // LSTM_PLAN_HAS_BACKWARD_REGISTERS

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
