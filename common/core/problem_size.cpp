#include "core/problem_size.h"

#include <climits>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace lstm {

double ProblemSize::flop_count() const {
  double flops = 0.0;
  for (int layer = 0; layer < layers; ++layer) {
    flops += 2.0 * seq_len * batch * 4.0 * hidden * (layer_input_size(layer) + hidden);
  }
  return flops;
}

std::string ProblemSize::describe() const {
  std::ostringstream text;
  text << "H=" << hidden << " I=" << input_size << " B=" << batch << " T=" << seq_len
       << " L=" << layers;
  return text.str();
}

std::size_t checked_mul(std::size_t a, std::size_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) {
    throw std::overflow_error(std::string("the size of ") + what + " overflows");
  }
  return a * b;
}

namespace {
std::size_t checked_add(std::size_t a, std::size_t b, const char* what) {
  if (b > std::numeric_limits<std::size_t>::max() - a) {
    throw std::overflow_error(std::string("the size of ") + what + " overflows");
  }
  return a + b;
}
}  // namespace

TensorCounts count_tensors(const ProblemSize& s) {
  if (s.hidden <= 0 || s.input_size <= 0 || s.batch <= 0 || s.seq_len <= 0 || s.layers <= 0) {
    throw std::invalid_argument("every size must be positive (" + s.describe() + ")");
  }
  const std::size_t H = s.hidden, I = s.input_size, B = s.batch, T = s.seq_len, L = s.layers;
  TensorCounts counts;
  counts.x = checked_mul(checked_mul(T, B, "x"), I, "x");
  counts.state = checked_mul(checked_mul(L, B, "h0"), H, "h0");
  counts.y = checked_mul(checked_mul(T, B, "y"), H, "y");
  const std::size_t four_h = checked_mul(4, H, "the gates");
  const auto layer_parameters = [&](std::size_t in) {  // W_ih, W_hh, b_ih, b_hh of one layer
    const std::size_t weights = checked_mul(four_h, checked_add(in, H, "weights"), "weights");
    return checked_add(weights, checked_mul(2, four_h, "biases"), "biases");
  };
  // Layer 0 reads I, every layer above it H.
  counts.parameters =
      checked_add(layer_parameters(I), checked_mul(L - 1, layer_parameters(H), "the parameters"),
                  "the parameters");
  std::size_t elements = checked_add(counts.x, counts.y, "the tensors");
  elements = checked_add(elements, checked_mul(4, counts.state, "the states"), "the tensors");
  elements = checked_add(elements, counts.parameters, "the tensors");
  counts.bytes = checked_mul(elements, sizeof(float), "the tensors");
  // dy is as large as y, dx as x, the parameters' gradients as the parameters; dhy, dcy, dh0
  // and dc0 are four more states.
  std::size_t gradients = checked_add(counts.y, counts.x, "the gradients");
  gradients =
      checked_add(gradients, checked_mul(4, counts.state, "the gradients"), "the gradients");
  gradients = checked_add(gradients, counts.parameters, "the gradients");
  counts.training_bytes = checked_add(
      counts.bytes, checked_mul(gradients, sizeof(float), "the gradients"), "the training tensors");
  return counts;
}

void validate_problem_size(const ProblemSize& size) {
  if (size.hidden <= 0 || size.input_size <= 0 || size.batch <= 0 || size.seq_len <= 0 ||
      size.layers <= 0) {
    throw std::invalid_argument("every size must be positive (" + size.describe() + ")");
  }
  const long long H = size.hidden, I = size.input_size, B = size.batch, T = size.seq_len;
  auto require = [](long long value, const char* what) {
    if (value > INT_MAX) {
      std::ostringstream text;
      text << what << " = " << value << " exceeds " << INT_MAX
           << ", the largest dimension cuBLAS and the kernels index with int";
      throw std::invalid_argument(text.str());
    }
  };
  require(4 * H, "4*H (rows of the gate matrix)");
  require(4 * H * B, "4*H*B (gate values of one step)");
  require(T * B, "T*B (columns of a layer's input GEMM)");
  require(4 * H * (I > H ? I : H), "4*H*max(I,H) (elements of one weight matrix)");
  try {
    count_tensors(size);  // no tensor's element or byte count may overflow
  } catch (const std::overflow_error& error) {
    throw std::invalid_argument(std::string(error.what()) + " 64-bit sizes (" + size.describe() +
                                "; at most " +
                                std::to_string(std::numeric_limits<std::size_t>::max()) + ")");
  }
}

}  // namespace lstm
