/*! \file lstm_reference.cpp
 *  \brief The CPU reference LSTM: the definition of the math, in double precision.
 *
 * This file defines what every stage, cuDNN and PyTorch are checked against. It computes
 * PyTorch's nn.LSTM forward pass (unidirectional, no projection, two bias vectors, gate order
 * i, f, g, o). For every layer l and time step t, with H hidden units:
 *
 *     gates = W_ih · x_t + b_ih + W_hh · h_{t-1} + b_hh      (4H rows: i, f, g, o)
 *     i = σ(gates_i)   f = σ(gates_f)   g = tanh(gates_g)   o = σ(gates_o)
 *     c_t = f ⊙ c_{t-1} + i ⊙ g
 *     h_t = o ⊙ tanh(c_t)
 *
 * where σ(z) = 1 / (1 + exp(-z)) and ⊙ is the element-wise product. Layer 0 reads x; layer l > 0
 * reads the h sequence of layer l-1. y is the last layer's h at every step; hy and cy are every
 * layer's final h and c.
 *
 * Everything is computed in double precision: the float32 inputs and parameters are promoted to
 * double once per layer. The work is organised for speed without changing the math:
 *   1. the input projection W_ih · x_t + b_ih + b_hh does not depend on h, so it is computed for
 *      all time steps of a layer at once;
 *   2. the time steps then run in order: the recurrent product W_hh · h_{t-1} is added to the
 *      projection, and the point-wise cell update produces c_t and h_t.
 * Both products are plain dot products of two contiguous vectors (a weight row and one batch
 * entry's input), parallelised with OpenMP.
 */
#include "lstm_reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference_math.h"

namespace lstm {
namespace {

using namespace reference_math;  // the gate order and helpers both directions share

void check_count(const std::vector<float>& values, std::size_t expected, const std::string& name) {
  if (values.size() != expected) {
    throw std::invalid_argument("reference_forward: " + name + " has " +
                                std::to_string(values.size()) + " elements, expected " +
                                std::to_string(expected));
  }
}

void check_params(const LstmParams& params) {
  const ProblemSize& size = params.size;
  if (size.hidden <= 0 || size.input_size <= 0 || size.batch <= 0 || size.seq_len <= 0 ||
      size.layers <= 0) {
    throw std::invalid_argument("reference_forward: every size must be positive");
  }
  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  check_count(params.x, T * B * static_cast<std::size_t>(size.input_size), "x");
  check_count(params.h0, L * B * H, "h0");
  check_count(params.c0, L * B * H, "c0");
  if (params.layers.size() != L) {
    throw std::invalid_argument("reference_forward: " + std::to_string(params.layers.size()) +
                                " layers of weights, expected " + std::to_string(L));
  }
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t input_width = size.layer_input_size(static_cast<int>(l));
    const LayerWeights& layer = params.layers[l];
    const std::string suffix = "_l" + std::to_string(l);
    check_count(layer.w_ih, kGateCount * H * input_width, "weight_ih" + suffix);
    check_count(layer.w_hh, kGateCount * H * H, "weight_hh" + suffix);
    check_count(layer.b_ih, kGateCount * H, "bias_ih" + suffix);
    check_count(layer.b_hh, kGateCount * H, "bias_hh" + suffix);
  }
}

/// The shapes one layer works with.
struct LayerShape {
  std::size_t steps;        ///< time steps computed
  std::size_t batch;        ///< B
  std::size_t input_width;  ///< I for layer 0, H after
  std::size_t hidden;       ///< H
  std::size_t gate_rows() const { return kGateCount * hidden; }
};

/// Step 1 of a layer, for all time steps at once:
///     input_gates[t][b][r] = W_ih[r] · input[t][b] + b_ih[r] + b_hh[r]
/// `input` is (steps, B, input_width); the result is (steps, B, 4H).
std::vector<double> input_projection(const LayerShape& shape, const std::vector<double>& input,
                                     const std::vector<double>& w_ih,
                                     const std::vector<double>& b_ih,
                                     const std::vector<double>& b_hh) {
  const std::size_t rows = shape.gate_rows();
  std::vector<double> input_gates(shape.steps * shape.batch * rows);
  // One (t, r) pair per iteration: the weight row stays in cache for the whole batch, and x_t
  // stays in cache for consecutive rows.
#pragma omp parallel for collapse(2) schedule(static)
  for (std::size_t t = 0; t < shape.steps; ++t) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double* weight_row = &w_ih[r * shape.input_width];
      for (std::size_t b = 0; b < shape.batch; ++b) {
        const std::size_t tb = t * shape.batch + b;
        const double* x_tb = &input[tb * shape.input_width];
        input_gates[tb * rows + r] = dot(weight_row, x_tb, shape.input_width) + b_ih[r] + b_hh[r];
      }
    }
  }
  return input_gates;
}

/// Step 2a of a layer, at one time step:
///     gates[b][r] = input_gates_t[b][r] + W_hh[r] · h_prev[b]
/// `h_prev` is (B, H); `input_gates_t` and `gates` are (B, 4H).
void add_recurrent_projection(const LayerShape& shape, const double* input_gates_t,
                              const std::vector<double>& w_hh, const double* h_prev,
                              std::vector<double>& gates) {
  const std::size_t rows = shape.gate_rows();
  // Rows outside, batch inside: each thread keeps its weight row in cache across the batch.
#pragma omp parallel for collapse(2) schedule(static)
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t b = 0; b < shape.batch; ++b) {
      const double* weight_row = &w_hh[r * shape.hidden];
      const double* h_prev_b = &h_prev[b * shape.hidden];
      gates[b * rows + r] = input_gates_t[b * rows + r] + dot(weight_row, h_prev_b, shape.hidden);
    }
  }
}

/// Step 2b of a layer, at one time step, for every batch entry b and unit j:
///     i = σ(gates_i)   f = σ(gates_f)   g = tanh(gates_g)   o = σ(gates_o)
///     c_t = f ⊙ c_{t-1} + i ⊙ g
///     h_t = o ⊙ tanh(c_t)
/// `gates` is (B, 4H); `c` is (B, H), holding c_{t-1} on entry and c_t on return; `h` receives
/// h_t, (B, H).
void update_cell(const LayerShape& shape, const std::vector<double>& gates, std::vector<double>& c,
                 double* h) {
  const std::size_t H = shape.hidden;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::size_t b = 0; b < shape.batch; ++b) {
    for (std::size_t j = 0; j < H; ++j) {
      const double* gates_b = &gates[b * shape.gate_rows()];
      const double input_gate = sigmoid(gates_b[kInputGate * H + j]);    // i
      const double forget_gate = sigmoid(gates_b[kForgetGate * H + j]);  // f
      const double cell_gate = std::tanh(gates_b[kCellGate * H + j]);    // g
      const double output_gate = sigmoid(gates_b[kOutputGate * H + j]);  // o
      const std::size_t bj = b * H + j;
      c[bj] = forget_gate * c[bj] + input_gate * cell_gate;  // c_t = f ⊙ c_{t-1} + i ⊙ g
      h[bj] = output_gate * std::tanh(c[bj]);                // h_t = o ⊙ tanh(c_t)
    }
  }
}

/// The result of running one layer over the whole (computed part of the) sequence.
struct LayerResult {
  std::vector<double> h_sequence;  ///< (steps, B, H): h_t at every step, the next layer's input
  std::vector<double> c_final;     ///< (B, H): c after the last step
};

/// Runs one layer: `input` is (steps, B, input_width); `h0` and `c0` are (B, H).
LayerResult run_layer(const LayerShape& shape, const std::vector<double>& input,
                      const LayerWeights& weights, std::vector<double> h0, std::vector<double> c0) {
  const std::vector<double> w_ih = to_double(weights.w_ih);
  const std::vector<double> w_hh = to_double(weights.w_hh);
  const std::vector<double> b_ih = to_double(weights.b_ih);
  const std::vector<double> b_hh = to_double(weights.b_hh);

  const std::vector<double> input_gates = input_projection(shape, input, w_ih, b_ih, b_hh);

  const std::size_t state_size = shape.batch * shape.hidden;
  const std::size_t gates_size = shape.batch * shape.gate_rows();
  LayerResult result;
  result.h_sequence.resize(shape.steps * state_size);
  result.c_final = std::move(c0);  // c_{t-1}, updated in place to c_t at every step
  std::vector<double> gates(gates_size);
  for (std::size_t t = 0; t < shape.steps; ++t) {
    const double* h_prev = t == 0 ? h0.data() : &result.h_sequence[(t - 1) * state_size];
    add_recurrent_projection(shape, &input_gates[t * gates_size], w_hh, h_prev, gates);
    update_cell(shape, gates, result.c_final, &result.h_sequence[t * state_size]);
  }
  return result;
}

/// Elements [begin, begin + count) of `values`, promoted to double.
std::vector<double> slice_to_double(const std::vector<float>& values, std::size_t begin,
                                    std::size_t count) {
  return std::vector<double>(values.begin() + begin, values.begin() + begin + count);
}

}  // namespace

ReferenceOutputs reference_forward(const LstmParams& params, int steps,
                                   const LayerDone& layer_done) {
  check_params(params);
  const ProblemSize& size = params.size;
  const int steps_computed = (steps <= 0 || steps >= size.seq_len) ? size.seq_len : steps;

  const std::size_t T = steps_computed, B = size.batch, H = size.hidden, L = size.layers;
  const std::size_t state_size = B * H;

  ReferenceOutputs outputs;
  outputs.steps = steps_computed;
  outputs.hy.resize(L * state_size);
  outputs.cy.resize(L * state_size);

  // Layer 0 reads the first T steps of x; every later layer reads the h sequence of the one below.
  std::vector<double> layer_input = slice_to_double(params.x, 0, T * B * size.input_size);
  for (std::size_t l = 0; l < L; ++l) {
    const LayerShape shape{T, B,
                           static_cast<std::size_t>(size.layer_input_size(static_cast<int>(l))), H};
    LayerResult layer = run_layer(shape, layer_input, params.layers[l],
                                  slice_to_double(params.h0, l * state_size, state_size),
                                  slice_to_double(params.c0, l * state_size, state_size));
    // hy[l] = h_{T-1}, cy[l] = c_{T-1} of this layer.
    std::copy(layer.h_sequence.end() - state_size, layer.h_sequence.end(),
              outputs.hy.begin() + l * state_size);
    std::copy(layer.c_final.begin(), layer.c_final.end(), outputs.cy.begin() + l * state_size);
    layer_input = std::move(layer.h_sequence);
    if (layer_done) layer_done(static_cast<int>(l));
  }
  outputs.y = std::move(layer_input);  // the last layer's h at every step
  return outputs;
}

int reference_steps(const ProblemSize& size) {
  const double flops = size.flop_count();
  if (flops <= kReferenceFlopBudget) return size.seq_len;
  const int steps = static_cast<int>(std::floor(size.seq_len * kReferenceFlopBudget / flops));
  return std::max(1, steps);
}

bool training_reference_fits(const ProblemSize& size) {
  return size.training_flop_count() <= kReferenceFlopBudget;
}

}  // namespace lstm
