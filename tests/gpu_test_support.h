// What the GPU test suites share: the odd shapes every implementation is checked on, and the
// skip where there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/checked_run.h"
#include "core/problem_size.h"

namespace lstm::testing {

/// A problem size with a name for the test's label.
struct Shape {
  const char* label;
  ProblemSize size;
};

/// Odd shapes: I != H with L = 3, B = 1, T = 1, H not a multiple of 32 (and H = 1), I > H, and
/// T not a multiple of the stages' 10-step chunks.
inline const std::vector<Shape>& odd_shapes() {
  static const std::vector<Shape> list = {
      {"I_ne_H_L3", ProblemSize{37, 19, 3, 7, 3}},
      {"B1", ProblemSize{64, 64, 1, 9, 2}},
      {"T1", ProblemSize{50, 30, 5, 1, 1}},
      {"H1", ProblemSize{1, 3, 2, 4, 2}},
      {"I_gt_H", ProblemSize{45, 100, 6, 5, 2}},
      {"medium", ProblemSize{256, 128, 16, 20, 2}},
      {"T23_short_last_chunk", ProblemSize{48, 20, 2, 23, 3}},
  };
  return list;
}

/// Runs `stage` (named `name` in messages) on `params` twice; the second run must repeat the
/// first bit for bit (a stage must not depend on state left by an earlier forward, and its
/// reduction order must be fixed). Returns the outputs of the first run.
inline LstmOutputs run_twice(Stage& stage, const LstmParams& params, const std::string& name) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string unsupported = stage.unsupported_reason(params.size, prop);
  EXPECT_EQ(unsupported, "") << name << " refuses " << params.size.describe();
  DeviceProblem problem(params);
  stage.prepare(problem.tensors());
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const LstmOutputs first = run_forward_for_check(stage, problem, stream);
  const LstmOutputs second = run_forward_for_check(stage, problem, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  EXPECT_EQ(0, std::memcmp(first.y.data(), second.y.data(), first.y.size() * sizeof(float)))
      << name << ": a second forward pass gave different y";
  EXPECT_EQ(0, std::memcmp(first.cy.data(), second.cy.data(), first.cy.size() * sizeof(float)))
      << name << ": a second forward pass gave different cy";
  return first;
}

}  // namespace lstm::testing

/// Skips the calling test, saying why, where no GPU is present (a macro: GTEST_SKIP returns
/// from the function it is written in).
#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why_;                                                            \
    if (!::lstm::cuda_device_available(&why_)) {                                 \
      GTEST_SKIP() << "no CUDA GPU (" << why_ << "): this GPU test was not run"; \
    }                                                                            \
  } while (0)
