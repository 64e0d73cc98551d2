/*! \file
 *  \brief Stage 20: stage 06's GEMMs on tensor cores. Both GEMMs of a step take 16-bit
 *         operands (FP16 or BF16) and sum in FP32 (cublasGemmEx, CUBLAS_COMPUTE_32F); the
 *         element-wise work, c and the outputs stay FP32. The lesson is in README.md.
 *
 * As stage 06 (the layers in a wavefront, the pass captured as a CUDA graph), with a 16-bit copy
 * of each GEMM operand: the weights rounded once in prepare() (as 06 transposes them once; again
 * for other weight tensors), x at the start of each pass, h written in both widths by the
 * element-wise kernel.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr int kThreadsPerBlock = 256;  // element-wise kernels: one thread per element
constexpr int kGates = 4;              // i, f, g, o
constexpr int kGateG = 2;              // the cell candidate g uses tanh, the others sigmoid
constexpr int kChunkSteps = 10;        // steps per input-GEMM chunk: the recurrence waits for one
constexpr std::size_t kCublasWorkspaceBytes = 4 << 20;  // per cuBLAS handle

// ---- the element-wise kernels. The LSTM one's mapping: 1-D grid, one thread per element of a
// ---- (B, H) tensor, element index = blockIdx.x * blockDim.x + threadIdx.x, batch row
// ---- b = index / H, unit j = index % H. Gate q of (b, j) is at b*4H + q*H + j of the step's
// ---- (B, 4H) gates.

/// `value` rounded to nearest (ties to even) in Element, __half or __nv_bfloat16.
template <typename Element>
__device__ Element to_16_bits(float value) {
  if constexpr (std::is_same_v<Element, __half>)
    return __float2half_rn(value);
  else
    return __float2bfloat16_rn(value);
}

/// out[i] = in[i] in 16 bits for i < n (grid-stride): a GEMM operand.
template <typename Element>
__global__ void round_kernel(const float* in, Element* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = to_16_bits<Element>(in[i]);
}

/// The whole element-wise part of one step for element (b, j): biases, activations, c and h,
/// h in FP32 (the outputs) and in 16 bits (the next GEMMs' operand).
template <typename Element>
__global__ void lstm_pointwise_kernel(const float* gates, const float* b_ih, const float* b_hh,
                                      float* cell, float* hidden_out, Element* hidden_16,
                                      int hidden, int count) {
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
  const float h = act[3] * tanhf(c);  // h = o * tanh(c)
  hidden_out[index] = h;
  hidden_16[index] = to_16_bits<Element>(h);
}

/// Calls body(Element{}) with Element the 16-bit type of `precision`: where the kernels are picked.
template <typename Body>
void with_16_bit_type(Precision precision, Body&& body) {
  if (precision == Precision::kBf16) {
    body(__nv_bfloat16{});
  } else {
    body(__half{});
  }
}

class ForwardPass final : public Stage {
 public:
  explicit ForwardPass(std::string precision_name) : precision_name_(std::move(precision_name)) {}
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
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (graph_) cudaGraphDestroy(graph_);
    if (capture_stream_) cudaStreamDestroy(capture_stream_);
  }

  Precision precision() const override {
    return precision_name_ == "bf16" ? Precision::kBf16 : Precision::kFp16;
  }

  /// The project's bounds for the precision (core/kind_and_precision.h).
  Tolerance tolerance(const std::string& tensor) const override {
    return reduced_precision_tolerance(precision(), tensor);
  }

  void add_flags(CLI::App& app) override {
    app.add_option("--precision", precision_name_,
                   "the 16-bit type of every GEMM's operands (FP32 sums); every input is rounded "
                   "to it on the host first, and the reference reads the rounded values")
        ->check(CLI::IsMember({"fp16", "bf16"}))
        ->capture_default_str();
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // The transposed weights, 4H * (I_l + H) per layer: in 16 bits for good, in FP32 (counted in
    // full) only while prepare() rounds them.
    std::size_t weights = 0;
    for (int layer = 0; layer < s.layers; ++layer)
      weights +=
          static_cast<std::size_t>(kGates) * s.hidden * (s.layer_input_size(layer) + s.hidden);
    // Per layer: gates (T, B, 4H) and c (B, H); per layer but the last: its h sequence.
    const std::size_t per_layer = kGates * sequence + state;
    const std::size_t cublas_workspaces = 2 * s.layers * kCublasWorkspaceBytes;
    // In 16 bits: the weights, x, and per layer its h sequence with h0 (T + 1, B, H).
    const std::size_t halves = weights +
                               static_cast<std::size_t>(s.seq_len) * s.batch * s.input_size +
                               s.layers * (sequence + state);
    return (s.layers * per_layer + (s.layers - 1) * sequence + weights) * sizeof(float) +
           halves * sizeof(std::uint16_t) + cublas_workspaces;
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
      // 16-bit operands with CUBLAS_COMPUTE_32F: tensor cores, FP32 sums.
      for (cublasHandle_t handle : {layer.cublas_input, layer.cublas_recurrent})
        CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
      // A workspace per handle, owned here: cuBLAS must not allocate during stream capture.
      for (auto [handle, workspace] :
           {std::pair{layer.cublas_input, &layer.workspace_input},
            std::pair{layer.cublas_recurrent, &layer.workspace_recurrent}}) {
        workspace->allocate(kCublasWorkspaceBytes);
        CUBLAS_CHECK(cublasSetWorkspace(handle, workspace->data(), kCublasWorkspaceBytes));
      }
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
      layer.hidden_16.allocate((s.seq_len + 1) * state);
    }
    transpose_weights(t);
    x_16_.allocate(static_cast<std::size_t>(s.seq_len) * s.batch * s.input_size);
    CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
    capture(t);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    // The graph holds the captured pointers: a pass with other tensors records it again, their
    // weights transposed again once the passes already on `stream` are done with the copies.
    if (!same_tensors(t, captured_)) {
      CUDA_CHECK(cudaStreamSynchronize(stream));
      captured_ = {};  // until the pass is recorded again
      transpose_weights(t);
      capture(t);
    }
    CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream));  // the whole pass: one call
  }

 private:
  /// The re-layout, in prepare() (and again for other weights). To column-major cuBLAS a
  /// row-major (4H, I_l) weight is the (I_l x 4H) matrix W^T; geam writes its transpose, W
  /// column-major (4H x I_l) with ld 4H (the same bytes as W^T row-major): the operand an NN GEMM
  /// takes as it is; then rounded to the 16-bit operands the GEMMs read. Returns once done.
  void transpose_weights(const DeviceTensors& t) {
    const ProblemSize& s = t.size;
    const float one = 1.0f, zero = 0.0f;
    const int four_h = kGates * s.hidden;
    for (int l = 0; l < s.layers; ++l) {
      Layer& layer = layers_[l];
      const int input_size = s.layer_input_size(l);
      // In FP32 only until they are rounded below.
      DeviceBuffer<float> w_ih_t(static_cast<std::size_t>(four_h) * input_size);
      DeviceBuffer<float> w_hh_t(static_cast<std::size_t>(four_h) * s.hidden);
      // C = 1 * op(A) + 0 * op(B) with op = transpose; B = A keeps the unused operand valid
      CUBLAS_CHECK(cublasSgeam(layer.cublas_input, CUBLAS_OP_T, CUBLAS_OP_T, four_h, input_size,
                               &one, t.w_ih[l], input_size, &zero, t.w_ih[l], input_size,
                               w_ih_t.data(), four_h));
      CUBLAS_CHECK(cublasSgeam(layer.cublas_input, CUBLAS_OP_T, CUBLAS_OP_T, four_h, s.hidden, &one,
                               t.w_hh[l], s.hidden, &zero, t.w_hh[l], s.hidden, w_hh_t.data(),
                               four_h));
      // ... and rounded once to the 16-bit operands the GEMMs read.
      layer.w_ih_16.allocate_once(w_ih_t.size());
      layer.w_hh_16.allocate_once(w_hh_t.size());
      round_16(w_ih_t.data(), layer.w_ih_16.data(), w_ih_t.size(), layer.input_stream);
      round_16(w_hh_t.data(), layer.w_hh_16.data(), w_hh_t.size(), layer.input_stream);
      CUDA_CHECK(cudaStreamSynchronize(layer.input_stream));  // ready before any forward
    }
  }

  /// Records one whole pass (stage 05's forward) into graph_ and instantiates graph_exec_.
  void capture(const DeviceTensors& t) {
    if (graph_exec_) CUDA_CHECK(cudaGraphExecDestroy(graph_exec_));
    if (graph_) CUDA_CHECK(cudaGraphDestroy(graph_));
    // Work issued to capture_stream_, and to every stream that waits on an event recorded in
    // it, is recorded into the graph instead of running.
    CUDA_CHECK(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
    enqueue_forward(t, capture_stream_);
    CUDA_CHECK(cudaStreamEndCapture(capture_stream_, &graph_));
    CUDA_CHECK(cudaGraphInstantiate(&graph_exec_, graph_, 0));
    captured_ = t;
  }

  /// Stage 05's forward pass: enqueues the wavefront on the layers' streams, forked from and
  /// joined back into `stream`.
  void enqueue_forward(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int chunks = ceil_div(s.seq_len, kChunkSteps);
    // x in 16 bits, and each layer's h0 into slot 0 of its 16-bit h sequence, every pass.
    round_16(t.x, x_16_.data(), x_16_.size(), stream);
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    for (int l = 0; l < s.layers; ++l)
      round_16(t.h0 + l * state, layers_[l].hidden_16.data(), state, stream);
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
    DeviceBuffer<std::uint16_t> w_ih_16, w_hh_16;  // W^T row-major, ld 4H, in 16 bits
    DeviceBuffer<std::uint16_t> hidden_16;  // (T + 1, B, H): h0, then the h sequence, 16 bits
    DeviceBuffer<char> workspace_input, workspace_recurrent;  // the cuBLAS handles' workspaces
  };

  /// Enqueues chunk `chunk` of layer l's input GEMM on the layer's input stream, after layer
  /// l-1's same chunk.
  void enqueue_input_gemm(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    Layer& layer = layers_[l];
    const int B = s.batch, four_h = kGates * s.hidden, input_size = s.layer_input_size(l);
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence (slots 1..T). Both in 16 bits.
    const std::uint16_t* input_sequence =
        l == 0 ? x_16_.data()
               : layers_[l - 1].hidden_16.data() + static_cast<std::size_t>(B) * s.hidden;
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);

    // Only layer l-1's SAME chunk must be written before this chunk's input GEMM reads it.
    if (l > 0)
      CUDA_CHECK(cudaStreamWaitEvent(layer.input_stream, layers_[l - 1].chunk_done[chunk], 0));
    // Steps [first, first + steps) at once: (4H x I) · (I x steps*B), on the input stream
    gemm_16(layer.cublas_input, four_h, steps * B, input_size, layer.w_ih_16.data(), four_h,
            input_sequence + static_cast<std::size_t>(first) * B * input_size, input_size, 0.0f,
            layer.gates.data() + static_cast<std::size_t>(first) * B * four_h, four_h);
    CUDA_CHECK(cudaEventRecord(layer.chunk_ready[chunk], layer.input_stream));
  }

  /// Enqueues the steps of chunk `chunk` of layer l on the layer's recurrent stream, after the
  /// chunk's input GEMM: c0 in before the first step, hy and cy out after the last.
  void enqueue_steps(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    Layer& layer = layers_[l];
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
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
      const std::uint16_t* h_prev = layer.hidden_16.data() + static_cast<std::size_t>(step) * state;
      float* h_t = output_sequence + static_cast<std::size_t>(step) * state;
      std::uint16_t* h_t_16 = layer.hidden_16.data() + static_cast<std::size_t>(step + 1) * state;
      float* gates_t = layer.gates.data() + static_cast<std::size_t>(step) * B * four_h;
      // gates_t += W_hh · h_{t-1}: all four gates in one (4H x H) · (H x B) GEMM
      gemm_16(layer.cublas_recurrent, four_h, B, H, layer.w_hh_16.data(), four_h, h_prev, H, 1.0f,
              gates_t, four_h);
      // Everything else of the step: one kernel
      with_16_bit_type(precision(), [&](auto type) {
        using Element = decltype(type);
        lstm_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, layer.recurrent_stream>>>(
            gates_t, t.b_ih[l], t.b_hh[l], layer.cell.data(), h_t,
            reinterpret_cast<Element*>(h_t_16), H, state);
      });
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

  /// C (m x n, FP32) = A · B + beta · C, column-major, A (m x k) and B (k x n) in 16 bits: on
  /// tensor cores, with FP32 sums.
  void gemm_16(cublasHandle_t handle, int m, int n, int k, const std::uint16_t* a, int lda,
               const std::uint16_t* b, int ldb, float beta, float* c, int ldc) const {
    const cudaDataType type = precision() == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, type, lda, b,
                              type, ldb, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }

  /// out[i] = in[i] rounded to the 16-bit type, i < n, on `stream`.
  void round_16(const float* in, std::uint16_t* out, std::size_t n, cudaStream_t stream) const {
    const int blocks =
        static_cast<int>(std::min<std::size_t>(ceil_div<std::size_t>(n, kThreadsPerBlock), 1024));
    with_16_bit_type(precision(), [&](auto type) {
      using Element = decltype(type);
      round_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(in, reinterpret_cast<Element*>(out), n);
    });
    CUDA_CHECK_LAUNCH();
  }

  cudaEvent_t start_ = nullptr;  // on the capture stream: the pass may begin
  std::vector<Layer> layers_;
  cudaStream_t capture_stream_ = nullptr;  // the origin stream of the capture
  cudaGraph_t graph_ = nullptr;            // the recorded pass
  cudaGraphExec_t graph_exec_ = nullptr;   // its instantiation, launched by forward()
  DeviceTensors captured_;                 // the pointers the graph was recorded with
  DeviceBuffer<std::uint16_t> x_16_;       // (T, B, I): x in 16 bits
  std::string precision_name_;             // --precision: fp16 or bf16
};

}  // namespace

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<ForwardPass>("fp16");
}

/// The BF16 stage: the registry's forward/20_tensor_core_gemms_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<ForwardPass>("bf16");
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
