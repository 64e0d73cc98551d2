// Multi-GPU stage 00 on the CPU (stages/multigpu/00_data_parallel/split.h): the batch split over
// G GPUs (every row exactly once, contiguous, shares differing by one row at most, the longer
// ones first), the refusals' messages, and the bytes one pass all-reduces against hand-worked
// values. Compiled in the stage's namespace beside its split.h (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "split.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

TEST(BatchSplit, EvenSplit) {
  const std::vector<BatchShare> shares = split_batch(8, 4);
  ASSERT_EQ(shares.size(), 4u);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(shares[g].begin, 2 * g);
    EXPECT_EQ(shares[g].rows, 2);
  }
}

TEST(BatchSplit, UnevenSplitGivesTheFirstGpusOneRowMore) {
  const std::vector<BatchShare> shares = split_batch(7, 3);  // 3 + 2 + 2
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_EQ(shares[0].begin, 0);
  EXPECT_EQ(shares[0].rows, 3);
  EXPECT_EQ(shares[1].begin, 3);
  EXPECT_EQ(shares[1].rows, 2);
  EXPECT_EQ(shares[2].begin, 5);
  EXPECT_EQ(shares[2].rows, 2);
}

TEST(BatchSplit, EveryRowOnceForEveryBatchAndGpuCount) {
  for (int batch = 1; batch <= 70; ++batch) {
    for (int gpus = 1; gpus <= std::min(batch, 9); ++gpus) {
      const std::vector<BatchShare> shares = split_batch(batch, gpus);
      ASSERT_EQ(static_cast<int>(shares.size()), gpus);
      int next = 0;
      for (const BatchShare& share : shares) {
        EXPECT_EQ(share.begin, next) << "B=" << batch << " G=" << gpus;
        EXPECT_GE(share.rows, 1) << "B=" << batch << " G=" << gpus;
        EXPECT_GE(share.rows, shares.back().rows) << "B=" << batch << " G=" << gpus;
        EXPECT_LE(share.rows, shares.back().rows + 1) << "B=" << batch << " G=" << gpus;
        next = share.begin + share.rows;
      }
      EXPECT_EQ(next, batch) << "B=" << batch << " G=" << gpus;
    }
  }
}

TEST(BatchSplit, OneRowPerGpu) {
  const std::vector<BatchShare> shares = split_batch(5, 5);
  for (int g = 0; g < 5; ++g) {
    EXPECT_EQ(shares[g].begin, g);
    EXPECT_EQ(shares[g].rows, 1);
  }
}

TEST(BatchSplit, MoreGpusThanRowsThrows) {
  EXPECT_THROW(split_batch(3, 4), std::invalid_argument);
  EXPECT_THROW(split_batch(3, 0), std::invalid_argument);
}

TEST(BatchSplit, Refusals) {
  EXPECT_EQ(split_refusal(16, 4, 8), "");
  EXPECT_EQ(split_refusal(7, 7, 8), "");
  EXPECT_EQ(split_refusal(4, 8, 8),
            "--gpus 8 splits a batch of 4 rows: every GPU needs at least one row (at most "
            "--gpus 4)");
  EXPECT_EQ(split_refusal(16, 4, 2),
            "--gpus 4 asks for more GPUs than the 2 visible here (CUDA_VISIBLE_DEVICES sets "
            "which are)");
  EXPECT_EQ(split_refusal(16, 0, 2), "--gpus 0: at least one GPU");
}

TEST(AllReduceBytes, HandWorked) {
  // H = 3, I = 5, L = 2: layer 0 12·(5 + 3) + 24 = 120 floats, layer 1 12·(3 + 3) + 24 = 96.
  EXPECT_EQ(allreduce_bytes(ProblemSize{3, 5, 7, 11, 2}), (120u + 96u) * 4u);
  // H = I = 1024, L = 4 (the scaling shapes): 4 · (4096 · 2048 + 8192) bytes per layer.
  EXPECT_EQ(allreduce_bytes(ProblemSize{1024, 1024, 64, 100, 4}), 4u * 33587200u);
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
