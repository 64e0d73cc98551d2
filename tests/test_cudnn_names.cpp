// The cuDNN baseline's names: its algorithms and the stage names they run under. Host code only:
// this suite needs no GPU and runs everywhere the baseline is built (cuDNN found), labelled cpu.
// The GPU suite of the same baseline is tests/test_cudnn_gpu.cpp.
#include <gtest/gtest.h>

#include <stdexcept>

#include "cudnn_lstm.h"

namespace lstm {
namespace {

namespace cudnn = baseline_cudnn;

TEST(CudnnNames, AlgorithmsAndStageNames) {
  ASSERT_EQ(cudnn::all_algos().size(), 3u);
  EXPECT_EQ(cudnn::algo_name(cudnn::Algo::kStandard), "standard");
  EXPECT_EQ(cudnn::algo_name(cudnn::Algo::kPersistStatic), "persist_static");
  EXPECT_EQ(cudnn::algo_name(cudnn::Algo::kPersistDynamic), "persist_dynamic");
  EXPECT_EQ(cudnn::stage_info(cudnn::Algo::kStandard).name, "cudnn_standard");
  EXPECT_EQ(cudnn::stage_info(cudnn::Algo::kPersistDynamic).name, "cudnn_persist_dynamic");
  for (cudnn::Algo algo : cudnn::all_algos())
    EXPECT_EQ(cudnn::algo_from_name(cudnn::algo_name(algo)), algo);
  EXPECT_THROW(cudnn::algo_from_name("bogus"), std::invalid_argument);
}

}  // namespace
}  // namespace lstm
