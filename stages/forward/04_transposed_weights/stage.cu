/*! \file
 *  \brief Stage 04: weights re-laid out once, so that every GEMM is cuBLAS's NN case. The lesson
 *         is in README.md beside this file.
 *
 * As stage 03, but prepare() transposes each layer's W_ih and W_hh once (cublasSgeam) into
 * buffers of its Layer (again where a pass brings other weights), and both GEMMs take them as
 * stored (CUBLAS_OP_N, lda = 4H) instead of transposing them on the fly (CUBLAS_OP_T).
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
    if (cublas_input_) cublasDestroy(cublas_input_);
    if (cublas_recurrent_) cublasDestroy(cublas_recurrent_);
    for (cudaEvent_t event : chunk_ready_)
      cudaEventDestroy(event);
    for (cudaEvent_t event : {start_, layer_done_, finished_})
      if (event) cudaEventDestroy(event);
    if (input_stream_) cudaStreamDestroy(input_stream_);
    if (recurrent_stream_) cudaStreamDestroy(recurrent_stream_);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    std::size_t weights = 0;  // the transposed copies: 4H * (I_l + H) per layer
    for (int layer = 0; layer < s.layers; ++layer)
      weights +=
          static_cast<std::size_t>(kGates) * s.hidden * (s.layer_input_size(layer) + s.hidden);
    return (kGates * sequence + state + sequence_buffers(s) * sequence + weights) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const int chunks = ceil_div(s.seq_len, kChunkSteps);
    // The recurrence is the critical path: its stream gets the highest priority, so the block
    // scheduler serves its kernels first whenever input-GEMM blocks are waiting for SMs too.
    int lowest_priority = 0, highest_priority = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest_priority, &highest_priority));
    CUDA_CHECK(
        cudaStreamCreateWithPriority(&recurrent_stream_, cudaStreamNonBlocking, highest_priority));
    CUDA_CHECK(
        cudaStreamCreateWithPriority(&input_stream_, cudaStreamNonBlocking, lowest_priority));
    // One cuBLAS handle per stream (a handle's workspace must not be shared by two streams).
    CUBLAS_CHECK(cublasCreate(&cublas_input_));
    CUBLAS_CHECK(cublasCreate(&cublas_recurrent_));
    CUBLAS_CHECK(cublasSetStream(cublas_input_, input_stream_));
    CUBLAS_CHECK(cublasSetStream(cublas_recurrent_, recurrent_stream_));
    for (cublasHandle_t handle : {cublas_input_, cublas_recurrent_})
      CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    // Events only order work here: without timing, recording and waiting are cheaper.
    for (cudaEvent_t* event : {&start_, &layer_done_, &finished_})
      CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    chunk_ready_.resize(chunks);
    for (cudaEvent_t& event : chunk_ready_)
      CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    gates_.allocate(static_cast<std::size_t>(s.seq_len) * kGates * state);
    cell_.allocate(state);
    for (int i = 0; i < sequence_buffers(s); ++i)
      layer_outputs_[i].allocate(s.seq_len * state);
    layers_.resize(s.layers);
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
    CUDA_CHECK(cudaStreamWaitEvent(input_stream_, start_, 0));
    CUDA_CHECK(cudaStreamWaitEvent(recurrent_stream_, start_, 0));
    // Layer by layer: all of a layer's input-GEMM chunks, then its steps.
    for (int l = 0; l < s.layers; ++l) {
      for (int chunk = 0; chunk < chunks; ++chunk)
        enqueue_input_gemm(t, l, chunk);
      for (int chunk = 0; chunk < chunks; ++chunk)
        enqueue_steps(t, l, chunk);
    }
    // Join: the recurrent stream waited for every chunk, so its end is the end of all the work;
    // the caller's stream waits for it, and the caller's synchronisation covers the whole pass.
    CUDA_CHECK(cudaEventRecord(finished_, recurrent_stream_));
    CUDA_CHECK(cudaStreamWaitEvent(stream, finished_, 0));
  }

 private:
  /// Intermediate layers' h sequences (T, B, H): two, used alternately, when L > 2; one when
  /// L = 2; none when L = 1 (the only layer writes y).
  static int sequence_buffers(const ProblemSize& s) { return s.layers > 2 ? 2 : s.layers - 1; }

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
      CUBLAS_CHECK(cublasSgeam(cublas_input_, CUBLAS_OP_T, CUBLAS_OP_T, four_h, input_size, &one,
                               t.w_ih[l], input_size, &zero, t.w_ih[l], input_size,
                               layer.w_ih_t.data(), four_h));
      CUBLAS_CHECK(cublasSgeam(cublas_input_, CUBLAS_OP_T, CUBLAS_OP_T, four_h, s.hidden, &one,
                               t.w_hh[l], s.hidden, &zero, t.w_hh[l], s.hidden, layer.w_hh_t.data(),
                               four_h));
    }
    CUDA_CHECK(cudaStreamSynchronize(input_stream_));  // ready before any forward
    transposed_ = t;
  }

  /// Everything one layer owns: its re-laid-out weights.
  struct Layer {
    DeviceBuffer<float> w_ih_t, w_hh_t;  // W^T row-major, ld 4H
  };

  /// Enqueues chunk `chunk` of layer l's input GEMM on the input stream, after layer l-1's
  /// recurrence.
  void enqueue_input_gemm(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    Layer& layer = layers_[l];
    const int B = s.batch, four_h = kGates * s.hidden, input_size = s.layer_input_size(l);
    const float one = 1.0f, zero = 0.0f;
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence.
    const float* input_sequence = l == 0 ? t.x : layer_outputs_[(l - 1) % 2].data();
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);

    // Layer l-1's recurrence wrote this layer's input sequence and still reads the gates
    // buffer that these GEMMs overwrite: one wait on "layer done" covers both hazards.
    if (l > 0 && chunk == 0) CUDA_CHECK(cudaStreamWaitEvent(input_stream_, layer_done_, 0));
    // Steps [first, first + steps) at once: (4H x I) · (I x steps*B), on the input stream
    CUBLAS_CHECK(cublasSgemm(cublas_input_, CUBLAS_OP_N, CUBLAS_OP_N, four_h, steps * B, input_size,
                             &one, layer.w_ih_t.data(), four_h,
                             input_sequence + static_cast<std::size_t>(first) * B * input_size,
                             input_size, &zero,
                             gates_.data() + static_cast<std::size_t>(first) * B * four_h, four_h));
    CUDA_CHECK(cudaEventRecord(chunk_ready_[chunk], input_stream_));
  }

  /// Enqueues the steps of chunk `chunk` of layer l on the recurrent stream, after the chunk's
  /// input GEMM: c0 in before the first step, hy and cy out after the last.
  void enqueue_steps(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    Layer& layer = layers_[l];
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const float one = 1.0f;
    // The last layer writes y; the others, their h sequence for the next layer.
    float* output_sequence = l == s.layers - 1 ? t.y : layer_outputs_[l % 2].data();
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);

    // The chunk's steps wait for its input GEMM. So a layer's recurrence ends after its input
    // GEMMs have read their input sequence, which layer l+2's recurrence, later on this stream,
    // overwrites (buffers alternate).
    CUDA_CHECK(cudaStreamWaitEvent(recurrent_stream_, chunk_ready_[chunk], 0));
    if (chunk == 0) {
      CUDA_CHECK(cudaMemcpyAsync(cell_.data(), t.c0 + static_cast<std::size_t>(l) * state,
                                 state * sizeof(float), cudaMemcpyDeviceToDevice,
                                 recurrent_stream_));
    }
    for (int step = first; step < first + steps; ++step) {
      const float* h_prev = step == 0
                                ? t.h0 + static_cast<std::size_t>(l) * state
                                : output_sequence + static_cast<std::size_t>(step - 1) * state;
      float* h_t = output_sequence + static_cast<std::size_t>(step) * state;
      float* gates_t = gates_.data() + static_cast<std::size_t>(step) * B * four_h;
      // gates_t += W_hh · h_{t-1}: all four gates in one (4H x H) · (H x B) GEMM
      CUBLAS_CHECK(cublasSgemm(cublas_recurrent_, CUBLAS_OP_N, CUBLAS_OP_N, four_h, B, H, &one,
                               layer.w_hh_t.data(), four_h, h_prev, H, &one, gates_t, four_h));
      // Everything else of the step: one kernel
      lstm_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, recurrent_stream_>>>(
          gates_t, t.b_ih[l], t.b_hh[l], cell_.data(), h_t, H, state);
      CUDA_CHECK_LAUNCH();
    }

    if (chunk == static_cast<int>(chunk_ready_.size()) - 1) {
      CUDA_CHECK(cudaEventRecord(layer_done_, recurrent_stream_));
      // The layer's final states: h_{T-1} is the last slice of its output sequence.
      const float* h_last = output_sequence + static_cast<std::size_t>(s.seq_len - 1) * state;
      CUDA_CHECK(cudaMemcpyAsync(t.hy + static_cast<std::size_t>(l) * state, h_last,
                                 state * sizeof(float), cudaMemcpyDeviceToDevice,
                                 recurrent_stream_));
      CUDA_CHECK(cudaMemcpyAsync(t.cy + static_cast<std::size_t>(l) * state, cell_.data(),
                                 state * sizeof(float), cudaMemcpyDeviceToDevice,
                                 recurrent_stream_));
    }
  }

  cudaStream_t recurrent_stream_ = nullptr;  // high priority: recurrent GEMMs, element-wise work
  cudaStream_t input_stream_ = nullptr;      // low priority: the input GEMMs, chunk by chunk
  cublasHandle_t cublas_recurrent_ = nullptr, cublas_input_ = nullptr;  // one per stream
  cudaEvent_t start_ = nullptr;       // on the caller's stream: the pass may begin
  cudaEvent_t layer_done_ = nullptr;  // on the recurrent stream: a layer's h sequence is written
  cudaEvent_t finished_ = nullptr;    // on the recurrent stream: the pass's last work
  std::vector<cudaEvent_t> chunk_ready_;  // on the input stream: chunk c's input GEMM is done

  DeviceBuffer<float> gates_;  // (T, B, 4H): every step's i, f, g, o side by side
  DeviceBuffer<float> cell_;   // (B, H): c of the current layer
  DeviceBuffer<float> layer_outputs_[2];
  std::vector<Layer> layers_;
  DeviceTensors transposed_;  // the tensors whose weights layers_ hold transposed
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<ForwardPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
