/*! \file
 *  \brief Training stage 23: training stage 22 whose backward splits the gate rows (k) of its
 *         product over the two blocks of a thread-block cluster, so that each block reads half of
 *         dz every step; the partial sums cross in distributed shared memory.
 *
 * What this stage changes (in training stage 22):
 *   1. backward_kernel.cuh: a block of a cluster keeps W_hhᵀ's rows of both blocks' units for
 *      its half of the gate rows, stages only that half of dz, sends the other block's partial
 *      sums into its shared memory and meets it at a cluster barrier (primitives.cuh: mapa and
 *      barrier.cluster).
 *   2. plan.cpp: clusters of one or two blocks, chosen by the backward's cost model.
 *   3. Here: the backward's launch in clusters (launch_in_clusters, harness/co_residency.h:
 *      cudaLaunchKernelExC, cooperative), its co-residency checked per cluster, the kernel per C
 *      and up to four row tiles, the name in --verbose.
 *
 * The lesson, the prediction and the measurement: README.md beside this file. Host code here;
 * the kernels in kernel.cuh and backward_kernel.cuh.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backward_kernel.cuh"
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

/// The forward kernel that runs `plan` with 16-bit values of type Element (forward stage 17's).
template <typename Element>
const void* forward_kernel_for(const ForwardPlan& plan) {
  switch (plan.tile_batch) {
    case 32:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 32>);
    case 16:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 16>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<Element, 8>);
  }
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
const void* backward_kernel_for(Precision precision, const BackwardPlan& plan) {
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
    if (cublas_) cublasDestroy(cublas_);
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
      // Where H itself does not fit (not only what --plan pins): what would.
      if (!make_plan(s, limits).fits)
        why << "; the largest H that fits at B = " << s.batch << " is "
            << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    std::string why = check_co_resident(forward_kernel_for(plan.forward, flags_.precision),
                                        "forward", plan.forward.threads, plan.forward.shared_bytes,
                                        plan.forward.blocks(), limits.sm_count);
    if (why.empty())
      why = check_co_resident(backward_kernel_for(flags_.precision, plan.backward), "backward",
                              kBackwardThreads, plan.backward.shared_bytes, plan.backward.blocks(),
                              limits.sm_count, plan.backward.cluster_blocks);
    return why;
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // Per layer the stash (FP32): gates (T, B, 4H), c and h (T + 1, B, H each). One dz (T, B, 4H)
    // in FP32, one gradient of an intermediate layer's output (T, B, H), the ones of the bias
    // gradient. In 16 bits: the forward's exchange buffer (T + 1 slots of one slice's
    // G x H x Bp), every layer's W_ih and W_hh's fragments for both kernels, a GEMM operand
    // sequence (T, B, max(I, H)) and dz (T, B, 4H).
    const std::size_t stash = s.layers * ((kGates + 2) * sequence + 2 * state);
    const Plan& plan = plan_for(s, current_device_limits());
    const std::size_t exchange = plan.fits ? exchange_values(s, plan.forward) : 0;
    const std::size_t floats = stash + kGates * sequence + (s.layers > 1 ? sequence : 0) +
                               static_cast<std::size_t>(s.seq_len) * s.batch;
    const std::size_t halves = exchange + w_ih_values(s) + operand_values(s) + kGates * sequence;
    return floats * sizeof(float) + halves * sizeof(std::uint16_t) +
           (plan.fits ? fragment_bytes(s, plan.forward) + backward_fragment_bytes(s, plan.backward)
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
      std::cerr << "training/23_dz_split_over_clusters plan (" << precision_name(flags_.precision)
                << "): " << plan_.describe() << "\n";
    }
    CUDA_CHECK(cudaFuncSetAttribute(forward_kernel_for(plan_.forward, flags_.precision),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.forward.shared_bytes)));
    CUDA_CHECK(cudaFuncSetAttribute(backward_kernel_for(flags_.precision, plan_.backward),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.backward.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    // cublasGemmEx with CUBLAS_COMPUTE_32F on 16-bit operands: FP32 sums, FP32 results; the
    // bias gradient's GEMV in FP32 FMA, never TF32.
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    layers_.resize(s.layers);
    for (Layer& layer : layers_) {
      layer.gates.allocate(T * kGates * state);
      layer.cell.allocate((T + 1) * state);
      layer.hidden.allocate((T + 1) * state);
    }
    exchange_.allocate(exchange_values(s, plan_.forward));
    dz_.allocate(T * kGates * state);
    if (s.layers > 1) d_input_.allocate(T * state);
    ones_.upload(std::vector<float>(T * s.batch, 1.0f));
    w_ih_16_.allocate(w_ih_values(s));
    fragments_.allocate(fragment_bytes(s, plan_.forward) / sizeof(uint4));
    backward_fragments_.allocate(backward_fragment_bytes(s, plan_.backward) / sizeof(uint4));
    operand_16_.allocate(operand_values(s));
    dz_16_.allocate(T * kGates * state);
    prepare_weights(t, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());  // done before a pass on any stream
  }

  // What the forward keeps for the backward, per layer: every step's activated gates (T, B, 4H),
  // c (T + 1, B, H; slot 0 = c0) and h (T + 1, B, H; slot 0 = h0), as training stages 01-05.
  // The kernel publishes h_t in 16 bits for the other blocks in its exchange buffer (forward
  // stage 17's layout) and keeps it, in FP32, in the stash with plain stores.
  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    if (t.w_ih != prepared_w_ih_ || t.w_hh != prepared_w_hh_) prepare_weights(t, stream);
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const ForwardPlan& plan = plan_.forward;
    const std::size_t slot = static_cast<std::size_t>(plan.batch_groups) * H * plan.padded_batch;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type_16 = data_type_16();
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
      // The input part of every step at once: gates (4H x T*B) = W_ih · x, on tensor cores
      // (the input rounded to 16 bits, W_ih rounded once in prepare_weights; FP32 sums and
      // results); the kernel adds the rest and overwrites it with the activated gates.
      round_to_16_bits(input_sequence, operand_16_.data(),
                       static_cast<std::size_t>(s.seq_len) * B * input_size, flags_.precision,
                       stream);
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B,
                                input_size, &one, w_ih_16(s, l), type_16, input_size,
                                operand_16_.data(), type_16, input_size, &zero, kept.gates.data(),
                                CUDA_R_32F, four_h, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      // Batch rows are independent sequences: a batch too large for one launch runs in slices.
      const int rows_per_slice = plan.batch_groups * plan.group_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // The exchange buffer: slot 0 = h0 (transposed); slots 1..T = "not yet published".
        const int publish_blocks = static_cast<int>(
            std::min<std::size_t>(ceil_div<std::size_t>(slot, kPublishThreads), 1024));
        const auto publish = flags_.precision == Precision::kBf16
                                 ? &publish_initial_state<__nv_bfloat16>
                                 : &publish_initial_state<__half>;
        publish<<<publish_blocks, kPublishThreads, 0, stream>>>(
            t.h0 + layer_state, exchange_.data(), H, plan.batch_groups, plan.group_batch,
            plan.padded_batch, begin, end);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(exchange_.data() + slot, 0xFF,
                                   s.seq_len * slot * sizeof(std::uint16_t), stream));
        // The whole recurrence of the slice: one launch of the plan's kernel.
        SharedKernelArgs args{};
        set_common_args(args, t, l, begin, end);
        launch_cooperative(forward_kernel_for(plan, flags_.precision), &args, plan.blocks(),
                           plan.threads, plan.shared_bytes, stream);
      }
    }
  }

  void backward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const int columns = s.seq_len * B;  // T*B: every step's batch rows side by side
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type_16 = data_type_16();
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

      // The recurrence: one launch per slice of the batch. dz in 16 bits: one slot per step,
      // every value the sentinel until its owner publishes it.
      CUDA_CHECK(cudaMemsetAsync(dz_16_.data(), 0xFF,
                                 s.seq_len * kGates * state * sizeof(std::uint16_t), stream));
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
        args.dz = dz_.data();
        args.dz16 = dz_16_.data();
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
        launch_in_clusters(backward_kernel_for(flags_.precision, plan), &args, plan.blocks(),
                           kBackwardThreads, plan.shared_bytes, stream, plan.cluster_blocks);
      }

      // After the recurrence, what needs none of it, over all T*B columns at once, on tensor
      // cores: 16-bit operands (dz as the kernel published it, the layer's input and h rounded
      // here; W_ih in prepare), FP32 sums and FP32 results. d(input) = W_ih^T · dz
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, input_size, columns, four_h,
                                &one, w_ih_16(s, l), type_16, input_size, dz_16_.data(), type_16,
                                four_h, &zero, d_input, CUDA_R_32F, input_size, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
      // dW_ih = dz · input^T, dW_hh = dz · h_{t-1}^T: row-major (4H x K) results are column-major
      // (K x 4H) = input (K x T*B) · dz^T (T*B x 4H). Written (beta = 0), summed over all steps.
      round_to_16_bits(input_sequence, operand_16_.data(),
                       static_cast<std::size_t>(columns) * input_size, flags_.precision, stream);
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, input_size, four_h, columns,
                                &one, operand_16_.data(), type_16, input_size, dz_16_.data(),
                                type_16, four_h, &zero, t.grad_w_ih[l], CUDA_R_32F, input_size,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      round_to_16_bits(kept.hidden.data(), operand_16_.data(), s.seq_len * state, flags_.precision,
                       stream);  // h_{-1} = h0 .. h_{T-2}: slots 0..T-1
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, H, four_h, columns, &one,
                                operand_16_.data(), type_16, H, dz_16_.data(), type_16, four_h,
                                &zero, t.grad_w_hh[l], CUDA_R_32F, H, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
      // db = dz · 1: the sum of every column of dz. Both bias vectors enter the gates the same
      // way: their gradients are equal.
      CUBLAS_CHECK(cublasSgemv(cublas_, CUBLAS_OP_N, four_h, columns, &one, dz_.data(), four_h,
                               ones_.data(), 1, &zero, t.grad_b_ih[l], 1));
      CUDA_CHECK(cudaMemcpyAsync(t.grad_b_hh[l], t.grad_b_ih[l], four_h * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
      gradients_ready(l, stream);  // layer l's gradients are written (stage.h's optional hook)
    }
  }

 private:
  /// Every layer's W_ih rounded to 16 bits and W_hh arranged as A fragments (kernel.cuh), on
  /// `stream` (forward stage 17's), and W_hhᵀ as the backward's (backward_kernel.cuh);
  /// remembers which weights they are.
  void prepare_weights(const DeviceTensors& t, cudaStream_t stream) {
    const ProblemSize& s = t.size;
    const std::size_t per_layer = fragment_bytes(s, plan_.forward) / s.layers / sizeof(unsigned);
    const bool bf16 = flags_.precision == Precision::kBf16;
    const auto arrange = bf16 ? &arrange_fragments<__nv_bfloat16> : &arrange_fragments<__half>;
    const int blocks =
        static_cast<int>(std::min<std::size_t>(ceil_div<std::size_t>(per_layer, 256), 1024));
    const std::size_t backward_per_layer =
        backward_fragment_bytes(s, plan_.backward) / s.layers / sizeof(unsigned);
    const auto transposed =
        bf16 ? &arrange_transposed_fragments<__nv_bfloat16> : &arrange_transposed_fragments<__half>;
    const int backward_blocks = static_cast<int>(
        std::min<std::size_t>(ceil_div<std::size_t>(backward_per_layer, 256), 1024));
    for (int layer = 0; layer < s.layers; ++layer) {
      transposed<<<backward_blocks, 256, 0, stream>>>(
          t.w_hh[layer],
          reinterpret_cast<unsigned*>(backward_fragments_.data()) + layer * backward_per_layer,
          s.hidden, plan_.backward.units_per_block, plan_.backward.row_tiles,
          plan_.backward.unit_blocks, plan_.backward.cluster_blocks, plan_.backward.k_rows);
      CUDA_CHECK(cudaGetLastError());
      round_to_16_bits(t.w_ih[layer], w_ih_16(s, layer),
                       static_cast<std::size_t>(kGates) * s.hidden * s.layer_input_size(layer),
                       flags_.precision, stream);
      arrange<<<blocks, 256, 0, stream>>>(
          t.w_hh[layer], reinterpret_cast<unsigned*>(fragments_.data()) + layer * per_layer,
          s.hidden, plan_.forward.units_per_block, plan_.forward.tile_groups_units,
          plan_.forward.unit_blocks);
      CUDA_CHECK(cudaGetLastError());
    }
    prepared_w_ih_ = t.w_ih;
    prepared_w_hh_ = t.w_hh;
  }

  /// Sets the forward kernel's arguments for layer `layer` and the batch rows [begin, end).
  void set_common_args(SharedKernelArgs& args, const DeviceTensors& t, int layer, int begin,
                       int end) {
    const ProblemSize& s = t.size;
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const ForwardPlan& plan = plan_.forward;
    Layer& kept = layers_[layer];
    args.w_fragments =
        fragments_.data() + layer * (fragment_bytes(s, plan) / s.layers / sizeof(uint4));
    args.input_part = kept.gates.data();  // the input GEMM's result, overwritten by the stash
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
  }

  cudaDataType_t data_type_16() const {
    return flags_.precision == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
  }
  /// The forward's exchange buffer: T + 1 slots of one slice's G x H x Bp 16-bit values.
  static std::size_t exchange_values(const ProblemSize& s, const ForwardPlan& plan) {
    return (static_cast<std::size_t>(s.seq_len) + 1) * plan.batch_groups * s.hidden *
           plan.padded_batch;
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
  /// Every layer's W_hh as A fragments: U blocks x k tiles x row tiles x 32 lanes x 16 bytes.
  static std::size_t fragment_bytes(const ProblemSize& s, const ForwardPlan& plan) {
    const std::size_t k_tiles = (s.hidden + kMmaK - 1) / kMmaK;
    return static_cast<std::size_t>(s.layers) * plan.unit_blocks * k_tiles *
           plan.tile_groups_units * kWarpSize * sizeof(uint4);
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
  DeviceBuffer<float> dz_;        // (T, B, 4H): one layer's gate gradients in FP32 (the bias's)
  DeviceBuffer<float> d_input_;   // (T, B, H): the gradient of an intermediate layer's output
  DeviceBuffer<float> ones_;      // (T*B): all ones, for the bias gradient's GEMV
  DeviceBuffer<std::uint16_t> w_ih_16_;     // every layer's W_ih (4H x I_l) in 16 bits
  DeviceBuffer<uint4> fragments_;           // every layer's W_hh as A fragments (kernel.cuh)
  DeviceBuffer<std::uint16_t> operand_16_;  // a layer's input or h sequence in 16 bits
  DeviceBuffer<std::uint16_t> dz_16_;       // (T, B, 4H): dz published in 16 bits; GEMM operand
  DeviceBuffer<uint4> backward_fragments_;  // every layer's W_hhᵀ as the backward's A fragments
  std::vector<const float*> prepared_w_ih_, prepared_w_hh_;  // what the fragments were made of
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
  limits.name = device.name;
  return limits;
}

/// The FP16 stage (the executable's default; --precision bf16 switches it).
std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentTraining>(Precision::kFp16);
}

/// The BF16 stage: the registry entry training/23_dz_split_over_clusters_bf16.
std::unique_ptr<Stage> make_bf16() {
  return std::make_unique<PersistentTraining>(Precision::kBf16);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
