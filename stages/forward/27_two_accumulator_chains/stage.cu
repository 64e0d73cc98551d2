/*! \file
 *  \brief Stage 27: a warp's mma over held fragments accumulate onto two sets of accumulators,
 *         even k tiles onto one and odd ones onto the other, so that an mma need not wait for
 *         the one before it.
 *
 * What this stage changes (from 24_wavefront_with_weights_in_registers): kernel.cuh only, the
 * loop over held fragments and the two sets' sum before the partial tile is stored. Host code
 * here is stage 24's, and so are the plans.
 *
 * The lesson, the prediction and the measurement: README.md beside this file. Host code here;
 * the kernel in kernel.cuh.
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

/// The kernel that runs `plan` with 16-bit values of type Element: where it holds W in registers,
/// the kernel of 256 threads that holds its held_tiles k tiles a warp (`kAfterInput`: those of
/// h_{t-1}'s chunk, after the layer below's).
template <typename Element, int kHeld, bool kAfterInput>
const void* kernel_for(int tile_batch) {
  switch (tile_batch) {
    case 32:
      return reinterpret_cast<const void*>(
          &persistent_lstm_kernel<Element, 32, kHeld, kAfterInput>);
    case 16:
      return reinterpret_cast<const void*>(
          &persistent_lstm_kernel<Element, 16, kHeld, kAfterInput>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 8, kHeld, kAfterInput>);
  }
}
template <typename Element, bool kAfterInput>
const void* kernel_for(const Plan& plan) {
  const int held = plan.held_tiles;
  return held == 0    ? kernel_for<Element, 0, false>(plan.tile_batch)
         : held <= 8  ? kernel_for<Element, 8, kAfterInput>(plan.tile_batch)
         : held <= 16 ? kernel_for<Element, 16, kAfterInput>(plan.tile_batch)
                      : kernel_for<Element, kHeldTiles, kAfterInput>(plan.tile_batch);
}

/// The kernel of a launch in `precision` (FP16 or BF16): the one for the most tiles any of its
/// layers holds, told whether an upper layer holds W_hh (its other layers are told by their
/// arguments how many they hold, or that they hold none).
const void* kernel_for(const LayerLaunch& launch, Precision precision) {
  const Plan* most = &launch.layers.front();
  bool after_input = false;
  for (const Plan& p : launch.layers) {
    if (p.held_tiles > most->held_tiles) most = &p;
    after_input = after_input || (p.input_rows > 0 && p.held_tiles > 0);
  }
  const bool bf16 = precision == Precision::kBf16;
  return after_input
             ? (bf16 ? kernel_for<__nv_bfloat16, true>(*most) : kernel_for<__half, true>(*most))
             : (bf16 ? kernel_for<__nv_bfloat16, false>(*most) : kernel_for<__half, false>(*most));
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
    const NetworkPlan& network = plan_for(s, limits);
    std::ostringstream why;
    if (!network.fits) {
      why << "the recurrent weights do not fit on chip: " << network.why << " (" << device.name
          << ", " << limits.sm_count << " SMs, " << limits.shared_bytes / 1024
          << " KiB of shared memory per block)";
      // Where H itself does not fit (not only what --plan or --layers-per-launch pins): what would.
      if (!make_plan(s, limits).fits)
        why << "; the largest H that fits at B = " << s.batch << " is "
            << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    // Waiting for h needs every block of a launch resident at once: one per SM here.
    for (const LayerLaunch& launch : network.launches) {
      const Plan& plan = launch.layers.front();
      const void* kernel = kernel_for(launch, flags_.precision);
      const std::string resident =
          check_co_resident(kernel, "persistent", plan.threads, launch.shared_bytes(),
                            launch.blocks(), limits.sm_count);
      if (!resident.empty()) return resident;
    }
    return {};
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // The input parts (T, B, 4H), the h sequences between launches (two, alternating) and the
    // exchange buffer (T + P slots of one slice's G x P x H x Bp, P layers per launch); in 16
    // bits, the widest layer's W_ih and input sequence.
    const NetworkPlan& network = plan_for(s, current_device_limits());
    const std::size_t exchange = network.fits ? exchange_values(s, network) : 0;
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence) * sizeof(float) +
           (exchange + w_ih_values(s) + input_values(s)) * sizeof(std::uint16_t) +
           kCublasWorkspaceBytes +
           (network.fits ? fragment_offset(s, network, s.layers) : 0) * sizeof(uint4);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    const DeviceLimits limits = current_device_limits();
    plan_for(s, limits);
    if (!network_.fits) throw UnsupportedError(network_.why);
    if (flags_.verbose) {
      std::cerr << "forward/27_two_accumulator_chains plan ("
                << precision_name(flags_.precision) << "):" << network_.describe() << "\n";
    }
    // Launches of one kernel may ask for different amounts: each may have what the device allows.
    for (const LayerLaunch& launch : network_.launches)
      CUDA_CHECK(cudaFuncSetAttribute(kernel_for(launch, flags_.precision),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(limits.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    // FP32 sums: cublasGemmEx with CUBLAS_COMPUTE_32F on 16-bit inputs, FP32 results.
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    cublas_workspace_.allocate(kCublasWorkspaceBytes);
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
    exchange_.allocate(exchange_values(s, network_));
    w_ih_16_.allocate(w_ih_values(s));
    input_16_.allocate(input_values(s));
    trace_.prepare(s.seq_len);
    fragments_.allocate(fragment_offset(s, network_, s.layers));
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

  /// Every layer's W_ih rounded to 16 bits and [W_ih |] W_hh arranged as A fragments
  /// (kernel.cuh) with its plan's layout, on `stream`.
  void prepare_weights(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const bool bf16 = flags_.precision == Precision::kBf16;
    const auto arrange = bf16 ? &arrange_fragments<__nv_bfloat16> : &arrange_fragments<__half>;
    for (int layer = 0; layer < s.layers; ++layer) {
      round_to_16_bits(t.w_ih[layer], w_ih_16_.data() + w_ih_offset(s, layer),
                       static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(layer),
                       flags_.precision, stream);
      const Plan& plan = layer_plan(network_, layer);
      const std::size_t words = fragment_offset(s, network_, layer + 1) * 4 -
                                fragment_offset(s, network_, layer) * 4;  // 32-bit words
      const int blocks =
          static_cast<int>(std::min<std::size_t>(ceil_div<std::size_t>(words, 256), 1024));
      arrange<<<blocks, 256, 0, stream>>>(
          t.w_ih[layer], t.w_hh[layer],
          reinterpret_cast<unsigned*>(fragments_.data() + fragment_offset(s, network_, layer)),
          s.hidden, plan.input_rows, plan.units_per_block, plan.tile_groups_units,
          plan.unit_blocks);
      CUDA_CHECK(cudaGetLastError());
    }
  }

  /// The forward pass, enqueued on `stream`: per launch of the network plan, the input GEMM of its
  /// first layer, then per batch slice one launch of all its layers.
  void enqueue_forward(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type_16 = flags_.precision == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    // After the stream: setting a stream resets the handle's workspace to cuBLAS's own pool.
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.data(), kCublasWorkspaceBytes));
    for (std::size_t n = 0; n < network_.launches.size(); ++n) {
      const LayerLaunch& launch = network_.launches[n];
      const Plan& plan = launch.layers.front();
      const int first = launch.first_layer, parts = static_cast<int>(launch.layers.size());
      const int top = first + parts - 1;  // the launch's top layer
      const int input_size = s.layer_input_size(first);
      const float* input_sequence = first == 0 ? t.x : layer_outputs_[(n - 1) % 2].data();
      float* output_sequence = top == s.layers - 1 ? t.y : layer_outputs_[n % 2].data();
      // The launch's first layer's input in 16 bits (its W_ih was rounded once, in
      // prepare_weights), then all steps' input parts at once, on tensor cores with FP32 sums and
      // FP32 results: [x_0 ... x_{T-1}]ᵀ · W_ihᵀ, (T*B x I) · (I x 4H), stored column by column,
      // so that a gate row's T * B values lie side by side: (4H, T, B), the kernel's order.
      const std::size_t input_count = static_cast<std::size_t>(s.seq_len) * B * input_size;
      round_to_16_bits(input_sequence, input_16_.data(), input_count, flags_.precision, stream);
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, s.seq_len * B, four_h,
                                input_size, &one, input_16_.data(), type_16, input_size,
                                w_ih_16_.data() + w_ih_offset(s, first), type_16, input_size, &zero,
                                input_part_.data(), CUDA_R_32F, s.seq_len * B, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
      const int rows_per_slice = plan.batch_groups * plan.group_batch;
      const std::size_t part = static_cast<std::size_t>(H) * plan.padded_batch;  // a layer, group
      const std::size_t slot = part * parts * plan.batch_groups;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // Every slot "not yet published"; then layer i's h0 (transposed) into its part of slot
        // i, where its step 0 reads it (a launch of one layer: slot 0, as in stage 17).
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
          const Plan& p = launch.layers[lag];
          const int layer = first + lag;
          SharedKernelArgs& a = args.layer[lag];
          // A layer below the top hands its h up through the exchange buffer only.
          set_common_args(a, p, t, layer, layer == top ? output_sequence : nullptr, begin, end);
          a.input_part = p.input_rows == 0 ? input_part_.data() : nullptr;
          a.unit_blocks = p.unit_blocks;
          a.batch_groups = p.batch_groups;
          a.group_batch = p.group_batch;
          a.padded_batch = p.padded_batch;
          a.tile_groups_units = p.tile_groups_units;
          a.tile_groups_batch = p.tile_groups_batch;
          a.mma_batch = p.mma_batch;
          a.h_stride = p.h_stride;
          a.chunk_rows = p.chunk_rows;
          a.chunks = p.chunks;
          a.input_rows = p.input_rows;
          a.weights_held = p.held_tiles > 0 ? 1 : 0;
          a.first_block = first_block;
          a.lag = lag;
          a.parts = parts;
          first_block += p.blocks();
        }
        launch_kernel(launch, &args, stream);
      }
    }
  }

  /// Sets the kernel's arguments that say which layer and batch rows [begin, end) a launch
  /// computes, and the plan's lane layout.
  void set_common_args(SharedKernelArgs& args, const Plan& plan, const DeviceTensors& t, int layer,
                       float* output_sequence, int begin, int end) {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    args.w_fragments = fragments_.data() + fragment_offset(s, network_, layer);
    args.b_ih = t.b_ih[layer];
    args.b_hh = t.b_hh[layer];
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
    args.units_per_block = plan.units_per_block;
    args.k_slices = plan.k_slices;
    args.trace = trace_.device();
  }

  /// Launches the kernel of `launch` with `args`: all its blocks resident at once, which the
  /// cooperative launch guarantees or refuses (a block that waits for h must never wait for a
  /// block that has not started).
  void launch_kernel(const LayerLaunch& launch, SharedLaunchArgs* args, cudaStream_t stream) {
    const Plan& plan = launch.layers.front();
    void* kernel_args[] = {args};
    CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(launch, flags_.precision),
                                           dim3(launch.blocks()), dim3(plan.threads), kernel_args,
                                           launch.shared_bytes(), stream));
  }
  /// The exchange buffer of a launch of P layers: T + P slots of G x P x H x Bp.
  static std::size_t exchange_values(const ProblemSize& s, const LayerLaunch& launch) {
    const Plan& plan = launch.layers.front();
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
  /// The 16-bit buffers' sizes: every layer's W_ih, and the widest layer's input sequence.
  static std::size_t w_ih_values(const ProblemSize& s) { return w_ih_offset(s, s.layers); }
  /// Where layer `layer`'s W_ih (4H x I_l) starts in the 16-bit W_ih buffer.
  static std::size_t w_ih_offset(const ProblemSize& s, int layer) {
    std::size_t offset = 0;
    for (int l = 0; l < layer; ++l)
      offset += static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(l);
    return offset;
  }
  /// The plan of layer `layer` in `network`.
  static const Plan& layer_plan(const NetworkPlan& network, int layer) {
    for (const LayerLaunch& launch : network.launches) {
      if (layer < launch.first_layer + static_cast<int>(launch.layers.size()))
        return launch.layers[layer - launch.first_layer];
    }
    throw std::logic_error("no launch runs this layer");
  }
  /// Where layer `layer`'s A fragments start (uint4), every layer before it with its own plan's
  /// U blocks x k tiles of K x row tiles x 32 lanes; layer L: the size of all of them.
  static std::size_t fragment_offset(const ProblemSize& s, const NetworkPlan& network, int layer) {
    std::size_t offset = 0;
    for (int l = 0; l < layer; ++l) {
      const Plan& plan = layer_plan(network, l);
      const std::size_t k_tiles = (s.hidden + plan.input_rows + kMmaK - 1) / kMmaK;
      offset +=
          static_cast<std::size_t>(plan.unit_blocks) * k_tiles * plan.tile_groups_units * kWarpSize;
    }
    return offset;
  }
  static std::size_t input_values(const ProblemSize& s) {
    return static_cast<std::size_t>(s.seq_len) * s.batch * widest_layer_input(s);
  }

  /// The plan for `s`, made once: unsupported_reason(), workspace_bytes() and prepare() of a
  /// run ask for the same size.
  const NetworkPlan& plan_for(const ProblemSize& s, const DeviceLimits& limits) const {
    if (planned_size_ != s) {
      network_ = make_network_plan(s, limits, flags_.request);
      planned_size_ = s;
    }
    return network_;
  }
  static DeviceLimits current_device_limits() {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return device_limits(prop);
  }

  StageFlags flags_;
  mutable NetworkPlan network_;
  mutable std::optional<ProblemSize> planned_size_;  // the size network_ was made for
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<float> input_part_;         // (4H, T, B): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];   // launches' top layers' h sequences, alternating
  DeviceBuffer<std::uint16_t> exchange_;   // (T + P, G, P, H, Bp): published h of one slice
  DeviceBuffer<std::uint16_t> w_ih_16_;    // every layer's W_ih (4H x I_l) in 16 bits (Element)
  DeviceBuffer<uint4> fragments_;          // every layer's [W_ih |] W_hh as A fragments
  DeviceBuffer<std::uint16_t> input_16_;   // one layer's input sequence (T, B, I_l) in 16 bits
  DeviceBuffer<char> cublas_workspace_;    // cuBLAS's workspace (a graph must not allocate)
  cudaStream_t capture_stream_ = nullptr;  // the origin stream of the capture
  cudaGraph_t graph_ = nullptr;            // the recorded pass
  cudaGraphExec_t graph_exec_ = nullptr;   // its instantiation, launched by forward()
  DeviceTensors captured_;                 // the pointers the graph was recorded with
  PhaseTraceRecorder trace_{
      "forward/27_two_accumulator_chains"};  // --trace: block 0's cycles by phase
};

}  // namespace

DeviceLimits device_limits(const cudaDeviceProp& device) {
  DeviceLimits limits;
  limits.sm_count = device.multiProcessorCount;
  // What a plan may ask for dynamically: the opt-in limit covers static shared memory too, and
  // the kernel declares PhaseTrace's sums statically (reserved whether or not tracing is
  // compiled in: the plan must not depend on it).
  limits.shared_bytes = device.sharedMemPerBlockOptin - kTraceSlots * sizeof(long long);
  limits.name = device.name;
  return limits;
}

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>(Precision::kFp16);
}

/// The BF16 stage: the registry entry forward/27_two_accumulator_chains_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<PersistentStage>(Precision::kBf16);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
