/*! \file
 *  \brief Training stage 05: the layers in a wavefront, the forward pass from the first layer
 *         and the backward pass from the last. The lesson is in README.md beside this file.
 *
 * As stage 04, with the steps cut into chunks of kChunkSteps: each layer has a recurrent stream
 * (its steps) and an input stream (its input-side GEMM per chunk, then its weight gradients), and
 * a layer starts a chunk as soon as its neighbour has finished the same chunk, instead of after
 * the neighbour's whole sequence. Both passes are still captured once as CUDA graphs.
 *
 * Layouts: as stage 01.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <tuple>
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

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    const std::size_t columns = static_cast<std::size_t>(s.seq_len) * s.batch;  // T*B
    // Per layer: its dz (T, B, 4H), dh_rec and dc_rec; per layer but the first: the gradient of
    // its input sequence (T, B, H); the ones vector; two cuBLAS workspaces per layer.
    const std::size_t per_layer = kGates * sequence + 2 * state;
    const std::size_t floats =
        stash_floats(s) + s.layers * per_layer + (s.layers - 1) * sequence + columns;
    return floats * sizeof(float) + 2 * s.layers * kCublasWorkspaceBytes;
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
        CUBLAS_CHECK(cublasSetMathMode(*handle, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
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
    const int chunks = ceil_div(t.size.seq_len, kChunkSteps);
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
    const float one = 1.0f, zero = 0.0f;
    const int input_size = s.layer_input_size(l);
    Layer& kept = layers_[l];
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);
    const std::size_t layer_state = static_cast<std::size_t>(l) * state;
    // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence (slots 1..T of its stash), of
    // which only the same chunk must be written: wait for it.
    const float* input_sequence = l == 0 ? t.x : layers_[l - 1].hidden.data() + state;
    if (l > 0)
      CUDA_CHECK(cudaStreamWaitEvent(kept.input_stream, layers_[l - 1].steps_done[chunk], 0));
    // The input part of the chunk's steps at once: gates (4H x steps*B) = W_ih · x
    CUBLAS_CHECK(cublasSgemm(
        kept.cublas_input, CUBLAS_OP_T, CUBLAS_OP_N, four_h, steps * B, input_size, &one, t.w_ih[l],
        input_size, input_sequence + static_cast<std::size_t>(first) * B * input_size, input_size,
        &zero, kept.gates.data() + static_cast<std::size_t>(first) * kGates * state, four_h));
    CUDA_CHECK(cudaEventRecord(kept.input_done[chunk], kept.input_stream));

    cudaStream_t stream = kept.recurrent_stream;
    CUDA_CHECK(cudaStreamWaitEvent(stream, kept.input_done[chunk], 0));
    if (chunk == 0) {
      CUDA_CHECK(cudaMemcpyAsync(kept.cell.data(), t.c0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(kept.hidden.data(), t.h0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    }
    for (int step = first; step < first + steps; ++step) {
      const float* h_prev = kept.hidden.data() + static_cast<std::size_t>(step) * state;
      float* gates = kept.gates.data() + static_cast<std::size_t>(step) * kGates * state;
      // gates_t += W_hh · h_{t-1}: one (4H x H)(H x B) GEMM for the four gates
      CUBLAS_CHECK(cublasSgemm(kept.cublas_recurrent, CUBLAS_OP_T, CUBLAS_OP_N, four_h, B, H, &one,
                               t.w_hh[l], H, h_prev, H, &one, gates, four_h));
      const float* c_prev = kept.cell.data() + static_cast<std::size_t>(step) * state;
      float* c_t = kept.cell.data() + static_cast<std::size_t>(step + 1) * state;
      float* h_t = kept.hidden.data() + static_cast<std::size_t>(step + 1) * state;
      forward_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(gates, t.b_ih[l], t.b_hh[l],
                                                                        c_prev, c_t, h_t, H, state);
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
    const float one = 1.0f, zero = 0.0f;
    const int input_size = s.layer_input_size(l);
    Layer& kept = layers_[l];
    const int first = chunk * kChunkSteps, steps = std::min(kChunkSteps, s.seq_len - first);
    const std::size_t layer_state = static_cast<std::size_t>(l) * state;
    // The gradient of this layer's h sequence from above: dy for the last layer, else what the
    // layer above computed for its input, of which only the same chunk must be written: wait for
    // it. Its own input's gradient goes to dx (layer 0) or to the buffer the layer below reads.
    const float* d_output = l == s.layers - 1 ? t.dy : layers_[l + 1].d_input.data();
    float* d_input = l == 0 ? t.dx : kept.d_input.data();
    const float* input_sequence = l == 0 ? t.x : layers_[l - 1].hidden.data() + state;

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
      float* dz = kept.dz.data() + static_cast<std::size_t>(step) * kGates * state;
      backward_pointwise_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
          dz, kept.dc_rec.data(), d_output + static_cast<std::size_t>(step) * state,
          kept.dh_rec.data(), gates, c_prev, c_t, H, state);
      CUDA_CHECK_LAUNCH();
      // dh_{t-1} = W_hh^T · dz_t: ONE (H x 4H)(4H x B) GEMM for the four gates. A row-major
      // (4H, H) W_hh read column-major is W_hh^T already: no transpose flag.
      CUBLAS_CHECK(cublasSgemm(kept.cublas_recurrent, CUBLAS_OP_N, CUBLAS_OP_N, H, B, four_h, &one,
                               t.w_hh[l], H, dz, four_h, &zero, kept.dh_rec.data(), H));
    }
    CUDA_CHECK(cudaEventRecord(kept.steps_done[chunk], stream));

    // The gradient of the chunk's input, on the input stream as soon as its dz is complete: the
    // layer below starts its chunk from it. d(input) = W_ih^T · dz: (I x 4H)(4H x steps*B)
    CUDA_CHECK(cudaStreamWaitEvent(kept.input_stream, kept.steps_done[chunk], 0));
    CUBLAS_CHECK(cublasSgemm(
        kept.cublas_input, CUBLAS_OP_N, CUBLAS_OP_N, input_size, steps * B, four_h, &one, t.w_ih[l],
        input_size, kept.dz.data() + static_cast<std::size_t>(first) * kGates * state, four_h,
        &zero, d_input + static_cast<std::size_t>(first) * B * input_size, input_size));
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
      CUBLAS_CHECK(cublasSgemm(kept.cublas_input, CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h,
                               columns, &one, input_sequence, input_size, kept.dz.data(), four_h,
                               &zero, t.grad_w_ih[l], input_size));
      CUBLAS_CHECK(cublasSgemm(kept.cublas_input, CUBLAS_OP_N, CUBLAS_OP_T, H, four_h, columns,
                               &one, kept.hidden.data(), H, kept.dz.data(), four_h, &zero,
                               t.grad_w_hh[l], H));
      // db = dz · 1: the sum of every column of dz. Both bias vectors enter the gates the same
      // way: their gradients are equal.
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
    DeviceBuffer<float> dh_rec, dc_rec;       // (B, H): what step t sends back to step t-1
    cudaStream_t recurrent_stream = nullptr;  // high priority: the steps
    cudaStream_t input_stream = nullptr;      // low priority: input-side GEMMs, weight gradients
    cublasHandle_t cublas_recurrent = nullptr, cublas_input = nullptr;  // one per stream
    DeviceBuffer<char> workspace_recurrent, workspace_input;            // the handles' workspaces
    std::vector<cudaEvent_t> input_done;  // on the input stream: chunk c's input-side GEMM
    std::vector<cudaEvent_t> steps_done;  // on the recurrent stream: chunk c's steps
    cudaEvent_t input_finished = nullptr, recurrent_finished = nullptr;  // each stream's last
  };

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
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<TrainingPass>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
