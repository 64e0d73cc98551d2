// The cuDNN baseline's algorithms, stage names, kinds, memory estimates and weight-space copy
// lists, without a GPU: making a stage touches neither the GPU nor cuDNN (all of that happens in
// prepare()), and a copy list is pointer arithmetic, so these run wherever the baseline is built.
// The GPU checks of the same stages are in test_cudnn_gpu.cpp.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudnn_lstm.h"
#include "cudnn_rnn.h"

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

TEST(CudnnTrainingNames, OneTrainingStagePerAlgorithm) {
  ASSERT_EQ(cudnn::all_algos().size(), 3u);
  EXPECT_EQ(cudnn::training_stage_info(cudnn::Algo::kStandard).name, "cudnn_standard_training");
  EXPECT_EQ(cudnn::training_stage_info(cudnn::Algo::kPersistStatic).name,
            "cudnn_persist_static_training");
  EXPECT_EQ(cudnn::training_stage_info(cudnn::Algo::kPersistDynamic).name,
            "cudnn_persist_dynamic_training");
  std::set<std::string> names;
  for (cudnn::Algo algo : cudnn::all_algos()) {
    const StageInfo training = cudnn::training_stage_info(algo);
    EXPECT_EQ(training.series, "") << training.name << ": a baseline has no series";
    EXPECT_EQ(training.name, "cudnn_" + cudnn::algo_name(algo) + "_training");
    names.insert(training.name);
    names.insert(cudnn::stage_info(algo).name);
  }
  EXPECT_EQ(names.size(), 6u) << "forward and training stages must not share a name";
}

TEST(CudnnTrainingNames, TrainingStagesAreTrainingInFp32) {
  for (cudnn::Algo algo : cudnn::all_algos()) {
    const std::string name = cudnn::training_stage_info(algo).name;
    const std::unique_ptr<TrainingStage> made = cudnn::make_training(algo);
    ASSERT_NE(made, nullptr) << name;
    EXPECT_EQ(made->kind(), StageKind::kTraining) << name;
    EXPECT_EQ(made->precision(), Precision::kFp32) << name;
    // The FP32 bound, except the persistent algorithms' weight and bias gradients: relative norm
    // 1e-4 (cudnn_training.cpp says why); max-abs and every other tensor keep the FP32 bound.
    const Tolerance fp32 = default_tolerance(Precision::kFp32);
    const bool persistent = algo != cudnn::Algo::kStandard;
    for (const char* tensor : {"grad_weight_hh_l0", "grad_bias_ih_l1"}) {
      const Tolerance bound = made->tolerance(tensor);
      EXPECT_EQ(bound.max_relative_norm, persistent ? 1e-4 : fp32.max_relative_norm)
          << name << " " << tensor;
      EXPECT_EQ(bound.max_absolute, fp32.max_absolute) << name << " " << tensor;
    }
    for (const char* tensor : {"y", "cy", "dx", "dh0", "dc0"}) {
      EXPECT_EQ(made->tolerance(tensor).max_relative_norm, fp32.max_relative_norm)
          << name << " " << tensor;
      EXPECT_EQ(made->tolerance(tensor).max_absolute, fp32.max_absolute) << name << " " << tensor;
    }

    // Through the factory the registry, the bench and lstm_cudnn use.
    const std::unique_ptr<Stage> from_info = cudnn::training_stage_info(algo).make();
    ASSERT_NE(from_info, nullptr) << name;
    EXPECT_EQ(from_info->kind(), StageKind::kTraining) << name;
    EXPECT_NE(dynamic_cast<TrainingStage*>(from_info.get()), nullptr) << name;

    // The forward stages stay forward.
    EXPECT_EQ(cudnn::make(algo)->kind(), StageKind::kForward) << cudnn::algo_name(algo);
    EXPECT_EQ(cudnn::stage_info(algo).make()->kind(), StageKind::kForward);
  }
}

// A training pass needs more device memory than a forward pass: at least a second copy of the
// parameters (the weight-gradient space) and a reserve space of at least the four gates of every
// layer, step and batch row.
TEST(CudnnTrainingWorkspace, CountsTheGradientAndReserveSpaces) {
  for (const ProblemSize& size :
       {ProblemSize{}, ProblemSize{37, 19, 3, 7, 3}, ProblemSize{1, 3, 2, 4, 2}}) {
    const std::size_t gates = 4 * static_cast<std::size_t>(size.hidden) * size.batch *
                              size.seq_len * size.layers * sizeof(float);
    for (cudnn::Algo algo : cudnn::all_algos()) {
      const std::size_t forward = cudnn::make(algo)->workspace_bytes(size);
      const std::size_t training = cudnn::make_training(algo)->workspace_bytes(size);
      EXPECT_GE(training, forward + count_tensors(size).parameters * sizeof(float) + gates)
          << cudnn::algo_name(algo) << " " << size.describe();
    }
  }
}

// One cudaMemcpyAsync must stay inside one allocation. Two PyTorch tensors whose allocations
// happen to lie back to back (here weight_ih and weight_hh of one layer, carved out of one host
// array: no GPU needed), copied into weight-space blocks that also lie back to back, give two
// copies, not one; the four gate blocks of one tensor still merge into one.
TEST(CudnnWeightCopies, NeverMergeAcrossTensors) {
  constexpr std::size_t kRows = 3, kGates = 4, kGateBlock = kRows * kRows;  // H = I = 3
  std::vector<float> pytorch(2 * kGates * kGateBlock), space(2 * kGates * kGateBlock);
  DeviceTensors t;
  t.w_ih = {pytorch.data()};
  t.w_hh = {pytorch.data() + kGates * kGateBlock};  // starts where weight_ih ends
  std::vector<cudnn::ParameterBlock> blocks;
  for (std::size_t q = 0; q < 2 * kGates; ++q) {
    const bool recurrent = q >= kGates;
    blocks.push_back({0, recurrent ? cudnn::Parameter::kWeightHh : cudnn::Parameter::kWeightIh,
                      (q % kGates) * kGateBlock, kGateBlock, space.data() + q * kGateBlock});
  }
  const std::vector<cudnn::DeviceCopy> copies = cudnn::copies_into_space(blocks, t);
  ASSERT_EQ(copies.size(), 2u) << "one copy per tensor expected";
  for (const cudnn::DeviceCopy& copy : copies) {
    EXPECT_EQ(copy.bytes, kGates * kGateBlock * sizeof(float));
  }
  EXPECT_EQ(copies[0].source, t.w_ih[0]);
  EXPECT_EQ(copies[1].source, t.w_hh[0]);
}

}  // namespace
}  // namespace lstm
