/*! \file lstm_reference_backward.h
 *  \brief The CPU reference of one training pass in double precision: the forward pass keeping
 *         every step's gates and cell state, then back-propagation through time (BPTT).
 *
 *  What it computes is exactly what
 *  `torch.autograd.grad((y, hy, cy), (x, h0, c0, *lstm.parameters()), (dy, dhy, dcy))` returns
 *  for a torch.nn.LSTM (unidirectional, no projection, two bias vectors, gate order i, f, g, o).
 */
#pragma once

#include <vector>

#include "core/lstm_data.h"
#include "core/named_tensor.h"
#include "lstm_reference.h"

namespace lstm {

/// Gradients of one layer's parameters, double, same layouts as LayerWeights.
struct ReferenceLayerGradients {
  std::vector<double> w_ih;  ///< ∂loss/∂weight_ih_l{k}: (4H, I_k)
  std::vector<double> w_hh;  ///< ∂loss/∂weight_hh_l{k}: (4H, H)
  std::vector<double> b_ih;  ///< ∂loss/∂bias_ih_l{k}: (4H)
  std::vector<double> b_hh;  ///< ∂loss/∂bias_hh_l{k}: (4H), equal to b_ih's
};

/// Every gradient of a training pass, double precision.
struct ReferenceGradients {
  std::vector<double> dx;                       ///< (T, B, I)
  std::vector<double> dh0;                      ///< (L, B, H)
  std::vector<double> dc0;                      ///< (L, B, H)
  std::vector<ReferenceLayerGradients> layers;  ///< L entries
};

/// The forward outputs and the gradients of one training pass.
struct ReferenceTraining {
  ReferenceOutputs forward;      ///< equal to reference_forward(params), all T steps
  ReferenceGradients gradients;  ///< the gradients of every input and parameter
};

/// Forward (keeping every step's gates and c) then BPTT, all in double; OpenMP-parallel where it
/// helps.
///
/// The loss being differentiated is implicit in the upstream gradients: the result is the
/// gradient of sum(dy ⊙ y) + sum(dhy ⊙ hy) + sum(dcy ⊙ cy) with respect to x, h0, c0 and every
/// layer's weight_ih, weight_hh, bias_ih and bias_hh. The forward part performs the same double
/// operations in the same order as reference_forward, so `forward` equals its result.
/// Memory: besides the inputs, about (4H + 2H)·T·B doubles per layer for the saved activations.
/// \param params   sizes, inputs and parameters (float32; promoted to double)
/// \param upstream dy, dhy and dcy (float32; promoted to double)
/// \throws std::invalid_argument if a size is not positive or a tensor of `params` or `upstream`
///         has the wrong number of elements (the message names the tensor).
ReferenceTraining reference_training(const LstmParams& params, const UpstreamGradients& upstream);

/// The tensors of a training pass by PyTorch's names, with the names, shapes and order of
/// output_layouts(size, StageKind::kTraining): y, hy, cy, dx, dh0, dc0, then per layer k
/// grad_weight_ih_l{k}, grad_weight_hh_l{k}, grad_bias_ih_l{k}, grad_bias_hh_l{k}. What a check
/// compares a training pass with, and what lstm_reference --training --dump writes.
/// \param size     the sizes `training` was computed for
/// \param training reference_training's result (its vectors are moved into the tensors)
/// \throws std::invalid_argument if `training` does not hold L layers' gradients or a tensor's
///         element count does not fit its shape (the message names the tensor).
std::vector<ReferenceTensor> training_tensors(const ProblemSize& size, ReferenceTraining training);

}  // namespace lstm
