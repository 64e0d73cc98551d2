/*! \file lstm_data.h
 *  \brief Host-side LSTM parameters, inputs, upstream gradients and outputs in PyTorch's layout:
 *         generate from a seed, load from and dump to .npy files.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/problem_size.h"

namespace lstm {

/// One layer's parameters, PyTorch names and layout (gate order i, f, g, o), row-major float32.
struct LayerWeights {
  std::vector<float> w_ih;  ///< weight_ih_l{k}: (4H, I_k)
  std::vector<float> w_hh;  ///< weight_hh_l{k}: (4H, H)
  std::vector<float> b_ih;  ///< bias_ih_l{k}: (4H)
  std::vector<float> b_hh;  ///< bias_hh_l{k}: (4H)
};

/// Everything a forward pass reads: sizes, inputs, initial states and all layers' parameters.
struct LstmParams {
  ProblemSize size;
  std::vector<float> x;              ///< (T, B, I)
  std::vector<float> h0;             ///< (L, B, H)
  std::vector<float> c0;             ///< (L, B, H)
  std::vector<LayerWeights> layers;  ///< L entries
};

/// Everything a forward pass writes, float32.
struct LstmOutputs {
  std::vector<float> y;   ///< (T, B, H): the last layer's h at every step
  std::vector<float> hy;  ///< (L, B, H): every layer's final h
  std::vector<float> cy;  ///< (L, B, H): every layer's final c
};

/// The upstream gradients of a training pass: what the loss sends back into y, hy and cy.
struct UpstreamGradients {
  std::vector<float> dy;   ///< (T, B, H)
  std::vector<float> dhy;  ///< (L, B, H)
  std::vector<float> dcy;  ///< (L, B, H)
};

/// A size flag given on the command line disagrees with the files of --load (a usage error).
class FlagDisagreement : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Sizes given explicitly on the command line; with --load each must agree with the files.
struct SizeFlags {
  std::optional<int> hidden, input_size, batch, seq_len, layers;
};

/// Generates parameters as docs/design.md fixes them: weights and biases uniform in
/// [-1/sqrt(H), 1/sqrt(H)], x, h0 and c0 uniform in [-1, 1], all from `seed`. Every tensor has
/// its own stream derived from the seed, so the same seed gives the same tensors in every stage.
LstmParams generate_params(const ProblemSize& size, std::uint64_t seed);

/// Generates upstream gradients dy, dhy and dcy uniform in [-1, 1] from `seed`, each from its own
/// stream (independent of generate_params's tensors).
UpstreamGradients generate_upstream(const ProblemSize& size, std::uint64_t seed);

/// Whether `dir` holds any of dy.npy, dhy.npy, dcy.npy.
bool has_upstream_files(const std::string& dir);

/// Loads dy.npy (T, B, H), dhy.npy and dcy.npy (L, B, H) from `dir`, or generates all three from
/// `seed` when none of them is there.
/// \throws std::runtime_error naming the file for a malformed or wrongly shaped file, or the
///         missing ones when only some are there.
UpstreamGradients load_upstream(const std::string& dir, const ProblemSize& size,
                                std::uint64_t seed);

/// Loads x.npy, h0.npy, c0.npy and weight_ih_l{k}.npy, weight_hh_l{k}.npy, bias_ih_l{k}.npy,
/// bias_hh_l{k}.npy from `dir`. Sizes come from the files (T, B, I from x; L, H from h0).
/// \throws std::runtime_error naming the file for a missing or malformed file, a shape that does
///         not fit the others, or a NaN or Inf (with its index); FlagDisagreement for a size
///         that disagrees with a flag in `flags`.
LstmParams load_params(const std::string& dir, const SizeFlags& flags);

/// Writes y.npy (T, B, H), hy.npy and cy.npy (L, B, H) into `dir` (created if missing).
void dump_outputs(const std::string& dir, const ProblemSize& size, const LstmOutputs& outputs);

/// Loads y.npy, hy.npy and cy.npy from `dir` with the shapes `size` implies.
LstmOutputs load_outputs(const std::string& dir, const ProblemSize& size);

}  // namespace lstm
