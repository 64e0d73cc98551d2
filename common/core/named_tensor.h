/*! \file named_tensor.h
 *  \brief Tensors by PyTorch's names, with shapes and axis names: what an implementation writes,
 *         what the reference computes, what --dump writes and a fixture holds.
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/kind_and_precision.h"
#include "core/problem_size.h"

namespace lstm {

/// A tensor with PyTorch's name ("y", "hy", "dx", "grad_weight_hh_l0", ...), its shape and the
/// names of its axes (for messages), float32 as an implementation wrote it or double as the
/// reference computed it.
template <typename Value>
struct NamedTensor {
  std::string name;                ///< PyTorch's name; also the .npy file name without ".npy"
  std::vector<std::size_t> shape;  ///< dimensions, outermost first
  std::vector<std::string> axes;   ///< one name per dimension, e.g. {"t", "b", "j"}
  std::vector<Value> values;       ///< prod(shape) values, C order (empty in a layout)
};
using OutputTensor = NamedTensor<float>;
using ReferenceTensor = NamedTensor<double>;

/// The tensors an implementation of `kind` writes for `size`, without values, in this order:
/// y (T,B,H), hy, cy (L,B,H); for a training pass then dx (T,B,I), dh0, dc0 (L,B,H) and per
/// layer k grad_weight_ih_l{k} (4H,I_k), grad_weight_hh_l{k} (4H,H), grad_bias_ih_l{k},
/// grad_bias_hh_l{k} (4H).
std::vector<OutputTensor> output_layouts(const ProblemSize& size, StageKind kind);

/// Elements of a tensor of `shape`.
std::size_t element_count(const std::vector<std::size_t>& shape);

/// Writes each tensor as `<dir>/<name>.npy` (float32; `dir` is created if missing).
/// \throws std::runtime_error naming the folder or file that cannot be written.
void dump_tensors(const std::string& dir, const std::vector<OutputTensor>& tensors);

/// Reads `<dir>/<name>.npy` for each layout (whose shape it must have), as double.
/// \throws NpyError naming the file for a missing, malformed or wrongly shaped one.
std::vector<ReferenceTensor> load_reference_tensors(const std::string& dir,
                                                    const std::vector<OutputTensor>& layouts);

}  // namespace lstm
