/*! \file
 *  \brief Training stage 44's rule: which of three training passes runs a shape. Host code only,
 *         so that the CPU tests check the rule. Why this rule and where it comes from: README.md
 *         beside this file.
 */
#pragma once

#include <string>

#include "core/problem_size.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// The three designs the stage chooses between.
enum class Algorithm {
  kFp32Recurrences,  ///< training stage 20: the recurrences in FP32 on the FMA units
  kPersistent,       ///< training stage 43: the recurrences on tensor cores, W_hh on chip
  kGemms,  ///< training stage 15: one tensor-core GEMM per step, the layers as a wavefront
};

/// "fp32_recurrences", "persistent" or "gemms", as --algorithm spells them.
inline const char* algorithm_name(Algorithm algorithm) {
  return algorithm == Algorithm::kFp32Recurrences ? "fp32_recurrences"
         : algorithm == Algorithm::kPersistent    ? "persistent"
                                                  : "gemms";
}

/// Multiply-adds of one wavefront step's recurrent products, every layer's W_hh · h_{t-1}:
/// 4H x H x B per layer.
inline double wavefront_step_macs(const ProblemSize& s) {
  return 4.0 * s.hidden * s.hidden * s.batch * s.layers;
}

/// From this much work a step on, the per-step GEMMs win (measured, training stage 40's README:
/// the persistent stage was faster at 1.3e8 and below, the GEMMs at 2.7e8 and above).
constexpr double kGemmsFromMacs = 2.0e8;

/// Stage 20 runs a single layer of one batch row from this H on (measured, README.md): its FP32
/// kernels have the shorter step there, an mma's eight columns holding one row of h. Below it
/// (H = 256: stage 43 by 2-4%) and over several layers (stage 43's forward runs them in one
/// launch as a wavefront, stage 20's one after another) stage 43 was faster.
constexpr int kFp32RecurrencesUpToRows = 1;
constexpr int kFp32RecurrencesUpToLayers = 1;
constexpr int kFp32RecurrencesFromHidden = 384;

/// The design for `s` by its shape alone: per-step GEMMs once a step is a real matrix product;
/// below, the persistent kernels: in FP32 for one layer of a single batch row (H >= 384), on
/// tensor cores otherwise.
inline Algorithm algorithm_for(const ProblemSize& s) {
  if (wavefront_step_macs(s) >= kGemmsFromMacs) return Algorithm::kGemms;
  const bool one_row = s.batch <= kFp32RecurrencesUpToRows &&
                       s.layers <= kFp32RecurrencesUpToLayers &&
                       s.hidden >= kFp32RecurrencesFromHidden;
  return one_row ? Algorithm::kFp32Recurrences : Algorithm::kPersistent;
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
