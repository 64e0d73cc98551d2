/*! \file
 *  \brief Training stage 03: one element-wise kernel per step, forward and backward. The lesson
 *         is in README.md beside this file.
 *
 * As stage 02, but the ten element-wise kernels of a forward step become one (biases,
 * activations, c_t and h_t, as forward stage 03), and the eight of a backward step become one
 * (dh, dc, the four gate gradients and the gradient sent back to c_{t-1}). A step is now one GEMM
 * and one kernel in each direction; intermediate values (dh, dc) stay in registers.
 *
 * Layouts: as stage 01.
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

// ---- element-wise kernels. The forward and backward ones' mapping: 1-D grid, one thread per
// ---- element (b, j) of a (B, H) tensor, element index = blockIdx.x * blockDim.x + threadIdx.x,
// ---- b = index / H, j = index % H. The step's gates (and gate gradients) are a (B, 4H) row-major
// ---- block: gate q of element (b, j) at b*4H + q*H + j.

/// One forward step's element-wise work: gates += biases, the activations (written back: the
/// backward reads them), c_t = f * c_{t-1} + i * g and h_t = o * tanh(c_t).
__global__ void forward_pointwise_kernel(float* gates, const float* b_ih, const float* b_hh,
                                         const float* cell_prev, float* cell, float* hidden_out,
                                         int hidden, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int unit = index % hidden;
  float* row = gates + (index / hidden) * kGates * hidden + unit;  // gate q at row[q * hidden]
  float activated[kGates];
  for (int q = 0; q < kGates; ++q) {
    const float pre = row[q * hidden] + b_ih[q * hidden + unit] + b_hh[q * hidden + unit];
    activated[q] = q == kGateG ? tanhf(pre) : 1.0f / (1.0f + expf(-pre));
    row[q * hidden] = activated[q];
  }
  const float c = activated[kGateF] * cell_prev[index] + activated[kGateI] * activated[kGateG];
  cell[index] = c;
  hidden_out[index] = activated[kGateO] * tanhf(c);
}

/// One backward step's element-wise work, from the gradient of h_t from above (d_above) and from
/// step t+1 (dh_rec), and the gradient of c_t from step t+1 (dc_rec, overwritten with the one
/// sent to c_{t-1}): dh, dc and the four gate gradients dz (before activation), in registers.
__global__ void backward_pointwise_kernel(float* dz, float* dc_rec, const float* d_above,
                                          const float* dh_rec, const float* gates,
                                          const float* cell_prev, const float* cell, int hidden,
                                          int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int offset = (index / hidden) * kGates * hidden + index % hidden;
  const float i = gates[offset + kGateI * hidden], f = gates[offset + kGateF * hidden];
  const float g = gates[offset + kGateG * hidden], o = gates[offset + kGateO * hidden];
  const float tanh_c = tanhf(cell[index]);
  const float dh = d_above[index] + dh_rec[index];
  const float dc = dc_rec[index] + dh * o * (1.0f - tanh_c * tanh_c);
  dz[offset + kGateI * hidden] = dc * g * i * (1.0f - i);
  dz[offset + kGateF * hidden] = dc * cell_prev[index] * f * (1.0f - f);
  dz[offset + kGateG * hidden] = dc * i * (1.0f - g * g);
  dz[offset + kGateO * hidden] = dh * tanh_c * o * (1.0f - o);
  dc_rec[index] = dc * f;
}

/// values[i] = 1 for i < count: the vector a GEMV sums the bias gradient with.
__global__ void fill_ones_kernel(float* values, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < count) values[index] = 1.0f;
}

class TrainingPass final : public TrainingStage {
 public:
  ~TrainingPass() override {
    for (cudaEvent_t event : {dz_ready_[0], dz_ready_[1], weights_done_[0], weights_done_[1]})
      if (event) cudaEventDestroy(event);
    if (gradient_stream_) cudaStreamDestroy(gradient_stream_);
    if (gradient_cublas_) cublasDestroy(gradient_cublas_);
    if (cublas_) cublasDestroy(cublas_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    const std::size_t columns = static_cast<std::size_t>(s.seq_len) * s.batch;  // T*B
    return (stash_floats(s) + 2 * kGates * sequence + 2 * sequence + 2 * state + columns) *
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
      dz.allocate(T * kGates * state);
    // The weight gradients' stream: the lowest priority, so that the recurrence's small kernels
    // are scheduled first; its own cuBLAS handle (a handle's workspace belongs to one stream).
    int least_priority = 0, greatest_priority = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
    CUDA_CHECK(
        cudaStreamCreateWithPriority(&gradient_stream_, cudaStreamNonBlocking, least_priority));
    CUBLAS_CHECK(cublasCreate(&gradient_cublas_));
    CUBLAS_CHECK(cublasSetMathMode(gradient_cublas_, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasSetStream(gradient_cublas_, gradient_stream_));
    // Events only order work here: without timing, recording and waiting are cheaper.
    for (cudaEvent_t* event : {&dz_ready_[0], &dz_ready_[1], &weights_done_[0], &weights_done_[1]})
      CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    dh_rec_.allocate(state);
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
        const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
        float* c_t = kept.cell.data() + static_cast<std::size_t>(step + 1) * state;
        float* h_t = kept.hidden.data() + static_cast<std::size_t>(step + 1) * state;
        forward_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            gates, t.b_ih[layer], t.b_hh[layer], c_prev, c_t, h_t, H, state);
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
      const int turn = layer % 2;  // which dz buffer (and events) this layer uses
      float* const dz_all = dz_[turn].data();
      // dz[turn] was last read by layer + 2's weight gradients: wait for them before writing it.
      if (layer + 2 < s.layers) CUDA_CHECK(cudaStreamWaitEvent(stream, weights_done_[turn], 0));
      CUDA_CHECK(cudaMemcpyAsync(dh_rec_.data(), t.dhy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(dc_rec_.data(), t.dcy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));

      // The recurrence: only what step t-1 needs from step t.
      for (int step = s.seq_len - 1; step >= 0; --step) {
        const float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
        const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
        const float* c_t = c_prev + state;
        float* dz = dz_all + static_cast<std::size_t>(step) * kGates * state;
        backward_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            dz, dc_rec_.data(), d_output + static_cast<std::size_t>(step) * state, dh_rec_.data(),
            gates, c_prev, c_t, H, state);
        CUDA_CHECK_LAUNCH();
        // dh_{t-1} = W_hh^T · dz_t: ONE (H x 4H)(4H x B) GEMM for the four gates. A row-major
        // (4H, H) W_hh read column-major is W_hh^T already: no transpose flag.
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, H, B, four_h, &one,
                                 t.w_hh[layer], H, dz, four_h, &zero, dh_rec_.data(), H));
      }

      // After the recurrence, what needs none of it. The weight gradients go to the gradient
      // stream as soon as dz is complete.
      CUDA_CHECK(cudaEventRecord(dz_ready_[turn], stream));
      CUDA_CHECK(cudaStreamWaitEvent(gradient_stream_, dz_ready_[turn], 0));
      // The gradient of the input is on the critical path (the layer below starts from it): it
      // stays on this stream. d(input) = W_ih^T · dz: (I x 4H)(4H x T*B)
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, input_size, columns, four_h, &one,
                               t.w_ih[layer], input_size, dz_all, four_h, &zero, d_input,
                               input_size));
      // dW_ih = dz · input^T, dW_hh = dz · h_{t-1}^T: row-major (4H x K) results are column-major
      // (K x 4H) = input (K x T*B) · dz^T (T*B x 4H). Written (beta = 0), summed over all steps.
      CUBLAS_CHECK(cublasSgemm(gradient_cublas_, CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h,
                               columns, &one, input_sequence, input_size, dz_all, four_h, &zero,
                               t.grad_w_ih[layer], input_size));
      CUBLAS_CHECK(cublasSgemm(gradient_cublas_, CUBLAS_OP_N, CUBLAS_OP_T, H, four_h, columns, &one,
                               kept.hidden.data(), H, dz_all, four_h, &zero, t.grad_w_hh[layer],
                               H));
      // db = dz · 1: the sum of every column of dz. Both bias vectors enter the gates the same
      // way: their gradients are equal.
      CUBLAS_CHECK(cublasSgemv(gradient_cublas_, CUBLAS_OP_N, four_h, columns, &one, dz_all, four_h,
                               ones_.data(), 1, &zero, t.grad_b_ih[layer], 1));
      CUDA_CHECK(cudaMemcpyAsync(t.grad_b_hh[layer], t.grad_b_ih[layer], four_h * sizeof(float),
                                 cudaMemcpyDeviceToDevice, gradient_stream_));
      CUDA_CHECK(cudaEventRecord(weights_done_[turn], gradient_stream_));
      CUDA_CHECK(cudaMemcpyAsync(t.dh0 + layer_state, dh_rec_.data(), state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(t.dc0 + layer_state, dc_rec_.data(), state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    }
    // The caller's stream waits for the gradient stream's last work (layer 0's, recorded after
    // every earlier layer's on the same stream).
    CUDA_CHECK(cudaStreamWaitEvent(stream, weights_done_[0], 0));
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
  cublasHandle_t gradient_cublas_ = nullptr;  // on gradient_stream_
  cudaStream_t gradient_stream_ = nullptr;    // the weight gradients, beside the recurrence
  cudaEvent_t dz_ready_[2] = {};              // on the caller's stream: dz[turn] is complete
  cudaEvent_t weights_done_[2] = {};          // on the gradient stream: dz[turn] has been read
  DeviceBuffer<float> dz_[2];  // (T, B, 4H) each: a layer's gate gradients, layers taking turns
  DeviceBuffer<float> dh_rec_, dc_rec_;  // (B, H): what step t sends back to step t-1
  DeviceBuffer<float> d_sequence_[2];    // (T, B, H): gradients of intermediate h sequences
  DeviceBuffer<float> ones_;             // (T*B): all ones, for the bias gradient's GEMV
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<TrainingPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
