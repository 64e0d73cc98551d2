/*! \file
 *  \brief Training stage 40's rule: which of two training passes runs a shape. Host code only,
 *         so that the CPU tests check the rule. Why this rule and where it comes from: README.md
 *         beside this file.
 */
#pragma once

#include <string>

#include "core/problem_size.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// The two designs the stage chooses between.
enum class Algorithm {
  kPersistent,  ///< training stage 38: the recurrences in persistent kernels, W_hh on chip
  kGemms,       ///< training stage 15: one tensor-core GEMM per step, the layers as a wavefront
};

/// "persistent" or "gemms", as --algorithm spells them.
inline const char* algorithm_name(Algorithm algorithm) {
  return algorithm == Algorithm::kPersistent ? "persistent" : "gemms";
}

/// Multiply-adds of one wavefront step's recurrent products, every layer's W_hh · h_{t-1}:
/// 4H x H x B per layer.
inline double wavefront_step_macs(const ProblemSize& s) {
  return 4.0 * s.hidden * s.hidden * s.batch * s.layers;
}

/// From this much work a step on, the per-step GEMMs win (measured, README.md: the persistent
/// stage was faster at 1.3e8 and below, the GEMMs at 2.7e8 and above).
constexpr double kGemmsFromMacs = 2.0e8;

/// The design for `s` by its shape alone: the persistent kernels while a step is small enough to
/// be bound by its latency, per-step GEMMs once it is a real matrix product.
inline Algorithm algorithm_for(const ProblemSize& s) {
  return wavefront_step_macs(s) >= kGemmsFromMacs ? Algorithm::kGemms : Algorithm::kPersistent;
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
