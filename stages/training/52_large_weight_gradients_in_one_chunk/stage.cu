/*! \file
 *  \brief Training stage 52: training stage 51 whose input and weight gradients run in one chunk
 *         after the backward recurrence where trailing chunks would rewrite a large dW.
 *
 * What this stage changes (from training stage 51): the rule of trailing_chunk_steps (plan.h,
 * plan.cpp). Where a layer's FP32 dW_hh is 16 MiB or more and a chunk's GEMMs would be narrower
 * than 1024 columns, the gradients run as one chunk after the recurrence (the path stage 43 takes
 * where the recurrence leaves no room). The kernels and the rest of the host code are stage 51's.
 *
 * The lesson, the prediction and the measurement: README.md beside this file. Host code here;
 * the kernels in kernel.cuh, backward_kernel.cuh and cluster_backward_kernel.cuh.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "backward_kernel.cuh"
#include "cluster_backward_kernel.cuh"
#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "harness/round_16_bits.cuh"
#include "harness/stage.h"
#include "kernel.cuh"
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// ---------------------------------------------------------------------------------------------
// The kernels (whether all their blocks can be resident at once: harness/co_residency.h)
// ---------------------------------------------------------------------------------------------

constexpr int kPublishThreads = 256;  // threads per block of the forward's slot-0 kernel
constexpr int kBiasThreads = 128;     // threads per block of sum_bias_rows
constexpr std::size_t kCublasWorkspaceBytes = 32 << 20;  // cuBLAS's, recorded into the graphs

/// The forward kernel that runs `plan` with 16-bit values of type Element (forward stage 17's;
/// where it holds W in registers, forward stage 23's of 256 threads that holds its held_tiles k
/// tiles a warp).
template <typename Element, int kHeld>
const void* forward_kernel_for(int tile_batch, bool by_gate) {
  if constexpr (kHeld > 0)  // a cell update a thread a gate: one mma column tile (plan.cpp)
    if (by_gate)
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 8, kHeld, true>);
  switch (tile_batch) {
    case 32:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 32, kHeld, false>);
    case 16:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 16, kHeld, false>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 8, kHeld, false>);
  }
}
template <typename Element>
const void* forward_kernel_for(const ForwardPlan& plan) {
  const int held = plan.held_tiles;  // only a launch of one layer holds W (plan.cpp)
  const bool by_gate = plan.by_gate;
  return held == 0    ? forward_kernel_for<Element, 0>(plan.tile_batch, by_gate)
         : held <= 8  ? forward_kernel_for<Element, 8>(plan.tile_batch, by_gate)
         : held <= 16 ? forward_kernel_for<Element, 16>(plan.tile_batch, by_gate)
                      : forward_kernel_for<Element, kHeldTiles>(plan.tile_batch, by_gate);
}
const void* forward_kernel_for(const ForwardPlan& plan, Precision precision) {
  return precision == Precision::kBf16 ? forward_kernel_for<__nv_bfloat16>(plan)
                                       : forward_kernel_for<__half>(plan);
}
/// The backward kernel with 16-bit values of `precision`, `row_tiles` row tiles (1 or 2 without
/// a cluster, 1 to 4 in clusters of two) and `cluster` blocks a cluster.
template <typename Element>
const void* backward_kernel_for(int row_tiles, int cluster) {
  if (cluster == 1) {
    return row_tiles == 2 ? reinterpret_cast<const void*>(&backward_persistent<Element, 2, 1>)
                          : reinterpret_cast<const void*>(&backward_persistent<Element, 1, 1>);
  }
  switch (row_tiles) {
    case 4:
      return reinterpret_cast<const void*>(&backward_persistent<Element, 4, 2>);
    case 3:
      return reinterpret_cast<const void*>(&backward_persistent<Element, 3, 2>);
    case 2:
      return reinterpret_cast<const void*>(&backward_persistent<Element, 2, 2>);
    default:
      return reinterpret_cast<const void*>(&backward_persistent<Element, 1, 2>);
  }
}
/// The cluster kernel's instance: over several clusters a group or one; one mma column tile
/// (up to 8 rows a group) or two.
template <typename Element>
const void* cluster_kernel_for(bool spanned, int rows) {
  const bool two = rows > kClusterRows;
  if (spanned)
    return two ? reinterpret_cast<const void*>(&cluster_backward<Element, true, 2>)
               : reinterpret_cast<const void*>(&cluster_backward<Element, true, 1>);
  return two ? reinterpret_cast<const void*>(&cluster_backward<Element, false, 2>)
             : reinterpret_cast<const void*>(&cluster_backward<Element, false, 1>);
}
/// db = the bias gradient: every batch row's sums (the backward kernel's) added in row order,
/// one thread a gate row; both bias vectors enter the gates the same way, so both get it.
__global__ void sum_bias_rows(const float* db_rows, int batch, int gate_rows, float* db_ih,
                              float* db_hh) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= gate_rows) return;
  float sum = 0.0f;
  for (int b = 0; b < batch; ++b)
    sum += db_rows[static_cast<std::size_t>(b) * gate_rows + row];
  db_ih[row] = db_hh[row] = sum;
}
/// Returns once `count` (a chunk's, counted by the backward kernel) reaches `target`: the stream's
/// next kernels, that chunk's gradients, then read its dz. One thread; a bug traps after
/// kMaxWaitNs instead of hanging.
__global__ void wait_for_chunk(const unsigned* count, unsigned target) {
  const unsigned long long started = global_time_ns();
  while (load_acquire(count) < target) {
    if (global_time_ns() - started > kMaxWaitNs) __trap();
    __nanosleep(kPollSleepNs);
  }
}
const void* backward_kernel_for(Precision precision, const BackwardPlan& plan) {
  if (plan.cluster_blocks == kOneCluster)
    return precision == Precision::kBf16
               ? cluster_kernel_for<__nv_bfloat16>(plan.span > 1, plan.group_rows)
               : cluster_kernel_for<__half>(plan.span > 1, plan.group_rows);
  return precision == Precision::kBf16
             ? backward_kernel_for<__nv_bfloat16>(plan.row_tiles, plan.cluster_blocks)
             : backward_kernel_for<__half>(plan.row_tiles, plan.cluster_blocks);
}

// ---------------------------------------------------------------------------------------------
// The stage: limits, preparation, the forward and the backward pass
// ---------------------------------------------------------------------------------------------

class PersistentTraining final : public TrainingStage {
 public:
  explicit PersistentTraining(Precision precision) {
    flags_.precision = precision;
    flags_.precision_name = precision_name(precision);
  }
  ~PersistentTraining() override {
    forward_graph_.destroy();
    backward_graph_.destroy();
    if (cublas_) cublasDestroy(cublas_);
    if (weights_cublas_) cublasDestroy(weights_cublas_);
    if (input_cublas_) cublasDestroy(input_cublas_);
    for (cudaEvent_t event : {started_, recurrence_done_, dx_done_, dz_free_[0], dz_free_[1]})
      if (event) cudaEventDestroy(event);
    if (capture_stream_) cudaStreamDestroy(capture_stream_);
    if (weights_stream_) cudaStreamDestroy(weights_stream_);
    if (input_stream_) cudaStreamDestroy(input_stream_);
  }

  Precision precision() const override { return flags_.precision; }

  /// The project's bounds for the precision (core/kind_and_precision.h; README.md, "Accuracy").
  Tolerance tolerance(const std::string& tensor) const override {
    return reduced_precision_tolerance(flags_.precision, tensor);
  }

  void add_flags(CLI::App& app) override { add_stage_flags(app, flags_); }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    const DeviceLimits limits = device_limits(device);
    const Plan& plan = plan_for(s, limits);
    if (!plan.fits) {
      std::ostringstream why;
      why << "the recurrent weights do not fit on chip: " << plan.why << " (" << device.name << ", "
          << limits.sm_count << " SMs, " << limits.shared_bytes / 1024
          << " KiB of shared memory per block)";
      // Where H itself does not fit (not only what --plan or --layers-per-launch pins): what would.
      if (!make_plan(s, limits).fits)
        why << "; the largest H that fits at B = " << s.batch << " is "
            << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    for (const LayerLaunch& launch : plan.network.launches) {
      const std::string why = check_co_resident(
          forward_kernel_for(launch.layers.front(), flags_.precision), "forward",
          launch.layers.front().threads, launch.shared_bytes(), launch.blocks(), limits.sm_count);
      if (!why.empty()) return why;
    }
    // The backward in one cluster waits for no other cluster: one resident at a time will do.
    const bool one_cluster = plan.backward.cluster_blocks == kOneCluster && plan.backward.span == 1;
    return check_co_resident(backward_kernel_for(flags_.precision, plan.backward), "backward",
                             plan.backward.threads, plan.backward.shared_bytes,
                             one_cluster ? kOneCluster : plan.backward.blocks(), limits.sm_count,
                             plan.backward.cluster_blocks);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // Per layer the stash (FP32): gates (T, B, 4H), c and h (T + 1, B, H each). One dz (T, B, 4H)
    // in FP32, one gradient of an intermediate layer's output (T, B, H), the ones of the bias
    // gradient, one layer's input parts (4H, T, B); cuBLAS's workspace. In 16 bits: the forward's
    // exchange buffer (T + P slots of one slice's G x P x H x Bp, P layers a launch), every
    // layer's W_ih, the forward's [W_ih |] W_hh fragments and the backward's W_hhᵀ ones, a GEMM
    // operand sequence (T, B, max(I, H)) and dz (T, B, 4H).
    const std::size_t stash = s.layers * ((kGates + 2) * sequence + 2 * state);
    const Plan& plan = plan_for(s, current_device_limits());
    const std::size_t exchange = plan.fits ? exchange_values(s, plan.network) : 0;
    const std::size_t floats = stash + 2 * kGates * sequence + (s.layers > 1 ? sequence : 0) +
                               static_cast<std::size_t>(s.seq_len) * s.batch;
    const std::size_t halves =
        exchange + w_ih_values(s) + operand_values(s) + sequence + kGates * sequence;
    const std::size_t counts = s.layers * kTrailingChunks;
    return floats * sizeof(float) + halves * sizeof(std::uint16_t) + 3 * kCublasWorkspaceBytes +
           counts * sizeof(unsigned) +
           (plan.fits ? fragment_offset(s, plan.network, s.layers) * sizeof(uint4) +
                            backward_fragment_bytes(s, plan.backward) +
                            cluster_sums_values(plan.backward) * sizeof(unsigned long long)
                      : 0);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t T = s.seq_len;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    // The refusal the harness gets from unsupported_reason(): what does not fit and what would.
    if (std::string why = unsupported_reason(s, prop); !why.empty()) throw UnsupportedError(why);
    if (flags_.verbose) {
      std::cerr << "training/51_two_accumulator_chains plan (" << precision_name(flags_.precision)
                << "): " << plan_.describe() << "\n";
    }
    for (const LayerLaunch& launch : plan_.network.launches)  // one kernel may serve several
      CUDA_CHECK(cudaFuncSetAttribute(forward_kernel_for(launch.layers.front(), flags_.precision),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(most_forward_shared_bytes())));
    CUDA_CHECK(cudaFuncSetAttribute(backward_kernel_for(flags_.precision, plan_.backward),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.backward.shared_bytes)));
    if (plan_.backward.cluster_blocks == kOneCluster)  // 16 blocks a cluster: not portable
      CUDA_CHECK(cudaFuncSetAttribute(backward_kernel_for(flags_.precision, plan_.backward),
                                      cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    // cublasGemmEx with CUBLAS_COMPUTE_32F on 16-bit operands: FP32 sums, FP32 results.
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    // The graphs are recorded from capture_stream_, cuBLAS's stream for good, with a workspace of
    // its own (a graph must not allocate; setting a stream resets the workspace, so this order).
    // The recorded stream at the highest priority, the weight gradients' at the lowest: where
    // both have blocks waiting for an SM, the recurrence's are placed first (the graph keeps each
    // kernel's priority from its stream; record() instantiates it to use them).
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    if (!capture_stream_)
      CUDA_CHECK(cudaStreamCreateWithPriority(&capture_stream_, cudaStreamNonBlocking, greatest));
    CUBLAS_CHECK(cublasSetStream(cublas_, capture_stream_));
    cublas_workspace_.allocate(kCublasWorkspaceBytes);
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.data(), kCublasWorkspaceBytes));
    // The weight gradients' stream and the input gradient's, joined into the backward's graph by
    // events; each its own cuBLAS handle and workspace (two GEMMs at once must not share one).
    if (!weights_stream_) {
      for (auto [side, handle] : {std::pair{&weights_stream_, &weights_cublas_},
                                  std::pair{&input_stream_, &input_cublas_}}) {
        CUDA_CHECK(cudaStreamCreateWithPriority(side, cudaStreamNonBlocking, least));
        CUBLAS_CHECK(cublasCreate(handle));
        CUBLAS_CHECK(cublasSetMathMode(*handle, CUBLAS_DEFAULT_MATH));
        CUBLAS_CHECK(cublasSetStream(*handle, *side));
      }
      for (cudaEvent_t* event :
           {&started_, &recurrence_done_, &dx_done_, &dz_free_[0], &dz_free_[1]})
        CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    }
    weights_workspace_.allocate(kCublasWorkspaceBytes);
    CUBLAS_CHECK(
        cublasSetWorkspace(weights_cublas_, weights_workspace_.data(), kCublasWorkspaceBytes));
    input_workspace_.allocate(kCublasWorkspaceBytes);
    CUBLAS_CHECK(cublasSetWorkspace(input_cublas_, input_workspace_.data(), kCublasWorkspaceBytes));
    forward_graph_.destroy();  // recorded at the first pass, with its tensors
    backward_graph_.destroy();
    forward_graph_.tensors = backward_graph_.tensors = DeviceTensors{};
    layers_.resize(s.layers);
    for (Layer& layer : layers_) {
      layer.gates.allocate(T * kGates * state);
      layer.cell.allocate((T + 1) * state);
      layer.hidden.allocate((T + 1) * state);
    }
    exchange_.allocate(exchange_values(s, plan_.network));
    input_part_.allocate(T * kGates * state);
    for (int i = 0; i < std::min(s.layers, 2); ++i) {  // a layer's, and the one above's
      db_rows_[i].allocate(kGates * state);
      dz_16_[i].allocate(T * kGates * state);
    }
    if (s.layers > 1) d_input_.allocate(T * state);
    w_ih_16_.allocate(w_ih_values(s));
    fragments_.allocate(fragment_offset(s, plan_.network, s.layers));
    backward_fragments_.allocate(backward_fragment_bytes(s, plan_.backward) / sizeof(uint4));
    operand_16_.allocate(operand_values(s));
    hidden_16_.allocate(T * state);
    chunk_done_.allocate(s.layers * kTrailingChunks);
    sm_count_ = prop.multiProcessorCount;
    cluster_sums_.allocate(cluster_sums_values(plan_.backward));
    prepare_weights(t, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());  // done before a pass on any stream
  }

  // What the forward keeps for the backward, per layer: every step's activated gates (T, B, 4H),
  // c (T + 1, B, H; slot 0 = c0) and h (T + 1, B, H; slot 0 = h0), as training stages 01-05.
  // The kernel publishes h_t in 16 bits for the other blocks in its exchange buffer (forward
  // stage 17's layout) and keeps it, in FP32, in the stash with plain stores.
  // The pass: each half one launch of the graph recorded from its work (below), recorded again
  // for other tensors. A layer's gradients are written when the backward graph is done.
  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    if (t.w_ih != prepared_w_ih_ || t.w_hh != prepared_w_hh_) prepare_weights(t, stream);
    if (!same_tensors(t, forward_graph_.tensors))
      record(forward_graph_, t, [&] { enqueue_forward(t, capture_stream_); });
    CUDA_CHECK(cudaGraphLaunch(forward_graph_.exec, stream));
  }
  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    if (!same_tensors(t, backward_graph_.tensors))
      record(backward_graph_, t, [&] { enqueue_backward(t, capture_stream_); });
    CUDA_CHECK(cudaGraphLaunch(backward_graph_.exec, stream));
    for (int l = t.size.layers - 1; l >= 0; --l)
      gradients_ready(l, stream);  // stage.h's hook, outside the graph
  }

 private:
  // Stage 28's forward with the layers of a launch in one wavefront, recorded into a graph: per
  // launch of the network plan, the input GEMM of its first layer, then per batch slice one
  // launch of all its layers.
  void enqueue_forward(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type_16 = data_type_16();
    for (const LayerLaunch& launch : plan_.network.launches) {
      const ForwardPlan& plan = launch.layers.front();
      const int first = launch.first_layer, parts = static_cast<int>(launch.layers.size());
      for (int l = first; l < first + parts; ++l) {
        // Slot 0 of the stash's h and c = h0 and c0 (the backward and the GEMMs read them).
        const std::size_t layer_state = static_cast<std::size_t>(l) * state;
        CUDA_CHECK(cudaMemcpyAsync(layers_[l].hidden.data(), t.h0 + layer_state,
                                   state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        CUDA_CHECK(cudaMemcpyAsync(layers_[l].cell.data(), t.c0 + layer_state,
                                   state * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      }
      // The launch's first layer reads x or the layer below's h sequence (slots 1..T of its
      // stash): the input part of every step at once, on tensor cores (the input rounded to 16
      // bits, W_ih rounded once in prepare_weights; FP32 sums and results): [x_0 ... x_{T-1}]ᵀ ·
      // W_ihᵀ, (T*B x I) · (I x 4H), stored column by column, so that a gate row's T * B values
      // lie side by side: (4H, T, B), the kernel's order. The kernel adds the rest. The layers
      // above it in the launch multiply their input on chip.
      const int input_size = s.layer_input_size(first);
      const float* input_sequence = first == 0 ? t.x : layers_[first - 1].hidden.data() + state;
      round_to_16_bits(input_sequence, operand_16_.data(),
                       static_cast<std::size_t>(s.seq_len) * B * input_size, flags_.precision,
                       stream);
      CUBLAS_CHECK(cublasGemmEx(
          cublas_, CUBLAS_OP_T, CUBLAS_OP_N, s.seq_len * B, four_h, input_size, &one,
          operand_16_.data(), type_16, input_size, w_ih_16(s, first), type_16, input_size, &zero,
          input_part_.data(), CUDA_R_32F, s.seq_len * B, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      // Batch rows are independent sequences: a batch too large for one launch runs in slices.
      const int rows_per_slice = plan.batch_groups * plan.group_batch;
      const std::size_t part = static_cast<std::size_t>(H) * plan.padded_batch;  // layer, group
      const std::size_t slot = part * parts * plan.batch_groups;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // Every slot "not yet published"; then layer i's h0 (transposed) into its part of slot
        // i, where its step 0 reads it (a launch of one layer: slot 0, as in stage 28).
        CUDA_CHECK(cudaMemsetAsync(exchange_.data(), 0xFF,
                                   exchange_values(s, launch) * sizeof(std::uint16_t), stream));
        const int publish_blocks = static_cast<int>(std::min<std::size_t>(
            ceil_div<std::size_t>(part * plan.batch_groups, kPublishThreads), 1024));
        const auto publish = flags_.precision == Precision::kBf16
                                 ? &publish_initial_state<__nv_bfloat16>
                                 : &publish_initial_state<__half>;
        for (int lag = 0; lag < parts; ++lag) {
          publish<<<publish_blocks, kPublishThreads, 0, stream>>>(
              t.h0 + (first + lag) * state, exchange_.data() + lag * slot + lag * part, H,
              plan.batch_groups, plan.group_batch, plan.padded_batch, begin, end, part * parts);
          CUDA_CHECK(cudaGetLastError());
        }
        // The whole recurrence of the slice, every layer of the launch: one launch.
        SharedLaunchArgs args{};
        args.layers = parts;
        for (int lag = 0, first_block = 0; lag < parts; ++lag) {
          SharedKernelArgs& a = args.layer[lag];
          set_common_args(a, launch.layers[lag], t, first + lag, begin, end);
          a.input_part = lag == 0 ? input_part_.data() : nullptr;
          a.first_block = first_block;
          a.lag = lag;
          a.parts = parts;
          first_block += launch.layers[lag].blocks();
        }
        launch_cooperative(forward_kernel_for(plan, flags_.precision), &args, launch.blocks(),
                           plan.threads, launch.shared_bytes(), stream);
      }
    }
  }

  // Stage 37's backward, recorded into a graph; each chunk of steps' input gradient (on
  // input_stream_) and weight gradients (on weights_stream_) as soon as the recurrence is past it.
  void enqueue_backward(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const int columns = s.seq_len * B;  // T*B: every step's batch rows side by side
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type_16 = data_type_16();
    const BackwardPlan& plan = plan_.backward;
    const int chunk_steps = trailing_chunk_steps(s, plan, sm_count_);
    const int chunks = ceil_div(s.seq_len, chunk_steps);
    CUDA_CHECK(
        cudaMemsetAsync(chunk_done_.data(), 0, s.layers * chunks * sizeof(unsigned), stream));
    for (int l = s.layers - 1; l >= 0; --l) {
      const Layer& kept = layers_[l];
      const int input_size = s.layer_input_size(l);
      const std::size_t layer_state = static_cast<std::size_t>(l) * state;
      // The gradient of this layer's h sequence from above: dy for the last layer, else what the
      // layer above computed for its input. This layer's input gradient overwrites it when the
      // layer's kernel is done with it: into dx for layer 0, else for the layer below.
      const float* d_above = l == s.layers - 1 ? t.dy : d_input_.data();
      float* d_input = l == 0 ? t.dx : d_input_.data();
      const float* input_sequence = l == 0 ? t.x : layers_[l - 1].hidden.data() + state;
      std::uint16_t* dz16 = dz_16_[l % 2].data();
      float* db_rows = db_rows_[l % 2].data();
      // dz_16_[l % 2] and db_rows_[l % 2] were last read by layer l + 2's gradients: wait for them.
      if (l + 2 < s.layers) CUDA_CHECK(cudaStreamWaitEvent(stream, dz_free_[l % 2]));
      // d_above, the layer above's input gradient, complete.
      if (l + 1 < s.layers) CUDA_CHECK(cudaStreamWaitEvent(stream, dx_done_));

      // The recurrence: one launch per slice of the batch. dz in 16 bits: one slot per step,
      // every value the sentinel until its owner publishes it.
      CUDA_CHECK(
          cudaMemsetAsync(dz16, 0xFF, s.seq_len * kGates * state * sizeof(std::uint16_t), stream));
      const int rows_per_slice = plan.batch_groups * plan.group_rows;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        BackwardArgs args{};
        args.w_fragments = backward_fragments_.data() +
                           l * (backward_fragment_bytes(s, plan) / s.layers / sizeof(uint4));
        args.gates = kept.gates.data();
        args.cell = kept.cell.data();
        args.d_above = d_above;
        args.dhy = t.dhy + layer_state;
        args.dcy = t.dcy + layer_state;
        args.db_rows = db_rows;
        args.dz16 = dz16;
        args.dh0 = t.dh0 + layer_state;
        args.dc0 = t.dc0 + layer_state;
        args.hidden_size = H;
        args.batch = B;
        args.seq_len = s.seq_len;
        args.batch_begin = begin;
        args.batch_end = std::min(B, begin + rows_per_slice);
        args.units_per_block = plan.units_per_block;
        args.unit_blocks = plan.unit_blocks;
        args.k_rows = plan.k_rows;
        args.group_rows = plan.group_rows;
        args.batch_tiles = plan.batch_tiles;
        args.k_slices = plan.k_slices;
        args.dz_stride = plan.dz_stride;
        args.chunk_rows = plan.chunk_rows;
        args.chunks = plan.chunks;
        args.span = plan.span;
        args.cluster_sums = cluster_sums_.data();
        args.chunk_done = chunk_done_.data() + l * chunks;
        args.chunk_steps = chunk_steps;
        if (plan.span > 1)  // tag 0 everywhere: no sum of an earlier launch passes for this one's
          CUDA_CHECK(cudaMemsetAsync(cluster_sums_.data(), 0,
                                     cluster_sums_values(plan) * sizeof(unsigned long long),
                                     stream));
        launch_in_clusters(backward_kernel_for(flags_.precision, plan), &args, plan.blocks(),
                           plan.threads, plan.shared_bytes, stream, plan.cluster_blocks,
                           plan.cluster_blocks != kOneCluster || plan.span > 1,
                           args.batch_end == B && chunks > 1 ? started_ : nullptr);
      }
      CUDA_CHECK(cudaEventRecord(recurrence_done_, stream));

      // The gradients of a chunk of steps need its dz only: from the moment every block of the
      // recurrence has begun (not before: a waiting kernel must not hold an SM it needs), each
      // side stream waits for a chunk's count and multiplies that chunk's T*B/chunks columns, on
      // tensor cores: 16-bit operands (dz as the kernel published it, the layer's input and h
      // rounded here; W_ih in prepare), FP32 sums and FP32 results. d(input) = W_ih^T · dz;
      // dW_ih = dz · input^T and dW_hh = dz · h_{t-1}^T (row-major 4H x K results are column-major
      // K x 4H = input · dz^T), written by the first chunk (beta = 0), added to by the others.
      for (cudaStream_t side : {input_stream_, weights_stream_})  // one chunk: after the end
        CUDA_CHECK(cudaStreamWaitEvent(side, chunks > 1 ? started_ : recurrence_done_));
      round_to_16_bits(input_sequence, operand_16_.data(),
                       static_cast<std::size_t>(columns) * input_size, flags_.precision,
                       weights_stream_);
      round_to_16_bits(kept.hidden.data(), hidden_16_.data(), s.seq_len * state, flags_.precision,
                       weights_stream_);  // h_{-1} = h0 .. h_{T-2}: slots 0..T-1
      for (int c = 0; c < chunks; ++c) {  // steps from the last: chunk c ends at T - c * steps
        const int end = s.seq_len - c * chunk_steps, begin = std::max(0, end - chunk_steps);
        const int first = begin * B, count = (end - begin) * B;  // its columns
        const std::uint16_t* dz_chunk = dz16 + static_cast<std::size_t>(first) * four_h;
        const float beta = c == 0 ? 0.0f : 1.0f;
        for (cudaStream_t side : {input_stream_, weights_stream_})
          if (chunks > 1)
            wait_for_chunk<<<1, 1, 0, side>>>(chunk_done_.data() + l * chunks + c,
                                              static_cast<unsigned>(H) * B);
        CUDA_CHECK(cudaGetLastError());
        CUBLAS_CHECK(cublasGemmEx(input_cublas_, CUBLAS_OP_N, CUBLAS_OP_N, input_size, count,
                                  four_h, &one, w_ih_16(s, l), type_16, input_size, dz_chunk,
                                  type_16, four_h, &zero,
                                  d_input + static_cast<std::size_t>(first) * input_size,
                                  CUDA_R_32F, input_size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUBLAS_CHECK(
            cublasGemmEx(weights_cublas_, CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h, count, &one,
                         operand_16_.data() + static_cast<std::size_t>(first) * input_size, type_16,
                         input_size, dz_chunk, type_16, four_h, &beta, t.grad_w_ih[l], CUDA_R_32F,
                         input_size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUBLAS_CHECK(cublasGemmEx(weights_cublas_, CUBLAS_OP_N, CUBLAS_OP_T, H, four_h, count, &one,
                                  hidden_16_.data() + static_cast<std::size_t>(first) * H, type_16,
                                  H, dz_chunk, type_16, four_h, &beta, t.grad_w_hh[l], CUDA_R_32F,
                                  H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
      CUDA_CHECK(cudaEventRecord(dx_done_, input_stream_));
      // The bias gradient: the kernel writes its rows at its end.
      CUDA_CHECK(cudaStreamWaitEvent(weights_stream_, recurrence_done_));
      sum_bias_rows<<<ceil_div(four_h, kBiasThreads), kBiasThreads, 0, weights_stream_>>>(
          db_rows, B, four_h, t.grad_b_ih[l], t.grad_b_hh[l]);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaEventRecord(dz_free_[l % 2], weights_stream_));
    }
    // Join: the side streams' work (layer 0's is their last) is part of the graph, before its end.
    CUDA_CHECK(cudaStreamWaitEvent(stream, dz_free_[0]));
    CUDA_CHECK(cudaStreamWaitEvent(stream, dx_done_));
  }

  /// A recorded half of the pass: the graph, its instantiation and the tensors it holds.
  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    DeviceTensors tensors;  // the pointers it was recorded with (size 0: none yet)
    void destroy() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      exec = nullptr;
      graph = nullptr;
    }
  };

  /// Records what `enqueue` issues to capture_stream_ into `g` (replacing what it held).
  template <typename Enqueue>
  void record(Graph& g, const DeviceTensors& t, Enqueue enqueue) {
    g.destroy();
    CUDA_CHECK(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CUDA_CHECK(cudaStreamEndCapture(capture_stream_, &g.graph));
    CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, cudaGraphInstantiateFlagUseNodePriority));
    g.tensors = t;
  }

  /// Every layer's W_ih rounded to 16 bits and W_hh arranged as A fragments (kernel.cuh), on
  /// `stream` (forward stage 17's), and W_hhᵀ as the backward's (backward_kernel.cuh);
  /// remembers which weights they are.
  void prepare_weights(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const bool bf16 = flags_.precision == Precision::kBf16;
    const auto arrange = bf16 ? &arrange_fragments<__nv_bfloat16> : &arrange_fragments<__half>;
    const std::size_t backward_per_layer =
        backward_fragment_bytes(s, plan_.backward) / s.layers / sizeof(unsigned);
    const auto transposed =
        bf16 ? &arrange_transposed_fragments<__nv_bfloat16> : &arrange_transposed_fragments<__half>;
    const int backward_blocks = static_cast<int>(
        std::min<std::size_t>(ceil_div<std::size_t>(backward_per_layer, 256), 1024));
    const auto in_one_cluster =
        bf16 ? &arrange_cluster_fragments<__nv_bfloat16> : &arrange_cluster_fragments<__half>;
    for (int layer = 0; layer < s.layers; ++layer) {
      unsigned* backward_words =
          reinterpret_cast<unsigned*>(backward_fragments_.data()) + layer * backward_per_layer;
      if (plan_.backward.cluster_blocks == kOneCluster) {
        in_one_cluster<<<backward_blocks, 256, 0, stream>>>(
            t.w_hh[layer], backward_words, s.hidden, plan_.backward.units_per_block,
            plan_.backward.row_tiles, plan_.backward.span);
      } else {
        transposed<<<backward_blocks, 256, 0, stream>>>(
            t.w_hh[layer], backward_words, s.hidden, plan_.backward.units_per_block,
            plan_.backward.row_tiles, plan_.backward.unit_blocks, plan_.backward.cluster_blocks,
            plan_.backward.k_rows);
      }
      CUDA_CHECK(cudaGetLastError());
      round_to_16_bits(t.w_ih[layer], w_ih_16(s, layer),
                       static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(layer),
                       flags_.precision, stream);
      // [W_ih |] W_hh with the layer's plan: W_ih's columns too where it multiplies its input.
      const ForwardPlan& plan = layer_plan(plan_.network, layer);
      const std::size_t offset = fragment_offset(s, plan_.network, layer);
      const std::size_t words = (fragment_offset(s, plan_.network, layer + 1) - offset) * 4;
      const int blocks =
          static_cast<int>(std::min<std::size_t>(ceil_div<std::size_t>(words, 256), 1024));
      arrange<<<blocks, 256, 0, stream>>>(t.w_ih[layer], t.w_hh[layer],
                                          reinterpret_cast<unsigned*>(fragments_.data() + offset),
                                          s.hidden, plan.input_rows, plan.units_per_block,
                                          plan.tile_groups_units, plan.unit_blocks);
      CUDA_CHECK(cudaGetLastError());
    }
    prepared_w_ih_ = t.w_ih;
    prepared_w_hh_ = t.w_hh;
  }

  /// Sets the forward kernel's arguments for layer `layer` with its plan `plan` and the batch
  /// rows [begin, end).
  void set_common_args(SharedKernelArgs& args, const ForwardPlan& plan, const DeviceTensors& t,
                       int layer, int begin, int end) {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    Layer& kept = layers_[layer];
    args.w_fragments = fragments_.data() + fragment_offset(s, plan_.network, layer);
    args.input_part = input_part_.data();  // the input GEMM's result, (4H, T, B)
    args.b_ih = t.b_ih[layer];
    args.b_hh = t.b_hh[layer];
    args.c0 = t.c0 + layer * state;
    args.gates = kept.gates.data();
    args.cell = kept.cell.data();
    args.h_seq = kept.hidden.data();
    args.y = layer == s.layers - 1 ? t.y : nullptr;
    args.hy = t.hy + layer * state;
    args.cy = t.cy + layer * state;
    args.exchange = exchange_.data();
    args.hidden = s.hidden;
    args.batch = s.batch;
    args.seq_len = s.seq_len;
    args.batch_begin = begin;
    args.batch_end = end;
    args.units_per_block = plan.units_per_block;
    args.unit_blocks = plan.unit_blocks;
    args.batch_groups = plan.batch_groups;
    args.group_batch = plan.group_batch;
    args.padded_batch = plan.padded_batch;
    args.tile_groups_units = plan.tile_groups_units;
    args.tile_groups_batch = plan.tile_groups_batch;
    args.mma_batch = plan.mma_batch;
    args.h_stride = plan.h_stride;
    args.k_slices = plan.k_slices;
    args.chunk_rows = plan.chunk_rows;
    args.chunks = plan.chunks;
    args.input_rows = plan.input_rows;
    args.weights_held = plan.held_tiles > 0 ? 1 : 0;
  }

  cudaDataType_t data_type_16() const {
    return flags_.precision == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
  }
  /// The forward's exchange buffer of a launch of P layers: T + P slots of one slice's
  /// G x P x H x Bp 16-bit values; of the network: its largest launch's.
  static std::size_t exchange_values(const ProblemSize& s, const LayerLaunch& launch) {
    const ForwardPlan& plan = launch.layers.front();
    const std::size_t parts = launch.layers.size();
    return (static_cast<std::size_t>(s.seq_len) + parts) * plan.batch_groups * parts * s.hidden *
           plan.padded_batch;
  }
  static std::size_t exchange_values(const ProblemSize& s, const NetworkPlan& network) {
    std::size_t most = 0;
    for (const LayerLaunch& launch : network.launches)
      most = std::max(most, exchange_values(s, launch));
    return most;
  }
  /// The most dynamic shared memory a forward block of any launch asks for.
  std::size_t most_forward_shared_bytes() const {
    std::size_t most = 0;
    for (const LayerLaunch& launch : plan_.network.launches)
      most = std::max(most, launch.shared_bytes());
    return most;
  }
  /// Every layer's W_ih (4H x I_l) in 16 bits, one after another; layer `layer`'s.
  static std::size_t w_ih_values(const ProblemSize& s) {
    return static_cast<std::size_t>(kGates) * s.hidden *
           (s.input_size + static_cast<std::size_t>(s.layers - 1) * s.hidden);
  }
  std::uint16_t* w_ih_16(const ProblemSize& s, int layer) {
    const std::size_t before =
        layer == 0 ? 0 : s.input_size + static_cast<std::size_t>(layer - 1) * s.hidden;
    return w_ih_16_.data() + static_cast<std::size_t>(kGates) * s.hidden * before;
  }
  /// A GEMM operand sequence in 16 bits: a layer's input (T, B, I_l) or its h (T, B, H).
  static std::size_t operand_values(const ProblemSize& s) {
    return static_cast<std::size_t>(s.seq_len) * s.batch * std::max(s.input_size, s.hidden);
  }
  /// The forward plan of layer `layer` in `network`.
  static const ForwardPlan& layer_plan(const NetworkPlan& network, int layer) {
    for (const LayerLaunch& launch : network.launches) {
      if (layer < launch.first_layer + static_cast<int>(launch.layers.size()))
        return launch.layers[layer - launch.first_layer];
    }
    throw std::logic_error("no launch runs this layer");
  }
  /// Where layer `layer`'s forward A fragments start (uint4), every layer before it with its own
  /// plan's U blocks x k tiles of K x row tiles x 32 lanes; layer L: the size of all of them.
  static std::size_t fragment_offset(const ProblemSize& s, const NetworkPlan& network, int layer) {
    std::size_t offset = 0;
    for (int l = 0; l < layer; ++l) {
      const ForwardPlan& plan = layer_plan(network, l);
      const std::size_t k_tiles = (s.hidden + plan.input_rows + kMmaK - 1) / kMmaK;
      offset +=
          static_cast<std::size_t>(plan.unit_blocks) * k_tiles * plan.tile_groups_units * kWarpSize;
    }
    return offset;
  }

  /// The clusters' sums for each other's units, [2][G][span][span][16][J][Bg] tagged values (none
  /// with one cluster a group).
  static std::size_t cluster_sums_values(const BackwardPlan& plan) {
    if (plan.span == 1) return 0;
    return static_cast<std::size_t>(2) * plan.batch_groups * plan.span * plan.span * kOneCluster *
           plan.units_per_block * plan.group_rows;
  }

  /// Every layer's W_hhᵀ as the backward's A fragments: U blocks x R row tiles of 16 units x
  /// k_rows / 16 k tiles x 32 lanes x 16 bytes.
  static std::size_t backward_fragment_bytes(const ProblemSize& s, const BackwardPlan& plan) {
    const std::size_t k_tiles = plan.k_rows / kMmaK;
    return static_cast<std::size_t>(s.layers) * plan.unit_blocks * plan.row_tiles * k_tiles *
           kWarpSize * sizeof(uint4);
  }

  /// What the forward keeps of one layer for the backward.
  struct Layer {
    DeviceBuffer<float> gates;   // (T, B, 4H): i, f, g, o after their activations
    DeviceBuffer<float> cell;    // (T + 1, B, H): c0, c_0 .. c_{T-1}
    DeviceBuffer<float> hidden;  // (T + 1, B, H): h0, h_0 .. h_{T-1}: the next layer's input
  };

  /// The plan for `s`, made once: unsupported_reason(), workspace_bytes() and prepare() of a
  /// run ask for the same size.
  const Plan& plan_for(const ProblemSize& s, const DeviceLimits& limits) const {
    if (planned_size_ != s) {
      plan_ = make_plan(s, limits, flags_.request);
      planned_size_ = s;
    }
    return plan_;
  }
  static DeviceLimits current_device_limits() {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return device_limits(prop);
  }

  StageFlags flags_;
  mutable Plan plan_;
  mutable std::optional<ProblemSize> planned_size_;  // the size plan_ was made for
  cublasHandle_t cublas_ = nullptr;
  std::vector<Layer> layers_;
  DeviceBuffer<std::uint16_t> exchange_;  // (T + 1, G, H, Bp): the forward's published h
  DeviceBuffer<float> db_rows_[2];        // (B, 4H): a layer's bias gradient by batch row; 2 layers
  DeviceBuffer<float> d_input_;  // (T, B, H): the gradient of an intermediate layer's output
  DeviceBuffer<std::uint16_t> w_ih_16_;     // every layer's W_ih (4H x I_l) in 16 bits
  DeviceBuffer<uint4> fragments_;           // every layer's W_hh as A fragments (kernel.cuh)
  DeviceBuffer<std::uint16_t> operand_16_;  // a layer's input sequence in 16 bits
  DeviceBuffer<std::uint16_t> hidden_16_;   // a layer's h sequence (h0 .. h_{T-2}) in 16 bits
  DeviceBuffer<unsigned> chunk_done_;       // [layer][chunk]: the backward kernel's counts
  int sm_count_ = 0;                        // the GPU's, for trailing_chunk_steps
  DeviceBuffer<std::uint16_t> dz_16_[2];    // (T, B, 4H): dz in 16 bits, layer l in [l % 2]
  DeviceBuffer<uint4> backward_fragments_;  // every layer's W_hhᵀ as the backward's A fragments
  DeviceBuffer<unsigned long long> cluster_sums_;  // the backward's sums between clusters
  DeviceBuffer<float> input_part_;          // (4H, T, B): one layer's input GEMM result (FP32)
  std::vector<const float*> prepared_w_ih_, prepared_w_hh_;  // what the fragments were made of
  DeviceBuffer<char> cublas_workspace_;                      // cuBLAS's (a graph must not allocate)
  cudaStream_t capture_stream_ = nullptr;                    // what the graphs are recorded from
  cudaStream_t weights_stream_ = nullptr;    // the weight and bias gradients, beside (joined in)
  cublasHandle_t weights_cublas_ = nullptr;  // their cuBLAS handle, bound to weights_stream_
  DeviceBuffer<char> weights_workspace_;     // and its workspace
  cudaStream_t input_stream_ = nullptr;      // the input gradient, beside (joined in)
  cublasHandle_t input_cublas_ = nullptr;    // its cuBLAS handle, bound to input_stream_
  DeviceBuffer<char> input_workspace_;       // and its workspace
  cudaEvent_t started_ = nullptr;            // every block of a layer's last launch has begun
  cudaEvent_t recurrence_done_ = nullptr;    // a layer's recurrence is done on `stream`
  cudaEvent_t dx_done_ = nullptr;            // a layer's input gradient is done
  cudaEvent_t dz_free_[2] = {};              // the weight gradients done with dz_16_[0] / [1]
  Graph forward_graph_, backward_graph_;
};

}  // namespace

DeviceLimits device_limits(const cudaDeviceProp& device) {
  DeviceLimits limits;
  limits.sm_count = device.multiProcessorCount;
  limits.shared_bytes = device.sharedMemPerBlockOptin;  // no kernel has static shared memory
  // Clusters of two backward blocks of that size (one per SM) resident at once: the GPCs decide.
  if (device.clusterLaunch)
    limits.pair_clusters =
        resident_clusters(reinterpret_cast<const void*>(&backward_persistent<__half, 4, 2>),
                          kBackwardThreads, limits.shared_bytes, 2);
  // Clusters of 16 blocks of the backward in one cluster, of the most shared memory it may take.
  if (device.clusterLaunch) {
    const void* whole = cluster_kernel_for<__half>(false, 1);
    for (bool spanned : {false, true})  // every instance: launches and checks
      for (int rows : {1, kMaxClusterRows}) {
        cudaFuncSetAttribute(cluster_kernel_for<__half>(spanned, rows),
                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        cudaFuncSetAttribute(cluster_kernel_for<__nv_bfloat16>(spanned, rows),
                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      }
    cudaGetLastError();  // a device without it shows as 0 clusters below
    limits.whole_clusters =
        resident_clusters(whole, kClusterBackwardThreads, limits.shared_bytes, kOneCluster);
  }
  limits.name = device.name;
  return limits;
}

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentTraining>(Precision::kFp16);
}

/// The BF16 stage: the registry entry training/51_two_accumulator_chains_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<PersistentTraining>(Precision::kBf16);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
