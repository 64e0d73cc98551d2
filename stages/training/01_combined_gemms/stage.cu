/*! \file
 *  \brief Training stage 01: one GEMM for the four gates, and the GEMMs that need no recurrence
 *         (the input part forward; dx and the weight gradients backward) done once per layer,
 *         for all steps. The lesson is in README.md beside this file.
 *
 * Forward: forward stage 01 (one input GEMM per layer, one 4H x B x H GEMM per step, ten
 * element-wise kernels per step), keeping the activated gates, c and h of every step.
 * Backward, per layer from the last, per step from the last: seven element-wise kernels write the
 * step's gate gradients dz_t into a (T, B, 4H) buffer, and ONE GEMM sends dh back to step t-1.
 * After the recurrence, four calls for the whole layer: dx, dW_ih, dW_hh (GEMMs over all T*B
 * columns) and the bias gradient (a GEMV of dz with a vector of ones).
 *
 * Layouts: as forward stage 01. Row-major (T, B, 4H) gates and gate gradients are column-major
 * (4H, T*B); a row-major (4H, K) weight is column-major (K, 4H), i.e. its own transpose.
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

// ---- element-wise kernels. Mapping for all: 1-D grid, one thread per element of a (B, H)
// ---- tensor, element index = blockIdx.x * blockDim.x + threadIdx.x, batch row b = index / H,
// ---- unit j = index % H. A gate is a (B, H) view with row stride 4H into the (B, 4H) gates.

/// Offset of element (b, j) of a gate whose rows are `stride` apart.
__device__ int gate_offset(int index, int hidden, int stride) {
  return (index / hidden) * stride + index % hidden;
}

/// gate[b][j] += b_ih[j] + b_hh[j] (the biases of one gate).
__global__ void add_biases_kernel(float* gate, const float* b_ih, const float* b_hh, int hidden,
                                  int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int unit = index % hidden;
  gate[gate_offset(index, hidden, stride)] += b_ih[unit] + b_hh[unit];
}

/// value = 1 / (1 + exp(-value)), in place.
__global__ void sigmoid_kernel(float* values, int hidden, int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  float& value = values[gate_offset(index, hidden, stride)];
  value = 1.0f / (1.0f + expf(-value));
}

/// value = tanh(value), in place.
__global__ void tanh_kernel(float* values, int hidden, int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  float& value = values[gate_offset(index, hidden, stride)];
  value = tanhf(value);
}

/// c_t = f * c_{t-1} + i * g.
__global__ void cell_update_kernel(float* cell, const float* cell_prev, const float* input_gate,
                                   const float* forget_gate, const float* candidate, int hidden,
                                   int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int gate = gate_offset(index, hidden, stride);
  cell[index] = forget_gate[gate] * cell_prev[index] + input_gate[gate] * candidate[gate];
}

/// h_t = o * tanh(c_t).
__global__ void hidden_output_kernel(float* hidden_out, const float* output_gate, const float* cell,
                                     int hidden, int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  hidden_out[index] = output_gate[gate_offset(index, hidden, stride)] * tanhf(cell[index]);
}

// ---- backward element-wise kernels: same mapping; gates and dz are (B, H) views with row
// ---- stride 4H. dz_q is the gradient of gate q before its activation; "rec" is what step t+1
// ---- sent back to step t.

/// out = a + b: the gradient of h_t, from above (y or the next layer) and from step t+1.
__global__ void add_kernel(float* out, const float* a, const float* b, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  out[index] = a[index] + b[index];
}

/// dc = dc_rec + dh * o * (1 - tanh(c)^2): the gradient of c_t.
__global__ void cell_gradient_kernel(float* dc, const float* dc_rec, const float* dh,
                                     const float* output_gate, const float* cell, int hidden,
                                     int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const float tanh_c = tanhf(cell[index]);
  const float o = output_gate[gate_offset(index, hidden, stride)];
  dc[index] = dc_rec[index] + dh[index] * o * (1.0f - tanh_c * tanh_c);
}

/// dz_o = dh * tanh(c) * o * (1 - o).
__global__ void output_gate_gradient_kernel(float* dz, const float* dh, const float* output_gate,
                                            const float* cell, int hidden, int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int gate = gate_offset(index, hidden, stride);
  const float o = output_gate[gate];
  dz[gate] = dh[index] * tanhf(cell[index]) * o * (1.0f - o);
}

/// dz = dc * other * s * (1 - s), for a sigmoid gate s whose product partner is `other`:
/// the input gate (partner g, rows 4H apart) and the forget gate (partner c_{t-1}, rows H apart).
__global__ void sigmoid_gate_gradient_kernel(float* dz, const float* dc, const float* other,
                                             int other_stride, const float* gate, int hidden,
                                             int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int offset = gate_offset(index, hidden, stride);
  const float s = gate[offset];
  dz[offset] = dc[index] * other[gate_offset(index, hidden, other_stride)] * s * (1.0f - s);
}

/// dz_g = dc * i * (1 - g^2).
__global__ void candidate_gradient_kernel(float* dz, const float* dc, const float* input_gate,
                                          const float* candidate, int hidden, int stride,
                                          int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int gate = gate_offset(index, hidden, stride);
  const float g = candidate[gate];
  dz[gate] = dc[index] * input_gate[gate] * (1.0f - g * g);
}

/// dc_rec = dc * f: the gradient sent back to c_{t-1}.
__global__ void cell_previous_gradient_kernel(float* dc_rec, const float* dc,
                                              const float* forget_gate, int hidden, int stride,
                                              int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  dc_rec[index] = dc[index] * forget_gate[gate_offset(index, hidden, stride)];
}

/// values[i] = 1 for i < count: the vector a GEMV sums the bias gradient with.
__global__ void fill_ones_kernel(float* values, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < count) values[index] = 1.0f;
}

class TrainingPass final : public TrainingStage {
 public:
  ~TrainingPass() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    const std::size_t columns = static_cast<std::size_t>(s.seq_len) * s.batch;  // T*B
    return (stash_floats(s) + kGates * sequence + 2 * sequence + 4 * state + columns) *
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
    dz_.allocate(T * kGates * state);
    dh_.allocate(state);
    dh_rec_.allocate(state);
    dc_.allocate(state);
    dc_rec_.allocate(state);
    for (DeviceBuffer<float>& d : d_sequence_)
      d.allocate(T * state);
    const int columns = s.seq_len * s.batch;
    ones_.allocate(columns);
    fill_ones_kernel<<<ceil_div(columns, kThreadsPerBlock), kThreadsPerBlock>>>(ones_.data(),
                                                                                columns);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  // What the forward keeps for the backward, per layer: every step's activated gates (T, B, 4H),
  // c (T + 1, B, H; slot 0 = c0) and h (T + 1, B, H; slot 0 = h0).
  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
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
      // The input part of every step at once: gates (4H x T*B) = W_ih · x.
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B, input_size,
                               &one, t.w_ih[layer], input_size, input_sequence, input_size, &zero,
                               kept.gates.data(), four_h));

      for (int step = 0; step < s.seq_len; ++step) {
        const float* h_prev = kept.hidden.data() + static_cast<std::size_t>(step) * state;
        float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
        // gates_t += W_hh · h_{t-1}: one (4H x H)(H x B) GEMM for the four gates
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, B, H, &one,
                                 t.w_hh[layer], H, h_prev, H, &one, gates, four_h));
        for (int q = 0; q < kGates; ++q) {
          float* gate = gates + q * H;
          add_biases_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
              gate, t.b_ih[layer] + q * H, t.b_hh[layer] + q * H, H, four_h, state);
          CUDA_CHECK_LAUNCH();
          if (q == kGateG) {
            tanh_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, H, four_h, state);
          } else {
            sigmoid_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, H, four_h, state);
          }
          CUDA_CHECK_LAUNCH();
        }
        const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
        float* c_t = kept.cell.data() + static_cast<std::size_t>(step + 1) * state;
        float* h_t = kept.hidden.data() + static_cast<std::size_t>(step + 1) * state;
        cell_update_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            c_t, c_prev, gates + kGateI * H, gates + kGateF * H, gates + kGateG * H, H, four_h,
            state);
        CUDA_CHECK_LAUNCH();
        hidden_output_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(h_t, gates + kGateO * H, c_t,
                                                                      H, four_h, state);
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
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int columns = s.seq_len * B;  // T*B: every step's batch rows side by side
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));

    for (int layer = s.layers - 1; layer >= 0; --layer) {
      const int input_size = s.layer_input_size(layer);
      const LayerStash& kept = stash_[layer];
      const std::size_t layer_state = static_cast<std::size_t>(layer) * state;
      // The gradient of this layer's h sequence from above: dy for the last layer, else what
      // the layer above computed for its input. Its own input's gradient goes to dx (layer 0)
      // or to the buffer the layer below reads.
      const float* d_output = layer == s.layers - 1 ? t.dy : d_sequence_[(layer + 1) % 2].data();
      float* d_input = layer == 0 ? t.dx : d_sequence_[layer % 2].data();
      const float* input_sequence = layer == 0 ? t.x : stash_[layer - 1].hidden.data() + state;
      CUDA_CHECK(cudaMemcpyAsync(dh_rec_.data(), t.dhy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(dc_rec_.data(), t.dcy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));

      // The recurrence: only what step t-1 needs from step t.
      for (int step = s.seq_len - 1; step >= 0; --step) {
        const float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
        const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
        const float* c_t = c_prev + state;
        float* dz = dz_.data() + static_cast<std::size_t>(step) * kGates * state;
        add_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dh_.data(), d_output + static_cast<std::size_t>(step) * state, dh_rec_.data(), state);
        CUDA_CHECK_LAUNCH();
        cell_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dc_.data(), dc_rec_.data(), dh_.data(), gates + kGateO * H, c_t, H, four_h, state);
        CUDA_CHECK_LAUNCH();
        output_gate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz + kGateO * H, dh_.data(), gates + kGateO * H, c_t, H, four_h, state);
        CUDA_CHECK_LAUNCH();
        sigmoid_gate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz + kGateI * H, dc_.data(), gates + kGateG * H, four_h, gates + kGateI * H, H, four_h,
            state);
        CUDA_CHECK_LAUNCH();
        sigmoid_gate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz + kGateF * H, dc_.data(), c_prev, H, gates + kGateF * H, H, four_h, state);
        CUDA_CHECK_LAUNCH();
        candidate_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz + kGateG * H, dc_.data(), gates + kGateI * H, gates + kGateG * H, H, four_h, state);
        CUDA_CHECK_LAUNCH();
        cell_previous_gradient_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dc_rec_.data(), dc_.data(), gates + kGateF * H, H, four_h, state);
        CUDA_CHECK_LAUNCH();
        // dh_{t-1} = W_hh^T · dz_t: ONE (H x 4H)(4H x B) GEMM for the four gates. A row-major
        // (4H, H) W_hh read column-major is W_hh^T already: no transpose flag.
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, H, B, four_h, &one,
                                 t.w_hh[layer], H, dz, four_h, &zero, dh_rec_.data(), H));
      }

      // After the recurrence, what needs none of it: one call each, over all T*B columns.
      // d(input) = W_ih^T · dz: (I x 4H)(4H x T*B)
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, input_size, columns, four_h, &one,
                               t.w_ih[layer], input_size, dz_.data(), four_h, &zero, d_input,
                               input_size));
      // dW_ih = dz · input^T, dW_hh = dz · h_{t-1}^T: row-major (4H x K) results are column-major
      // (K x 4H) = input (K x T*B) · dz^T (T*B x 4H). Written (beta = 0), summed over all steps.
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h, columns, &one,
                               input_sequence, input_size, dz_.data(), four_h, &zero,
                               t.grad_w_ih[layer], input_size));
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, H, four_h, columns, &one,
                               kept.hidden.data(), H, dz_.data(), four_h, &zero, t.grad_w_hh[layer],
                               H));
      // db = dz · 1: the sum of every column of dz. Both bias vectors enter the gates the same
      // way: their gradients are equal.
      CUBLAS_CHECK(cublasSgemv(cublas_, CUBLAS_OP_N, four_h, columns, &one, dz_.data(), four_h,
                               ones_.data(), 1, &zero, t.grad_b_ih[layer], 1));
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
    DeviceBuffer<float> gates;   // (T, B, 4H): i, f, g, o after their activations
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
  DeviceBuffer<float> dz_;  // (T, B, 4H): every step's gate gradients, for the GEMMs after
  DeviceBuffer<float> dh_, dh_rec_, dc_, dc_rec_;  // (B, H)
  DeviceBuffer<float> d_sequence_[2];  // (T, B, H): gradients of intermediate h sequences
  DeviceBuffer<float> ones_;           // (T*B): all ones, for the bias gradient's GEMV
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<TrainingPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
