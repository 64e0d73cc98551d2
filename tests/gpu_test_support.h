// What the GPU test suites share: the odd shapes every implementation is checked on, and the
// skip where there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_utils.h"
#include "problem.h"

namespace lstm::testing {

/// A problem size with a name for the test's label.
struct Shape {
  const char* label;
  ProblemSize size;
};

inline ProblemSize make_size(int hidden, int input_size, int batch, int seq_len, int layers) {
  ProblemSize s;
  s.hidden = hidden;
  s.input_size = input_size;
  s.batch = batch;
  s.seq_len = seq_len;
  s.layers = layers;
  return s;
}

/// Odd shapes: I != H with L = 3, B = 1, T = 1, H not a multiple of 32 (and H = 1), I > H, and
/// T not a multiple of the stages' 10-step chunks.
inline const std::vector<Shape>& odd_shapes() {
  static const std::vector<Shape> list = {
      {"I_ne_H_L3", make_size(37, 19, 3, 7, 3)},
      {"B1", make_size(64, 64, 1, 9, 2)},
      {"T1", make_size(50, 30, 5, 1, 1)},
      {"H1", make_size(1, 3, 2, 4, 2)},
      {"I_gt_H", make_size(45, 100, 6, 5, 2)},
      {"medium", make_size(256, 128, 16, 20, 2)},
      {"T23_short_last_chunk", make_size(48, 20, 2, 23, 3)},
  };
  return list;
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
