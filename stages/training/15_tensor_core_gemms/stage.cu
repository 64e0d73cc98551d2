/*! \file
 *  \brief Training stage 15: stage 05's GEMMs on tensor cores. Every GEMM of the pass takes
 *         16-bit operands (FP16 or BF16) and sums in FP32 (cublasGemmEx, CUBLAS_COMPUTE_32F);
 *         the element-wise work and every result stay in FP32. The lesson is in README.md.
 *
 * As stage 05 (the layers in a wavefront, both passes captured as CUDA graphs), with a 16-bit
 * copy of each GEMM operand: the weights and x rounded at the start of each forward pass, h and
 * dz written in both widths by the element-wise kernels.
 *
 * Layouts: as stage 01.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
namespace {

constexpr int kThreadsPerBlock = 256;  // element-wise kernels: one thread per element
constexpr int kGates = 4;              // i, f, g, o
constexpr int kGateI = 0, kGateF = 1, kGateG = 2, kGateO = 3;
constexpr int kChunkSteps = 5;  // steps per chunk: what a layer hands its neighbour at once
constexpr std::size_t kCublasWorkspaceBytes = 4 << 20;  // per cuBLAS handle

// ---- element-wise kernels. The forward and backward ones' mapping: 1-D grid, one thread per
// ---- element (b, j) of a (B, H) tensor, element index = blockIdx.x * blockDim.x + threadIdx.x,
// ---- b = index / H, j = index % H. The step's gates (and gate gradients) are a (B, 4H) row-major
// ---- block: gate q of element (b, j) at b*4H + q*H + j.

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

/// One forward step's element-wise work: gates += biases, the activations (written back: the
/// backward reads them), c_t = f * c_{t-1} + i * g and h_t = o * tanh(c_t), h_t in FP32 (y, hy)
/// and in 16 bits (the next GEMMs' operand).
template <typename Element>
__global__ void forward_pointwise_kernel(float* gates, const float* b_ih, const float* b_hh,
                                         const float* cell_prev, float* cell, float* hidden_out,
                                         Element* hidden_16, int hidden, int count) {
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
  const float h = activated[kGateO] * tanhf(c);
  hidden_out[index] = h;
  hidden_16[index] = to_16_bits<Element>(h);
}

/// One backward step's element-wise work, from the gradient of h_t from above (d_above) and from
/// step t+1 (dh_rec), and the gradient of c_t from step t+1 (dc_rec, overwritten with the one
/// sent to c_{t-1}): dh, dc and the four gate gradients dz (before activation), in registers;
/// dz written in FP32 (the bias gradient's sum) and in 16 bits (the GEMMs' operand).
template <typename Element>
__global__ void backward_pointwise_kernel(float* dz, Element* dz_16, float* dc_rec,
                                          const float* d_above, const float* dh_rec,
                                          const float* gates, const float* cell_prev,
                                          const float* cell, int hidden, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const int offset = (index / hidden) * kGates * hidden + index % hidden;
  const float i = gates[offset + kGateI * hidden], f = gates[offset + kGateF * hidden];
  const float g = gates[offset + kGateG * hidden], o = gates[offset + kGateO * hidden];
  const float tanh_c = tanhf(cell[index]);
  const float dh = d_above[index] + dh_rec[index];
  const float dc = dc_rec[index] + dh * o * (1.0f - tanh_c * tanh_c);
  const float gate_grad[kGates] = {dc * g * i * (1.0f - i), dc * cell_prev[index] * f * (1.0f - f),
                                   dc * i * (1.0f - g * g), dh * tanh_c * o * (1.0f - o)};
  for (int q = 0; q < kGates; ++q) {  // i, f, g, o
    dz[offset + q * hidden] = gate_grad[q];
    dz_16[offset + q * hidden] = to_16_bits<Element>(gate_grad[q]);
  }
  dc_rec[index] = dc * f;
}

/// values[i] = 1 for i < count: the vector a GEMV sums the bias gradient with.
__global__ void fill_ones_kernel(float* values, int count) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < count) values[index] = 1.0f;
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

class TrainingPass final : public TrainingStage {
 public:
  explicit TrainingPass(std::string precision_name) : precision_name_(std::move(precision_name)) {}
  ~TrainingPass() override {
    for (Graph* graph : {&forward_graph_, &backward_graph_})
      graph->destroy();
    if (capture_stream_) cudaStreamDestroy(capture_stream_);
    if (start_) cudaEventDestroy(start_);
    for (Layer& layer : layers_) {
      for (std::vector<cudaEvent_t>* events : {&layer.input_done, &layer.steps_done})
        for (cudaEvent_t event : *events)
          cudaEventDestroy(event);
      for (cudaEvent_t event : {layer.input_finished, layer.recurrent_finished})
        if (event) cudaEventDestroy(event);
      if (layer.cublas_input) cublasDestroy(layer.cublas_input);
      if (layer.cublas_recurrent) cublasDestroy(layer.cublas_recurrent);
      if (layer.input_stream) cudaStreamDestroy(layer.input_stream);
      if (layer.recurrent_stream) cudaStreamDestroy(layer.recurrent_stream);
    }
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
    const std::size_t columns = static_cast<std::size_t>(s.seq_len) * s.batch;  // T*B
    // Per layer: its dz (T, B, 4H), dh_rec and dc_rec; per layer but the first: the gradient of
    // its input sequence (T, B, H); the ones vector; two cuBLAS workspaces per layer.
    const std::size_t per_layer = kGates * sequence + 2 * state;
    const std::size_t floats =
        stash_floats(s) + s.layers * per_layer + (s.layers - 1) * sequence + columns;
    // In 16 bits: x; per layer W_ih, W_hh, h (T + 1, B, H) and dz (T, B, 4H).
    std::size_t halves = static_cast<std::size_t>(s.seq_len) * s.batch * s.input_size;
    for (int l = 0; l < s.layers; ++l)
      halves += static_cast<std::size_t>(kGates) * s.hidden * (s.layer_input_size(l) + s.hidden) +
                (static_cast<std::size_t>(kGates + 1) * s.seq_len + 1) * state;
    return floats * sizeof(float) + halves * sizeof(std::uint16_t) +
           2 * s.layers * kCublasWorkspaceBytes;
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t T = s.seq_len;
    const int chunks = ceil_div(s.seq_len, kChunkSteps);
    // The recurrences are the critical path: their streams get the highest priority; the
    // input-side GEMMs and the weight gradients the lowest.
    int least_priority = 0, greatest_priority = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
    CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
    layers_.resize(s.layers);
    for (int l = 0; l < s.layers; ++l) {
      Layer& layer = layers_[l];
      layer.gates.allocate(T * kGates * state);
      layer.cell.allocate((T + 1) * state);
      layer.hidden.allocate((T + 1) * state);
      layer.dz.allocate(T * kGates * state);
      layer.dh_rec.allocate(state);
      layer.dc_rec.allocate(state);
      if (l > 0) layer.d_input.allocate(T * state);  // layer 0 writes dx
      layer.w_ih_16.allocate(static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(l));
      layer.w_hh_16.allocate(static_cast<std::size_t>(kGates) * s.hidden * s.hidden);
      layer.hidden_16.allocate((T + 1) * state);
      layer.dz_16.allocate(T * kGates * state);
      CUDA_CHECK(cudaStreamCreateWithPriority(&layer.recurrent_stream, cudaStreamNonBlocking,
                                              greatest_priority));
      CUDA_CHECK(
          cudaStreamCreateWithPriority(&layer.input_stream, cudaStreamNonBlocking, least_priority));
      // One cuBLAS handle per stream, each with a workspace owned here (a handle's workspace
      // belongs to one stream, and cuBLAS must not allocate during stream capture).
      for (auto [handle, stream, workspace] :
           {std::tuple{&layer.cublas_recurrent, layer.recurrent_stream, &layer.workspace_recurrent},
            std::tuple{&layer.cublas_input, layer.input_stream, &layer.workspace_input}}) {
        CUBLAS_CHECK(cublasCreate(handle));
        // 16-bit operands with CUBLAS_COMPUTE_32F: tensor cores, FP32 sums; the bias
        // gradient's GEMV in FP32 FMA, never TF32.
        CUBLAS_CHECK(cublasSetMathMode(*handle, CUBLAS_DEFAULT_MATH));
        CUBLAS_CHECK(cublasSetStream(*handle, stream));
        workspace->allocate(kCublasWorkspaceBytes);
        CUBLAS_CHECK(cublasSetWorkspace(*handle, workspace->data(), kCublasWorkspaceBytes));
      }
      // Events only order work here: without timing, recording and waiting are cheaper.
      for (std::vector<cudaEvent_t>* events : {&layer.input_done, &layer.steps_done}) {
        events->resize(chunks);
        for (cudaEvent_t& event : *events)
          CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      }
      for (cudaEvent_t* event : {&layer.input_finished, &layer.recurrent_finished})
        CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    }
    const int columns = s.seq_len * s.batch;
    x_16_.allocate(static_cast<std::size_t>(columns) * s.input_size);
    ones_.allocate(columns);
    fill_ones_kernel<<<ceil_div(columns, kThreadsPerBlock), kThreadsPerBlock>>>(ones_.data(),
                                                                                columns);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
    capture(t);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    if (!same_tensors(t, captured_)) capture(t);  // the graphs hold the captured pointers
    CUDA_CHECK(cudaGraphLaunch(forward_graph_.exec, stream));  // the whole forward: one call
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    if (!same_tensors(t, captured_)) capture(t);
    CUDA_CHECK(cudaGraphLaunch(backward_graph_.exec, stream));  // the whole backward: one call
  }

 private:
  /// A recorded pass and its instantiation.
  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    void destroy() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      exec = nullptr;
      graph = nullptr;
    }
  };

  /// Records the forward and backward passes into forward_graph_ and backward_graph_.
  void capture(const DeviceTensors& t) {
    for (auto [graph, enqueue] : {std::pair{&forward_graph_, &TrainingPass::enqueue_forward},
                                  std::pair{&backward_graph_, &TrainingPass::enqueue_backward}}) {
      graph->destroy();
      // Work issued to capture_stream_, and to every stream that waits on an event recorded in
      // it, is recorded into the graph instead of running.
      CUDA_CHECK(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
      (this->*enqueue)(t, capture_stream_);
      CUDA_CHECK(cudaStreamEndCapture(capture_stream_, &graph->graph));
      CUDA_CHECK(cudaGraphInstantiate(&graph->exec, graph->graph, 0));
    }
    captured_ = t;
  }

  /// Every layer's streams start after the work already on `stream` (the harness's poisoning,
  /// the previous pass); the caller's stream ends after every layer's last work.
  void fork(cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(start_, stream));
    for (Layer& layer : layers_) {
      CUDA_CHECK(cudaStreamWaitEvent(layer.input_stream, start_, 0));
      CUDA_CHECK(cudaStreamWaitEvent(layer.recurrent_stream, start_, 0));
    }
  }
  void join(cudaStream_t stream) {
    for (Layer& layer : layers_) {
      CUDA_CHECK(cudaStreamWaitEvent(stream, layer.input_finished, 0));
      CUDA_CHECK(cudaStreamWaitEvent(stream, layer.recurrent_finished, 0));
    }
  }

  /// Issues the forward in wavefront order: diagonal d holds (layer l, chunk d - l) for every
  /// layer, the order in which the GPU can run them.
  void enqueue_forward(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int chunks = ceil_div(s.seq_len, kChunkSteps);
    // The GEMMs' 16-bit operands that come from outside: x and every layer's weights, rounded
    // in every pass (a pass may bring weights an optimizer has changed in place).
    round_16(t.x, x_16_.data(), static_cast<std::size_t>(s.seq_len) * s.batch * s.input_size,
             stream);
    for (int l = 0; l < s.layers; ++l) {
      round_16(t.w_ih[l], layers_[l].w_ih_16.data(), layers_[l].w_ih_16.size(), stream);
      round_16(t.w_hh[l], layers_[l].w_hh_16.data(), layers_[l].w_hh_16.size(), stream);
    }
    fork(stream);
    for (int diagonal = 0; diagonal < chunks + t.size.layers - 1; ++diagonal)
      for (int l = 0; l < t.size.layers; ++l)
        if (const int chunk = diagonal - l; chunk >= 0 && chunk < chunks)
          enqueue_forward_chunk(t, l, chunk);
    join(stream);
  }

  /// The backward's wavefront runs the other way: from the last layer and the last chunk.
  /// Diagonal d holds (layer L-1-k, chunk chunks-1-(d-k)).
  void enqueue_backward(const DeviceTensors& t, cudaStream_t stream) {
    const int chunks = ceil_div(t.size.seq_len, kChunkSteps), L = t.size.layers;
    fork(stream);
    for (int diagonal = 0; diagonal < chunks + L - 1; ++diagonal)
      for (int k = 0; k < L; ++k)
        if (const int chunk = chunks - 1 - (diagonal - k); chunk >= 0 && chunk < chunks)
          enqueue_backward_chunk(t, L - 1 - k, chunk);
    join(stream);
  }

  // What the forward keeps for the backward, per layer: every step's activated gates (T, B, 4H),
  // c (T + 1, B, H; slot 0 = c0) and h (T + 1, B, H; slot 0 = h0).
  void enqueue_forward_chunk(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const int input_size = s.layer_input_size(l);
    Layer& kept = layers_[l];
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);
    const std::size_t layer_state = static_cast<std::size_t>(l) * state;
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence (slots 1..T of its stash), of
    // which only the same chunk must be written: wait for it. Both in 16 bits.
    const std::uint16_t* input_sequence =
        l == 0 ? x_16_.data() : layers_[l - 1].hidden_16.data() + state;
    if (l > 0)
      CUDA_CHECK(cudaStreamWaitEvent(kept.input_stream, layers_[l - 1].steps_done[chunk], 0));
    // The input part of the chunk's steps at once: gates (4H x steps*B) = W_ih · x
    gemm_16(kept.cublas_input, CUBLAS_OP_T, CUBLAS_OP_N, four_h, steps * B, input_size, 1.0f,
            kept.w_ih_16.data(), input_size,
            input_sequence + static_cast<std::size_t>(first) * B * input_size, input_size, 0.0f,
            kept.gates.data() + static_cast<std::size_t>(first) * kGates * state, four_h);
    CUDA_CHECK(cudaEventRecord(kept.input_done[chunk], kept.input_stream));

    cudaStream_t stream = kept.recurrent_stream;
    CUDA_CHECK(cudaStreamWaitEvent(stream, kept.input_done[chunk], 0));
    if (chunk == 0) {
      CUDA_CHECK(cudaMemcpyAsync(kept.cell.data(), t.c0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(kept.hidden.data(), t.h0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      round_16(t.h0 + layer_state, kept.hidden_16.data(), state, stream);
    }
    for (int step = first; step < first + steps; ++step) {
      const std::uint16_t* h_prev = kept.hidden_16.data() + static_cast<std::size_t>(step) * state;
      float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
      // gates_t += W_hh · h_{t-1}: one (4H x H)(H x B) GEMM for the four gates
      gemm_16(kept.cublas_recurrent, CUBLAS_OP_T, CUBLAS_OP_N, four_h, B, H, 1.0f,
              kept.w_hh_16.data(), H, h_prev, H, 1.0f, gates, four_h);
      const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
      float* c_t = kept.cell.data() + static_cast<std::size_t>(step + 1) * state;
      float* h_t = kept.hidden.data() + static_cast<std::size_t>(step + 1) * state;
      std::uint16_t* h_t_16 = kept.hidden_16.data() + static_cast<std::size_t>(step + 1) * state;
      with_16_bit_type(precision(), [&](auto type) {
        using Element = decltype(type);
        forward_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            gates, t.b_ih[l], t.b_hh[l], c_prev, c_t, h_t, reinterpret_cast<Element*>(h_t_16), H,
            state);
      });
      CUDA_CHECK_LAUNCH();
    }
    CUDA_CHECK(cudaEventRecord(kept.steps_done[chunk], stream));

    if (chunk == ceil_div(s.seq_len, kChunkSteps) - 1) {
      const std::size_t last = static_cast<std::size_t>(s.seq_len) * state;
      CUDA_CHECK(cudaMemcpyAsync(t.hy + layer_state, kept.hidden.data() + last,
                                 state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(t.cy + layer_state, kept.cell.data() + last, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      // y is the last layer's h at every step.
      if (l == s.layers - 1)
        CUDA_CHECK(cudaMemcpyAsync(t.y, kept.hidden.data() + state,
                                   static_cast<std::size_t>(s.seq_len) * state * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaEventRecord(kept.recurrent_finished, stream));
      CUDA_CHECK(cudaEventRecord(kept.input_finished, kept.input_stream));
    }
  }

  void enqueue_backward_chunk(const DeviceTensors& t, int l, int chunk) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, state = B * H, four_h = kGates * H;
    const int columns = s.seq_len * B;  // T*B: every step's batch rows side by side
    const int blocks = ceil_div(state, kThreadsPerBlock);
    const int input_size = s.layer_input_size(l);
    Layer& kept = layers_[l];
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);
    const std::size_t layer_state = static_cast<std::size_t>(l) * state;
    // The gradient of this layer's h sequence from above: dy for the last layer, else what the
    // layer above computed for its input, of which only the same chunk must be written: wait for
    // it. Its own input's gradient goes to dx (layer 0) or to the buffer the layer below reads.
    const float* d_output = l == s.layers - 1 ? t.dy : layers_[l + 1].d_input.data();
    float* d_input = l == 0 ? t.dx : kept.d_input.data();
    const std::uint16_t* input_sequence =
        l == 0 ? x_16_.data() : layers_[l - 1].hidden_16.data() + state;
    const std::uint16_t* dz_16 = kept.dz_16.data();

    cudaStream_t stream = kept.recurrent_stream;
    if (l < s.layers - 1)
      CUDA_CHECK(cudaStreamWaitEvent(stream, layers_[l + 1].input_done[chunk], 0));
    if (chunk == ceil_div(s.seq_len, kChunkSteps) - 1) {  // the first chunk this pass runs
      CUDA_CHECK(cudaMemcpyAsync(kept.dh_rec.data(), t.dhy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(kept.dc_rec.data(), t.dcy + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    }
    // The recurrence: only what step t-1 needs from step t.
    for (int step = first + steps - 1; step >= first; --step) {
      const float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
      const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
      const float* c_t = c_prev + state;
      const std::size_t dz_offset = static_cast<std::size_t>(step) * kGates * state;
      with_16_bit_type(precision(), [&](auto type) {
        using Element = decltype(type);
        backward_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
            kept.dz.data() + dz_offset, reinterpret_cast<Element*>(kept.dz_16.data() + dz_offset),
            kept.dc_rec.data(), d_output + static_cast<std::size_t>(step) * state,
            kept.dh_rec.data(), gates, c_prev, c_t, H, state);
      });
      CUDA_CHECK_LAUNCH();
      // dh_{t-1} = W_hh^T · dz_t: ONE (H x 4H)(4H x B) GEMM for the four gates. A row-major
      // (4H, H) W_hh read column-major is W_hh^T already: no transpose flag.
      gemm_16(kept.cublas_recurrent, CUBLAS_OP_N, CUBLAS_OP_N, H, B, four_h, 1.0f,
              kept.w_hh_16.data(), H, dz_16 + dz_offset, four_h, 0.0f, kept.dh_rec.data(), H);
    }
    CUDA_CHECK(cudaEventRecord(kept.steps_done[chunk], stream));

    // The gradient of the chunk's input, on the input stream as soon as its dz is complete: the
    // layer below starts its chunk from it. d(input) = W_ih^T · dz: (I x 4H)(4H x steps*B)
    CUDA_CHECK(cudaStreamWaitEvent(kept.input_stream, kept.steps_done[chunk], 0));
    gemm_16(kept.cublas_input, CUBLAS_OP_N, CUBLAS_OP_N, input_size, steps * B, four_h, 1.0f,
            kept.w_ih_16.data(), input_size,
            dz_16 + static_cast<std::size_t>(first) * kGates * state, four_h, 0.0f,
            d_input + static_cast<std::size_t>(first) * B * input_size, input_size);
    CUDA_CHECK(cudaEventRecord(kept.input_done[chunk], kept.input_stream));

    if (chunk == 0) {  // the layer's last chunk: its dz is complete
      CUDA_CHECK(cudaMemcpyAsync(t.dh0 + layer_state, kept.dh_rec.data(), state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(t.dc0 + layer_state, kept.dc_rec.data(), state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaEventRecord(kept.recurrent_finished, stream));
      // dW_ih = dz · input^T, dW_hh = dz · h_{t-1}^T: row-major (4H x K) results are
      // column-major (K x 4H) = input (K x T*B) · dz^T (T*B x 4H). Written (beta = 0), summed
      // over all steps; on the input stream, behind the layer's last input gradient.
      gemm_16(kept.cublas_input, CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h, columns, 1.0f,
              input_sequence, input_size, dz_16, four_h, 0.0f, t.grad_w_ih[l], input_size);
      gemm_16(kept.cublas_input, CUBLAS_OP_N, CUBLAS_OP_T, H, four_h, columns, 1.0f,
              kept.hidden_16.data(), H, dz_16, four_h, 0.0f, t.grad_w_hh[l], H);
      const float one = 1.0f, zero = 0.0f;
      // db = dz · 1, in FP32: the sum of every column of dz. Both bias vectors enter the gates the
      // same way: their gradients are equal.
      CUBLAS_CHECK(cublasSgemv(kept.cublas_input, CUBLAS_OP_N, four_h, columns, &one,
                               kept.dz.data(), four_h, ones_.data(), 1, &zero, t.grad_b_ih[l], 1));
      CUDA_CHECK(cudaMemcpyAsync(t.grad_b_hh[l], t.grad_b_ih[l], four_h * sizeof(float),
                                 cudaMemcpyDeviceToDevice, kept.input_stream));
      CUDA_CHECK(cudaEventRecord(kept.input_finished, kept.input_stream));
    }
  }

  /// Everything one layer owns: what its forward keeps, its backward's buffers, its streams.
  struct Layer {
    DeviceBuffer<float> gates;    // (T, B, 4H): i, f, g, o after their activations
    DeviceBuffer<float> cell;     // (T + 1, B, H): c0, c_0 .. c_{T-1}
    DeviceBuffer<float> hidden;   // (T + 1, B, H): h0, h_0 .. h_{T-1} (the next layer's input)
    DeviceBuffer<float> dz;       // (T, B, 4H): the layer's gate gradients
    DeviceBuffer<float> d_input;  // (T, B, H): the gradient of its input (layers > 0)
    DeviceBuffer<float> dh_rec, dc_rec;            // (B, H): what step t sends back to step t-1
    DeviceBuffer<std::uint16_t> w_ih_16, w_hh_16;  // the weights in 16 bits, as the GEMMs read
    DeviceBuffer<std::uint16_t> hidden_16;         // (T + 1, B, H): h in 16 bits
    DeviceBuffer<std::uint16_t> dz_16;             // (T, B, 4H): dz in 16 bits
    cudaStream_t recurrent_stream = nullptr;       // high priority: the steps
    cudaStream_t input_stream = nullptr;  // low priority: input-side GEMMs, weight gradients
    cublasHandle_t cublas_recurrent = nullptr, cublas_input = nullptr;  // one per stream
    DeviceBuffer<char> workspace_recurrent, workspace_input;            // the handles' workspaces
    std::vector<cudaEvent_t> input_done;  // on the input stream: chunk c's input-side GEMM
    std::vector<cudaEvent_t> steps_done;  // on the recurrent stream: chunk c's steps
    cudaEvent_t input_finished = nullptr, recurrent_finished = nullptr;  // each stream's last
  };

  /// The 16-bit type of the GEMMs' operands.
  cudaDataType type_16() const {
    return precision() == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
  }

  /// C (m x n, FP32) = alpha · op(A) · op(B) + beta · C, column-major, A and B in 16 bits: on
  /// tensor cores, with FP32 sums.
  void gemm_16(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n,
               int k, float alpha, const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb,
               float beta, float* c, int ldc) const {
    CUBLAS_CHECK(cublasGemmEx(handle, op_a, op_b, m, n, k, &alpha, a, type_16(), lda, b, type_16(),
                              ldb, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
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

  /// Floats the forward keeps for the backward: (4 + 2) T B H + 2 B H per layer.
  static std::size_t stash_floats(const ProblemSize& s) {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    return static_cast<std::size_t>(s.layers) * ((kGates + 2) * s.seq_len * state + 2 * state);
  }

  std::vector<Layer> layers_;
  cudaEvent_t start_ = nullptr;            // on the caller's stream: the pass may begin
  cudaStream_t capture_stream_ = nullptr;  // the origin stream of the captures
  Graph forward_graph_, backward_graph_;   // the recorded passes, launched by forward/backward
  DeviceTensors captured_;                 // the pointers the graphs were recorded with
  DeviceBuffer<float> ones_;               // (T*B): all ones, for the bias gradient's GEMV
  DeviceBuffer<std::uint16_t> x_16_;       // (T, B, I): x in 16 bits
  std::string precision_name_;             // --precision: fp16 or bf16
};

}  // namespace

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<TrainingPass>("fp16");
}

/// The BF16 stage: the registry's training/15_tensor_core_gemms_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<TrainingPass>("bf16");
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
