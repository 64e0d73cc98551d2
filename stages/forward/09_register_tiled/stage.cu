/*! \file
 *  \brief Stage 09: the persistent kernel's product register-tiled and split over k.
 *
 * What this stage adds (to 08_published_h):
 *   1. kernel.cuh: each thread computes a 4 x 4 register tile (one unit's four gates x four
 *      batch rows) over its share of k: per k, one float4 of W and one of h from shared memory
 *      feed 16 FMAs (stage 08: a float4 of W and one float of h, 4 FMAs); the lanes of a warp
 *      and the warps of a block split k further, reduced by shuffles and then in shared
 *      memory, in a fixed order (bitwise reproducible).
 *   2. h_{t-1} staged as before (all of it, each step), but transposed to [k][b] in shared
 *      memory, rows padded to the tile, so that a tile row of h is one 16-byte load.
 *   3. plan.h/plan.cpp: the lane layout of the tiles, what fits in shared memory, and the
 *      limits, by a fixed rule (4-wide tile, 256 threads, batch rows per launch halved until
 *      they fit).
 *
 * The lesson, the mapping, the limits, the prediction and the measurement: README.md beside
 * this file. Host code here; the kernel in kernel.cuh.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "harness/phase_trace.cuh"
#include "harness/stage.h"
#include "kernel.cuh"
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// ---------------------------------------------------------------------------------------------
// Which kernel runs a plan
// ---------------------------------------------------------------------------------------------

/// The kernel that runs `plan` (this stage's rule always takes the 4-wide tile).
const void* kernel_for(const Plan&) {
  return reinterpret_cast<const void*>(&persistent_lstm_kernel<4>);
}

// ---------------------------------------------------------------------------------------------
// The stage: limits, preparation, and the launches of one forward pass
// ---------------------------------------------------------------------------------------------

class PersistentStage final : public Stage {
 public:
  ~PersistentStage() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  void add_flags(CLI::App& app) override { trace_.add_flag(app); }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    const DeviceLimits limits = device_limits(device);
    const Plan plan = make_plan(s, limits);
    std::ostringstream why;
    if (!plan.fits) {
      why << "the recurrent weights do not fit on chip: " << plan.why << " (" << device.name << ", "
          << limits.sm_count << " SMs, " << limits.shared_bytes / 1024
          << " KiB of shared memory per block); the largest H that fits at B = " << s.batch
          << " is " << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    // Waiting for h needs every block resident at once: one per SM here.
    const void* kernel = kernel_for(plan);
    return check_co_resident(kernel, "persistent", plan.threads, plan.shared_bytes, plan.blocks(),
                             limits.sm_count);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    // The input parts (T, B, 4H), the intermediate layers' h sequences (two, alternating) and
    // the exchange buffer (T + 1 slots of one slice's rows x H).
    std::size_t exchange = 0;
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
      const Plan plan = make_plan(s, device_limits(prop));
      if (plan.fits) exchange = exchange_floats(s, plan);
    }
    cudaGetLastError();
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence + exchange) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    plan_ = make_plan(s, device_limits(prop));
    if (!plan_.fits) throw UnsupportedError(plan_.why);
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
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    for (int layer = 0; layer < s.layers; ++layer) {
      const int input_size = s.layer_input_size(layer);
      const float* input_sequence = layer == 0 ? t.x : layer_outputs_[(layer - 1) % 2].data();
      float* output_sequence = layer == s.layers - 1 ? t.y : layer_outputs_[layer % 2].data();
      // All steps' input parts at once: W_ih · [x_0 ... x_{T-1}], (4H x I) · (I x T*B).
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B, input_size,
                               &one, t.w_ih[layer], input_size, input_sequence, input_size, &zero,
                               input_part_.data(), four_h));
      // Batch rows are independent sequences: a batch too large for one launch runs in slices.
      const int rows_per_slice = plan_.slice_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        const std::size_t slot = static_cast<std::size_t>(end - begin) * H;
        // Slot 0 = h0 of the slice's rows; slots 1..T = "not yet published" (every bit set).
        CUDA_CHECK(cudaMemcpyAsync(exchange_.data(), t.h0 + layer * state + begin * H,
                                   slot * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        CUDA_CHECK(cudaMemsetAsync(exchange_.data() + slot, 0xFF, s.seq_len * slot * sizeof(float),
                                   stream));
        // The whole recurrence of the slice: one launch.
        SharedKernelArgs args{};
        args.w_hh = t.w_hh[layer];
        args.input_part = input_part_.data();
        args.b_ih = t.b_ih[layer];
        args.b_hh = t.b_hh[layer];
        args.c0 = t.c0 + layer * state;
        args.y = output_sequence;
        args.hy = t.hy + layer * state;
        args.cy = t.cy + layer * state;
        args.exchange = exchange_.data();
        args.hidden = H;
        args.batch = B;
        args.seq_len = s.seq_len;
        args.batch_begin = begin;
        args.batch_end = end;
        args.units_per_block = plan_.units_per_block;
        args.padded_batch = plan_.padded_batch;
        args.lanes_batch = plan_.lanes_batch;
        args.lanes_units = plan_.lanes_units;
        args.phases = plan_.phases;
        args.tile_groups_units = plan_.tile_groups_units;
        args.tile_groups_batch = plan_.tile_groups_batch;
        args.k_slices = plan_.k_slices;
        args.trace = trace_.device();
        void* kernel_args[] = {&args};
        // All blocks resident at once, which the cooperative launch guarantees or refuses: a
        // block that waits for h must never wait for a block that has not started.
        CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(plan_), dim3(plan_.blocks()),
                                               dim3(plan_.threads), kernel_args, plan_.shared_bytes,
                                               stream));
      }
    }
  }

 private:
  static std::size_t exchange_floats(const ProblemSize& s, const Plan& plan) {
    return (static_cast<std::size_t>(s.seq_len) + 1) * plan.slice_batch * s.hidden;
  }

  Plan plan_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<float> input_part_;        // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];  // intermediate layers' h sequences, alternating
  DeviceBuffer<float> exchange_;          // (T + 1, rows, H): published h of one slice
  PhaseTraceRecorder trace_{"forward/09_register_tiled"};  // --trace: block 0's cycles by phase
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

std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
