/*! \file
 *  \brief Stage 12: a second persistent kernel for small batches, W_hh in registers.
 *
 * What this stage adds (to 11_batch_groups):
 *   1. kernel_registers.cuh: for B <= 8, each lane holds 4 x 8 or 4 x 32 weights of W_hh in
 *      registers for the whole sequence; each warp stages its own rows of h_{t-1}; a
 *      "transposing" butterfly sums the lanes; one block barrier per step.
 *   2. Where a lane's share of W_ih · x_t is small, the kernel computes it itself while the
 *      first loads of h_{t-1} fly.
 *   3. The planner (plan.h) picks the kernel; --weights and --input pin the choices.
 *
 * The lesson, the mapping, the limits, the prediction and the measurement: README.md beside
 * this file. Host code here; the kernels in kernel.cuh and kernel_registers.cuh.
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
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    // Waiting for h needs every block resident at once: one per SM here.
    const void* kernel = kernel_for(plan);
    return check_co_resident(kernel, "persistent", plan.threads, plan.shared_bytes, plan.blocks(),
                             limits.sm_count);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // The input parts (T, B, 4H), the intermediate layers' h sequences (two, alternating) and
    // the exchange buffer (T + 1 slots of one slice's G x H x Bp).
    const Plan& plan = plan_for(s, current_device_limits());
    const std::size_t exchange = plan.fits ? exchange_floats(s, plan) : 0;
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence + exchange) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    plan_for(s, current_device_limits());
    if (!plan_.fits) throw UnsupportedError(plan_.why);
    if (flags_.verbose)
      std::cerr << "forward/12_small_batch_registers plan: " << plan_.describe() << "\n";
    CUDA_CHECK(cudaFuncSetAttribute(kernel_for(plan_), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
    exchange_.allocate(exchange_floats(s, plan_));
    trace_.prepare(s.seq_len);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const std::size_t slot = static_cast<std::size_t>(plan_.batch_groups) * H * plan_.padded_batch;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    for (int layer = 0; layer < s.layers; ++layer) {
      const int input_size = s.layer_input_size(layer);
      const float* input_sequence = layer == 0 ? t.x : layer_outputs_[(layer - 1) % 2].data();
      float* output_sequence = layer == s.layers - 1 ? t.y : layer_outputs_[layer % 2].data();
      // All steps' input parts at once: W_ih · [x_0 ... x_{T-1}], (4H x I) · (I x T*B), unless
      // the register kernel computes them itself.
      if (plan_.input_k_per_lane == 0) {
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B,
                                 input_size, &one, t.w_ih[layer], input_size, input_sequence,
                                 input_size, &zero, input_part_.data(), four_h));
      }
      // Batch rows are independent sequences: a batch too large for one launch runs in slices.
      const int rows_per_slice = plan_.batch_groups * plan_.group_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // Slot 0 = h0 (transposed); slots 1..T = "not yet published".
        const int publish_blocks = static_cast<int>(
            std::min<std::size_t>(ceil_div<std::size_t>(slot, kPublishThreads), 1024));
        publish_initial_state<<<publish_blocks, kPublishThreads, 0, stream>>>(
            t.h0 + layer * state, exchange_.data(), H, plan_.batch_groups, plan_.group_batch,
            plan_.padded_batch, begin, end);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(exchange_.data() + slot, 0xFF, s.seq_len * slot * sizeof(float),
                                   stream));
        // The whole recurrence of the slice: one launch of the plan's kernel.
        if (plan_.weights_in_registers) {
          RegisterKernelArgs args{};
          set_common_args(args, t, layer, output_sequence, begin, end);
          args.w_ih = t.w_ih[layer];
          args.x = input_sequence;
          args.input_size = input_size;
          args.input_k_per_lane = plan_.input_k_per_lane;
          launch(&args, stream);
        } else {
          SharedKernelArgs args{};
          set_common_args(args, t, layer, output_sequence, begin, end);
          args.unit_blocks = plan_.unit_blocks;
          args.batch_groups = plan_.batch_groups;
          args.group_batch = plan_.group_batch;
          args.padded_batch = plan_.padded_batch;
          args.lanes_batch = plan_.lanes_batch;
          args.tile_groups_units = plan_.tile_groups_units;
          args.tile_groups_batch = plan_.tile_groups_batch;
          args.chunk_rows = plan_.chunk_rows;
          args.chunks = plan_.chunks;
          launch(&args, stream);
        }
      }
    }
  }

 private:
  /// Sets the fields that both kernels' arguments have (RegisterKernelArgs, SharedKernelArgs)
  /// for layer `layer` and the batch rows [begin, end).
  template <typename Args>
  void set_common_args(Args& args, const DeviceTensors& t, int layer, float* output_sequence,
                       int begin, int end) {
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
    args.units_per_block = plan_.units_per_block;
    args.lanes_units = plan_.lanes_units;
    args.phases = plan_.phases;
    args.k_slices = plan_.k_slices;
    args.trace = trace_.device();
  }

  /// Launches the plan's kernel with `args` (its own argument struct): all blocks resident at
  /// once, which the cooperative launch guarantees or refuses (a block that waits for h must
  /// never wait for a block that has not started).
  void launch(void* args, cudaStream_t stream) {
    void* kernel_args[] = {args};
    CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(plan_), dim3(plan_.blocks()),
                                           dim3(plan_.threads), kernel_args, plan_.shared_bytes,
                                           stream));
  }
  static std::size_t exchange_floats(const ProblemSize& s, const Plan& plan) {
    return (static_cast<std::size_t>(s.seq_len) + 1) * plan.batch_groups * s.hidden *
           plan.padded_batch;
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
  DeviceBuffer<float> input_part_;        // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];  // intermediate layers' h sequences, alternating
  DeviceBuffer<float> exchange_;          // (T + 1, G, H, Bp): published h of one slice
  PhaseTraceRecorder trace_{
      "forward/12_small_batch_registers"};  // --trace: block 0's cycles by phase
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
