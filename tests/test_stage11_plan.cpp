// Stage 09's launch planner (host code, no GPU): what fits on the H100's chip, what is refused
// and why, and the invariants the persistent kernel relies on, over many shapes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage 09's, as its build names it
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
  EXPECT_EQ(p.padded_batch % p.tile_batch, 0);
  EXPECT_GE(p.padded_batch, p.group_batch);
  EXPECT_EQ(p.lanes_batch * p.lanes_units * p.phases, kWarpSize);
  EXPECT_LE(p.tile_groups_units * p.tile_groups_batch * p.k_slices, p.threads / kWarpSize);
  EXPECT_GE(p.tile_groups_units * p.lanes_units, p.units_per_block);
  EXPECT_GE(p.tile_groups_batch * p.lanes_batch * p.tile_batch, p.padded_batch);
  EXPECT_LE(p.chunk_rows * p.padded_batch / 4, kStageRegisters * p.threads);
  EXPECT_GE(p.chunk_rows * p.chunks, s.hidden);
}

TEST(Stage09Plan, CanonicalConfigFitsInOneLaunchPerLayer) {
  const ProblemSize s = size_of(512, 64, 100, 4);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_EQ(p.slices, 1);
}

TEST(Stage09Plan, EveryShapeOfTheSweepsFits) {
  for (int hidden : {256, 512, 1024}) {
    for (int batch : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      const ProblemSize s = size_of(hidden, batch);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Stage09Plan, OddShapesAreConsistent) {
  for (int hidden : {1, 3, 33, 37, 200, 257, 1000, 1196}) {
    for (int batch : {1, 3, 5, 7, 130, 1000, 5000}) {
      const ProblemSize s = size_of(hidden, batch, 7);
      expect_consistent(make_plan(s, h100()), s, h100());
    }
  }
}

TEST(Stage09Plan, LargeBatchesRunInSlices) {
  const ProblemSize s = size_of(1024, 5000);
  const Plan p = make_plan(s, h100());
  expect_consistent(p, s, h100());
  EXPECT_GT(p.slices, 1);
}

TEST(Stage09Plan, TooLargeHiddenIsRefusedWithTheReasonAndTheLimit) {
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

TEST(Stage09Plan, ASmallerChipFitsLess) {
  DeviceLimits small = h100();
  small.sm_count = 16;
  small.shared_bytes = 100 * 1024;
  EXPECT_FALSE(make_plan(size_of(1024, 4), small).fits);
  EXPECT_LT(largest_hidden_that_fits(size_of(1024, 4), small),
            largest_hidden_that_fits(size_of(1024, 4), h100()));
}

TEST(Stage09Plan, RequestPinsTheChoices) {
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

TEST(Stage09Plan, SmallStagingForcesSeveralChunks) {
  PlanRequest request;
  request.tile_batch = 8;
  request.threads = 64;
  request.batch_groups = 1;
  const ProblemSize s = size_of(300, 64, 6);
  const Plan p = make_plan(s, h100(), request);
  expect_consistent(p, s, h100());
  EXPECT_GT(p.chunks, 2);
}

TEST(Stage09Plan, FlagsAreParsedOrRefused) {
  PlanRequest r = parse_plan_request("8,256,2");
  EXPECT_EQ(r.tile_batch, 8);
  EXPECT_EQ(r.threads, 256);
  EXPECT_EQ(r.batch_groups, 2);
  EXPECT_EQ(r.group_batch, 0);
  EXPECT_EQ(parse_plan_request("8,,2").batch_groups, 2);  // an empty field is automatic
  for (const char* bad : {"8,abc", "5", "8,100", "-1", "8,256,x", "4,256,1,0,9"}) {
    EXPECT_THROW(parse_plan_request(bad), std::invalid_argument) << bad;
  }
  r = parse_plan_request("");
  EXPECT_EQ(r.tile_batch, 0);
  EXPECT_EQ(r.threads, 0);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
