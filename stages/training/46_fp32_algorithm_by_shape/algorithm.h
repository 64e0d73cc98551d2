/*! \file
 *  \brief Training stage 46's rule: which of four FP32 training passes runs a shape. Host code
 *         only, so that the CPU tests check the rule. Why this rule and where it comes from:
 *         README.md beside this file.
 */
#pragma once

#include <string>

#include "core/problem_size.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// The four FP32 designs the stage chooses between, in the order it falls back through them.
enum class Algorithm {
  kPersistent,      ///< training stage 25: persistent kernels, dz read by the blocks that need it
  kPartialSums,     ///< training stage 13: persistent kernels, partial sums of dh sent to owners
  kLayerWavefront,  ///< training stage 05: one cuBLAS GEMM per step, the layers as a wavefront
  kLayerByLayer,    ///< training stage 04: one cuBLAS GEMM per step, one layer after another
};

/// "persistent", "partial_sums", "layer_wavefront" or "layer_by_layer", as --algorithm spells
/// them.
inline const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kPersistent:
      return "persistent";
    case Algorithm::kPartialSums:
      return "partial_sums";
    case Algorithm::kLayerWavefront:
      return "layer_wavefront";
    case Algorithm::kLayerByLayer:
      break;
  }
  return "layer_by_layer";
}

/// Multiply-adds of one layer's recurrent product in a step, W_hh · h_{t-1}: 4H x H x B.
inline double layer_step_macs(const ProblemSize& s) {
  return 4.0 * s.hidden * s.hidden * s.batch;
}

/// From this much work a layer's step on, one GEMM a step over the whole GPU beats the persistent
/// kernels' loops over each SM's share of W_hh (measured, README.md).
constexpr double kGemmsFromMacs = 1.0e8;

/// From this much work a wavefront step (every layer's step, L x layer_step_macs) on, the layers
/// of per-step GEMMs side by side beat the persistent kernels, which run the layers one after
/// another (measured, README.md).
constexpr double kWavefrontFromMacs = 1.0e8;

/// From this many values of h a step (B x H) on, stage 13's backward, each block reading only its
/// own units' partial sums, beats stage 25's, each block reading all of dz (measured, README.md).
constexpr double kPartialSumsFromValues = 4096;

/// The design for `s` by its shape alone: per-step GEMMs once a layer's step is a real matrix
/// product, layer by layer; side by side over several layers once the layers together are;
/// below, the persistent kernels, stage 13's from a batch's worth of h on.
inline Algorithm algorithm_for(const ProblemSize& s) {
  if (layer_step_macs(s) >= kGemmsFromMacs) return Algorithm::kLayerByLayer;
  if (layer_step_macs(s) * s.layers >= kWavefrontFromMacs) return Algorithm::kLayerWavefront;
  return double(s.batch) * s.hidden >= kPartialSumsFromValues ? Algorithm::kPartialSums
                                                              : Algorithm::kPersistent;
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
