/*! \file
 *  \brief Stage 07: one persistent kernel per layer runs all T steps; each block keeps its slice
 *         of W_hh in shared memory for the whole sequence; all blocks meet at a grid-wide
 *         barrier every step.
 *
 * What this stage adds (to 06_cuda_graph):
 *   1. Per layer, ONE cooperative kernel (kernel.cuh) runs the whole recurrence instead of a
 *      GEMM and an element-wise kernel per step. Each block loads its units' rows of W_hh into
 *      shared memory once and keeps them for all T steps.
 *   2. Each step a block reads h_{t-1} from L2, computes its units' gates for every batch row,
 *      updates c (in shared memory) and writes h_t; grid.sync() separates the steps.
 *   3. The input part W_ih · x_t of all steps stays one cuBLAS GEMM before the kernel.
 *   4. The limits come from the device (SM count, shared memory per block); what does not fit
 *      is refused with the reason and what fits.
 *
 * The lesson, the mapping, the costs, the prediction and the measurement: README.md beside
 * this file. Host code here; the kernel in kernel.cuh.
 */
#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "harness/co_residency.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"
#include "kernel.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

// ---------------------------------------------------------------------------------------------
// What fits: how one layer is spread over the GPU
// ---------------------------------------------------------------------------------------------

/// One layer's launch shape (the mapping: README.md).
struct Fit {
  std::string why;               ///< empty: it fits; else what does not
  int units_per_block = 0;       ///< J = ceil(H / SMs): each block owns J hidden units
  int blocks = 0;                ///< U = ceil(H / J), one per SM
  int rows = 0;                  ///< batch rows per launch: a layer runs ceil(B / rows) launches
  int k_slices = 0;              ///< S: threads per dot product, where pairs are fewer than threads
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
};

/// The launch shape of `s` on a GPU with `sm_count` SMs and `shared_limit` bytes of shared
/// memory per block: as many batch rows per launch as fit beside the weights.
Fit fit(const ProblemSize& s, int sm_count, std::size_t shared_limit) {
  Fit f;
  const int H = s.hidden, J = ceil_div(H, sm_count);
  f.units_per_block = J;
  f.blocks = ceil_div(H, J);
  const auto slices = [&](int rows) {
    return std::clamp(kThreads / (J * rows), 1, std::min(kMaxKSlices, H));
  };
  const auto bytes = [&](int rows) {
    return shared_floats(H, J, rows, slices(rows)) * sizeof(float);
  };
  // Without batch rows, and the least a row adds (S = 1: its partial sums, h and c).
  const std::size_t fixed = shared_floats(H, J, 0, 0) * sizeof(float);
  const std::size_t per_row = shared_floats(H, J, 1, 1) * sizeof(float) - fixed;
  int rows = 0;
  if (fixed < shared_limit) {
    rows = static_cast<int>(std::min<std::size_t>(s.batch, (shared_limit - fixed) / per_row));
    while (rows > 0 && bytes(rows) > shared_limit)
      --rows;
  }
  if (rows == 0) {
    std::ostringstream why;
    why << "a block's slice of W_hh (" << kGates * J << " rows x " << H << " floats) and one batch "
        << "row of h need " << bytes(1) / 1024 << " KiB of shared memory, more than the "
        << shared_limit / 1024 << " KiB of a block";
    f.why = why.str();
    return f;
  }
  f.rows = rows;
  f.k_slices = slices(rows);
  f.shared_bytes = bytes(rows);
  return f;
}

/// The largest H that fits at the other sizes of `s` (for the refusal message).
int largest_hidden(ProblemSize s, int sm_count, std::size_t shared_limit) {
  int low = 0, high = s.hidden;  // low fits (0: none), high does not
  while (high - low > 1) {
    s.hidden = low + (high - low) / 2;
    if (fit(s, sm_count, shared_limit).why.empty()) {
      low = s.hidden;
    } else {
      high = s.hidden;
    }
  }
  return low;
}

// ---------------------------------------------------------------------------------------------
// The stage
// ---------------------------------------------------------------------------------------------

class PersistentStage final : public Stage {
 public:
  ~PersistentStage() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    const Fit f = fit(s, device.multiProcessorCount, device.sharedMemPerBlockOptin);
    std::ostringstream why;
    if (!f.why.empty()) {
      why << "the recurrent weights do not fit on chip: " << f.why << " (" << device.name << ", "
          << device.multiProcessorCount << " SMs); the largest H that fits at B = " << s.batch
          << " is " << largest_hidden(s, device.multiProcessorCount, device.sharedMemPerBlockOptin);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    // grid.sync() needs every block resident at once: one per SM here.
    const void* kernel = reinterpret_cast<const void*>(&persistent_lstm_barrier);
    return check_co_resident(kernel, "persistent", kThreads, f.shared_bytes, f.blocks,
                             device.multiProcessorCount);
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    // The input parts (T, B, 4H) and the intermediate layers' h sequences (two, alternating).
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    fit_ = fit(s, prop.multiProcessorCount, prop.sharedMemPerBlockOptin);
    if (!fit_.why.empty()) throw UnsupportedError(fit_.why);
    CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&persistent_lstm_barrier),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(fit_.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
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
      for (int begin = 0; begin < B; begin += fit_.rows) {
        KernelArgs args{};
        args.w_hh = t.w_hh[layer];
        args.input_part = input_part_.data();
        args.b_ih = t.b_ih[layer];
        args.b_hh = t.b_hh[layer];
        args.h0 = t.h0 + layer * state;
        args.c0 = t.c0 + layer * state;
        args.y = output_sequence;
        args.hy = t.hy + layer * state;
        args.cy = t.cy + layer * state;
        args.hidden = H;
        args.batch = B;
        args.seq_len = s.seq_len;
        args.batch_begin = begin;
        args.rows = std::min(fit_.rows, B - begin);
        args.units_per_block = fit_.units_per_block;
        args.k_slices = fit_.k_slices;
        void* kernel_args[] = {&args};
        // All blocks resident at once, which the cooperative launch guarantees or refuses:
        // grid.sync() would wait forever for a block that has not started.
        CUDA_CHECK(cudaLaunchCooperativeKernel(
            reinterpret_cast<const void*>(&persistent_lstm_barrier), dim3(fit_.blocks),
            dim3(kThreads), kernel_args, fit_.shared_bytes, stream));
      }
    }
  }

 private:
  Fit fit_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<float> input_part_;        // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];  // intermediate layers' h sequences, alternating
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>();
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
