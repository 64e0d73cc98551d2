/*! \file problem_size.h
 *  \brief The sizes of one LSTM problem, their limits, and the FLOP count every report uses.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lstm {

/// Integer division rounded up: the number of blocks of `divisor` threads that cover `count`.
template <typename T>
constexpr T ceil_div(T count, T divisor) {
  return (count + divisor - 1) / divisor;
}

/// The sizes of one LSTM forward pass (PyTorch `nn.LSTM`, unidirectional, no projection).
struct ProblemSize {
  int hidden = 512;      ///< H: hidden units per layer.
  int input_size = 512;  ///< I: features of x, read by layer 0 (layers l > 0 read H).
  int batch = 64;        ///< B: independent sequences.
  int seq_len = 100;     ///< T: time steps.
  int layers = 4;        ///< L: stacked layers.

  /// Input width of layer `layer`: I for layer 0, H after.
  int layer_input_size(int layer) const { return layer == 0 ? input_size : hidden; }

  /// FLOPs of the forward pass: sum over layers of 2*T*B*4H*(I_l + H) (element-wise work is not
  /// counted).
  double flop_count() const;

  /// FLOPs of a training pass: the forward, then the data gradients and the weight gradients
  /// (each as many as the forward), so 3 * flop_count().
  double training_flop_count() const { return 3.0 * flop_count(); }

  /// "H=512 I=512 B=64 T=100 L=4", for messages.
  std::string describe() const;
};

/// Two sizes are equal when every field is (a stage that plans once per run compares them).
inline bool operator==(const ProblemSize& a, const ProblemSize& b) {
  return a.hidden == b.hidden && a.input_size == b.input_size && a.batch == b.batch &&
         a.seq_len == b.seq_len && a.layers == b.layers;
}
inline bool operator!=(const ProblemSize& a, const ProblemSize& b) {
  return !(a == b);
}

/// Element counts of every tensor of a problem, computed with overflow checks.
struct TensorCounts {
  std::size_t x = 0;           ///< (T, B, I)
  std::size_t state = 0;       ///< h0, c0, hy, cy: (L, B, H)
  std::size_t y = 0;           ///< (T, B, H)
  std::size_t parameters = 0;  ///< all weights and biases of all layers
  std::size_t bytes = 0;       ///< float32 bytes of all of the above (inputs, parameters, outputs)
  /// float32 bytes of a training problem: the above, the upstream gradients (dy, dhy, dcy) and
  /// the gradients (dx, dh0, dc0 and one per parameter)
  std::size_t training_bytes = 0;
};

/// Counts the tensors of `size`.
/// \throws std::invalid_argument if a size is not positive; std::overflow_error (naming the
///         tensor) if a count overflows size_t.
TensorCounts count_tensors(const ProblemSize& size);

/// Checks sizes beyond positivity: element counts must not overflow, and every GEMM dimension and
/// kernel index must fit cuBLAS's and CUDA's 32-bit ints.
/// \throws std::invalid_argument with a message naming the size and the limit (an overflowing
///         count too: it names the sizes, the tensor and the 64-bit limit).
void validate_problem_size(const ProblemSize& size);

/// Multiplies two sizes, throwing std::overflow_error (naming `what`) on overflow.
std::size_t checked_mul(std::size_t a, std::size_t b, const char* what);

}  // namespace lstm
