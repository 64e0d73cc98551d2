/*! \file lstm_reference.h
 *  \brief The CPU reference LSTM in double precision: the definition of the math every stage,
 *         cuDNN and PyTorch are checked against.
 */
#pragma once

#include <functional>
#include <vector>

#include "core/lstm_data.h"
#include "core/problem_size.h"

namespace lstm {

/// Called by the reference after each layer it has computed, with the layer's index.
using LayerDone = std::function<void(int layer)>;

/// Outputs of the reference, double precision, same layouts as LstmOutputs.
struct ReferenceOutputs {
  int steps = 0;           ///< time steps computed (a prefix of the sequence if fewer than T)
  std::vector<double> y;   ///< (steps, B, H)
  std::vector<double> hy;  ///< (L, B, H): final h after `steps` steps
  std::vector<double> cy;  ///< (L, B, H): final c after `steps` steps
};

/// Runs the LSTM forward pass in double precision on the CPU (OpenMP-parallel where available).
/// \param params sizes, inputs and parameters (float32; promoted to double)
/// \param steps  time steps to compute: all T when steps <= 0 or steps >= T, else the first
///               `steps` (y is causal, so its first steps are exact; hy and cy then describe
///               step `steps`-1, not the end of the sequence)
/// \param layer_done called after each layer with its index (for progress), if given
ReferenceOutputs reference_forward(const LstmParams& params, int steps = 0,
                                   const LayerDone& layer_done = {});

/// Double-precision FLOPs the reference may spend on one check (a few seconds on a 16-core CPU).
/// A forward check above it compares only a prefix of the sequence; a training check above it
/// compares no gradient (they depend on every step), and says so.
constexpr double kReferenceFlopBudget = 2.5e11;

/// Time steps the forward reference computes for `size`: all T, or the longest prefix within
/// kReferenceFlopBudget (at least 1).
int reference_steps(const ProblemSize& size);

/// Whether the training reference (forward and backward over every step) fits the budget.
bool training_reference_fits(const ProblemSize& size);

}  // namespace lstm
