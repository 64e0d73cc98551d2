/*! \file
 *  \brief Training stage 00: the naive training pass, operation by operation. The lesson is in
 *         README.md beside this file.
 *
 * Forward: forward stage 00's 8 GEMMs and 10 element-wise kernels per step and layer, keeping
 * what the backward needs (every step's activated gates, c and h). Backward, per layer from the
 * last, per step from the last: 7 element-wise kernels for the cell's derivatives, then 16 GEMMs
 * (per gate: W_hh^T dz into dh_{t-1}, W_ih^T dz into the input's gradient, and the weight
 * gradients dz x^T, dz h_{t-1}^T accumulated step by step) and a bias-gradient kernel per gate.
 */
#include <cublas_v2.h>

#include <memory>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

constexpr int kThreadsPerBlock = 256;  // element-wise kernels: one thread per element
constexpr int kGates = 4;              // i, f, g, o
constexpr int kGateI = 0, kGateF = 1, kGateG = 2, kGateO = 3;

// ---- forward element-wise kernels. Mapping for all: 1-D grid, one thread per element of a
// ---- (B, H) tensor, element index = blockIdx.x * blockDim.x + threadIdx.x, unit j = index % H.

/// gate[b][j] += b_ih[j] + b_hh[j] (the biases of one gate).
__global__ void add_biases_kernel(float* gate, const float* b_ih, const float* b_hh, int hidden,
                                  int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int unit = index % hidden;
  gate[index] += b_ih[unit] + b_hh[unit];
}

/// value = 1 / (1 + exp(-value)), in place.
__global__ void sigmoid_kernel(float* values, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  values[index] = 1.0f / (1.0f + expf(-values[index]));
}

/// value = tanh(value), in place.
__global__ void tanh_kernel(float* values, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  values[index] = tanhf(values[index]);
}

/// c_t = f * c_{t-1} + i * g.
__global__ void cell_update_kernel(float* cell, const float* cell_prev, const float* input_gate,
                                   const float* forget_gate, const float* candidate, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  cell[index] = forget_gate[index] * cell_prev[index] + input_gate[index] * candidate[index];
}

/// h_t = o * tanh(c_t).
__global__ void hidden_output_kernel(float* hidden_out, const float* output_gate, const float* cell,
                                     int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  hidden_out[index] = output_gate[index] * tanhf(cell[index]);
}

// ---- backward element-wise kernels: same mapping. dz_q is the gradient of gate q before its
// ---- activation; "rec" is what step t+1 sent back to step t.

/// out = a + b: the gradient of h_t, from above (y or the next layer) and from step t+1.
__global__ void add_kernel(float* out, const float* a, const float* b, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  out[index] = a[index] + b[index];
}

/// dc = dc_rec + dh * o * (1 - tanh(c)^2): the gradient of c_t.
__global__ void cell_gradient_kernel(float* dc, const float* dc_rec, const float* dh,
                                     const float* output_gate, const float* cell, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const float tanh_c = tanhf(cell[index]);
  dc[index] = dc_rec[index] + dh[index] * output_gate[index] * (1.0f - tanh_c * tanh_c);
}

/// dz_o = dh * tanh(c) * o * (1 - o).
__global__ void output_gate_gradient_kernel(float* dz, const float* dh, const float* output_gate,
                                            const float* cell, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const float o = output_gate[index];
  dz[index] = dh[index] * tanhf(cell[index]) * o * (1.0f - o);
}

/// dz = dc * other * s * (1 - s), for a sigmoid gate s whose product partner is `other`:
/// the input gate (partner g) and the forget gate (partner c_{t-1}).
__global__ void sigmoid_gate_gradient_kernel(float* dz, const float* dc, const float* other,
                                             const float* gate, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const float s = gate[index];
  dz[index] = dc[index] * other[index] * s * (1.0f - s);
}

/// dz_g = dc * i * (1 - g^2).
__global__ void candidate_gradient_kernel(float* dz, const float* dc, const float* input_gate,
                                          const float* candidate, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const float g = candidate[index];
  dz[index] = dc[index] * input_gate[index] * (1.0f - g * g);
}

/// dc_rec = dc * f: the gradient sent back to c_{t-1}.
__global__ void cell_previous_gradient_kernel(float* dc_rec, const float* dc,
                                              const float* forget_gate, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  dc_rec[index] = dc[index] * forget_gate[index];
}

/// db[j] += sum over b of dz[b][j]: one thread per unit of one gate, in a fixed order.
__global__ void bias_gradient_kernel(float* db, const float* dz, int hidden, int batch) {
  const int unit = blockIdx.x * blockDim.x + threadIdx.x;
  if (unit >= hidden) return;
  float sum = 0.0f;
  for (int b = 0; b < batch; ++b)
    sum += dz[static_cast<std::size_t>(b) * hidden + unit];
  db[unit] += sum;
}

class TrainingPass final : public TrainingStage {
 public:
  ~TrainingPass() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    return (stash_floats(s) + (kGates + 4) * state +
            2 * static_cast<std::size_t>(s.seq_len) * state) *
           sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t T = s.seq_len;
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    stash_.resize(s.layers);
    for (LayerStash& layer : stash_) {
      layer.gates.allocate(T * kGates * state);
      layer.cell.allocate((T + 1) * state);
      layer.hidden.allocate((T + 1) * state);
    }
    for (DeviceBuffer<float>& dz : dz_)
      dz.allocate(state);
    dh_.allocate(state);
    dh_rec_.allocate(state);
    dc_.allocate(state);
    dc_rec_.allocate(state);
    for (DeviceBuffer<float>& d : d_sequence_)
      d.allocate(T * state);
  }

  // What the forward keeps for the backward, per layer: every step's activated gates (T, 4, B, H),
  // c (T + 1, B, H; slot 0 = c0) and h (T + 1, B, H; slot 0 = h0).
  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));

    for (int layer = 0; layer < s.layers; ++layer) {
      const int input_size = s.layer_input_size(layer);
      LayerStash& kept = stash_[layer];
      // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence (slots 1..T of its stash).
      const float* input_sequence = layer == 0 ? t.x : stash_[layer - 1].hidden.data() + state;
      const std::size_t layer_state = static_cast<std::size_t>(layer) * state;
      CUDA_CHECK(cudaMemcpyAsync(kept.cell.data(), t.c0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(kept.hidden.data(), t.h0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));

      for (int step = 0; step < s.seq_len; ++step) {
        const float* x_t = input_sequence + static_cast<std::size_t>(step) * B * input_size;
        const float* h_prev = kept.hidden.data() + static_cast<std::size_t>(step) * state;
        float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
        for (int q = 0; q < kGates; ++q) {
          float* gate = gates + static_cast<std::size_t>(q) * state;
          const float* w_ih_q = t.w_ih[layer] + static_cast<std::size_t>(q) * H * input_size;
          const float* w_hh_q = t.w_hh[layer] + static_cast<std::size_t>(q) * H * H;
          // gate_q = W_ih[q] · x_t + W_hh[q] · h_{t-1}: (H x I)(I x B) + (H x H)(H x B)
          CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, H, B, input_size, &one,
                                   w_ih_q, input_size, x_t, input_size, &zero, gate, H));
          CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, H, B, H, &one, w_hh_q, H,
                                   h_prev, H, &one, gate, H));
          add_biases_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
              gate, t.b_ih[layer] + q * H, t.b_hh[layer] + q * H, H, state);
          CUDA_CHECK_LAUNCH();
          if (q == kGateG) {
            tanh_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, state);
          } else {
            sigmoid_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, state);
          }
          CUDA_CHECK_LAUNCH();
        }
        const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
        float* c_t = kept.cell.data() + static_cast<std::size_t>(step + 1) * state;
        float* h_t = kept.hidden.data() + static_cast<std::size_t>(step + 1) * state;
        cell_update_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            c_t, c_prev, gates + kGateI * state, gates + kGateF * state, gates + kGateG * state,
            state);
        CUDA_CHECK_LAUNCH();
        hidden_output_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(h_t, gates + kGateO * state,
                                                                      c_t, state);
        CUDA_CHECK_LAUNCH();
      }
      const std::size_t last = static_cast<std::size_t>(s.seq_len) * state;
      CUDA_CHECK(cudaMemcpyAsync(t.hy + layer_state, kept.hidden.data() + last,
                                 state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(t.cy + layer_state, kept.cell.data() + last, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    }
    // y is the last layer's h at every step.
    CUDA_CHECK(cudaMemcpyAsync(t.y, stash_[s.layers - 1].hidden.data() + state,
                               static_cast<std::size_t>(s.seq_len) * state * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream));
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const int bias_blocks = ceil_div(H, kThreadsPerBlock);
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));

    for (int layer = s.layers - 1; layer >= 0; --layer) {
      const int input_size = s.layer_input_size(layer);
      const LayerStash& kept = stash_[layer];
      const std::size_t layer_state = static_cast<std::size_t>(layer) * state;
      const std::size_t four_h = static_cast<std::size_t>(kGates) * H;
      // The gradient of this layer's h sequence from above: dy for the last layer, else what
      // the layer above computed for its input. Its own input's gradient goes to dx (layer 0)
      // or to the buffer the layer below reads.
      const float* d_output = layer == s.layers - 1 ? t.dy : d_sequence_[(layer + 1) % 2].data();
      float* d_input = layer == 0 ? t.dx : d_sequence_[layer % 2].data();
      const float* input_sequence = layer == 0 ? t.x : stash_[layer - 1].hidden.data() + state;
      // Gradients are written, not accumulated into what the buffers held: start from zero.
      CUDA_CHECK(
          cudaMemsetAsync(t.grad_w_ih[layer], 0, four_h * input_size * sizeof(float), stream));
      CUDA_CHECK(cudaMemsetAsync(t.grad_w_hh[layer], 0, four_h * H * sizeof(float), stream));
      CUDA_CHECK(cudaMemsetAsync(t.grad_b_ih[layer], 0, four_h * sizeof(float), stream));
      CUDA_CHECK(cudaMemcpyAsync(dh_rec_.data(), t.dhy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(dc_rec_.data(), t.dcy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));

      for (int step = s.seq_len - 1; step >= 0; --step) {
        const float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
        const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
        const float* c_t = c_prev + state;
        const float* h_prev = kept.hidden.data() + static_cast<std::size_t>(step) * state;
        const float* x_t = input_sequence + static_cast<std::size_t>(step) * B * input_size;
        float* dx_t = d_input + static_cast<std::size_t>(step) * B * input_size;
        // The cell's derivatives, one element-wise kernel each.
        add_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dh_.data(), d_output + static_cast<std::size_t>(step) * state, dh_rec_.data(), state);
        CUDA_CHECK_LAUNCH();
        cell_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dc_.data(), dc_rec_.data(), dh_.data(), gates + kGateO * state, c_t, state);
        CUDA_CHECK_LAUNCH();
        output_gate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz_[kGateO].data(), dh_.data(), gates + kGateO * state, c_t, state);
        CUDA_CHECK_LAUNCH();
        sigmoid_gate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz_[kGateI].data(), dc_.data(), gates + kGateG * state, gates + kGateI * state, state);
        CUDA_CHECK_LAUNCH();
        sigmoid_gate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz_[kGateF].data(), dc_.data(), c_prev, gates + kGateF * state, state);
        CUDA_CHECK_LAUNCH();
        candidate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz_[kGateG].data(), dc_.data(), gates + kGateI * state, gates + kGateG * state, state);
        CUDA_CHECK_LAUNCH();
        cell_previous_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dc_rec_.data(), dc_.data(), gates + kGateF * state, state);
        CUDA_CHECK_LAUNCH();

        // Per gate, the GEMMs. Row-major (B, H) is column-major (H, B); a row-major weight block
        // (H, K) read column-major is its transpose, so W^T · dz needs no transpose flag.
        for (int q = 0; q < kGates; ++q) {
          const float* dz = dz_[q].data();
          const float beta = q == 0 ? 0.0f : 1.0f;  // the first gate writes, the others add
          const float* w_ih_q = t.w_ih[layer] + static_cast<std::size_t>(q) * H * input_size;
          const float* w_hh_q = t.w_hh[layer] + static_cast<std::size_t>(q) * H * H;
          // dh_{t-1} (+)= W_hh[q]^T · dz_q: (H x H)(H x B)
          CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, H, B, H, &one, w_hh_q, H, dz,
                                   H, &beta, dh_rec_.data(), H));
          // d(input)_t (+)= W_ih[q]^T · dz_q: (I x H)(H x B)
          CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, input_size, B, H, &one,
                                   w_ih_q, input_size, dz, H, &beta, dx_t, input_size));
          // dW_ih[q] += dz_q · x_t^T, dW_hh[q] += dz_q · h_{t-1}^T: row-major (H x K) results,
          // i.e. column-major (K x H) = x_t (K x B) · dz_q^T (B x H)
          CUBLAS_CHECK(cublasSgemm(
              cublas_, CUBLAS_OP_N, CUBLAS_OP_T, input_size, H, B, &one, x_t, input_size, dz, H,
              &one, t.grad_w_ih[layer] + static_cast<std::size_t>(q) * H * input_size, input_size));
          CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, H, H, B, &one, h_prev, H, dz,
                                   H, &one,
                                   t.grad_w_hh[layer] + static_cast<std::size_t>(q) * H * H, H));
          bias_gradient_kernel<<<bias_blocks, kThreadsPerBlock, 0, stream>>>(
              t.grad_b_ih[layer] + q * H, dz, H, B);
          CUDA_CHECK_LAUNCH();
        }
      }
      // Both bias vectors enter the gates the same way: their gradients are equal.
      CUDA_CHECK(cudaMemcpyAsync(t.grad_b_hh[layer], t.grad_b_ih[layer], four_h * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(t.dh0 + layer_state, dh_rec_.data(), state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(t.dc0 + layer_state, dc_rec_.data(), state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    }
  }

 private:
  struct LayerStash {
    DeviceBuffer<float> gates;   // (T, 4, B, H): i, f, g, o after their activations
    DeviceBuffer<float> cell;    // (T + 1, B, H): c0, c_0 .. c_{T-1}
    DeviceBuffer<float> hidden;  // (T + 1, B, H): h0, h_0 .. h_{T-1} (the next layer's input)
  };

  /// Floats the forward keeps for the backward: (4 + 2) T B H + 2 B H per layer.
  static std::size_t stash_floats(const ProblemSize& s) {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    return static_cast<std::size_t>(s.layers) * ((kGates + 2) * s.seq_len * state + 2 * state);
  }

  cublasHandle_t cublas_ = nullptr;
  std::vector<LayerStash> stash_;
  DeviceBuffer<float> dz_[kGates];  // (B, H) each: the gates' gradients of the current step
  DeviceBuffer<float> dh_, dh_rec_, dc_, dc_rec_;  // (B, H)
  DeviceBuffer<float> d_sequence_[2];  // (T, B, H): gradients of intermediate h sequences
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<TrainingPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
