/*! \file
 *  \brief Training stage 18: training stage 17 with layer 0's four products after the
 *         recurrence (dx, dW_ih, dW_hh, db) started together, each on a stream of its own.
 *
 * What this stage adds to training stage 17 (this file only): at layer 0, the last the backward
 * reaches, the weight gradients no longer wait for the input gradient, nor for each other;
 * README.md gives the prediction, the measurement and why the layers above keep stage 17's
 * order.
 *
 * The lesson, the mapping, the costs, the prediction and the measurement: README.md beside this
 * file. Host code here; the kernels in kernel_registers.cuh, kernel.cuh and
 * backward_kernel.cuh.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backward_kernel.cuh"
#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"
#include "kernel.cuh"
#include "kernel_registers.cuh"
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// ---------------------------------------------------------------------------------------------
// The kernels (whether all their blocks can be resident at once: harness/co_residency.h)
// ---------------------------------------------------------------------------------------------

constexpr int kPublishThreads = 256;  // threads per block of the forward's slot-0 kernel
/// The backward kernel for `plan`: its lanes read their float4 of dz directly, or stage dz.
const void* backward_kernel_for(const BackwardPlan& plan) {
  static_assert(kDirectFloat4 == 1, "one instantiation per direct share");
  return plan.direct_float4 == 1 ? reinterpret_cast<const void*>(&backward_persistent<1>)
                                 : reinterpret_cast<const void*>(&backward_persistent<0>);
}

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

/// The forward kernel that runs `plan` (forward stage 12's choice).
const void* forward_kernel_for(const ForwardPlan& plan) {
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
// The stage: limits, preparation, the forward and the backward pass
// ---------------------------------------------------------------------------------------------

class PersistentTraining final : public TrainingStage {
 public:
  ~PersistentTraining() override {
    if (cublas_) cublasDestroy(cublas_);
    for (int i = 0; i < kTailStreams; ++i) {
      if (weights_cublas_[i]) cublasDestroy(weights_cublas_[i]);
      if (weights_streams_[i]) cudaStreamDestroy(weights_streams_[i]);
      if (tail_done_[i]) cudaEventDestroy(tail_done_[i]);
    }
    for (cudaEvent_t event : {dz_ready_, dz_free_[0], dz_free_[1]})
      if (event) cudaEventDestroy(event);
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
      // Where H itself does not fit (not only what --plan pins): what would.
      if (!make_plan(s, limits).fits)
        why << "; the largest H that fits at B = " << s.batch << " is "
            << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    std::string why =
        check_co_resident(forward_kernel_for(plan.forward), "forward", plan.forward.threads,
                          plan.forward.shared_bytes, plan.forward.blocks(), limits.sm_count);
    if (why.empty())
      why = check_co_resident(backward_kernel_for(plan.backward), "backward", kBackwardThreads,
                              plan.backward.shared_bytes, plan.backward.blocks(), limits.sm_count);
    return why;
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // Per layer the stash: gates (T, B, 4H), c and h (T + 1, B, H each). The forward's exchange
    // buffer (T + 1 slots of one slice's G x H x Bp). One dz (T, B, 4H), one gradient of an
    // intermediate layer's output (T, B, H), the ones of the bias gradient.
    const std::size_t stash = s.layers * ((kGates + 2) * sequence + 2 * state);
    const Plan& plan = plan_for(s, current_device_limits());
    const std::size_t exchange = plan.fits ? exchange_floats(s, plan.forward) : 0;
    const std::size_t floats = stash + exchange + (s.layers > 1 ? 2 : 1) * kGates * sequence +
                               (s.layers > 1 ? sequence : 0) +
                               static_cast<std::size_t>(s.seq_len) * s.batch;
    return floats * sizeof(float);
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
    if (flags_.verbose)
      std::cerr << "training/18_tail_side_by_side plan: " << plan_.describe() << "\n";
    CUDA_CHECK(cudaFuncSetAttribute(forward_kernel_for(plan_.forward),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.forward.shared_bytes)));
    CUDA_CHECK(cudaFuncSetAttribute(backward_kernel_for(plan_.backward),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.backward.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    // The weight and bias gradients' own streams, a handle each (a handle's workspace serves one
    // stream at a time) and the events that order the streams.
    for (int i = 0; i < kTailStreams; ++i) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&weights_streams_[i], cudaStreamNonBlocking));
      CUBLAS_CHECK(cublasCreate(&weights_cublas_[i]));
      CUBLAS_CHECK(cublasSetMathMode(weights_cublas_[i], CUBLAS_DEFAULT_MATH));
      CUBLAS_CHECK(cublasSetStream(weights_cublas_[i], weights_streams_[i]));
      CUDA_CHECK(cudaEventCreateWithFlags(&tail_done_[i], cudaEventDisableTiming));
    }
    for (cudaEvent_t* event : {&dz_ready_, &dz_free_[0], &dz_free_[1]})
      CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    layers_.resize(s.layers);
    for (Layer& layer : layers_) {
      layer.gates.allocate(T * kGates * state);
      layer.cell.allocate((T + 1) * state);
      layer.hidden.allocate((T + 1) * state);
    }
    exchange_.allocate(exchange_floats(s, plan_.forward));
    dz_[0].allocate(T * kGates * state);
    if (s.layers > 1) dz_[1].allocate(T * kGates * state);  // layer l's dz: dz_[l % 2]
    if (s.layers > 1) d_input_.allocate(T * state);
    ones_.upload(std::vector<float>(T * s.batch, 1.0f));
  }

  // What the forward keeps for the backward, per layer: every step's activated gates (T, B, 4H),
  // c (T + 1, B, H; slot 0 = c0) and h (T + 1, B, H; slot 0 = h0), as training stages 01-05.
  // The kernels publish h_t for each other in their own exchange buffer (forward stage 12's
  // layout) and keep it in the stash with plain stores.
  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const ForwardPlan& plan = plan_.forward;
    const std::size_t slot = static_cast<std::size_t>(plan.batch_groups) * H * plan.padded_batch;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    for (int l = 0; l < s.layers; ++l) {
      Layer& kept = layers_[l];
      const int input_size = s.layer_input_size(l);
      // Layer 0 reads x; layer l > 0 reads layer l-1's h sequence (slots 1..T of its stash).
      const float* input_sequence = l == 0 ? t.x : layers_[l - 1].hidden.data() + state;
      const std::size_t layer_state = static_cast<std::size_t>(l) * state;
      // Slot 0 of the stash's h and c = h0 and c0 (the backward and the GEMMs read them).
      CUDA_CHECK(cudaMemcpyAsync(kept.hidden.data(), t.h0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(kept.cell.data(), t.c0 + layer_state, state * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      // The input part of every step at once: gates (4H x T*B) = W_ih · x; the kernel adds the
      // rest and overwrites it with the activated gates. Not where the register kernel computes
      // the input parts itself.
      if (plan.input_k_per_lane == 0) {
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B,
                                 input_size, &one, t.w_ih[l], input_size, input_sequence,
                                 input_size, &zero, kept.gates.data(), four_h));
      }
      // Batch rows are independent sequences: a batch too large for one launch runs in slices.
      const int rows_per_slice = plan.batch_groups * plan.group_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // The exchange buffer: slot 0 = h0 (transposed); slots 1..T = "not yet published".
        const int publish_blocks = static_cast<int>(
            std::min<std::size_t>(ceil_div<std::size_t>(slot, kPublishThreads), 1024));
        publish_initial_state<<<publish_blocks, kPublishThreads, 0, stream>>>(
            t.h0 + layer_state, exchange_.data(), H, plan.batch_groups, plan.group_batch,
            plan.padded_batch, begin, end);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(exchange_.data() + slot, 0xFF, s.seq_len * slot * sizeof(float),
                                   stream));
        // The whole recurrence of the slice: one launch of the plan's kernel.
        if (plan.weights_in_registers) {
          RegisterKernelArgs args{};
          set_common_args(args, t, l, begin, end);
          args.w_ih = t.w_ih[l];
          args.x = input_sequence;
          args.input_size = input_size;
          args.input_k_per_lane = plan.input_k_per_lane;
          launch_cooperative(forward_kernel_for(plan), &args, plan.blocks(), plan.threads,
                             plan.shared_bytes, stream);
        } else {
          SharedKernelArgs args{};
          set_common_args(args, t, l, begin, end);
          args.unit_blocks = plan.unit_blocks;
          args.batch_groups = plan.batch_groups;
          args.group_batch = plan.group_batch;
          args.padded_batch = plan.padded_batch;
          args.lanes_batch = plan.lanes_batch;
          args.tile_groups_units = plan.tile_groups_units;
          args.tile_groups_batch = plan.tile_groups_batch;
          args.chunk_rows = plan.chunk_rows;
          args.chunks = plan.chunks;
          launch_cooperative(forward_kernel_for(plan), &args, plan.blocks(), plan.threads,
                             plan.shared_bytes, stream);
        }
      }
    }
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const int columns = s.seq_len * B;  // T*B: every step's batch rows side by side
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    const BackwardPlan& plan = plan_.backward;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
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
      float* dz = dz_[l % 2].data();
      // dz_[l % 2] was last read by the weight gradients of layer l + 2: wait for them.
      if (l + 2 < s.layers) CUDA_CHECK(cudaStreamWaitEvent(stream, dz_free_[l % 2]));

      // The recurrence: one launch per slice of the batch. dz: one slot per step, every value
      // the sentinel until its owner publishes it.
      CUDA_CHECK(cudaMemsetAsync(dz, 0xFF, s.seq_len * kGates * state * sizeof(float), stream));
      const int rows_per_slice = plan.batch_groups * plan.group_rows;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        BackwardArgs args{};
        args.w_hh = t.w_hh[l];
        args.gates = kept.gates.data();
        args.cell = kept.cell.data();
        args.d_above = d_above;
        args.dhy = t.dhy + layer_state;
        args.dcy = t.dcy + layer_state;
        args.dz = dz;
        args.dh0 = t.dh0 + layer_state;
        args.dc0 = t.dc0 + layer_state;
        args.hidden_size = H;
        args.batch = B;
        args.seq_len = s.seq_len;
        args.batch_begin = begin;
        args.batch_end = std::min(B, begin + rows_per_slice);
        args.units_per_block = plan.units_per_block;
        args.unit_quads = plan.unit_quads;
        args.unit_blocks = plan.unit_blocks;
        args.group_rows = plan.group_rows;
        args.k_slices = plan.k_slices;
        args.lanes_rows = plan.lanes_rows;
        args.stage_threads = plan.stage_threads;
        args.chunk_rows = plan.chunk_rows;
        args.chunks = plan.chunks;
        launch_cooperative(backward_kernel_for(plan), &args, plan.blocks(), kBackwardThreads,
                           plan.shared_bytes, stream);
      }

      // After the recurrence, over all T*B columns at once, four products that need dz and nothing
      // of each other. At layer 0, where nothing else runs, they start together, each on a stream
      // of its own, on the SMs the others leave free. Above it, as in stage 17: d(input) first (the
      // layer below waits for it), then the weight gradients one after another on one stream,
      // beside the next layer's recurrence (side by side there they took it more SMs: slower).
      const bool last_layer = l == 0;  // nothing waits for its d(input) but the pass's end
      const int w_hh_stream = last_layer ? 1 : 0, bias_stream = last_layer ? 2 : 0;  // else dW_ih's
      if (last_layer) CUDA_CHECK(cudaEventRecord(dz_ready_, stream));
      // d(input) = W_ih^T · dz: (I x 4H)(4H x T*B), on `stream`: the layer below needs it.
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, input_size, columns, four_h, &one,
                               t.w_ih[l], input_size, dz, four_h, &zero, d_input, input_size));
      if (!last_layer) CUDA_CHECK(cudaEventRecord(dz_ready_, stream));
      for (cudaStream_t side : weights_streams_)
        CUDA_CHECK(cudaStreamWaitEvent(side, dz_ready_));
      // dW_ih = dz · input^T, dW_hh = dz · h_{t-1}^T: row-major (4H x K) results are column-major
      // (K x 4H) = input (K x T*B) · dz^T (T*B x 4H). Written (beta = 0), summed over all steps.
      CUBLAS_CHECK(cublasSgemm(weights_cublas_[0], CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h,
                               columns, &one, input_sequence, input_size, dz, four_h, &zero,
                               t.grad_w_ih[l], input_size));
      CUBLAS_CHECK(cublasSgemm(weights_cublas_[w_hh_stream], CUBLAS_OP_N, CUBLAS_OP_T, H, four_h,
                               columns, &one, kept.hidden.data(), H, dz, four_h, &zero,
                               t.grad_w_hh[l], H));
      // db = dz · 1: the sum of every column of dz. Both bias vectors enter the gates the same
      // way: their gradients are equal.
      CUBLAS_CHECK(cublasSgemv(weights_cublas_[bias_stream], CUBLAS_OP_N, four_h, columns, &one, dz,
                               four_h, ones_.data(), 1, &zero, t.grad_b_ih[l], 1));
      CUDA_CHECK(cudaMemcpyAsync(t.grad_b_hh[l], t.grad_b_ih[l], four_h * sizeof(float),
                                 cudaMemcpyDeviceToDevice, weights_streams_[bias_stream]));
      for (int i = 1; i < kTailStreams; ++i) {  // streams 1 and 2 join stream 0
        CUDA_CHECK(cudaEventRecord(tail_done_[i], weights_streams_[i]));
        CUDA_CHECK(cudaStreamWaitEvent(weights_streams_[0], tail_done_[i]));
      }
      gradients_ready(l, weights_streams_[0]);  // layer l's gradients are written (stage.h's hook)
      CUDA_CHECK(cudaEventRecord(dz_free_[l % 2], weights_streams_[0]));
    }
    // Join: everything the pass did is ordered before later work on `stream`.
    CUDA_CHECK(cudaStreamWaitEvent(stream, dz_free_[0]));
  }

 private:
  /// Sets the fields that both forward kernels' arguments have (RegisterKernelArgs,
  /// SharedKernelArgs) for layer `layer` and the batch rows [begin, end).
  template <typename Args>
  void set_common_args(Args& args, const DeviceTensors& t, int layer, int begin, int end) {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    Layer& kept = layers_[layer];
    args.w_hh = t.w_hh[layer];
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
    args.units_per_block = plan_.forward.units_per_block;
    args.lanes_units = plan_.forward.lanes_units;
    args.phases = plan_.forward.phases;
    args.k_slices = plan_.forward.k_slices;
  }

  /// The forward's exchange buffer: T + 1 slots of one slice's G x H x Bp floats.
  static std::size_t exchange_floats(const ProblemSize& s, const ForwardPlan& plan) {
    return (static_cast<std::size_t>(s.seq_len) + 1) * plan.batch_groups * s.hidden *
           plan.padded_batch;
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
  DeviceBuffer<float> exchange_;  // (T + 1, G, H, Bp): the forward's published h of one slice
  DeviceBuffer<float> dz_[2];     // (T, B, 4H): a layer's gate gradients, published per step;
                                  // two (layer l uses dz_[l % 2]) so that the weight gradients
                                  // of a layer can read its dz while the next layer writes its own
  static constexpr int kTailStreams = 3;  // dW_ih, dW_hh, db: one stream each
  cudaStream_t weights_streams_[kTailStreams] = {};
  cublasHandle_t weights_cublas_[kTailStreams] = {};  // one cuBLAS handle bound to each
  cudaEvent_t tail_done_[kTailStreams] = {};  // stream i's part of a layer done (1 and 2 used)
  cudaEvent_t dz_ready_ = nullptr;            // a layer's dz is done on `stream`
  cudaEvent_t dz_free_[2] = {};               // the weight gradients done with dz_[0] / dz_[1]
  DeviceBuffer<float> d_input_;  // (T, B, H): the gradient of an intermediate layer's output
  DeviceBuffer<float> ones_;     // (T*B): all ones, for the bias gradient's GEMV
};

}  // namespace

DeviceLimits device_limits(const cudaDeviceProp& device) {
  DeviceLimits limits;
  limits.sm_count = device.multiProcessorCount;
  limits.shared_bytes = device.sharedMemPerBlockOptin;  // no kernel has static shared memory
  limits.name = device.name;
  return limits;
}

std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentTraining>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
