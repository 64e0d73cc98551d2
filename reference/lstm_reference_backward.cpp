/*! \file lstm_reference_backward.cpp
 *  \brief The CPU reference of one training pass: forward keeping the activations, then
 *         back-propagation through time, in double precision.
 *
 * The forward pass is the one lstm_reference.cpp defines (same operations, same order, so the
 * outputs are bit for bit reference_forward's); it keeps, for every layer and step, the activated
 * gates i, f, g, o, the cell state c_t and the hidden state h_t.
 *
 * The backward pass differentiates L = Σ dy ⊙ y + Σ dhy ⊙ hy + Σ dcy ⊙ cy. For one layer, going
 * from the last step t = T-1 down to t = 0, with z the gate pre-activations
 * (z = W_ih · x_t + b_ih + W_hh · h_{t-1} + b_hh, x_t the layer's input: x for layer 0, the h
 * sequence of layer l-1 after; σ' = σ(1-σ) and tanh' = 1 - tanh²):
 *
 *     dh_t   = dĥ_t + dh_rec                    dĥ_t: from above (dy, or the next layer's dx_t)
 *                                               dh_rec: from step t+1 (dhy[l] at t = T-1)
 *     dc_t   = dc_rec + dh_t ⊙ o ⊙ (1 - tanh²(c_t))   dc_rec: from step t+1 (dcy[l] at t = T-1)
 *     dz_i   = dc_t ⊙ g       ⊙ i (1 - i)
 *     dz_f   = dc_t ⊙ c_{t-1} ⊙ f (1 - f)
 *     dz_g   = dc_t ⊙ i       ⊙ (1 - g²)
 *     dz_o   = dh_t ⊙ tanh(c_t) ⊙ o (1 - o)
 *     dc_rec ← dc_t ⊙ f                          (becomes dc_{t-1}'s recurrent part)
 *     dh_rec ← W_hhᵀ · dz                        (becomes dh_{t-1}'s recurrent part)
 *
 * After step 0, dh_rec and dc_rec are dh0[l] and dc0[l]. The rest does not depend on the order of
 * the steps, so it is done once per layer over all T·B columns dz (4H × T·B):
 *
 *     dx_t     = W_ihᵀ · dz_t              (layer 0: dx; layer l > 0: dĥ of layer l-1)
 *     dW_ih    = Σ_t dz_t · x_tᵀ           dW_hh = Σ_t dz_t · h_{t-1}ᵀ   (h_{-1} = h0[l])
 *     db_ih    = db_hh = Σ_t dz_t          (summed over the batch as well)
 *
 * Speed: the recurrent product of each step and the three per-layer products are one routine
 * (gemm_nt: C = A · Bᵀ with both operands' rows contiguous, blocked for the cache with a 4 × 2
 * register tile, OpenMP over blocks of C); the per-layer products are transposed so that their
 * long dimension T·B is the contiguous one.
 */
#include "lstm_reference_backward.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/npy.h"
#include "reference_math.h"

namespace lstm {
namespace {

using namespace reference_math;  // the gate order and helpers both directions share

/// Throws std::invalid_argument unless `values` holds `expected` elements.
void check_count(std::size_t count, std::size_t expected, const std::string& name,
                 const std::string& shape) {
  if (count != expected) {
    throw std::invalid_argument("reference_training: " + name + " has " + std::to_string(count) +
                                " elements, expected " + std::to_string(expected) + " " + shape);
  }
}

void check_arguments(const LstmParams& params, const UpstreamGradients& upstream) {
  const ProblemSize& size = params.size;
  if (size.hidden <= 0 || size.input_size <= 0 || size.batch <= 0 || size.seq_len <= 0 ||
      size.layers <= 0) {
    throw std::invalid_argument("reference_training: every size must be positive (" +
                                size.describe() + ")");
  }
  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  const std::size_t I = size.input_size;
  check_count(params.x.size(), T * B * I, "x", "(T, B, I)");
  check_count(params.h0.size(), L * B * H, "h0", "(L, B, H)");
  check_count(params.c0.size(), L * B * H, "c0", "(L, B, H)");
  if (params.layers.size() != L) {
    throw std::invalid_argument("reference_training: " + std::to_string(params.layers.size()) +
                                " layers of weights, expected " + std::to_string(L));
  }
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t input_width = size.layer_input_size(static_cast<int>(l));
    const LayerWeights& layer = params.layers[l];
    const std::string suffix = "_l" + std::to_string(l);
    check_count(layer.w_ih.size(), kGateCount * H * input_width, "weight_ih" + suffix, "(4H, I_l)");
    check_count(layer.w_hh.size(), kGateCount * H * H, "weight_hh" + suffix, "(4H, H)");
    check_count(layer.b_ih.size(), kGateCount * H, "bias_ih" + suffix, "(4H)");
    check_count(layer.b_hh.size(), kGateCount * H, "bias_hh" + suffix, "(4H)");
  }
  check_count(upstream.dy.size(), T * B * H, "upstream dy", "(T, B, H)");
  check_count(upstream.dhy.size(), L * B * H, "upstream dhy", "(L, B, H)");
  check_count(upstream.dcy.size(), L * B * H, "upstream dcy", "(L, B, H)");
}

/// The shapes one layer works with.
struct LayerShape {
  std::size_t steps;        ///< T
  std::size_t batch;        ///< B
  std::size_t input_width;  ///< I for layer 0, H after
  std::size_t hidden;       ///< H
  std::size_t gate_rows() const { return kGateCount * hidden; }
  std::size_t columns() const { return steps * batch; }  ///< T·B
};

/// One layer's parameters promoted to double.
struct LayerWeightsDouble {
  std::vector<double> w_ih, w_hh, b_ih, b_hh;
  explicit LayerWeightsDouble(const LayerWeights& weights)
      : w_ih(to_double(weights.w_ih)),
        w_hh(to_double(weights.w_hh)),
        b_ih(to_double(weights.b_ih)),
        b_hh(to_double(weights.b_hh)) {}
};

/// What the forward pass of one layer keeps for the backward pass.
struct LayerActivations {
  std::vector<double> gates;       ///< (T, B, 4H): σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
  std::vector<double> c_sequence;  ///< (T, B, H): c_t
  std::vector<double> h_sequence;  ///< (T, B, H): h_t, the next layer's input
};

/// The forward pass of one layer, operation for operation as run_layer in lstm_reference.cpp:
///     gates[t][b][r] = (W_ih[r] · input[t][b] + b_ih[r] + b_hh[r]) + W_hh[r] · h_{t-1}[b]
/// then the activations, c_t = f ⊙ c_{t-1} + i ⊙ g, h_t = o ⊙ tanh(c_t). The activated gates
/// overwrite the pre-activations in place.
LayerActivations forward_layer(const LayerShape& shape, const std::vector<double>& input,
                               const LayerWeightsDouble& weights, const double* h0,
                               const double* c0) {
  const std::size_t rows = shape.gate_rows(), H = shape.hidden;
  const std::size_t state_size = shape.batch * H, gates_size = shape.batch * rows;
  LayerActivations saved;
  saved.gates.resize(shape.steps * gates_size);
  saved.c_sequence.resize(shape.steps * state_size);
  saved.h_sequence.resize(shape.steps * state_size);

  // The input projection of every step at once.
#pragma omp parallel for collapse(2) schedule(static)
  for (std::size_t t = 0; t < shape.steps; ++t) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double* weight_row = &weights.w_ih[r * shape.input_width];
      for (std::size_t b = 0; b < shape.batch; ++b) {
        const std::size_t tb = t * shape.batch + b;
        const double* x_tb = &input[tb * shape.input_width];
        saved.gates[tb * rows + r] =
            dot(weight_row, x_tb, shape.input_width) + weights.b_ih[r] + weights.b_hh[r];
      }
    }
  }

  for (std::size_t t = 0; t < shape.steps; ++t) {
    const double* h_prev = t == 0 ? h0 : &saved.h_sequence[(t - 1) * state_size];
    const double* c_prev = t == 0 ? c0 : &saved.c_sequence[(t - 1) * state_size];
    double* gates = &saved.gates[t * gates_size];
    double* c = &saved.c_sequence[t * state_size];
    double* h = &saved.h_sequence[t * state_size];
#pragma omp parallel for collapse(2) schedule(static)
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t b = 0; b < shape.batch; ++b) {
        const double* weight_row = &weights.w_hh[r * H];
        const double* h_prev_b = &h_prev[b * H];
        gates[b * rows + r] = gates[b * rows + r] + dot(weight_row, h_prev_b, H);
      }
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (std::size_t b = 0; b < shape.batch; ++b) {
      for (std::size_t j = 0; j < H; ++j) {
        double* gates_b = &gates[b * rows];
        const double input_gate = sigmoid(gates_b[kInputGate * H + j]);    // i
        const double forget_gate = sigmoid(gates_b[kForgetGate * H + j]);  // f
        const double cell_gate = std::tanh(gates_b[kCellGate * H + j]);    // g
        const double output_gate = sigmoid(gates_b[kOutputGate * H + j]);  // o
        gates_b[kInputGate * H + j] = input_gate;
        gates_b[kForgetGate * H + j] = forget_gate;
        gates_b[kCellGate * H + j] = cell_gate;
        gates_b[kOutputGate * H + j] = output_gate;
        const std::size_t bj = b * H + j;
        c[bj] = forget_gate * c_prev[bj] + input_gate * cell_gate;  // c_t = f ⊙ c_{t-1} + i ⊙ g
        h[bj] = output_gate * std::tanh(c[bj]);                     // h_t = o ⊙ tanh(c_t)
      }
    }
  }
  return saved;
}

// ---- dense products for the backward pass ------------------------------------------------------

/// dst[c · ld_dst + r] = src[r · ld_src + c] for r < rows, c < cols (a blocked transpose).
void transpose(std::size_t rows, std::size_t cols, const double* src, std::size_t ld_src,
               double* dst, std::size_t ld_dst) {
  constexpr std::size_t kTile = 32;
  const std::size_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::size_t rt = 0; rt < row_tiles; ++rt) {
    for (std::size_t ct = 0; ct < col_tiles; ++ct) {
      const std::size_t r_end = std::min(rows, (rt + 1) * kTile);
      const std::size_t c_end = std::min(cols, (ct + 1) * kTile);
      for (std::size_t c = ct * kTile; c < c_end; ++c) {
        for (std::size_t r = rt * kTile; r < r_end; ++r) {
          dst[c * ld_dst + r] = src[r * ld_src + c];
        }
      }
    }
  }
}

/// C[m][0..1] += Σ_k A[m][k] · B[n][k] for the four rows m of A at `a` and the two rows n of B at
/// `b`, over `length` elements: the register tile of gemm_nt.
void tile_4x2(const double* a, std::size_t lda, const double* b, std::size_t ldb, double* c,
              std::size_t ldc, std::size_t length) {
  const double *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  const double *b0 = b, *b1 = b + ldb;
  double c00 = 0.0, c01 = 0.0, c10 = 0.0, c11 = 0.0, c20 = 0.0, c21 = 0.0, c30 = 0.0, c31 = 0.0;
#pragma omp simd reduction(+ : c00, c01, c10, c11, c20, c21, c30, c31)
  for (std::size_t k = 0; k < length; ++k) {
    const double x0 = b0[k], x1 = b1[k];
    c00 += a0[k] * x0;
    c01 += a0[k] * x1;
    c10 += a1[k] * x0;
    c11 += a1[k] * x1;
    c20 += a2[k] * x0;
    c21 += a2[k] * x1;
    c30 += a3[k] * x0;
    c31 += a3[k] * x1;
  }
  c[0] += c00;
  c[1] += c01;
  c[ldc] += c10;
  c[ldc + 1] += c11;
  c[2 * ldc] += c20;
  c[2 * ldc + 1] += c21;
  c[3 * ldc] += c30;
  c[3 * ldc + 1] += c31;
}

/// C = A · Bᵀ: C[m · ldc + n] = Σ_{k < K} A[m · lda + k] · B[n · ldb + k] for m < M, n < N.
/// Both operands are read along contiguous rows. OpenMP runs over blocks of C; inside a block the
/// K dimension is cut into pieces that keep the block's rows of A and B in cache.
void gemm_nt(std::size_t M, std::size_t N, std::size_t K, const double* A, std::size_t lda,
             const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  constexpr std::size_t kBlockM = 32, kBlockN = 32, kBlockK = 512;
  const std::size_t m_blocks = (M + kBlockM - 1) / kBlockM;
  const std::size_t n_blocks = (N + kBlockN - 1) / kBlockN;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::size_t mb = 0; mb < m_blocks; ++mb) {
    for (std::size_t nb = 0; nb < n_blocks; ++nb) {
      const std::size_t m_begin = mb * kBlockM, m_end = std::min(M, m_begin + kBlockM);
      const std::size_t n_begin = nb * kBlockN, n_end = std::min(N, n_begin + kBlockN);
      for (std::size_t m = m_begin; m < m_end; ++m) {
        std::fill(C + m * ldc + n_begin, C + m * ldc + n_end, 0.0);
      }
      for (std::size_t k_begin = 0; k_begin < K; k_begin += kBlockK) {
        const std::size_t length = std::min(K - k_begin, kBlockK);
        std::size_t m = m_begin;
        for (; m + 4 <= m_end; m += 4) {
          std::size_t n = n_begin;
          for (; n + 2 <= n_end; n += 2) {
            tile_4x2(A + m * lda + k_begin, lda, B + n * ldb + k_begin, ldb, C + m * ldc + n, ldc,
                     length);
          }
          for (; n < n_end; ++n) {  // a last column of the block
            for (std::size_t mm = m; mm < m + 4; ++mm) {
              C[mm * ldc + n] += dot(A + mm * lda + k_begin, B + n * ldb + k_begin, length);
            }
          }
        }
        for (; m < m_end; ++m) {  // the last rows of the block
          for (std::size_t n = n_begin; n < n_end; ++n) {
            C[m * ldc + n] += dot(A + m * lda + k_begin, B + n * ldb + k_begin, length);
          }
        }
      }
    }
  }
}

// ---- the backward pass of one layer -------------------------------------------------------------

/// What the backward pass of one layer produces besides its parameter gradients.
struct LayerBackward {
  std::vector<double> d_input;  ///< (T, B, I_l): dx for layer 0, dĥ of layer l-1 otherwise
  std::vector<double> dh0;      ///< (B, H)
  std::vector<double> dc0;      ///< (B, H)
};

/// BPTT through one layer. `d_above` (T, B, H) is the gradient reaching h_t from outside the
/// recurrence (dy for the last layer, the next layer's d_input otherwise); `dhy`, `dcy` (B, H)
/// are the gradients of this layer's final h and c. The parameter gradients go to `gradients`.
LayerBackward backward_layer(const LayerShape& shape, const std::vector<double>& input,
                             const LayerWeightsDouble& weights, const double* h0, const double* c0,
                             const LayerActivations& saved, const std::vector<double>& d_above,
                             const double* dhy, const double* dcy,
                             ReferenceLayerGradients& gradients) {
  const std::size_t rows = shape.gate_rows(), H = shape.hidden, B = shape.batch;
  const std::size_t I = shape.input_width, TB = shape.columns();
  const std::size_t state_size = B * H, gates_size = B * rows;

  // W_hhᵀ (H, 4H): dh_rec[b][k] = Σ_r dz[b][r] · W_hh[r][k] reads its rows contiguously.
  std::vector<double> w_hh_t(H * rows);
  transpose(rows, H, weights.w_hh.data(), H, w_hh_t.data(), rows);

  LayerBackward result;
  std::vector<double> dh_rec(dhy, dhy + state_size);  // the recurrent part of dh_t
  std::vector<double> dc_rec(dcy, dcy + state_size);  // the recurrent part of dc_t
  std::vector<double> dz(shape.steps * gates_size);   // (T, B, 4H): ∂loss/∂z at every step

  for (std::size_t step = shape.steps; step-- > 0;) {
    const double* gates = &saved.gates[step * gates_size];
    const double* c = &saved.c_sequence[step * state_size];
    const double* c_prev = step == 0 ? c0 : &saved.c_sequence[(step - 1) * state_size];
    const double* d_above_t = &d_above[step * state_size];
    double* dz_t = &dz[step * gates_size];
#pragma omp parallel for collapse(2) schedule(static)
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t j = 0; j < H; ++j) {
        const std::size_t bj = b * H + j;
        const double* gates_b = &gates[b * rows];
        const double i = gates_b[kInputGate * H + j];
        const double f = gates_b[kForgetGate * H + j];
        const double g = gates_b[kCellGate * H + j];
        const double o = gates_b[kOutputGate * H + j];
        const double tanh_c = std::tanh(c[bj]);
        const double dh = d_above_t[bj] + dh_rec[bj];
        const double dc = dc_rec[bj] + dh * o * (1.0 - tanh_c * tanh_c);
        double* dz_b = &dz_t[b * rows];
        dz_b[kInputGate * H + j] = dc * g * i * (1.0 - i);
        dz_b[kForgetGate * H + j] = dc * c_prev[bj] * f * (1.0 - f);
        dz_b[kCellGate * H + j] = dc * i * (1.0 - g * g);
        dz_b[kOutputGate * H + j] = dh * tanh_c * o * (1.0 - o);
        dc_rec[bj] = dc * f;
      }
    }
    // dh_rec = dz_t · W_hh, (B, H)
    gemm_nt(B, H, rows, dz_t, rows, w_hh_t.data(), rows, dh_rec.data(), H);
  }
  result.dh0 = std::move(dh_rec);
  result.dc0 = std::move(dc_rec);

  // d_input = dz · W_ih, (T·B, I), with W_ihᵀ (I, 4H).
  {
    std::vector<double> w_ih_t(I * rows);
    transpose(rows, I, weights.w_ih.data(), I, w_ih_t.data(), rows);
    result.d_input.resize(TB * I);
    gemm_nt(TB, I, rows, dz.data(), rows, w_ih_t.data(), rows, result.d_input.data(), I);
  }

  // The weight gradients sum over all T·B columns: make T·B the contiguous dimension.
  std::vector<double> dz_t(rows * TB);  // (4H, T·B)
  transpose(TB, rows, dz.data(), rows, dz_t.data(), TB);
  dz = std::vector<double>();  // free

  gradients.w_ih.resize(rows * I);
  {
    std::vector<double> input_t(I * TB);  // (I, T·B)
    transpose(TB, I, input.data(), I, input_t.data(), TB);
    gemm_nt(rows, I, TB, dz_t.data(), TB, input_t.data(), TB, gradients.w_ih.data(), I);
  }

  gradients.w_hh.resize(rows * H);
  {
    // h_{t-1} for every column: h0 for t = 0, then h_0 … h_{T-2}; stored transposed, (H, T·B).
    std::vector<double> h_prev_t(H * TB);
    transpose(B, H, h0, H, h_prev_t.data(), TB);
    transpose(TB - B, H, saved.h_sequence.data(), H, h_prev_t.data() + B, TB);
    gemm_nt(rows, H, TB, dz_t.data(), TB, h_prev_t.data(), TB, gradients.w_hh.data(), H);
  }

  gradients.b_ih.resize(rows);
#pragma omp parallel for schedule(static)
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    const double* row = &dz_t[r * TB];
    for (std::size_t k = 0; k < TB; ++k) {
      sum += row[k];
    }
    gradients.b_ih[r] = sum;
  }
  gradients.b_hh = gradients.b_ih;  // z depends on b_ih + b_hh only through their sum
  return result;
}

}  // namespace

ReferenceTraining reference_training(const LstmParams& params, const UpstreamGradients& upstream) {
  check_arguments(params, upstream);
  const ProblemSize& size = params.size;
  const std::size_t T = size.seq_len, B = size.batch, H = size.hidden, L = size.layers;
  const std::size_t state_size = B * H;

  const std::vector<double> h0 = to_double(params.h0);
  const std::vector<double> c0 = to_double(params.c0);
  std::vector<LayerWeightsDouble> weights;
  std::vector<LayerShape> shapes;
  for (std::size_t l = 0; l < L; ++l) {
    weights.emplace_back(params.layers[l]);
    shapes.push_back(
        {T, B, static_cast<std::size_t>(size.layer_input_size(static_cast<int>(l))), H});
  }

  // Forward, keeping every layer's activations. Layer l reads inputs[l]: x, then the h sequence
  // of layer l-1 (saved[l-1].h_sequence).
  const std::vector<double> x = to_double(params.x);
  std::vector<LayerActivations> saved;
  for (std::size_t l = 0; l < L; ++l) {
    const std::vector<double>& input = l == 0 ? x : saved[l - 1].h_sequence;
    saved.push_back(
        forward_layer(shapes[l], input, weights[l], &h0[l * state_size], &c0[l * state_size]));
  }

  ReferenceTraining training;
  ReferenceOutputs& outputs = training.forward;
  outputs.steps = size.seq_len;
  outputs.hy.resize(L * state_size);
  outputs.cy.resize(L * state_size);
  for (std::size_t l = 0; l < L; ++l) {
    std::copy(saved[l].h_sequence.end() - state_size, saved[l].h_sequence.end(),
              outputs.hy.begin() + l * state_size);
    std::copy(saved[l].c_sequence.end() - state_size, saved[l].c_sequence.end(),
              outputs.cy.begin() + l * state_size);
  }
  outputs.y = saved[L - 1].h_sequence;

  // Backward, from the last layer down; each layer's d_input is the gradient reaching the h
  // sequence of the layer below.
  ReferenceGradients& gradients = training.gradients;
  gradients.dh0.resize(L * state_size);
  gradients.dc0.resize(L * state_size);
  gradients.layers.resize(L);
  const std::vector<double> dhy = to_double(upstream.dhy);
  const std::vector<double> dcy = to_double(upstream.dcy);
  std::vector<double> d_above = to_double(upstream.dy);
  for (std::size_t l = L; l-- > 0;) {
    const std::vector<double>& input = l == 0 ? x : saved[l - 1].h_sequence;
    LayerBackward layer = backward_layer(
        shapes[l], input, weights[l], &h0[l * state_size], &c0[l * state_size], saved[l], d_above,
        &dhy[l * state_size], &dcy[l * state_size], gradients.layers[l]);
    std::copy(layer.dh0.begin(), layer.dh0.end(), gradients.dh0.begin() + l * state_size);
    std::copy(layer.dc0.begin(), layer.dc0.end(), gradients.dc0.begin() + l * state_size);
    d_above = std::move(layer.d_input);
    saved[l] = LayerActivations();  // done with: the layers below need only their own
  }
  gradients.dx = std::move(d_above);
  return training;
}

std::vector<ReferenceTensor> training_tensors(const ProblemSize& size, ReferenceTraining training) {
  std::vector<OutputTensor> layouts = output_layouts(size, StageKind::kTraining);
  ReferenceGradients& gradients = training.gradients;
  if (gradients.layers.size() != static_cast<std::size_t>(size.layers)) {
    throw std::invalid_argument("training_tensors: " + std::to_string(gradients.layers.size()) +
                                " layers' gradients for " + size.describe());
  }
  // In output_layouts' order.
  std::vector<std::vector<double>*> values = {&training.forward.y,  &training.forward.hy,
                                              &training.forward.cy, &gradients.dx,
                                              &gradients.dh0,       &gradients.dc0};
  for (ReferenceLayerGradients& layer : gradients.layers) {
    for (std::vector<double>* v : {&layer.w_ih, &layer.w_hh, &layer.b_ih, &layer.b_hh})
      values.push_back(v);
  }
  std::vector<ReferenceTensor> tensors;
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    OutputTensor& layout = layouts[i];
    if (values[i]->size() != element_count(layout.shape)) {
      throw std::invalid_argument("training_tensors: " + layout.name + " has " +
                                  std::to_string(values[i]->size()) + " values for shape " +
                                  shape_to_string(layout.shape));
    }
    tensors.push_back({std::move(layout.name), std::move(layout.shape), std::move(layout.axes),
                       std::move(*values[i])});
  }
  return tensors;
}

}  // namespace lstm
