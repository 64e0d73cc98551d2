// Training stage 06's launch planner (host code, no GPU): what fits on the H100's chip and on a
// made-up smaller one, what is refused and why, and the invariants both persistent kernels rely
// on, over many shapes.
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
  EXPECT_LE(f.blocks, device.sm_count);                     // one block per SM, all resident
  EXPECT_GE(f.units_per_block * f.blocks, s.hidden);        // every unit has an owner
  EXPECT_LT(f.units_per_block * (f.blocks - 1), s.hidden);  // and no block is empty
  EXPECT_GE(f.rows, 1);
  EXPECT_LE(f.rows, s.batch);
  EXPECT_EQ(f.slices, ceil_div(s.batch, f.rows));  // every batch row runs once
  EXPECT_GE(f.k_slices, 1);
  EXPECT_LE(f.k_slices, kMaxKSlices);
  EXPECT_EQ(f.shared_bytes, forward_shared_bytes(s.hidden, f.units_per_block, f.rows, f.k_slices));
  EXPECT_LE(f.shared_bytes, device.shared_bytes);

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
  // forward_kernel.cuh: w [H][J] float4 | sums [S][J * rows] float4 | h [rows][H + 4] | c | biases
  EXPECT_EQ(forward_shared_bytes(512, 4, 64, 1),
            (4u * 4 * 512 + 4 * 1 * 4 * 64 + 64 * 516 + 4 * 64 + 4 * 4) * sizeof(float));
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
    EXPECT_GT(p.forward.blocks, 100);
  }
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
  request.forward_rows = 2;
  request.backward_groups = 2;
  request.backward_rows = 3;
  const ProblemSize s = size_of(130, 10, 5);
  const Plan p = make_plan(s, h100(), request);
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.forward.rows, 2);
  EXPECT_EQ(p.forward.slices, 5);
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
  request.forward_rows = 5000;  // more rows of h than fit beside W_hh's slice
  const Plan q = make_plan(size_of(1024, 5000), h100(), request);
  EXPECT_FALSE(q.fits);
  EXPECT_NE(q.why.find("the forward's slice of W_hh"), std::string::npos) << q.why;
}

TEST(Training06Plan, FlagsAreParsedOrRefused) {
  PlanRequest r = parse_plan_request("4,2,3");
  EXPECT_EQ(r.forward_rows, 4);
  EXPECT_EQ(r.backward_groups, 2);
  EXPECT_EQ(r.backward_rows, 3);
  r = parse_plan_request("0,2");
  EXPECT_EQ(r.forward_rows, 0);
  EXPECT_EQ(r.backward_groups, 2);
  EXPECT_EQ(r.backward_rows, 0);
  EXPECT_EQ(parse_plan_request(",,7").backward_rows, 7);  // an empty field is automatic
  for (const char* bad : {"x", "1,2,3,4", "-1", "2,y", "1.5"}) {
    EXPECT_THROW(parse_plan_request(bad), std::invalid_argument) << bad;
  }
  r = parse_plan_request("");
  EXPECT_EQ(r.forward_rows, 0);
  EXPECT_EQ(r.backward_groups, 0);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
