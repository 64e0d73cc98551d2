/*! \file
 *  \brief Stage 00: the naive LSTM forward pass, operation by operation. The lesson is in
 *         README.md beside this file.
 *
 * The equations one at a time, as written: per layer and step, for each gate q two cuBLAS GEMMs
 * (W_ih[q] · x_t, then W_hh[q] · h_{t-1} added onto it) and two element-wise kernels (the biases,
 * the activation), then one kernel for c_t and one for h_t; everything on the caller's stream.
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
// ---- tensor, element index = blockIdx.x * blockDim.x + threadIdx.x, unit j = index % H.

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

/// c = f * c + i * g: the new cell state, in place.
__global__ void cell_update_kernel(float* cell, const float* input_gate, const float* forget_gate,
                                   const float* candidate, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  cell[index] = forget_gate[index] * cell[index] + input_gate[index] * candidate[index];
}

/// h = o * tanh(c): the new hidden state, written straight into the layer's output sequence.
__global__ void hidden_output_kernel(float* hidden_out, const float* output_gate, const float* cell,
                                     int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  hidden_out[index] = output_gate[index] * tanhf(cell[index]);
}

class ForwardPass final : public Stage {
 public:
  ~ForwardPass() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    return (kGates * state + state + sequence_buffers(s) * sequence) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    for (DeviceBuffer<float>& gate : gates_)
      gate.allocate(state);
    cell_.allocate(state);
    for (int i = 0; i < sequence_buffers(s); ++i)
      layer_outputs_[i].allocate(s.seq_len * state);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    // Layer by layer, all on the caller's stream.
    for (int l = 0; l < s.layers; ++l)
      enqueue_steps(t, l, stream);
  }

 private:
  /// Intermediate layers' h sequences (T, B, H): two, used alternately, when L > 2; one when
  /// L = 2; none when L = 1 (the only layer writes y).
  static int sequence_buffers(const ProblemSize& s) { return s.layers > 2 ? 2 : s.layers - 1; }

  /// Enqueues layer l's steps on `stream`: c0 in before the first step, hy and cy out after the
  /// last.
  void enqueue_steps(const DeviceTensors& t, int l, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H, input_size = s.layer_input_size(l);
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const float one = 1.0f, zero = 0.0f;
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence.
    const float* input_sequence = l == 0 ? t.x : layer_outputs_[(l - 1) % 2].data();
    // The last layer writes y; the others, their h sequence for the next layer.
    float* output_sequence = l == s.layers - 1 ? t.y : layer_outputs_[l % 2].data();

    CUDA_CHECK(cudaMemcpyAsync(cell_.data(), t.c0 + static_cast<std::size_t>(l) * state,
                               state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    for (int step = 0; step < s.seq_len; ++step) {
      const float* x_t = input_sequence + static_cast<std::size_t>(step) * B * input_size;
      const float* h_prev = step == 0
                                ? t.h0 + static_cast<std::size_t>(l) * state
                                : output_sequence + static_cast<std::size_t>(step - 1) * state;
      float* h_t = output_sequence + static_cast<std::size_t>(step) * state;
      for (int q = 0; q < kGates; ++q) {
        float* gate = gates_[q].data();
        const float* w_ih_q = t.w_ih[l] + static_cast<std::size_t>(q) * H * input_size;
        const float* w_hh_q = t.w_hh[l] + static_cast<std::size_t>(q) * H * H;
        // gate_q = W_ih[q] · x_t: (H x I) · (I x B), W_ih[q] transposed from its storage
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, H, B, input_size, &one, w_ih_q,
                                 input_size, x_t, input_size, &zero, gate, H));
        // gate_q += W_hh[q] · h_{t-1}  (beta = 1 accumulates onto the input part)
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, H, B, H, &one, w_hh_q, H,
                                 h_prev, H, &one, gate, H));
        add_biases_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, t.b_ih[l] + q * H,
                                                                   t.b_hh[l] + q * H, H, state);
        CUDA_CHECK_LAUNCH();
        if (q == kGateG) {
          tanh_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, state);
        } else {
          sigmoid_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gate, state);
        }
        CUDA_CHECK_LAUNCH();
      }
      cell_update_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
          cell_.data(), gates_[0].data(), gates_[1].data(), gates_[2].data(), state);
      CUDA_CHECK_LAUNCH();
      hidden_output_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(h_t, gates_[3].data(),
                                                                    cell_.data(), state);
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
  DeviceBuffer<float> gates_[kGates];  // (B, H) each: i, f, g, o
  DeviceBuffer<float> cell_;           // (B, H): c of the current layer
  DeviceBuffer<float> layer_outputs_[2];
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<ForwardPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
