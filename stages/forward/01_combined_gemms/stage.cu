/*! \file
 *  \brief Stage 01: one GEMM for the four gates, one GEMM for a layer's inputs. The lesson is in
 *         README.md beside this file.
 *
 * As stage 00, but a step's recurrent part is one 4H x B x H GEMM for the four gates
 * (enqueue_steps), and a layer's input parts W_ih · x_t are one 4H x (T*B) x I GEMM for all
 * steps up front (enqueue_input_gemm). The gates lie side by side in a (T, B, 4H) buffer.
 */
#include <cublas_v2.h>

#include <memory>

#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr int kThreadsPerBlock = 256;  // element-wise kernels: one thread per element
constexpr int kGates = 4;              // i, f, g, o
constexpr int kGateG = 2;              // the cell candidate g uses tanh, the others sigmoid

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

/// c = f * c + i * g: the new cell state, in place.
__global__ void cell_update_kernel(float* cell, const float* input_gate, const float* forget_gate,
                                   const float* candidate, int hidden, int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int gate = gate_offset(index, hidden, stride);
  cell[index] = forget_gate[gate] * cell[index] + input_gate[gate] * candidate[gate];
}

/// h = o * tanh(c): the new hidden state, written straight into the layer's output sequence.
__global__ void hidden_output_kernel(float* hidden_out, const float* output_gate, const float* cell,
                                     int hidden, int stride, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  hidden_out[index] = output_gate[gate_offset(index, hidden, stride)] * tanhf(cell[index]);
}

class ForwardPass final : public Stage {
 public:
  ~ForwardPass() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    return (kGates * sequence + state + sequence_buffers(s) * sequence) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    gates_.allocate(static_cast<std::size_t>(s.seq_len) * kGates * state);
    cell_.allocate(state);
    for (int i = 0; i < sequence_buffers(s); ++i)
      layer_outputs_[i].allocate(s.seq_len * state);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    // Layer by layer, all on the caller's stream: the layer's input GEMM, then its steps.
    for (int l = 0; l < s.layers; ++l) {
      enqueue_input_gemm(t, l);
      enqueue_steps(t, l, stream);
    }
  }

 private:
  /// Intermediate layers' h sequences (T, B, H): two, used alternately, when L > 2; one when
  /// L = 2; none when L = 1 (the only layer writes y).
  static int sequence_buffers(const ProblemSize& s) { return s.layers > 2 ? 2 : s.layers - 1; }

  /// Enqueues layer l's input GEMM: the input parts of all T steps at once.
  void enqueue_input_gemm(const DeviceTensors& t, int l) {
    const ProblemSize& s = t.size;
    const int B = s.batch, four_h = kGates * s.hidden, input_size = s.layer_input_size(l);
    const float one = 1.0f, zero = 0.0f;
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence.
    const float* input_sequence = l == 0 ? t.x : layer_outputs_[(l - 1) % 2].data();

    // All steps' input parts at once: gates = W_ih · [x_0 ... x_{T-1}], (4H x I) · (I x T*B)
    CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B, input_size,
                             &one, t.w_ih[l], input_size, input_sequence, input_size, &zero,
                             gates_.data(), four_h));
  }

  /// Enqueues layer l's steps on `stream`: c0 in before the first step, hy and cy out after the
  /// last.
  void enqueue_steps(const DeviceTensors& t, int l, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const float one = 1.0f;
    // The last layer writes y; the others, their h sequence for the next layer.
    float* output_sequence = l == s.layers - 1 ? t.y : layer_outputs_[l % 2].data();

    CUDA_CHECK(cudaMemcpyAsync(cell_.data(), t.c0 + static_cast<std::size_t>(l) * state,
                               state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    for (int step = 0; step < s.seq_len; ++step) {
      const float* h_prev = step == 0
                                ? t.h0 + static_cast<std::size_t>(l) * state
                                : output_sequence + static_cast<std::size_t>(step - 1) * state;
      float* h_t = output_sequence + static_cast<std::size_t>(step) * state;
      float* gates_t = gates_.data() + static_cast<std::size_t>(step) * B * four_h;
      // gates_t += W_hh · h_{t-1}: all four gates in one (4H x H) · (H x B) GEMM
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, B, H, &one, t.w_hh[l], H,
                               h_prev, H, &one, gates_t, four_h));
      for (int q = 0; q < kGates; ++q) {
        float* gate = gates_t + q * H;  // gate q: columns qH..qH+H-1 of each (B, 4H) row
        add_biases_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            gate, t.b_ih[l] + q * H, t.b_hh[l] + q * H, H, four_h, state);
        CUDA_CHECK_LAUNCH();
        if (q == kGateG) {
          tanh_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, H, four_h, state);
        } else {
          sigmoid_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, H, four_h, state);
        }
        CUDA_CHECK_LAUNCH();
      }
      cell_update_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
          cell_.data(), gates_t, gates_t + H, gates_t + 2 * H, H, four_h, state);
      CUDA_CHECK_LAUNCH();
      hidden_output_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(h_t, gates_t + 3 * H,
                                                                    cell_.data(), H, four_h, state);
      CUDA_CHECK_LAUNCH();
    }

    // The layer's final states: h_{T-1} is the last slice of its output sequence.
    const float* h_last = output_sequence + static_cast<std::size_t>(s.seq_len - 1) * state;
    CUDA_CHECK(cudaMemcpyAsync(t.hy + static_cast<std::size_t>(l) * state, h_last,
                               state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(t.cy + static_cast<std::size_t>(l) * state, cell_.data(),
                               state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }

  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<float> gates_;  // (T, B, 4H): every step's i, f, g, o side by side
  DeviceBuffer<float> cell_;   // (B, H): c of the current layer
  DeviceBuffer<float> layer_outputs_[2];
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<ForwardPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
