/*! \file
 *  \brief Stage 22: stage 17 with the recurrence inside one cluster of 16 blocks per batch group
 *         where W_hh fits in their shared memory: h_t crosses between the blocks' shared
 *         memories, not through L2.
 *
 * What this stage changes (in 17_weights_prepared_once):
 *   1. cluster_kernel.cuh: the recurrence of a batch group of up to 8 rows in one cluster; each
 *      block sends its units' h_t to every block of the cluster (st.async, an mbarrier counts
 *      the bytes), so no block polls L2 for a published value.
 *   2. plan.cpp (plan_one_cluster): that plan wherever W_hh fits in 16 resident blocks (H up to
 *      ~600 in 16 bits; more groups run in waves); stage 17's elsewhere and where --plan pins one.
 *   3. Here: its launch in clusters of 16 (not cooperative), no exchange slot 0 or sentinels.
 *
 * The lesson, the mapping, the limits, the prediction and the measurement: README.md beside
 * this file. Host code here; the kernels in kernel.cuh and cluster_kernel.cuh.
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

#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "harness/phase_trace.cuh"
#include "harness/round_16_bits.cuh"
#include "harness/stage.h"
#include "cluster_kernel.cuh"
#include "kernel.cuh"
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr int kPublishThreads = 256;                     // threads per block of the slot-0 kernel
constexpr std::size_t kCublasWorkspaceBytes = 32 << 20;  // cuBLAS's own, recorded into the graph

// ---------------------------------------------------------------------------------------------
// The input GEMM's operands in 16 bits
// ---------------------------------------------------------------------------------------------

/// The input width of the widest layer: I for the first, H for the others.
int widest_layer_input(const ProblemSize& s) {
  return s.layers > 1 ? std::max(s.input_size, s.hidden) : s.input_size;
}

// ---------------------------------------------------------------------------------------------
// Which kernel runs a plan
// ---------------------------------------------------------------------------------------------

/// The kernel that runs `plan` with 16-bit values of type Element.
template <typename Element>
const void* kernel_for(const Plan& plan) {
  if (plan.one_cluster) return reinterpret_cast<const void*>(&cluster_recurrence<Element>);
  switch (plan.tile_batch) {
    case 32:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 32>);
    case 16:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 16>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 8>);
  }
}

/// The kernel that runs `plan` in `precision` (FP16 or BF16).
const void* kernel_for(const Plan& plan, Precision precision) {
  return precision == Precision::kBf16 ? kernel_for<__nv_bfloat16>(plan) : kernel_for<__half>(plan);
}

// ---------------------------------------------------------------------------------------------
// The stage: limits, preparation, and the launches of one forward pass
// ---------------------------------------------------------------------------------------------

class PersistentStage final : public Stage {
 public:
  explicit PersistentStage(Precision precision) {
    flags_.precision = precision;
    flags_.precision_name = precision_name(precision);
  }
  ~PersistentStage() override {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (graph_) cudaGraphDestroy(graph_);
    if (capture_stream_) cudaStreamDestroy(capture_stream_);
    if (cublas_) cublasDestroy(cublas_);
  }

  Precision precision() const override { return flags_.precision; }

  /// The project's bounds for the precision (core/kind_and_precision.h; README.md, "Accuracy").
  Tolerance tolerance(const std::string& tensor) const override {
    return reduced_precision_tolerance(flags_.precision, tensor);
  }

  void add_flags(CLI::App& app) override {
    add_stage_flags(app, flags_);
    trace_.add_flag(app);
  }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    const DeviceLimits limits = device_limits(device);
    const Plan& plan = plan_for(s, limits);
    std::ostringstream why;
    if (!plan.fits) {
      why << "the recurrent weights do not fit on chip: " << plan.why << " (" << device.name << ", "
          << limits.sm_count << " SMs, " << limits.shared_bytes / 1024
          << " KiB of shared memory per block)";
      // Where H itself does not fit (not only what --plan pins): what would.
      if (!make_plan(s, limits).fits)
        why << "; the largest H that fits at B = " << s.batch << " is "
            << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (plan.one_cluster) return "";  // no cluster waits for another; one fits (the planner)
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    const void* kernel = kernel_for(plan, flags_.precision);
    return check_co_resident(kernel, "persistent", plan.threads, plan.shared_bytes, plan.blocks(),
                             limits.sm_count);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // The input parts (T, B, 4H), the intermediate layers' h sequences (two, alternating) and
    // the exchange buffer (T + 1 slots of one slice's G x H x Bp); in 16 bits, the widest
    // layer's W_ih and input sequence.
    const Plan& plan = plan_for(s, current_device_limits());
    const std::size_t exchange = plan.fits ? exchange_values(s, plan) : 0;
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence) * sizeof(float) +
           (exchange + w_ih_values(s) + input_values(s)) * sizeof(std::uint16_t) +
           kCublasWorkspaceBytes + (plan.fits ? fragment_bytes(s, plan) : 0);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    plan_for(s, current_device_limits());
    if (!plan_.fits) throw UnsupportedError(plan_.why);
    if (flags_.verbose) {
      std::cerr << "forward/22_recurrence_in_one_cluster plan (" << precision_name(flags_.precision)
                << "): " << plan_.describe() << "\n";
    }
    CUDA_CHECK(cudaFuncSetAttribute(kernel_for(plan_, flags_.precision),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    // FP32 sums: cublasGemmEx with CUBLAS_COMPUTE_32F on 16-bit inputs, FP32 results.
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    cublas_workspace_.allocate(kCublasWorkspaceBytes);
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
    exchange_.allocate(exchange_values(s, plan_));
    w_ih_16_.allocate(w_ih_values(s));
    input_16_.allocate(input_values(s));
    trace_.prepare(s.seq_len);
    fragments_.allocate(fragment_bytes(s, plan_) / sizeof(uint4));
    CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
    prepare_weights(t, capture_stream_);
    // The graph is launched on the caller's stream, which nothing orders after this one.
    CUDA_CHECK(cudaStreamSynchronize(capture_stream_));
    capture(t);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    if (!same_tensors(t, captured_)) {  // the graph holds the captured pointers
      prepare_weights(t, stream);       // after the passes already on `stream`
      capture(t);
    }
    CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream));  // the whole pass: one call
  }

 private:
  /// Records one whole pass (stage 15's forward) into graph_ and instantiates graph_exec_.
  void capture(const DeviceTensors& t) {
    if (graph_exec_) CUDA_CHECK(cudaGraphExecDestroy(graph_exec_));
    if (graph_) CUDA_CHECK(cudaGraphDestroy(graph_));
    // Work issued to capture_stream_ is recorded into the graph instead of running.
    CUDA_CHECK(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
    enqueue_forward(t, capture_stream_);
    CUDA_CHECK(cudaStreamEndCapture(capture_stream_, &graph_));
    CUDA_CHECK(cudaGraphInstantiate(&graph_exec_, graph_, 0));
    captured_ = t;
  }

  /// Every layer's W_ih rounded to 16 bits and W_hh arranged as A fragments (kernel.cuh), on
  /// `stream`.
  void prepare_weights(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const std::size_t per_layer = fragment_bytes(s, plan_) / s.layers / sizeof(unsigned);
    const bool bf16 = flags_.precision == Precision::kBf16;
    const auto arrange = bf16 ? &arrange_fragments<__nv_bfloat16> : &arrange_fragments<__half>;
    const int blocks =
        static_cast<int>(std::min<std::size_t>(ceil_div<std::size_t>(per_layer, 256), 1024));
    for (int layer = 0; layer < s.layers; ++layer) {
      round_to_16_bits(t.w_ih[layer], w_ih_16_.data() + w_ih_offset(s, layer),
                       static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(layer),
                       flags_.precision, stream);
      arrange<<<blocks, 256, 0, stream>>>(
          t.w_hh[layer], reinterpret_cast<unsigned*>(fragments_.data()) + layer * per_layer,
          s.hidden, plan_.units_per_block, plan_.tile_groups_units, plan_.unit_blocks);
      CUDA_CHECK(cudaGetLastError());
    }
  }

  /// Stage 16's forward pass, enqueued on `stream`.
  void enqueue_forward(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const std::size_t slot = static_cast<std::size_t>(plan_.batch_groups) * H * plan_.padded_batch;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type_16 = flags_.precision == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    // After the stream: setting a stream resets the handle's workspace to cuBLAS's own pool.
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.data(), kCublasWorkspaceBytes));
    for (int layer = 0; layer < s.layers; ++layer) {
      const int input_size = s.layer_input_size(layer);
      const float* input_sequence = layer == 0 ? t.x : layer_outputs_[(layer - 1) % 2].data();
      float* output_sequence = layer == s.layers - 1 ? t.y : layer_outputs_[layer % 2].data();
      // The layer's input in 16 bits (its W_ih was rounded once, in prepare_weights).
      const std::size_t input_count = static_cast<std::size_t>(s.seq_len) * B * input_size;
      round_to_16_bits(input_sequence, input_16_.data(), input_count, flags_.precision, stream);
      // All steps' input parts at once: W_ih · [x_0 ... x_{T-1}], (4H x I) · (I x T*B), on
      // tensor cores with FP32 sums and FP32 results.
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B,
                                input_size, &one, w_ih_16_.data() + w_ih_offset(s, layer), type_16,
                                input_size, input_16_.data(), type_16, input_size, &zero,
                                input_part_.data(), CUDA_R_32F, four_h, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
      const int rows_per_slice = plan_.batch_groups * plan_.group_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        SharedKernelArgs args{};
        set_common_args(args, t, layer, output_sequence, begin, end);
        args.unit_blocks = plan_.unit_blocks;
        args.batch_groups = plan_.batch_groups;
        args.group_batch = plan_.group_batch;
        args.tile_groups_units = plan_.tile_groups_units;
        if (plan_.one_cluster) {  // the cluster kernel reads h0 itself and publishes nothing
          launch_clusters(&args, stream);
          continue;
        }
        // Slot 0 = h0 (transposed); slots 1..T = "not yet published".
        const int publish_blocks = static_cast<int>(
            std::min<std::size_t>(ceil_div<std::size_t>(slot, kPublishThreads), 1024));
        const auto publish = flags_.precision == Precision::kBf16
                                 ? &publish_initial_state<__nv_bfloat16>
                                 : &publish_initial_state<__half>;
        publish<<<publish_blocks, kPublishThreads, 0, stream>>>(
            t.h0 + layer * state, exchange_.data(), H, plan_.batch_groups, plan_.group_batch,
            plan_.padded_batch, begin, end);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(exchange_.data() + slot, 0xFF,
                                   s.seq_len * slot * sizeof(std::uint16_t), stream));
        // The whole recurrence of the slice: one launch.
        args.padded_batch = plan_.padded_batch;
        args.tile_groups_batch = plan_.tile_groups_batch;
        args.mma_batch = plan_.mma_batch;
        args.h_stride = plan_.h_stride;
        args.chunk_rows = plan_.chunk_rows;
        args.chunks = plan_.chunks;
        launch(&args, stream);
      }
    }
  }

  /// Sets the kernel's arguments that say which layer and batch rows [begin, end) a launch
  /// computes, and the plan's lane layout.
  template <typename Args>
  void set_common_args(Args& args, const DeviceTensors& t, int layer, float* output_sequence,
                       int begin, int end) {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t layer_fragments = fragment_bytes(s, plan_) / s.layers / sizeof(uint4);
    args.w_fragments = fragments_.data() + layer * layer_fragments;
    args.input_part = input_part_.data();
    args.b_ih = t.b_ih[layer];
    args.b_hh = t.b_hh[layer];
    args.h0 = t.h0 + layer * state;
    args.c0 = t.c0 + layer * state;
    args.y = output_sequence;
    args.hy = t.hy + layer * state;
    args.cy = t.cy + layer * state;
    args.exchange = exchange_.data();
    args.hidden = s.hidden;
    args.batch = s.batch;
    args.seq_len = s.seq_len;
    args.batch_begin = begin;
    args.batch_end = end;
    args.units_per_block = plan_.units_per_block;
    args.k_slices = plan_.k_slices;
    args.trace = trace_.device();
  }

  /// Launches the plan's kernel with `args` (its own argument struct): all blocks resident at
  /// once, which the cooperative launch guarantees or refuses (a block that waits for h must
  /// never wait for a block that has not started).
  void launch(void* args, cudaStream_t stream) {
    void* kernel_args[] = {args};
    CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(plan_, flags_.precision),
                                           dim3(plan_.blocks()), dim3(plan_.threads), kernel_args,
                                           plan_.shared_bytes, stream));
  }
  /// Launches the cluster kernel with `args`: clusters of kOneCluster blocks, one per batch
  /// group, which wait for no block outside their own (so not a cooperative launch).
  void launch_clusters(void* args, cudaStream_t stream) {
    launch_in_clusters(kernel_for(plan_, flags_.precision), args, plan_.blocks(), plan_.threads,
                       plan_.shared_bytes, stream, kOneCluster, /*cooperative=*/false);
  }
  static std::size_t exchange_values(const ProblemSize& s, const Plan& plan) {
    return (static_cast<std::size_t>(s.seq_len) + 1) * plan.batch_groups * s.hidden *
           plan.padded_batch;
  }
  /// The 16-bit buffers' sizes: every layer's W_ih, and the widest layer's input sequence.
  static std::size_t w_ih_values(const ProblemSize& s) { return w_ih_offset(s, s.layers); }
  /// Where layer `layer`'s W_ih (4H x I_l) starts in the 16-bit W_ih buffer.
  static std::size_t w_ih_offset(const ProblemSize& s, int layer) {
    std::size_t offset = 0;
    for (int l = 0; l < layer; ++l)
      offset += static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(l);
    return offset;
  }
  /// Every layer's W_hh as A fragments: U blocks x k tiles x row tiles x 32 lanes x 16 bytes.
  static std::size_t fragment_bytes(const ProblemSize& s, const Plan& plan) {
    const std::size_t k_tiles = (s.hidden + kMmaK - 1) / kMmaK;
    return static_cast<std::size_t>(s.layers) * plan.unit_blocks * k_tiles *
           plan.tile_groups_units * kWarpSize * sizeof(uint4);
  }
  static std::size_t input_values(const ProblemSize& s) {
    return static_cast<std::size_t>(s.seq_len) * s.batch * widest_layer_input(s);
  }

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
  DeviceBuffer<float> input_part_;         // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];   // intermediate layers' h sequences, alternating
  DeviceBuffer<std::uint16_t> exchange_;   // (T + 1, G, H, Bp): published h of one slice
  DeviceBuffer<std::uint16_t> w_ih_16_;    // every layer's W_ih (4H x I_l) in 16 bits (Element)
  DeviceBuffer<uint4> fragments_;          // every layer's W_hh as A fragments (kernel.cuh)
  DeviceBuffer<std::uint16_t> input_16_;   // one layer's input sequence (T, B, I_l) in 16 bits
  DeviceBuffer<char> cublas_workspace_;    // cuBLAS's workspace (a graph must not allocate)
  cudaStream_t capture_stream_ = nullptr;  // the origin stream of the capture
  cudaGraph_t graph_ = nullptr;            // the recorded pass
  cudaGraphExec_t graph_exec_ = nullptr;   // its instantiation, launched by forward()
  DeviceTensors captured_;                 // the pointers the graph was recorded with
  PhaseTraceRecorder trace_{"forward/22_recurrence_in_one_cluster"};  // --trace: block 0's cycles by phase
};

}  // namespace

DeviceLimits device_limits(const cudaDeviceProp& device) {
  DeviceLimits limits;
  limits.sm_count = device.multiProcessorCount;
  // What a plan may ask for dynamically: the opt-in limit covers static shared memory too, and
  // the kernel declares PhaseTrace's sums statically (reserved whether or not tracing is
  // compiled in: the plan must not depend on it).
  limits.shared_bytes = device.sharedMemPerBlockOptin - kTraceSlots * sizeof(long long);
  // Clusters of 16 blocks of the cluster kernel, of the most shared memory it may take.
  if (device.clusterLaunch) {
    for (const void* kernel : {reinterpret_cast<const void*>(&cluster_recurrence<__half>),
                               reinterpret_cast<const void*>(&cluster_recurrence<__nv_bfloat16>)})
      cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaGetLastError();  // a device without it shows as 0 clusters below
    limits.whole_clusters =
        resident_clusters(reinterpret_cast<const void*>(&cluster_recurrence<__half>),
                          kClusterThreads, limits.shared_bytes, kOneCluster);
  }
  limits.name = device.name;
  return limits;
}

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>(Precision::kFp16);
}

/// The BF16 stage: the registry entry forward/22_recurrence_in_one_cluster_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<PersistentStage>(Precision::kBf16);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
