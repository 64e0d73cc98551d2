/*! \file
 *  \brief Training stage 46's rule: which of four FP32 training passes runs a shape. Host code
 *         only, so that the CPU tests check the rule. Why this rule and where it comes from:
 *         README.md beside this file.
 */
#pragma once

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
/// kernels' loops over each SM's share of W_hh (measured, README.md: the persistent stages were
/// faster at 6.7e7 and below, stage 04 at 1.3e8 and above).
constexpr double kGemmsFromMacs = 1.0e8;

/// Over several layers, from this many batch rows on, stage 05's per-step GEMMs with the layers
/// side by side beat the persistent kernels, which run the layers one after another and whose
/// step grows with the rows (measured, README.md: 13 faster at B = 32, 05 at B = 64).
constexpr int kWavefrontFromRows = 64;

/// From this much work a layer's step on, stage 13's backward, each block reading only its own
/// units' partial sums of dh, beats stage 25's, each block reading all of dz (measured, README.md:
/// 25 faster at 8.4e6 and below, 13 at 1.7e7 and above).
constexpr double kPartialSumsFromMacs = 1.2e7;

/// The design for `s` by its shape alone: per-step GEMMs, layer by layer, once a layer's step is
/// a real matrix product; side by side over several layers of a large batch; below, the
/// persistent kernels, stage 13's from a mid-sized step on.
inline Algorithm algorithm_for(const ProblemSize& s) {
  if (layer_step_macs(s) >= kGemmsFromMacs) return Algorithm::kLayerByLayer;
  if (s.layers > 1 && s.batch >= kWavefrontFromRows) return Algorithm::kLayerWavefront;
  return layer_step_macs(s) >= kPartialSumsFromMacs ? Algorithm::kPartialSums
                                                    : Algorithm::kPersistent;
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
