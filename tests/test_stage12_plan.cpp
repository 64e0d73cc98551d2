// Stage 10's launch planner (host code, no GPU): what fits on the H100's chip, what is refused
// and why, and the invariants the persistent kernel relies on, over many shapes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage 10's, as its build names it
namespace {

DeviceLimits h100() {
  DeviceLimits limits;
  limits.sm_count = 132;
  limits.shared_bytes = 227 * 1024;
  limits.name = "H100";
  return limits;
}

ProblemSize size_of(int hidden, int batch, int seq_len = 100, int layers = 1) {
  return ProblemSize{hidden, hidden, batch, seq_len, layers};  // I = H
}

/// What the kernel assumes of every plan it is given.
void expect_consistent(const Plan& p, const ProblemSize& s, const DeviceLimits& device) {
  SCOPED_TRACE(s.describe() + ": " + p.describe());
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_LE(p.blocks(), device.sm_count);                         // one block per SM, all resident
  EXPECT_GE(p.units_per_block * p.unit_blocks, s.hidden);         // every unit has an owner
  EXPECT_LT(p.units_per_block * (p.unit_blocks - 1), s.hidden);   // and no block is empty
  EXPECT_GE(p.slices * p.batch_groups * p.group_batch, s.batch);  // every batch row runs
  EXPECT_EQ(p.shared_bytes, shared_bytes_for(p, s.hidden));
  EXPECT_LE(p.shared_bytes, device.shared_bytes);
  if (p.weights_in_registers) {  // one warp per k slice; one launch, one batch group
    EXPECT_EQ(p.threads, kWarpSize * p.k_slices);
    EXPECT_LE(p.threads, kMaxRegisterThreads);
    EXPECT_EQ(p.lanes_units * p.phases, kWarpSize);
    EXPECT_GE(p.lanes_units, p.units_per_block);                      // a group of lanes per unit
    EXPECT_EQ(p.lanes_units & (p.lanes_units - 1), 0);                // a power of two
    EXPECT_GE(p.k_slices * p.phases * p.k_per_lane, s.hidden);        // every k is multiplied
    EXPECT_LT((p.k_slices - 1) * p.phases * p.k_per_lane, s.hidden);  // and no slice is empty
    EXPECT_LE(p.units_per_block * p.tile_batch, p.threads);           // a thread per cell update
    EXPECT_EQ(p.batch_groups, 1);
    EXPECT_EQ(p.slices, 1);
    EXPECT_EQ(p.group_batch, s.batch);
    EXPECT_EQ(p.padded_batch, p.tile_batch);
    EXPECT_GE(p.tile_batch, s.batch);
    EXPECT_LE(p.tile_batch, kMaxRegisterBatch);
    EXPECT_EQ(p.tile_batch & (p.tile_batch - 1), 0);  // 1, 2, 4 or 8
    return;
  }
  EXPECT_EQ(p.padded_batch % p.tile_batch, 0);
  EXPECT_GE(p.padded_batch, p.group_batch);
  EXPECT_EQ(p.lanes_batch * p.lanes_units * p.phases, kWarpSize);
  EXPECT_LE(p.tile_groups_units * p.tile_groups_batch * p.k_slices, p.threads / kWarpSize);
  EXPECT_GE(p.tile_groups_units * p.lanes_units, p.units_per_block);
  EXPECT_GE(p.tile_groups_batch * p.lanes_batch * p.tile_batch, p.padded_batch);
  EXPECT_LE(p.chunk_rows * p.padded_batch / 4, kStageRegisters * p.threads);
  EXPECT_GE(p.chunk_rows * p.chunks, s.hidden);
}

TEST(Stage10Plan, CanonicalConfigFitsInOneLaunchPerLayer) {
  const ProblemSize s = size_of(512, 64, 100, 4);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.slices, 1);
}

TEST(Stage10Plan, EveryShapeOfTheSweepsFits) {
  for (int hidden : {256, 512, 1024}) {
    for (int batch : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      const ProblemSize s = size_of(hidden, batch);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Stage10Plan, OddShapesAreConsistent) {
  for (int hidden : {1, 3, 33, 37, 200, 257, 1000, 1196}) {
    for (int batch : {1, 3, 5, 7, 130, 1000, 5000}) {
      const ProblemSize s = size_of(hidden, batch, 7);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Stage10Plan, SmallBatchesKeepTheWeightsInRegisters) {
  const ProblemSize s512 = size_of(512, 1);
  const Plan p512 = make_plan(s512, h100());
  expect_consistent(p512, s512, h100());
  EXPECT_TRUE(p512.weights_in_registers);
  EXPECT_EQ(p512.units_per_block, 4);  // 128 blocks x 4 units
  EXPECT_EQ(p512.k_per_lane, 8);       // 4 x 8 weights per thread
  EXPECT_EQ(p512.threads, 256);
  EXPECT_EQ(p512.tile_batch, 1);
  const ProblemSize s1024 = size_of(1024, 4);
  const Plan p1024 = make_plan(s1024, h100());
  expect_consistent(p1024, s1024, h100());
  EXPECT_TRUE(p1024.weights_in_registers);
  EXPECT_EQ(p1024.k_per_lane, 32);  // 8 per lane would need 1024 threads
  EXPECT_EQ(p1024.threads, 256);
  EXPECT_EQ(p1024.tile_batch, 4);
  EXPECT_EQ(make_plan(size_of(512, 3), h100()).tile_batch, 4);  // B rounds up to 1, 2, 4 or 8
  EXPECT_EQ(make_plan(size_of(512, 8), h100()).tile_batch, 8);
  EXPECT_FALSE(make_plan(size_of(512, 9), h100()).weights_in_registers);
}

TEST(Stage10Plan, TheRegisterKernelComputesItsInputPartsWhereTheyHideInARoundTrip) {
  // H = 512, B = 1: 8 input rows per lane, one batch column: the kernel computes them.
  const Plan p512 = make_plan(size_of(512, 1), h100());
  EXPECT_EQ(p512.input_k_per_lane * p512.k_slices * p512.phases, 512);
  // B = 2 or H = 1024: more work per lane than a round trip hides: cuBLAS.
  EXPECT_EQ(make_plan(size_of(512, 2), h100()).input_k_per_lane, 0);
  EXPECT_EQ(make_plan(size_of(1024, 1), h100()).input_k_per_lane, 0);
  // Asked for, the kernel does it wherever W_ih fits; the layout takes the largest I of any
  // layer (layer 0's I may differ from H).
  PlanRequest kernel;
  kernel.input = InputParts::kKernel;
  ProblemSize wide = size_of(512, 1, 100, 2);
  wide.input_size = 1024;
  const Plan p_wide = make_plan(wide, h100(), kernel);
  expect_consistent(p_wide, wide, h100());
  EXPECT_GE(p_wide.input_k_per_lane * p_wide.k_slices * p_wide.phases, 1024);
  EXPECT_EQ(make_plan(wide, h100()).input_k_per_lane, 0);  // automatic: too much work
  ProblemSize narrow = size_of(512, 1, 100, 2);
  narrow.input_size = 10;
  EXPECT_GE(make_plan(narrow, h100()).input_k_per_lane * p512.k_slices * p512.phases, 512);
  // H = 1024, B = 8: W_ih's slice (128 KiB) and two steps of x do not fit even when asked.
  const ProblemSize big = size_of(1024, 8);
  const Plan p_big = make_plan(big, h100(), kernel);
  expect_consistent(p_big, big, h100());
  EXPECT_EQ(p_big.input_k_per_lane, 0);
  EXPECT_GT(make_plan(size_of(1024, 4), h100(), kernel).input_k_per_lane, 0);
  // Asking for the GEMM gives it.
  PlanRequest gemm;
  gemm.input = InputParts::kGemm;
  EXPECT_EQ(make_plan(size_of(512, 1), h100(), gemm).input_k_per_lane, 0);
}

TEST(Stage10Plan, WhereTheRegisterKernelDoesNotFitTheSharedOneRuns) {
  // H = 1320: 10 units (16 lanes), 2 lanes along k: 21 slices of 2 x 32 rows, more than 8 warps.
  const ProblemSize s = size_of(1320, 1);
  const Plan registers = make_register_plan(s, h100());
  EXPECT_FALSE(registers.fits);
  EXPECT_NE(registers.why.find("warps per block"), std::string::npos) << registers.why;
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_FALSE(p.weights_in_registers);
  // Asking for registers where they do not fit is refused with the reason.
  PlanRequest request;
  request.weights = WeightHome::kRegisters;
  const Plan refused = make_plan(size_of(512, 16), h100(), request);
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("batch rows"), std::string::npos) << refused.why;
  // Asking for shared memory, or pinning any of its choices, gives the shared-memory kernel.
  request.weights = WeightHome::kSharedMemory;
  EXPECT_FALSE(make_plan(size_of(512, 1), h100(), request).weights_in_registers);
  request = {};
  request.threads = 256;
  EXPECT_FALSE(make_plan(size_of(512, 1), h100(), request).weights_in_registers);
}

TEST(Stage10Plan, LargeBatchesRunInSlices) {
  const ProblemSize s = size_of(1024, 5000);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_GT(p.slices, 1);
}

TEST(Stage10Plan, TooLargeHiddenIsRefusedWithTheReasonAndTheLimit) {
  const ProblemSize s = size_of(2048, 64, 100, 4);
  const Plan p = make_plan(s, h100());
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.why.find("shared memory"), std::string::npos) << p.why;
  const int largest = largest_hidden_that_fits(s, h100());
  EXPECT_GT(largest, 1024);
  EXPECT_LT(largest, 2048);
  EXPECT_TRUE(make_plan(size_of(largest, 64), h100()).fits);
  EXPECT_FALSE(make_plan(size_of(largest + 1, 64), h100()).fits);
}

TEST(Stage10Plan, ASmallerChipFitsLess) {
  DeviceLimits small = h100();
  small.sm_count = 16;
  small.shared_bytes = 100 * 1024;
  EXPECT_FALSE(make_plan(size_of(1024, 4), small).fits);
  EXPECT_LT(largest_hidden_that_fits(size_of(1024, 4), small),
            largest_hidden_that_fits(size_of(1024, 4), h100()));
}

TEST(Stage10Plan, RequestPinsTheChoices) {
  PlanRequest request;
  request.tile_batch = 8;
  request.threads = 128;
  request.batch_groups = 2;
  request.group_batch = 3;
  const ProblemSize s = size_of(130, 10, 5);
  const Plan p = make_plan(s, h100(), request);
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.tile_batch, 8);
  EXPECT_EQ(p.threads, 128);
  EXPECT_EQ(p.batch_groups, 2);
  EXPECT_EQ(p.group_batch, 3);
  EXPECT_EQ(p.slices, 2);  // 10 rows, 2 groups of 3 per launch
}

TEST(Stage10Plan, SmallStagingForcesSeveralChunks) {
  PlanRequest request;
  request.tile_batch = 8;
  request.threads = 64;
  request.batch_groups = 1;
  const ProblemSize s = size_of(300, 64, 6);
  const Plan p = make_plan(s, h100(), request);
  expect_consistent(p, s, h100());
  EXPECT_GT(p.chunks, 2);
}

TEST(Stage10Plan, FlagsAreParsedOrRefused) {
  PlanRequest r = parse_plan_request("8,256,2", "", "");
  EXPECT_EQ(r.tile_batch, 8);
  EXPECT_EQ(r.threads, 256);
  EXPECT_EQ(r.batch_groups, 2);
  EXPECT_EQ(r.group_batch, 0);
  EXPECT_EQ(parse_plan_request("8,,2", "", "").batch_groups, 2);  // an empty field is automatic
  for (const char* bad : {"8,abc", "5", "8,100", "-1", "8,256,x", "4,256,1,0,9"}) {
    EXPECT_THROW(parse_plan_request(bad, "", ""), std::invalid_argument) << bad;
  }
  r = parse_plan_request("", "", "");
  EXPECT_EQ(r.tile_batch, 0);
  EXPECT_EQ(r.weights, WeightHome::kAuto);
  EXPECT_EQ(parse_plan_request("", "registers", "").weights, WeightHome::kRegisters);
  r = parse_plan_request("", "registers,32", "");
  EXPECT_EQ(r.k_per_lane, 32);
  EXPECT_EQ(make_plan(size_of(512, 1), h100(), r).k_per_lane, 32);
  EXPECT_THROW(parse_plan_request("", "registers,16", ""), std::invalid_argument);
  EXPECT_EQ(parse_plan_request("", "shared", "").weights, WeightHome::kSharedMemory);
  EXPECT_EQ(parse_plan_request("", "", "gemm").input, InputParts::kGemm);
  EXPECT_EQ(parse_plan_request("", "", "kernel").input, InputParts::kKernel);
  EXPECT_THROW(parse_plan_request("", "", "cublas"), std::invalid_argument);
  EXPECT_THROW(parse_plan_request("", "smem", ""), std::invalid_argument);
  // registers with a shared-memory plan contradict each other
  EXPECT_THROW(parse_plan_request("4,256", "registers", ""), std::invalid_argument);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
