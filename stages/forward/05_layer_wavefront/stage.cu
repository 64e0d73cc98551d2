/*! \file
 *  \brief Stage 05: the layers overlap in a wavefront, each on its own streams. The lesson is in
 *         README.md beside this file.
 *
 * As stage 04, but each Layer owns its streams, handles, events, gates, cell and output sequence;
 * a chunk's input GEMM waits only for the previous layer's same chunk (chunk_done); and forward()
 * issues the (layer, chunk) pairs diagonal by diagonal.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr int kThreadsPerBlock = 256;  // element-wise kernels: one thread per element
constexpr int kGates = 4;              // i, f, g, o
constexpr int kGateG = 2;              // the cell candidate g uses tanh, the others sigmoid
constexpr int kChunkSteps = 10;        // steps per input-GEMM chunk: the recurrence waits for one

// ---- the element-wise kernel. Mapping: 1-D grid, one thread per element of a (B, H) tensor,
// ---- element index = blockIdx.x * blockDim.x + threadIdx.x, batch row b = index / H,
// ---- unit j = index % H. Gate q of (b, j) is at b*4H + q*H + j of the step's (B, 4H) gates.

/// The whole element-wise part of one step for element (b, j): biases, activations, c and h.
__global__ void lstm_pointwise_kernel(const float* gates, const float* b_ih, const float* b_hh,
                                      float* cell, float* hidden_out, int hidden, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int unit = index % hidden;
  // size_t: the row offset b*4H passes 2^31 before B*H does.
  const float* row = gates + static_cast<std::size_t>(index / hidden) * kGates * hidden;
  float act[kGates];  // i, f, g, o: activated in registers, never written back
#pragma unroll
  for (int q = 0; q < kGates; ++q) {
    const int k = q * hidden + unit;
    const float pre = row[k] + b_ih[k] + b_hh[k];
    act[q] = q == kGateG ? tanhf(pre) : 1.0f / (1.0f + expf(-pre));
  }
  const float c = act[1] * cell[index] + act[0] * act[kGateG];  // c = f * c + i * g
  cell[index] = c;
  hidden_out[index] = act[3] * tanhf(c);  // h = o * tanh(c)
}

class ForwardPass final : public Stage {
 public:
  ~ForwardPass() override {
    for (Layer& layer : layers_) {
      if (layer.cublas_input) cublasDestroy(layer.cublas_input);
      if (layer.cublas_recurrent) cublasDestroy(layer.cublas_recurrent);
      for (std::vector<cudaEvent_t>* events : {&layer.chunk_ready, &layer.chunk_done})
        for (cudaEvent_t event : *events)
          cudaEventDestroy(event);
      if (layer.finished) cudaEventDestroy(layer.finished);
      if (layer.input_stream) cudaStreamDestroy(layer.input_stream);
      if (layer.recurrent_stream) cudaStreamDestroy(layer.recurrent_stream);
    }
    if (start_) cudaEventDestroy(start_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    std::size_t weights = 0;  // the transposed copies: 4H * (I_l + H) per layer
    for (int layer = 0; layer < s.layers; ++layer)
      weights +=
          static_cast<std::size_t>(kGates) * s.hidden * (s.layer_input_size(layer) + s.hidden);
    // Per layer: gates (T, B, 4H) and c (B, H); per layer but the last: its h sequence.
    const std::size_t per_layer = kGates * sequence + state;
    return (s.layers * per_layer + (s.layers - 1) * sequence + weights) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const int chunks = ceil_div(s.seq_len, kChunkSteps);
    // The recurrences are the critical path: their streams get the highest priority, so the
    // block scheduler serves their kernels first whenever input-GEMM blocks wait for SMs too.
    int lowest_priority = 0, highest_priority = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest_priority, &highest_priority));
    CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
    layers_.resize(s.layers);
    for (int l = 0; l < s.layers; ++l) {
      Layer& layer = layers_[l];
      CUDA_CHECK(cudaStreamCreateWithPriority(&layer.recurrent_stream, cudaStreamNonBlocking,
                                              highest_priority));
      CUDA_CHECK(cudaStreamCreateWithPriority(&layer.input_stream, cudaStreamNonBlocking,
                                              lowest_priority));
      // One cuBLAS handle per stream (a handle's workspace must not be shared by two streams).
      CUBLAS_CHECK(cublasCreate(&layer.cublas_input));
      CUBLAS_CHECK(cublasCreate(&layer.cublas_recurrent));
      CUBLAS_CHECK(cublasSetStream(layer.cublas_input, layer.input_stream));
      CUBLAS_CHECK(cublasSetStream(layer.cublas_recurrent, layer.recurrent_stream));
      for (cublasHandle_t handle : {layer.cublas_input, layer.cublas_recurrent})
        CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
      // Events only order work here: without timing, recording and waiting are cheaper.
      for (std::vector<cudaEvent_t>* events : {&layer.chunk_ready, &layer.chunk_done}) {
        events->resize(chunks);
        for (cudaEvent_t& event : *events)
          CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      }
      CUDA_CHECK(cudaEventCreateWithFlags(&layer.finished, cudaEventDisableTiming));
      layer.gates.allocate(static_cast<std::size_t>(s.seq_len) * kGates * state);
      layer.cell.allocate(state);
      if (l < s.layers - 1) layer.output.allocate(s.seq_len * state);  // the last writes y
    }
    transpose_weights(t);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int chunks = ceil_div(s.seq_len, kChunkSteps);
    // A pass with other weights: transposed again, once the passes already on `stream` are done
    // with the copies.
    if (!same_tensors(t, transposed_)) {
      CUDA_CHECK(cudaStreamSynchronize(stream));
      transpose_weights(t);
    }
    // Every side stream starts after the work already on the caller's stream: the harness's
    // poisoning of y, hy, cy, and the previous pass (joined back into `stream` at its end).
    CUDA_CHECK(cudaEventRecord(start_, stream));
    for (Layer& layer : layers_) {
      CUDA_CHECK(cudaStreamWaitEvent(layer.input_stream, start_, 0));
      CUDA_CHECK(cudaStreamWaitEvent(layer.recurrent_stream, start_, 0));
    }
    // Issue in wavefront order: diagonal d holds (layer l, chunk d - l) for every layer, the
    // order in which the GPU can run them.
    for (int diagonal = 0; diagonal < chunks + s.layers - 1; ++diagonal) {
      for (int l = 0; l < s.layers; ++l) {
        const int chunk = diagonal - l;
        if (chunk < 0 || chunk >= chunks) continue;
        enqueue_input_gemm(t, l, chunk);
        enqueue_steps(t, l, chunk);
      }
    }
    // Join: each layer's recurrent stream waited for all its input chunks, so its end is the
    // end of that layer's work; the caller's stream waits for every layer.
    for (Layer& layer : layers_)
      CUDA_CHECK(cudaStreamWaitEvent(stream, layer.finished, 0));
  }

 private:
  /// The re-layout, in prepare() (and again for other weights). To column-major cuBLAS a
  /// row-major (4H, I_l) weight is the (I_l x 4H) matrix W^T; geam writes its transpose, W
  /// column-major (4H x I_l) with ld 4H (the same bytes as W^T row-major): the operand an NN GEMM
  /// takes as it is. Returns once done.
  void transpose_weights(const DeviceTensors& t) {
    const ProblemSize& s = t.size;
    transposed_ = {};  // until every layer is done
    const float one = 1.0f, zero = 0.0f;
    const int four_h = kGates * s.hidden;
    for (int l = 0; l < s.layers; ++l) {
      Layer& layer = layers_[l];
      const int input_size = s.layer_input_size(l);
      layer.w_ih_t.allocate_once(static_cast<std::size_t>(four_h) * input_size);
      layer.w_hh_t.allocate_once(static_cast<std::size_t>(four_h) * s.hidden);
      // C = 1 * op(A) + 0 * op(B) with op = transpose; B = A keeps the unused operand valid
      CUBLAS_CHECK(cublasSgeam(layer.cublas_input, CUBLAS_OP_T, CUBLAS_OP_T, four_h, input_size,
                               &one, t.w_ih[l], input_size, &zero, t.w_ih[l], input_size,
                               layer.w_ih_t.data(), four_h));
      CUBLAS_CHECK(cublasSgeam(layer.cublas_input, CUBLAS_OP_T, CUBLAS_OP_T, four_h, s.hidden, &one,
                               t.w_hh[l], s.hidden, &zero, t.w_hh[l], s.hidden, layer.w_hh_t.data(),
                               four_h));
      CUDA_CHECK(cudaStreamSynchronize(layer.input_stream));  // ready before any forward
    }
    transposed_ = t;
  }

  /// Everything one layer owns: streams, handles, events, buffers, re-laid-out weights.
  struct Layer {
    cudaStream_t recurrent_stream = nullptr;  // high priority: recurrent GEMMs, element-wise
    cudaStream_t input_stream = nullptr;      // low priority: the input GEMMs, chunk by chunk
    cublasHandle_t cublas_recurrent = nullptr, cublas_input = nullptr;  // one per stream
    std::vector<cudaEvent_t> chunk_ready;  // on the input stream: chunk c's input GEMM is done
    std::vector<cudaEvent_t> chunk_done;   // on the recurrent stream: chunk c's h is written
    cudaEvent_t finished = nullptr;        // on the recurrent stream: the layer's last work
    DeviceBuffer<float> gates;             // (T, B, 4H): every step's i, f, g, o side by side
    DeviceBuffer<float> cell;              // (B, H): c of this layer
    DeviceBuffer<float> output;  // (T, B, H): this layer's h sequence (not for the last layer)
    DeviceBuffer<float> w_ih_t, w_hh_t;  // W^T row-major, ld 4H
  };

  /// Enqueues chunk `chunk` of layer l's input GEMM on the layer's input stream, after layer
  /// l-1's same chunk.
  void enqueue_input_gemm(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    Layer& layer = layers_[l];
    const int B = s.batch, four_h = kGates * s.hidden, input_size = s.layer_input_size(l);
    const float one = 1.0f, zero = 0.0f;
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence.
    const float* input_sequence = l == 0 ? t.x : layers_[l - 1].output.data();
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);

    // Only layer l-1's SAME chunk must be written before this chunk's input GEMM reads it.
    if (l > 0)
      CUDA_CHECK(cudaStreamWaitEvent(layer.input_stream, layers_[l - 1].chunk_done[chunk], 0));
    // Steps [first, first + steps) at once: (4H x I) · (I x steps*B), on the input stream
    CUBLAS_CHECK(cublasSgemm(
        layer.cublas_input, CUBLAS_OP_N, CUBLAS_OP_N, four_h, steps * B, input_size, &one,
        layer.w_ih_t.data(), four_h,
        input_sequence + static_cast<std::size_t>(first) * B * input_size, input_size, &zero,
        layer.gates.data() + static_cast<std::size_t>(first) * B * four_h, four_h));
    CUDA_CHECK(cudaEventRecord(layer.chunk_ready[chunk], layer.input_stream));
  }

  /// Enqueues the steps of chunk `chunk` of layer l on the layer's recurrent stream, after the
  /// chunk's input GEMM: c0 in before the first step, hy and cy out after the last.
  void enqueue_steps(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    Layer& layer = layers_[l];
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const float one = 1.0f;
    // The last layer writes y; the others, their h sequence for the next layer.
    float* output_sequence = l == s.layers - 1 ? t.y : layer.output.data();
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);

    CUDA_CHECK(cudaStreamWaitEvent(layer.recurrent_stream, layer.chunk_ready[chunk], 0));
    if (chunk == 0) {
      CUDA_CHECK(cudaMemcpyAsync(layer.cell.data(), t.c0 + static_cast<std::size_t>(l) * state,
                                 state * sizeof(float), cudaMemcpyDeviceToDevice,
                                 layer.recurrent_stream));
    }
    for (int step = first; step < first + steps; ++step) {
      const float* h_prev = step == 0
                                ? t.h0 + static_cast<std::size_t>(l) * state
                                : output_sequence + static_cast<std::size_t>(step - 1) * state;
      float* h_t = output_sequence + static_cast<std::size_t>(step) * state;
      float* gates_t = layer.gates.data() + static_cast<std::size_t>(step) * B * four_h;
      // gates_t += W_hh · h_{t-1}: all four gates in one (4H x H) · (H x B) GEMM
      CUBLAS_CHECK(cublasSgemm(layer.cublas_recurrent, CUBLAS_OP_N, CUBLAS_OP_N, four_h, B, H, &one,
                               layer.w_hh_t.data(), four_h, h_prev, H, &one, gates_t, four_h));
      // Everything else of the step: one kernel
      lstm_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, layer.recurrent_stream>>>(
          gates_t, t.b_ih[l], t.b_hh[l], layer.cell.data(), h_t, H, state);
      CUDA_CHECK_LAUNCH();
    }
    CUDA_CHECK(cudaEventRecord(layer.chunk_done[chunk], layer.recurrent_stream));

    if (chunk == static_cast<int>(layer.chunk_done.size()) - 1) {
      // The layer's final states: h_{T-1} is the last slice of its output sequence.
      const float* h_last = output_sequence + static_cast<std::size_t>(s.seq_len - 1) * state;
      CUDA_CHECK(cudaMemcpyAsync(t.hy + static_cast<std::size_t>(l) * state, h_last,
                                 state * sizeof(float), cudaMemcpyDeviceToDevice,
                                 layer.recurrent_stream));
      CUDA_CHECK(cudaMemcpyAsync(t.cy + static_cast<std::size_t>(l) * state, layer.cell.data(),
                                 state * sizeof(float), cudaMemcpyDeviceToDevice,
                                 layer.recurrent_stream));
      CUDA_CHECK(cudaEventRecord(layer.finished, layer.recurrent_stream));
    }
  }

  cudaEvent_t start_ = nullptr;  // on the caller's stream: the pass may begin
  std::vector<Layer> layers_;
  DeviceTensors transposed_;  // the tensors whose weights layers_ hold transposed
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<ForwardPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
