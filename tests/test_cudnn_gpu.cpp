// The cuDNN baseline, every algorithm, forward and training passes, against the CPU reference on
// odd shapes and against the PyTorch fixtures (forward outputs; autograd's gradients). These tests
// need a CUDA GPU and are skipped, with the reason, without one. An algorithm that cuDNN refuses
// for a shape (UnsupportedError from prepare) is skipped with cuDNN's message: a documented
// refusal, not a pass; any other reason not to run (e.g. the harness's memory check) fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/quantize.h"
#include "cudnn_lstm.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"

namespace lstm {
namespace {

namespace cudnn = baseline_cudnn;

using testing::Shape;

// The stages' odd shapes, and one multiple-of-128 shape that the persistent algorithms are most
// likely to accept.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> list = [] {
    std::vector<Shape> all = testing::odd_shapes();
    all.push_back({"H256_B8_L1", ProblemSize{256, 256, 8, 16, 1}});
    return all;
  }();
  return list;
}

/// Whether `refused` (prepare_stage's answer) is cuDNN refusing the configuration.
bool is_cudnn_refusal(const std::string& refused) {
  return refused.rfind("cuDNN ", 0) == 0 && refused.find(" refuses it: ") != std::string::npos;
}

/// Skips (cuDNN's own refusal, with its message) or fails (any other reason) for `refused`.
#define SKIP_ONLY_FOR_CUDNN_REFUSAL(name, size, refused)                                     \
  do {                                                                                       \
    if (!is_cudnn_refusal(refused)) {                                                        \
      FAIL() << (name) << " did not run " << (size).describe() << ", and not because cuDNN " \
             << "refused it: " << (refused);                                                 \
    }                                                                                        \
    GTEST_SKIP() << (name) << " refused " << (size).describe() << ": " << (refused);         \
  } while (0)

/// Runs the stage `info` on `params` twice (two passes after one prepare; for a training stage,
/// with `upstream`, each pass is forward then backward) and stores both runs' outputs in `runs`.
/// Returns false, with cuDNN's reason in `refused`, when prepare() throws UnsupportedError.
///
/// Unlike the stages' test (testing::run_twice), the two runs are not required to agree bit for
/// bit: cuDNN's release notes (7.6.5) say its RNN calls may be nondeterministic when cuBLAS runs
/// on several internal streams, and cuDNN is not ours to fix. Instead each run must pass the
/// check on its own, which still catches a pass that depends on state left by an earlier one
/// (e.g. weight gradients accumulated onto the previous pass's). Bitwise differences are
/// printed, tensor by tensor, for the record.
bool run_algo(const StageInfo& info, Stage& stage, const LstmParams& params,
              std::vector<std::vector<OutputTensor>>* runs, std::string* refused,
              const UpstreamGradients* upstream = nullptr) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string unsupported = stage.unsupported_reason(params.size, prop);
  EXPECT_EQ(unsupported, "") << info.name << " refuses " << params.size.describe();
  DeviceProblem problem(params, upstream);
  *refused = prepare_stage(stage, problem);
  if (!refused->empty()) return false;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  runs->clear();
  runs->push_back(run_for_check(stage, problem, stream));
  runs->push_back(run_for_check(stage, problem, stream));
  CUDA_CHECK(cudaStreamDestroy(stream));
  const std::vector<OutputTensor>& first = runs->at(0);
  const std::vector<OutputTensor>& second = runs->at(1);
  EXPECT_EQ(first.size(), second.size()) << info.name;
  std::string differing;
  for (std::size_t i = 0; i < std::min(first.size(), second.size()); ++i) {
    if (first[i].values.size() != second[i].values.size() ||
        std::memcmp(first[i].values.data(), second[i].values.data(),
                    first[i].values.size() * sizeof(float)) != 0) {
      differing += " " + first[i].name;
    }
  }
  if (!differing.empty()) {
    std::cout << "[   INFO   ] " << info.name << " " << params.size.describe()
              << ": the two passes differ bitwise in" << differing << " (each is checked)\n";
  }
  return true;
}

StageInfo algo_info(std::size_t index) {
  return cudnn::stage_info(cudnn::all_algos().at(index));
}

// The names (algorithms, stage names) are checked without a GPU in test_cudnn_cpu.cpp.

class CudnnVsReference : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(CudnnVsReference, MatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const StageInfo info = algo_info(std::get<0>(GetParam()));
  const Shape& shape = shapes()[std::get<1>(GetParam())];
  const LstmParams params = generate_params(shape.size, 42);
  std::unique_ptr<Stage> stage = info.make();
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, shape.size, refused);
  }
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const CheckReport report = testing::check_against_reference(*stage, params, runs[run]);
    EXPECT_TRUE(report.passed()) << info.name << " " << shape.size.describe() << ", forward pass "
                                 << run + 1 << "\n"
                                 << report.describe();
    EXPECT_EQ(report.tensors.size(), 3u);  // y, hy and cy all compared
  }
}

std::string case_name(const ::testing::TestParamInfo<CudnnVsReference::ParamType>& info) {
  return algo_info(std::get<0>(info.param)).name + "_" + shapes()[std::get<1>(info.param)].label;
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgos, CudnnVsReference,
    ::testing::Combine(::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                       ::testing::Range<std::size_t>(0, shapes().size())),
    case_name);

class CudnnVsPyTorch : public ::testing::TestWithParam<std::size_t> {};

TEST_P(CudnnVsPyTorch, ReproducesThePyTorchFixture) {
  SKIP_WITHOUT_GPU();
  const StageInfo info = algo_info(GetParam());
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) + "/pytorch_fixture";
  const LstmParams params = load_params(dir, {});
  std::unique_ptr<Stage> stage = info.make();
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, params.size, refused);
  }
  // PyTorch's outputs (float64, stored as float32) play the reference here.
  const ReferenceForCheck torch = load_reference(dir, params.size, StageKind::kForward);
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const CheckReport report = check_run(*stage, runs[run], torch);
    EXPECT_TRUE(report.passed()) << info.name << " vs PyTorch, forward pass " << run + 1 << "\n"
                                 << report.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgos, CudnnVsPyTorch,
                         ::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return algo_info(info.param).name;
                         });

/// Counts the NaN and Inf elements of `values`.
std::size_t count_nonfinite(const std::vector<float>& values) {
  std::size_t count = 0;
  for (float value : values)
    if (!std::isfinite(value)) ++count;
  return count;
}

// cuDNN's STANDARD algorithm must accept the canonical configuration (the 2016 blog's): prepare
// must not throw, and a forward pass must write every output (no reference run: it is large).
TEST(CudnnStandard, SupportsTheCanonicalConfig) {
  SKIP_WITHOUT_GPU();
  const ProblemSize size;  // the defaults are the canonical config: H=512 B=64 T=100 L=4, I=H
  ASSERT_EQ(size.describe(), (ProblemSize{512, 512, 64, 100, 4}).describe());
  const LstmParams params = generate_params(size, 1);
  std::unique_ptr<Stage> stage = cudnn::make(cudnn::Algo::kStandard);
  DeviceProblem problem(params);
  const std::string refused = prepare_stage(*stage, problem);
  ASSERT_EQ(refused, "") << "cudnn_standard refuses the canonical config " << size.describe();
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto outputs = run_for_check(*stage, problem, stream);  // poisons first
  CUDA_CHECK(cudaStreamDestroy(stream));
  ASSERT_EQ(outputs.size(), 3u);
  for (const OutputTensor& tensor : outputs) {
    EXPECT_EQ(count_nonfinite(tensor.values), 0u)
        << tensor.name << " has NaN/Inf (unwritten) elements";
  }
}

// ---- The training stages: forward in training mode, backward data, backward weights. ----------

StageInfo training_info(std::size_t index) {
  return cudnn::training_stage_info(cudnn::all_algos().at(index));
}

// A few of the odd shapes (the training reference costs three forward passes): I != H with three
// layers, B = 1, T = 1, H = 1, and T not a multiple of ten.
const std::vector<Shape>& training_shapes() {
  static const std::vector<Shape> list = [] {
    std::vector<Shape> some;
    for (const Shape& shape : testing::odd_shapes()) {
      const std::string label = shape.label;
      if (label == "I_ne_H_L3" || label == "B1" || label == "T1" || label == "H1" ||
          label == "T23_short_last_chunk") {
        some.push_back(shape);
      }
    }
    return some;
  }();
  return list;
}

TEST(CudnnTrainingShapes, AreTheOnesNamed) {
  EXPECT_EQ(training_shapes().size(), 5u);
}

class CudnnTrainingVsReference
    : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(CudnnTrainingVsReference, MatchesTheCpuReferenceOnEveryGradient) {
  SKIP_WITHOUT_GPU();
  const StageInfo info = training_info(std::get<0>(GetParam()));
  const Shape& shape = training_shapes()[std::get<1>(GetParam())];
  const LstmParams params = generate_params(shape.size, 42);
  const UpstreamGradients upstream = generate_upstream(shape.size, 42);
  std::unique_ptr<Stage> stage = info.make();
  ASSERT_EQ(stage->kind(), StageKind::kTraining) << info.name;
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused, &upstream)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, shape.size, refused);
  }
  const std::size_t expected = output_layouts(shape.size, StageKind::kTraining).size();
  for (std::size_t run = 0; run < runs.size(); ++run) {
    ASSERT_EQ(runs[run].size(), expected) << info.name << ": not every output was downloaded";
    const CheckReport report =
        testing::check_against_reference(*stage, params, runs[run], &upstream);
    EXPECT_TRUE(report.passed()) << info.name << " " << shape.size.describe() << ", training pass "
                                 << run + 1 << "\n"
                                 << report.describe();
    // y, hy, cy, dx, dh0, dc0 and four gradients per layer, all compared; nothing left out.
    EXPECT_EQ(report.tensors.size(), expected) << report.describe();
    EXPECT_TRUE(report.not_checked.empty()) << report.describe();
  }
}

std::string training_case_name(
    const ::testing::TestParamInfo<CudnnTrainingVsReference::ParamType>& info) {
  return training_info(std::get<0>(info.param)).name + "_" +
         training_shapes()[std::get<1>(info.param)].label;
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgos, CudnnTrainingVsReference,
    ::testing::Combine(::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                       ::testing::Range<std::size_t>(0, training_shapes().size())),
    training_case_name);

class CudnnTrainingVsPyTorch : public ::testing::TestWithParam<std::size_t> {};

// PyTorch's autograd (float64 on the CPU, stored as float32) plays the reference: y, hy, cy and
// torch.autograd.grad((y, hy, cy), (x, h0, c0, *params), (dy, dhy, dcy)).
TEST_P(CudnnTrainingVsPyTorch, ReproducesThePyTorchAutogradFixture) {
  SKIP_WITHOUT_GPU();
  const StageInfo info = training_info(GetParam());
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) + "/pytorch_training_fixture";
  const LstmParams params = load_params(dir, {});
  ASSERT_TRUE(has_upstream_files(dir)) << dir << " lacks dy.npy, dhy.npy, dcy.npy";
  const UpstreamGradients upstream = load_upstream(dir, params.size, /*seed (unused)=*/0);
  std::unique_ptr<Stage> stage = info.make();
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused, &upstream)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, params.size, refused);
  }
  const ReferenceForCheck torch = load_reference(dir, params.size, StageKind::kTraining);
  ASSERT_EQ(torch.tensors.size(), output_layouts(params.size, StageKind::kTraining).size());
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const CheckReport report = check_run(*stage, runs[run], torch);
    EXPECT_TRUE(report.passed()) << info.name << " vs PyTorch autograd, training pass " << run + 1
                                 << "\n"
                                 << report.describe();
    EXPECT_EQ(report.tensors.size(), torch.tensors.size());
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgos, CudnnTrainingVsPyTorch,
                         ::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return training_info(info.param).name;
                         });

// cuDNN's STANDARD algorithm must accept a training pass of the canonical configuration too (the
// benchmark's first): prepare must not throw, and forward + backward must write every output
// and every gradient (no reference run: it is over the CPU reference's budget).
TEST(CudnnStandardTraining, SupportsTheCanonicalConfig) {
  SKIP_WITHOUT_GPU();
  const ProblemSize size;  // the canonical config
  const LstmParams params = generate_params(size, 1);
  const UpstreamGradients upstream = generate_upstream(size, 1);
  std::unique_ptr<Stage> stage = cudnn::make_training(cudnn::Algo::kStandard);
  DeviceProblem problem(params, &upstream);
  const std::string refused = prepare_stage(*stage, problem);
  ASSERT_EQ(refused, "") << "cudnn_standard_training refuses the canonical config "
                         << size.describe();
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto outputs = run_for_check(*stage, problem, stream);  // poisons first
  CUDA_CHECK(cudaStreamDestroy(stream));
  ASSERT_EQ(outputs.size(), output_layouts(size, StageKind::kTraining).size());
  for (const OutputTensor& tensor : outputs) {
    EXPECT_EQ(count_nonfinite(tensor.values), 0u)
        << tensor.name << " has NaN/Inf (unwritten) elements";
  }
}

// ---- FP16 and BF16: every algorithm, forward and training, on data rounded to the precision. ---
//
// Each case rounds its inputs (and upstream gradients) to the precision on the host, as
// run_stages does, and checks against the FP64 reference of those very values, within the
// stage's reduced-precision bounds. Every output must also be a value of the
// precision (cuDNN wrote FP16/BF16, converted exactly to float32): nothing FP32 passes as FP16.
// A refusal is a skip only when it is cuDNN's own ("cuDNN x.y.z refuses it: ..."), never a pass;
// any other reason not to run fails. The measured errors are printed ([ MEASURED ]) for the
// bounds' next revision.

const std::vector<Precision>& reduced_precisions() {
  static const std::vector<Precision> list = {Precision::kFp16, Precision::kBf16};
  return list;
}

/// Checks `outputs` of `stage` against the reference of the (rounded) `params`: passes within
/// the stage's bounds, all `expected_tensors` compared, every value one of the precision's.
void expect_reduced_precision_pass(const Stage& stage, const std::string& name,
                                   const LstmParams& params,
                                   const std::vector<OutputTensor>& outputs,
                                   std::size_t expected_tensors,
                                   const UpstreamGradients* upstream = nullptr) {
  const Precision precision = stage.precision();
  const CheckReport report = testing::check_against_reference(stage, params, outputs, upstream);
  EXPECT_TRUE(report.passed()) << name << " " << params.size.describe() << "\n"
                               << report.describe();
  EXPECT_EQ(report.tensors.size(), expected_tensors) << report.describe();
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
  for (const TensorCheck& tensor : report.tensors) {
    std::cout << "[ MEASURED ] " << name << " " << params.size.describe() << " " << tensor.name
              << " relative_norm " << tensor.relative_norm << " max_absolute "
              << tensor.max_absolute << " (bound " << tensor.bound.max_relative_norm << ", "
              << tensor.bound.max_absolute << ")\n";
  }
  for (const OutputTensor& tensor : outputs) {
    std::size_t not_representable = 0;
    for (float value : tensor.values)
      if (!representable(value, precision)) ++not_representable;
    EXPECT_EQ(not_representable, 0u) << name << ": " << tensor.name << " holds values that are not "
                                     << precision_name(precision);
  }
}

class CudnnReducedVsReference
    : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, std::size_t>> {};

TEST_P(CudnnReducedVsReference, MatchesTheReferenceOfTheRoundedInputs) {
  SKIP_WITHOUT_GPU();
  const cudnn::Algo algo = cudnn::all_algos().at(std::get<0>(GetParam()));
  const Precision precision = reduced_precisions().at(std::get<1>(GetParam()));
  const Shape& shape = shapes()[std::get<2>(GetParam())];
  LstmParams params = generate_params(shape.size, 42);
  quantize_problem(precision, params);
  const StageInfo info = cudnn::stage_info(algo, precision);
  std::unique_ptr<Stage> stage = info.make();
  ASSERT_EQ(stage->precision(), precision);
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, shape.size, refused);
  }
  for (const std::vector<OutputTensor>& run : runs)
    expect_reduced_precision_pass(*stage, info.name, params, run, 3);
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgos, CudnnReducedVsReference,
    ::testing::Combine(::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                       ::testing::Range<std::size_t>(0, reduced_precisions().size()),
                       ::testing::Range<std::size_t>(0, shapes().size())),
    [](const ::testing::TestParamInfo<CudnnReducedVsReference::ParamType>& info) {
      return cudnn::stage_name(cudnn::all_algos().at(std::get<0>(info.param)),
                               reduced_precisions().at(std::get<1>(info.param)),
                               StageKind::kForward) +
             "_" + shapes()[std::get<2>(info.param)].label;
    });

class CudnnReducedTrainingVsReference
    : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, std::size_t>> {};

TEST_P(CudnnReducedTrainingVsReference, MatchesTheReferenceOfTheRoundedInputsOnEveryGradient) {
  SKIP_WITHOUT_GPU();
  const cudnn::Algo algo = cudnn::all_algos().at(std::get<0>(GetParam()));
  const Precision precision = reduced_precisions().at(std::get<1>(GetParam()));
  const Shape& shape = training_shapes()[std::get<2>(GetParam())];
  LstmParams params = generate_params(shape.size, 42);
  UpstreamGradients upstream = generate_upstream(shape.size, 42);
  quantize_problem(precision, params, &upstream);
  const StageInfo info = cudnn::training_stage_info(algo, precision);
  std::unique_ptr<Stage> stage = info.make();
  ASSERT_EQ(stage->kind(), StageKind::kTraining);
  ASSERT_EQ(stage->precision(), precision);
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused, &upstream)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, shape.size, refused);
  }
  const std::size_t expected = output_layouts(shape.size, StageKind::kTraining).size();
  for (const std::vector<OutputTensor>& run : runs)
    expect_reduced_precision_pass(*stage, info.name, params, run, expected, &upstream);
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgos, CudnnReducedTrainingVsReference,
    ::testing::Combine(::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                       ::testing::Range<std::size_t>(0, reduced_precisions().size()),
                       ::testing::Range<std::size_t>(0, training_shapes().size())),
    [](const ::testing::TestParamInfo<CudnnReducedTrainingVsReference::ParamType>& info) {
      return cudnn::stage_name(cudnn::all_algos().at(std::get<0>(info.param)),
                               reduced_precisions().at(std::get<1>(info.param)),
                               StageKind::kTraining) +
             "_" + training_shapes()[std::get<2>(info.param)].label;
    });

// The committed PyTorch fixtures' data (forward; training with its dy, dhy, dcy), rounded to the
// precision: against the FP64 reference of the rounded values (the fixtures' own outputs are
// PyTorch's of the unrounded ones, so they are not the reference here).
class CudnnReducedOnFixtures
    : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, bool>> {};

TEST_P(CudnnReducedOnFixtures, MatchesTheReferenceOfTheRoundedFixture) {
  SKIP_WITHOUT_GPU();
  const cudnn::Algo algo = cudnn::all_algos().at(std::get<0>(GetParam()));
  const Precision precision = reduced_precisions().at(std::get<1>(GetParam()));
  const bool training = std::get<2>(GetParam());
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) +
                          (training ? "/pytorch_training_fixture" : "/pytorch_fixture");
  LstmParams params = load_params(dir, {});
  UpstreamGradients upstream;
  if (training) {
    ASSERT_TRUE(has_upstream_files(dir)) << dir << " lacks dy.npy, dhy.npy, dcy.npy";
    upstream = load_upstream(dir, params.size, /*seed (unused)=*/0);
  }
  quantize_problem(precision, params, training ? &upstream : nullptr);
  const StageInfo info =
      training ? cudnn::training_stage_info(algo, precision) : cudnn::stage_info(algo, precision);
  std::unique_ptr<Stage> stage = info.make();
  std::vector<std::vector<OutputTensor>> runs;
  std::string refused;
  if (!run_algo(info, *stage, params, &runs, &refused, training ? &upstream : nullptr)) {
    SKIP_ONLY_FOR_CUDNN_REFUSAL(info.name, params.size, refused);
  }
  const std::size_t expected =
      output_layouts(params.size, training ? StageKind::kTraining : StageKind::kForward).size();
  for (const std::vector<OutputTensor>& run : runs) {
    expect_reduced_precision_pass(*stage, info.name, params, run, expected,
                                  training ? &upstream : nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgos, CudnnReducedOnFixtures,
    ::testing::Combine(::testing::Range<std::size_t>(0, cudnn::all_algos().size()),
                       ::testing::Range<std::size_t>(0, reduced_precisions().size()),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<CudnnReducedOnFixtures::ParamType>& info) {
      const bool training = std::get<2>(info.param);
      return cudnn::stage_name(cudnn::all_algos().at(std::get<0>(info.param)),
                               reduced_precisions().at(std::get<1>(info.param)),
                               training ? StageKind::kTraining : StageKind::kForward) +
             "_fixture";
    });

// cuDNN's STANDARD algorithm must accept the canonical configuration in FP16 and BF16, forward
// and training (the benchmark's first rows): prepare must not refuse, and a pass must write
// every output with finite values of the precision (no reference run: it is large).
class CudnnReducedStandard : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(CudnnReducedStandard, SupportsTheCanonicalConfig) {
  SKIP_WITHOUT_GPU();
  const Precision precision = reduced_precisions().at(std::get<0>(GetParam()));
  const bool training = std::get<1>(GetParam());
  const ProblemSize size;  // the canonical config
  LstmParams params = generate_params(size, 1);
  UpstreamGradients upstream = generate_upstream(size, 1);
  quantize_problem(precision, params, &upstream);
  std::unique_ptr<Stage> stage =
      training ? std::unique_ptr<Stage>(cudnn::make_training(cudnn::Algo::kStandard, precision))
               : cudnn::make(cudnn::Algo::kStandard, precision);
  DeviceProblem problem(params, training ? &upstream : nullptr);
  const std::string refused = prepare_stage(*stage, problem);
  ASSERT_EQ(refused, "") << cudnn::stage_name(cudnn::Algo::kStandard, precision, stage->kind())
                         << " refuses the canonical config " << size.describe();
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto outputs = run_for_check(*stage, problem, stream);  // poisons first
  CUDA_CHECK(cudaStreamDestroy(stream));
  ASSERT_EQ(outputs.size(),
            output_layouts(size, training ? StageKind::kTraining : StageKind::kForward).size());
  for (const OutputTensor& tensor : outputs) {
    EXPECT_EQ(count_nonfinite(tensor.values), 0u)
        << tensor.name << " has NaN/Inf (unwritten) elements";
    std::size_t not_representable = 0;
    for (float value : tensor.values)
      if (!representable(value, precision)) ++not_representable;
    EXPECT_EQ(not_representable, 0u) << tensor.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, CudnnReducedStandard,
    ::testing::Combine(::testing::Range<std::size_t>(0, reduced_precisions().size()),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<CudnnReducedStandard::ParamType>& info) {
      return cudnn::stage_name(
          cudnn::Algo::kStandard, reduced_precisions().at(std::get<0>(info.param)),
          std::get<1>(info.param) ? StageKind::kTraining : StageKind::kForward);
    });

}  // namespace
}  // namespace lstm
