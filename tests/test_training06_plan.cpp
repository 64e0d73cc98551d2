// Training stage 06's launch planner (host code, no GPU): what fits on the H100's chip and on a
// made-up smaller one, what is refused and why, and the invariants the persistent kernels rely
// on (the forward's two, forward stage 10's, and the backward), over many shapes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // training stage 06's, as its build names it
namespace {

DeviceLimits h100() {
  DeviceLimits limits;
  limits.sm_count = 132;
  limits.shared_bytes = 227 * 1024;
  limits.name = "H100";
  return limits;
}

DeviceLimits small_chip(int sm_count, std::size_t shared_kib) {
  DeviceLimits limits;
  limits.sm_count = sm_count;
  limits.shared_bytes = shared_kib * 1024;
  limits.name = "a small GPU";
  return limits;
}

ProblemSize size_of(int hidden, int batch, int seq_len = 100, int layers = 1) {
  return ProblemSize{hidden, hidden, batch, seq_len, layers};  // I = H
}

/// What the kernels assume of every plan they are given.
void expect_consistent(const Plan& p, const ProblemSize& s, const DeviceLimits& device) {
  SCOPED_TRACE(s.describe() + ": " + p.describe());
  ASSERT_TRUE(p.fits) << p.why;
  const ForwardPlan& f = p.forward;
  ASSERT_TRUE(f.fits) << f.why;
  EXPECT_LE(f.blocks(), device.sm_count);                         // one block per SM, all resident
  EXPECT_GE(f.units_per_block * f.unit_blocks, s.hidden);         // every unit has an owner
  EXPECT_LT(f.units_per_block * (f.unit_blocks - 1), s.hidden);   // and no block is empty
  EXPECT_GE(f.slices * f.batch_groups * f.group_batch, s.batch);  // every batch row runs
  EXPECT_LT((f.slices - 1) * f.batch_groups * f.group_batch, s.batch);  // no slice is empty
  EXPECT_EQ(f.shared_bytes, forward_shared_bytes(f, s.hidden));
  EXPECT_LE(f.shared_bytes, device.shared_bytes);
  if (f.weights_in_registers) {  // one warp per k slice; one launch, one batch group
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
    if (f.input_k_per_lane > 0) {  // the kernel's input rows cover every layer's I
      EXPECT_GE(f.input_k_per_lane * f.k_slices * f.phases, s.input_size);
      if (s.layers > 1) {
        EXPECT_GE(f.input_k_per_lane * f.k_slices * f.phases, s.hidden);
      }
    }
  } else {
    EXPECT_EQ(f.input_k_per_lane, 0);  // the shared-memory kernel's input parts: cuBLAS
    EXPECT_EQ(f.padded_batch % f.tile_batch, 0);
    EXPECT_GE(f.padded_batch, f.group_batch);
    EXPECT_EQ(f.lanes_batch * f.lanes_units * f.phases, kWarpSize);
    EXPECT_LE(f.tile_groups_units * f.tile_groups_batch * f.k_slices, f.threads / kWarpSize);
    EXPECT_GE(f.tile_groups_units * f.lanes_units, f.units_per_block);
    EXPECT_GE(f.tile_groups_batch * f.lanes_batch * f.tile_batch, f.padded_batch);
    EXPECT_LE(f.chunk_rows * f.padded_batch / 4, kStageRegisters * f.threads);
    EXPECT_GE(f.chunk_rows * f.chunks, s.hidden);
    EXPECT_LE(f.threads, max_threads_for_tile(f.tile_batch));
  }

  const BackwardPlan& b = p.backward;
  EXPECT_LE(b.blocks(), device.sm_count);
  EXPECT_LE(b.units_per_block, kMaxUnitsPerBlock);  // the kernel's sums per thread
  EXPECT_EQ(b.unit_quads, ceil_div(b.units_per_block, 4));
  EXPECT_GE(b.units_per_block * b.unit_blocks, s.hidden);
  EXPECT_LT(b.units_per_block * (b.unit_blocks - 1), s.hidden);
  EXPECT_GE(b.group_rows, 1);
  EXPECT_EQ(b.slices, ceil_div(s.batch, b.batch_groups * b.group_rows));
  EXPECT_EQ(b.k_slices, backward_k_slices(b.group_rows));
  // The warps of a block cover its row quads, k slices each (or one slice, several quads each).
  const int warps = kBackwardThreads / kWarpSize, quads = ceil_div(b.group_rows, kLanesRows);
  EXPECT_TRUE(quads * b.k_slices <= warps || b.k_slices == 1);
  EXPECT_EQ(b.shared_bytes,
            backward_shared_bytes(s.hidden, b.units_per_block, b.group_rows, b.k_slices));
  EXPECT_LE(b.shared_bytes, device.shared_bytes);
}

TEST(Training06Plan, SharedMemoryIsTheKernelsLayout) {
  // forward_shared.cuh: w [H][J] float4 | h [2][chunk_rows][Bp] | sums [S][J][4][Bp] |
  // input parts [J][Bp][4] | c [J][Bp] | biases [J][4]
  ForwardPlan shared;
  shared.units_per_block = 4;
  shared.padded_batch = 64;
  shared.chunk_rows = 100;
  shared.k_slices = 2;
  EXPECT_EQ(forward_shared_bytes(shared, 512),
            (16u * 512 + 2 * 100 * 64 + 2 * 16 * 64 + 16 * 64 + 4 * 64 + 16) * sizeof(float));
  // forward_registers.cuh: W_ih [S][k'][32] float4 | x [2][S][lanes_k * k'][Bt] |
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
      forward_shared_bytes(registers, 512),
      (8u * 8 * 32 * 4 + 2 * 8 * 8 * 8 * 1 + 512 * 1 + 2 * 8 * 4 * 4 + 4 * 4 + 16) * sizeof(float));
  // backward_kernel.cuh: w [4 * J4][H] float4 | sums [S][Bg][J4] float4 | stash [J * Bg][7] | dc
  EXPECT_EQ(backward_shared_bytes(512, 16, 16, 4),
            (16u * 512 * 4 + 4 * 4 * 4 * 16 + 7 * 16 * 16 + 16 * 16) * sizeof(float));
  EXPECT_EQ(backward_shared_bytes(100, 5, 3, 16),  // J = 5: two float4 of units, zeros past 5
            (16u * 100 * 2 + 4 * 2 * 16 * 3 + 7 * 5 * 3 + 5 * 3) * sizeof(float));
  EXPECT_EQ(backward_k_slices(1), 16);
  EXPECT_EQ(backward_k_slices(5), 8);
  EXPECT_EQ(backward_k_slices(64), 1);
  EXPECT_EQ(backward_k_slices(100), 1);
}

TEST(Training06Plan, CanonicalConfigRunsOneLaunchPerLayerAndPass) {
  const ProblemSize s = size_of(512, 64, 100, 4);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.forward.slices, 1);
  EXPECT_EQ(p.backward.slices, 1);
  // Every block reads all of dz_t for its rows: batch groups cut that traffic (README.md).
  EXPECT_GT(p.backward.batch_groups, 1);
}

TEST(Training06Plan, SmallBatchesUseEverySm) {
  for (int hidden : {512, 1024}) {
    const ProblemSize s = size_of(hidden, 1);
    const Plan p = make_plan(s, h100());
    expect_consistent(p, s, h100());
    EXPECT_EQ(p.backward.batch_groups, 1);
    EXPECT_GT(p.backward.blocks(), 100);
    EXPECT_GT(p.forward.blocks(), 100);
  }
}

TEST(Training06Plan, SmallBatchesKeepTheForwardsWeightsInRegisters) {
  // Forward stage 10's choices: H = 512, B = 1: 128 blocks x 4 units, 8 weights per lane and
  // gate, 256 threads, the input parts computed in the kernel.
  const ProblemSize s512 = size_of(512, 1);
  const ForwardPlan p512 = make_plan(s512, h100()).forward;
  EXPECT_TRUE(p512.weights_in_registers);
  EXPECT_EQ(p512.units_per_block, 4);
  EXPECT_EQ(p512.k_per_lane, 8);
  EXPECT_EQ(p512.threads, 256);
  EXPECT_EQ(p512.tile_batch, 1);
  EXPECT_EQ(p512.input_k_per_lane * p512.k_slices * p512.phases, 512);
  // H = 1024, B = 4: 32 weights per lane (8 would need 1024 threads), input parts from cuBLAS.
  const ForwardPlan p1024 = make_plan(size_of(1024, 4), h100()).forward;
  EXPECT_TRUE(p1024.weights_in_registers);
  EXPECT_EQ(p1024.k_per_lane, 32);
  EXPECT_EQ(p1024.tile_batch, 4);
  EXPECT_EQ(p1024.input_k_per_lane, 0);
  EXPECT_EQ(make_plan(size_of(512, 3), h100()).forward.tile_batch, 4);        // B rounds up to 4
  EXPECT_EQ(make_plan(size_of(512, 2), h100()).forward.input_k_per_lane, 0);  // too much work
  // B > 8, or H too large for the register kernel: the shared-memory kernel.
  EXPECT_FALSE(make_plan(size_of(512, 9), h100()).forward.weights_in_registers);
  const ProblemSize wide = size_of(1100, 1);
  EXPECT_FALSE(make_register_plan(wide, h100()).fits);
  const Plan p_wide = make_plan(wide, h100());
  expect_consistent(p_wide, wide, h100());
  EXPECT_FALSE(p_wide.forward.weights_in_registers);
}

TEST(Training06Plan, TheForwardsKernelAndInputPartsCanBePinned) {
  PlanRequest request;
  request.weights = WeightHome::kRegisters;
  request.k_per_lane = 32;
  request.input = InputParts::kKernel;
  ProblemSize s = size_of(300, 3, 5, 3);  // I != H: the input rows cover both
  s.input_size = 40;
  Plan p = make_plan(s, h100(), request);
  expect_consistent(p, s, h100());
  EXPECT_TRUE(p.forward.weights_in_registers);
  EXPECT_EQ(p.forward.k_per_lane, 32);
  EXPECT_GT(p.forward.input_k_per_lane, 0);
  request.input = InputParts::kGemm;
  EXPECT_EQ(make_plan(s, h100(), request).forward.input_k_per_lane, 0);
  // Registers where they cannot hold the batch: refused with the reason, not replaced.
  const Plan refused = make_plan(size_of(512, 16), h100(), request);
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("batch rows"), std::string::npos) << refused.why;
  // Shared memory asked for, or any of its choices pinned: the shared-memory kernel, at B = 1.
  request = PlanRequest{};
  request.weights = WeightHome::kSharedMemory;
  p = make_plan(size_of(512, 1), h100(), request);
  expect_consistent(p, size_of(512, 1), h100());
  EXPECT_FALSE(p.forward.weights_in_registers);
  request = PlanRequest{};
  request.threads = 128;
  EXPECT_FALSE(make_plan(size_of(512, 1), h100(), request).forward.weights_in_registers);
}

TEST(Training06Plan, EveryShapeOfTheSweepsFits) {
  for (int hidden : {256, 512, 1024}) {
    for (int batch : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      const ProblemSize s = size_of(hidden, batch);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Training06Plan, OddShapesAreConsistent) {
  for (int hidden : {1, 3, 33, 37, 200, 257, 301, 1000}) {
    for (int batch : {1, 3, 5, 7, 130, 1000}) {
      const ProblemSize s = size_of(hidden, batch, 7);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Training06Plan, AFewSmsGiveMoreUnitsPerBlockOrARefusal) {
  // 8 SMs: H = 100 needs 13 units per block (fits the kernel's 16), H = 200 needs 25 (refused).
  const DeviceLimits device = small_chip(8, 227);
  const ProblemSize fits = size_of(100, 5, 7);
  expect_consistent(make_plan(fits, device), fits, device);
  const Plan refused = make_plan(size_of(200, 5, 7), device);
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("more than the kernel's 16"), std::string::npos) << refused.why;
  EXPECT_EQ(largest_hidden_that_fits(size_of(200, 5, 7), device), 8 * kMaxUnitsPerBlock);
}

TEST(Training06Plan, LargeBatchesRunInSlices) {
  const ProblemSize s = size_of(1024, 5000);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_GT(p.forward.slices, 1);
  EXPECT_GT(p.backward.slices, 1);
  EXPECT_FALSE(p.forward.weights_in_registers);
}

TEST(Training06Plan, TooLargeHiddenIsRefusedWithTheReasonAndTheLimit) {
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

TEST(Training06Plan, ASmallerChipFitsLess) {
  const DeviceLimits small = small_chip(16, 100);
  EXPECT_FALSE(make_plan(size_of(1024, 4), small).fits);
  const int largest = largest_hidden_that_fits(size_of(1024, 4), small);
  EXPECT_GT(largest, 0);
  EXPECT_LT(largest, largest_hidden_that_fits(size_of(1024, 4), h100()));
  expect_consistent(make_plan(size_of(largest, 4), small), size_of(largest, 4), small);
}

TEST(Training06Plan, RequestPinsTheChoices) {
  PlanRequest request;
  request.tile_batch = 8;
  request.threads = 128;
  request.batch_groups = 2;
  request.group_batch = 2;
  request.backward_groups = 2;
  request.backward_rows = 3;
  const ProblemSize s = size_of(130, 10, 5);
  const Plan p = make_plan(s, h100(), request);
  expect_consistent(p, s, h100());
  EXPECT_FALSE(p.forward.weights_in_registers);
  EXPECT_EQ(p.forward.tile_batch, 8);
  EXPECT_EQ(p.forward.threads, 128);
  EXPECT_EQ(p.forward.batch_groups, 2);
  EXPECT_EQ(p.forward.group_batch, 2);
  EXPECT_EQ(p.forward.slices, 3);  // 10 rows, 2 groups of 2 per launch
  EXPECT_EQ(p.backward.batch_groups, 2);
  EXPECT_EQ(p.backward.group_rows, 3);
  EXPECT_EQ(p.backward.slices, 2);  // 10 rows, 2 groups of 3 per launch
}

TEST(Training06Plan, APinnedPlanThatDoesNotFitIsRefused) {
  PlanRequest request;
  request.backward_groups = 4;  // H = 1024 in 33 blocks per group: 32 units each
  const Plan p = make_plan(size_of(1024, 8), h100(), request);
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("more than the kernel's 16"), std::string::npos) << p.why;
  request = PlanRequest{};
  request.tile_batch = 4;  // 8 units x 64 rows in 4-wide tiles: 4 warps of tiles, not 2
  request.threads = 64;
  request.group_batch = 64;
  const Plan q = make_plan(size_of(1024, 64), h100(), request);
  EXPECT_FALSE(q.fits);
  EXPECT_NE(q.why.find("warps of register tiles"), std::string::npos) << q.why;
}

TEST(Training06Plan, FlagsAreParsedOrRefused) {
  PlanRequest r = parse_plan_request("8,256,2,3,4,5");
  EXPECT_EQ(r.tile_batch, 8);
  EXPECT_EQ(r.threads, 256);
  EXPECT_EQ(r.batch_groups, 2);
  EXPECT_EQ(r.group_batch, 3);
  EXPECT_EQ(r.backward_groups, 4);
  EXPECT_EQ(r.backward_rows, 5);
  r = parse_plan_request("0,0,0,0,2");
  EXPECT_FALSE(r.pins_shared_plan());  // the backward alone
  EXPECT_EQ(r.backward_groups, 2);
  EXPECT_EQ(r.backward_rows, 0);
  EXPECT_EQ(parse_plan_request(",,,,,7").backward_rows, 7);  // an empty field is automatic
  EXPECT_EQ(parse_plan_request("4").tile_batch, 4);
  for (const char* bad : {"x", "1,2,3,4,5,6,7", "-1", "4,y", "1.5", "5", "4,100", "4,1024"}) {
    EXPECT_THROW(parse_plan_request(bad), std::invalid_argument) << bad;
  }
  r = parse_plan_request("");
  EXPECT_EQ(r.tile_batch, 0);
  EXPECT_EQ(r.backward_groups, 0);
  EXPECT_EQ(r.weights, WeightHome::kAuto);
  EXPECT_EQ(r.input, InputParts::kAuto);
  // The forward's kernel, as forward stage 10's --weights and --input.
  EXPECT_EQ(parse_plan_request("", "registers").weights, WeightHome::kRegisters);
  r = parse_plan_request("0,0,0,0,2,3", "registers,32", "kernel");
  EXPECT_EQ(r.weights, WeightHome::kRegisters);
  EXPECT_EQ(r.k_per_lane, 32);
  EXPECT_EQ(r.input, InputParts::kKernel);
  EXPECT_EQ(r.backward_groups, 2);  // the backward's pins go with the register kernel
  EXPECT_EQ(make_plan(size_of(512, 1), h100(), r).forward.k_per_lane, 32);
  EXPECT_EQ(parse_plan_request("", "shared").weights, WeightHome::kSharedMemory);
  EXPECT_EQ(parse_plan_request("", "", "gemm").input, InputParts::kGemm);
  EXPECT_THROW(parse_plan_request("", "registers,16"), std::invalid_argument);
  EXPECT_THROW(parse_plan_request("", "smem"), std::invalid_argument);
  EXPECT_THROW(parse_plan_request("", "", "cublas"), std::invalid_argument);
  // registers with a shared-memory plan contradict each other
  EXPECT_THROW(parse_plan_request("4,256", "registers"), std::invalid_argument);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
