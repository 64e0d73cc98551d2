/*! \file
 *  \brief Stage 18: the layers of the network in one persistent launch, as a wavefront.
 *
 * What this stage adds (to 12_small_batch_registers):
 *   1. One launch of the shared-memory kernel runs several layers, each on its own share of the
 *      blocks; layer l works on step t - l of the launch's first, its input h^{l-1}_t handed up
 *      through the exchange buffer as h is handed between blocks since stage 08.
 *   2. An upper layer multiplies [W_ih | W_hh] (both slices in shared memory) by
 *      [h^{l-1}_t ; h^l_{t-1}]: its input product on chip, no GEMM between the layers.
 *   3. The planner (plan.h) splits the layers into launches of what fits on chip;
 *      --layers-per-launch pins it (1: stage 12's one launch per layer).
 *
 * The lesson, the on-chip budget, the prediction and the measurement: README.md beside this
 * file. Host code here; the kernels in kernel.cuh and kernel_registers.cuh.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "harness/phase_trace.cuh"
#include "harness/stage.h"
#include "kernel.cuh"
#include "kernel_registers.cuh"
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr int kPublishThreads = 256;  // threads per block of the slot-0 kernel

// ---------------------------------------------------------------------------------------------
// Which kernel runs a plan
// ---------------------------------------------------------------------------------------------

template <int kKPerLane>
const void* register_kernel_for(int tile_batch) {
  switch (tile_batch) {
    case 1:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 1>);
    case 2:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 2>);
    case 4:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 4>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 8>);
  }
}

/// The kernel that runs `plan`.
const void* kernel_for(const Plan& plan) {
  if (plan.weights_in_registers) {
    return plan.k_per_lane == 8 ? register_kernel_for<8>(plan.tile_batch)
                                : register_kernel_for<32>(plan.tile_batch);
  }
  switch (plan.tile_batch) {
    case 16:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<16>);
    case 8:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<8>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<4>);
  }
}

// ---------------------------------------------------------------------------------------------
// The stage: limits, preparation, and the launches of one forward pass
// ---------------------------------------------------------------------------------------------

class PersistentStage final : public Stage {
 public:
  ~PersistentStage() override {
    if (cublas_) cublasDestroy(cublas_);
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
      const void* kernel = kernel_for(plan);
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
    // exchange buffer (T + P slots of one slice's G x P x H x Bp, P layers per launch).
    const NetworkPlan& network = plan_for(s, current_device_limits());
    const std::size_t exchange = network.fits ? exchange_floats(s, network) : 0;
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence + exchange) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    const DeviceLimits limits = current_device_limits();
    plan_for(s, limits);
    if (!network_.fits) throw UnsupportedError(network_.why);
    if (flags_.verbose)
      std::cerr << "forward/18_layers_in_one_launch plan: " << network_.describe() << "\n";
    // Launches of one kernel may ask for different amounts: each may have what the device allows.
    for (const LayerLaunch& launch : network_.launches)
      CUDA_CHECK(cudaFuncSetAttribute(kernel_for(launch.layers.front()),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(limits.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
    exchange_.allocate(exchange_floats(s, network_));
    trace_.prepare(s.seq_len);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    for (std::size_t n = 0; n < network_.launches.size(); ++n) {
      const LayerLaunch& launch = network_.launches[n];
      const Plan& plan = launch.layers.front();
      const int first = launch.first_layer, parts = static_cast<int>(launch.layers.size());
      const int top = first + parts - 1;  // the launch's top layer
      const int input_size = s.layer_input_size(first);
      const float* input_sequence = first == 0 ? t.x : layer_outputs_[(n - 1) % 2].data();
      float* output_sequence = top == s.layers - 1 ? t.y : layer_outputs_[n % 2].data();
      // All steps' input parts of the launch's first layer at once: W_ih · [x_0 ... x_{T-1}],
      // (4H x I) · (I x T*B), unless the register kernel computes them itself.
      if (plan.input_k_per_lane == 0) {
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B,
                                 input_size, &one, t.w_ih[first], input_size, input_sequence,
                                 input_size, &zero, input_part_.data(), four_h));
      }
      // Batch rows are independent sequences: a batch too large for one launch runs in slices.
      const int rows_per_slice = plan.batch_groups * plan.group_batch;
      const std::size_t part = static_cast<std::size_t>(plan.batch_groups) * H * plan.padded_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // Every slot "not yet published"; then layer i's h0 (transposed) into its part of slot
        // i, where its step 0 reads it (a launch of one layer: slot 0, as in stage 12).
        CUDA_CHECK(cudaMemsetAsync(exchange_.data(), 0xFF,
                                   exchange_floats(s, launch) * sizeof(float), stream));
        const int publish_blocks = static_cast<int>(
            std::min<std::size_t>(ceil_div<std::size_t>(part, kPublishThreads), 1024));
        for (int lag = 0; lag < parts; ++lag) {
          publish_initial_state<<<publish_blocks, kPublishThreads, 0, stream>>>(
              t.h0 + (first + lag) * state, exchange_.data() + (lag * parts + lag) * part, H,
              plan.batch_groups, plan.group_batch, plan.padded_batch, begin, end);
          CUDA_CHECK(cudaGetLastError());
        }
        // The whole recurrence of the slice, every layer of the launch: one launch.
        if (plan.weights_in_registers) {
          RegisterKernelArgs args{};
          set_common_args(args, plan, t, first, output_sequence, begin, end);
          args.w_ih = t.w_ih[first];
          args.x = input_sequence;
          args.input_size = input_size;
          args.input_k_per_lane = plan.input_k_per_lane;
          launch_kernel(plan, launch.blocks(), launch.shared_bytes(), &args, stream);
        } else {
          SharedLaunchArgs args{};
          args.layers = parts;
          for (int lag = 0, first_block = 0; lag < parts; ++lag) {
            const Plan& p = launch.layers[lag];
            const int layer = first + lag;
            SharedKernelArgs& a = args.layer[lag];
            // A layer below the top hands its h up through the exchange buffer only.
            set_common_args(a, p, t, layer, layer == top ? output_sequence : nullptr, begin, end);
            a.w_ih = t.w_ih[layer];
            a.input_part = p.input_rows == 0 ? input_part_.data() : nullptr;
            a.unit_blocks = p.unit_blocks;
            a.batch_groups = p.batch_groups;
            a.group_batch = p.group_batch;
            a.padded_batch = p.padded_batch;
            a.lanes_batch = p.lanes_batch;
            a.tile_groups_units = p.tile_groups_units;
            a.tile_groups_batch = p.tile_groups_batch;
            a.chunk_rows = p.chunk_rows;
            a.chunks = p.chunks;
            a.input_rows = p.input_rows;
            a.first_block = first_block;
            a.lag = lag;
            a.parts = parts;
            first_block += p.blocks();
          }
          launch_kernel(plan, launch.blocks(), launch.shared_bytes(), &args, stream);
        }
      }
    }
  }

 private:
  /// Sets the fields that both kernels' arguments have (RegisterKernelArgs, SharedKernelArgs)
  /// for layer `layer` and the batch rows [begin, end).
  template <typename Args>
  void set_common_args(Args& args, const Plan& plan, const DeviceTensors& t, int layer,
                       float* output_sequence, int begin, int end) {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    args.w_hh = t.w_hh[layer];
    args.input_part = input_part_.data();
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
    args.lanes_units = plan.lanes_units;
    args.phases = plan.phases;
    args.k_slices = plan.k_slices;
    args.trace = trace_.device();
  }

  /// Launches the kernel of `plan` (a launch's first layer's) with `args` (its own argument
  /// struct), `blocks` in all: all resident at once, which the cooperative launch guarantees or
  /// refuses (a block that waits for h must never wait for a block that has not started).
  void launch_kernel(const Plan& plan, int blocks, std::size_t shared_bytes, void* args,
                     cudaStream_t stream) {
    void* kernel_args[] = {args};
    CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(plan), dim3(blocks), dim3(plan.threads),
                                           kernel_args, shared_bytes, stream));
  }
  /// The exchange buffer of a launch of P layers: T + P slots of G x P x H x Bp.
  static std::size_t exchange_floats(const ProblemSize& s, const LayerLaunch& launch) {
    const Plan& plan = launch.layers.front();
    const std::size_t parts = launch.layers.size();
    return (static_cast<std::size_t>(s.seq_len) + parts) * plan.batch_groups * parts * s.hidden *
           plan.padded_batch;
  }
  static std::size_t exchange_floats(const ProblemSize& s, const NetworkPlan& network) {
    std::size_t most = 0;
    for (const LayerLaunch& launch : network.launches)
      most = std::max(most, exchange_floats(s, launch));
    return most;
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
  DeviceBuffer<float> input_part_;        // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];  // launches' top layers' h sequences, alternating
  DeviceBuffer<float> exchange_;          // (T + P, G, P, H, Bp): published h of one slice
  PhaseTraceRecorder trace_{
      "forward/18_layers_in_one_launch"};  // --trace: block 0's cycles by phase
};

}  // namespace

DeviceLimits device_limits(const cudaDeviceProp& device) {
  DeviceLimits limits;
  limits.sm_count = device.multiProcessorCount;
  // What a plan may ask for dynamically: the opt-in limit covers static shared memory too, and
  // both kernels declare PhaseTrace's sums statically (reserved whether or not tracing is
  // compiled in: the plan must not depend on it).
  limits.shared_bytes = device.sharedMemPerBlockOptin - kTraceSlots * sizeof(long long);
  limits.name = device.name;
  return limits;
}

std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
