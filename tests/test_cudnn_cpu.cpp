// The cuDNN baseline's algorithms, stage names, kinds, memory estimates and weight-space copy
// lists, without a GPU: making a stage touches neither the GPU nor cuDNN (all of that happens in
// prepare()), and a copy list is pointer arithmetic, so these run wherever the baseline is built.
// The GPU checks of the same stages are in test_cudnn_gpu.cpp.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
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
    // The FP32 bound everywhere, except the persistent algorithms' weight and bias gradients
    // (relative norm 1e-4: their summation order, measured at H = 1; cudnn_training.cpp).
    const Tolerance fp32 = default_tolerance(Precision::kFp32);
    const double gradient_norm_bound = algo == cudnn::Algo::kStandard ? 1e-5 : 1e-4;
    for (const char* tensor : {"grad_weight_hh_l0", "grad_weight_ih_l1", "grad_bias_ih_l0"}) {
      const Tolerance bound = made->tolerance(tensor);
      EXPECT_EQ(bound.max_relative_norm, gradient_norm_bound) << name << " " << tensor;
      EXPECT_EQ(bound.max_absolute, fp32.max_absolute) << name << " " << tensor;
    }
    for (const char* tensor : {"y", "hy", "dx", "dh0", "dc0"}) {
      EXPECT_EQ(made->tolerance(tensor).max_relative_norm, fp32.max_relative_norm)
          << name << " " << tensor;
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
    EXPECT_EQ(copy.count, kGates * kGateBlock);
    EXPECT_EQ(copy.source_type, cudnn::ElementType::kFloat);
    EXPECT_EQ(copy.destination_type, cudnn::ElementType::kFloat);
  }
  EXPECT_EQ(copies[0].source, t.w_ih[0]);
  EXPECT_EQ(copies[1].source, t.w_hh[0]);
}

// An FP16 weight space: 2-byte blocks. The copies convert (float32 in, FP16 out), and blocks
// that lie back to back in 2-byte elements, and in float32 on the PyTorch side, still merge;
// out of the dweight space the other way round.
TEST(CudnnWeightCopies, ConvertIntoAndOutOfAHalfPrecisionSpace) {
  constexpr std::size_t kRows = 3, kGates = 4, kGateBlock = kRows * kRows;
  std::vector<float> pytorch(kGates * kGateBlock), gradients(kGates * kGateBlock);
  std::vector<std::uint16_t> space(kGates * kGateBlock);  // FP16 elements
  DeviceTensors t;
  t.w_ih = {pytorch.data()};
  t.grad_w_ih = {gradients.data()};
  std::vector<cudnn::ParameterBlock> blocks;
  for (std::size_t q = 0; q < kGates; ++q) {
    blocks.push_back({0, cudnn::Parameter::kWeightIh, q * kGateBlock, kGateBlock,
                      space.data() + q * kGateBlock});
  }
  const auto in = cudnn::copies_into_space(blocks, t, cudnn::ElementType::kHalf);
  ASSERT_EQ(in.size(), 1u) << "the four gate blocks lie back to back on both sides";
  EXPECT_EQ(in[0].count, kGates * kGateBlock);
  EXPECT_EQ(in[0].source, pytorch.data());
  EXPECT_EQ(in[0].source_type, cudnn::ElementType::kFloat);
  EXPECT_EQ(in[0].destination, space.data());
  EXPECT_EQ(in[0].destination_type, cudnn::ElementType::kHalf);
  const auto out = cudnn::copies_out_of_space(blocks, t, cudnn::ElementType::kHalf);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].destination, gradients.data());
  EXPECT_EQ(out[0].destination_type, cudnn::ElementType::kFloat);
  EXPECT_EQ(out[0].source_type, cudnn::ElementType::kHalf);
  // Read as float32 blocks (4 bytes), the same addresses would not be contiguous: one per gate.
  EXPECT_EQ(cudnn::copies_into_space(blocks, t, cudnn::ElementType::kFloat).size(), kGates);
}

// The reduced-precision stages: one per algorithm, precision and kind, each named with its
// precision (FP32 keeps the names the records have always had), computing in that precision,
// and checked against the reduced-precision bounds.
TEST(CudnnPrecisions, NamesKindsAndBounds) {
  ASSERT_EQ(cudnn::all_precisions(),
            (std::vector<Precision>{Precision::kFp32, Precision::kFp16, Precision::kBf16}));
  EXPECT_EQ(cudnn::stage_info(cudnn::Algo::kPersistStatic, Precision::kFp16).name,
            "cudnn_persist_static_fp16");
  EXPECT_EQ(cudnn::training_stage_info(cudnn::Algo::kStandard, Precision::kBf16).name,
            "cudnn_standard_bf16_training");
  EXPECT_EQ(cudnn::stage_info(cudnn::Algo::kStandard, Precision::kFp32).name, "cudnn_standard");
  EXPECT_EQ(cudnn::stage_info(cudnn::Algo::kStandard).name, "cudnn_standard");

  std::set<std::string> names;
  for (cudnn::Algo algo : cudnn::all_algos()) {
    for (Precision precision : cudnn::all_precisions()) {
      const StageInfo forward = cudnn::stage_info(algo, precision);
      const StageInfo training = cudnn::training_stage_info(algo, precision);
      names.insert(forward.name);
      names.insert(training.name);
      const std::string suffix =
          precision == Precision::kFp32 ? "" : std::string("_") + precision_name(precision);
      EXPECT_EQ(forward.name, "cudnn_" + cudnn::algo_name(algo) + suffix);
      EXPECT_EQ(training.name, "cudnn_" + cudnn::algo_name(algo) + suffix + "_training");
      for (const StageInfo& info : {forward, training}) {
        const std::unique_ptr<Stage> stage = info.make();
        EXPECT_EQ(stage->precision(), precision) << info.name;
        EXPECT_EQ(info.series, "") << info.name;
        if (precision == Precision::kFp32) continue;
        // The name says the precision the stage computes in, and nothing else does.
        EXPECT_NE(info.name.find(precision_name(precision)), std::string::npos) << info.name;
        for (const char* tensor :
             {"y", "hy", "cy", "dx", "dh0", "dc0", "grad_weight_hh_l0", "grad_bias_ih_l1"}) {
          const Tolerance expected = reduced_precision_tolerance(precision, tensor);
          const Tolerance bound = stage->tolerance(tensor);
          EXPECT_EQ(bound.max_relative_norm, expected.max_relative_norm) << info.name << tensor;
          EXPECT_EQ(bound.max_absolute, expected.max_absolute) << info.name << tensor;
        }
      }
      EXPECT_EQ(cudnn::make(algo, precision)->kind(), StageKind::kForward);
      EXPECT_EQ(cudnn::make_training(algo, precision)->kind(), StageKind::kTraining);
      EXPECT_EQ(cudnn::make_training(algo, precision)->precision(), precision);
    }
  }
  EXPECT_EQ(names.size(), 18u) << "three algorithms, three precisions, two kinds: no name shared";
}

// A reduced-precision stage's memory estimate counts the buffers its float32 tensors are
// converted into (x, y, and the states; for training their gradients too).
TEST(CudnnPrecisions, WorkspaceCountsTheStagingBuffers) {
  const ProblemSize size{37, 19, 3, 7, 3};
  const TensorCounts counts = count_tensors(size);
  const std::size_t forward_staging = (counts.x + counts.y + 4 * counts.state) * 2;
  EXPECT_EQ(cudnn::staging_bytes(size, Precision::kFp32, true), 0u);
  EXPECT_EQ(cudnn::staging_bytes(size, Precision::kFp16, false), forward_staging);
  EXPECT_EQ(cudnn::staging_bytes(size, Precision::kBf16, true), 2 * forward_staging);
  for (cudnn::Algo algo : cudnn::all_algos()) {
    EXPECT_EQ(cudnn::make(algo, Precision::kFp16)->workspace_bytes(size),
              cudnn::make(algo)->workspace_bytes(size) + forward_staging);
    EXPECT_EQ(cudnn::make_training(algo, Precision::kBf16)->workspace_bytes(size),
              cudnn::make_training(algo)->workspace_bytes(size) + 2 * forward_staging);
  }
}

}  // namespace
}  // namespace lstm
