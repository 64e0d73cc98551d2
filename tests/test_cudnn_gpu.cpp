// The cuDNN baseline, every algorithm, against the CPU reference on odd shapes and against the
// PyTorch fixture. These tests need a CUDA GPU and are skipped, with the reason, without one. An
// algorithm that cuDNN refuses for a shape (UnsupportedError from prepare) is skipped with
// cuDNN's message: a documented refusal, not a pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

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

/// Runs the stage `info` on `params` twice (two forward passes after one prepare) and stores
/// both runs' outputs in `runs`. Returns false, with cuDNN's reason in `refused`, when prepare()
/// throws UnsupportedError.
///
/// Unlike the stages' test, the two runs are not required to agree bit for bit: cuDNN's release
/// notes (7.6.5) say its RNN calls may be nondeterministic when cuBLAS runs on several internal
/// streams, and cuDNN is not ours to fix. Instead each run must pass the check on its own, which
/// still catches a forward pass that depends on state left by an earlier one. A bitwise
/// difference is printed, for the record.
bool run_algo(const StageInfo& info, Stage& stage, const LstmParams& params,
              std::vector<std::vector<OutputTensor>>* runs, std::string* refused) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string unsupported = stage.unsupported_reason(params.size, prop);
  EXPECT_EQ(unsupported, "") << info.name << " refuses " << params.size.describe();
  DeviceProblem problem(params);
  *refused = prepare_stage(stage, problem);
  if (!refused->empty()) return false;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  runs->clear();
  runs->push_back(run_for_check(stage, problem, stream));
  runs->push_back(run_for_check(stage, problem, stream));
  CUDA_CHECK(cudaStreamDestroy(stream));
  if (std::memcmp(runs->at(0)[0].values.data(), runs->at(1)[0].values.data(),
                  runs->at(0)[0].values.size() * sizeof(float)) != 0) {
    std::cout << "[   INFO   ] " << info.name << " " << params.size.describe()
              << ": the two forward passes differ bitwise in y (each is checked)\n";
  }
  return true;
}

StageInfo algo_info(std::size_t index) {
  return cudnn::stage_info(cudnn::all_algos().at(index));
}

// The names (algorithms, stage names) are checked without a GPU in test_cudnn_names.cpp.

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
    GTEST_SKIP() << info.name << " refused " << shape.size.describe() << ": " << refused;
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
    GTEST_SKIP() << info.name << " refused the fixture (" << params.size.describe()
                 << "): " << refused;
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

}  // namespace
}  // namespace lstm
