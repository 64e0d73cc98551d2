/*! \file baselines/cudnn/cudnn_lstm.cpp
 *  \brief The cuDNN baseline: the LSTM forward pass through cuDNN 9's RNN API, every algorithm.
 *
 * lstm-stages measures its stages against the library that the 2016 work became: cuDNN's LSTM.
 * This file is host code only. It describes the problem to cuDNN (descriptors), copies the
 * harness's PyTorch-layout weights into cuDNN's weight space once, and then each forward pass is
 * a single call, cudnnRNNForward, which runs the whole network (every layer, every step).
 *
 * cuDNN's three algorithms (cudnnRNNAlgo_t), one stage each ("cudnn_standard", ...):
 *   STANDARD         the cuDNN 5 optimisations of the 2016 blog post, i.e. what stages 01-05 do
 *                    by hand: one GEMM for the four gates, one large GEMM for a layer's inputs
 *                    over all steps, streams, fused element-wise kernels, layers overlapped in a
 *                    wavefront. GEMM-based: fast for large batches, launch-bound for small ones.
 *   PERSIST_STATIC   a persistent kernel ("Persistent RNNs", Diamos et al. 2016; our stages 07-10):
 *                    one kernel for the whole sequence that keeps the recurrent weights on chip
 *                    (registers / shared memory) across time steps and synchronises the grid
 *                    once per step. Precompiled, built for the largest batch and hidden size it
 *                    supports; cuDNN refuses shapes whose weights do not fit on chip.
 *   PERSIST_DYNAMIC  the same idea, but the kernel is compiled at run time (NVRTC, in
 *                    cudnnBuildRNNDynamic) for the exact shape (H, I, batch) and the GPU at
 *                    hand. Compilation costs seconds, once, in prepare(); its limits on H are
 *                    looser than PERSIST_STATIC's.
 * A refusal (any CUDNN_STATUS_NOT_SUPPORTED* status during setup) is reported as "unsupported"
 * with cuDNN's message, not as a failure: cuDNN documents these limits, we measure them.
 *
 * Why CUDNN_FMA_MATH: every stage computes in FP32 with FMA (cuBLAS's default math, never TF32)
 * and is checked at FP32 bounds. CUDNN_DEFAULT_MATH would let cuDNN use TF32 tensor cores (10
 * mantissa bits) for FP32 data on Ampere and later: faster, but a different function, and it
 * would fail the 1e-5 relative-norm check. CUDNN_FMA_MATH restricts cuDNN to FP32 FMA kernels,
 * so the comparison is like for like.
 *
 * Reduced precision (lstm_cudnn --precision fp16|bf16; stages "cudnn_<algo>_fp16", "..._bf16"):
 * the network's data and weights are FP16 or BF16, with CUDNN_TENSOR_OP_MATH and FP32 math
 * precision (the tensor cores' FP32 accumulation; the settings PyTorch uses for a half-precision
 * LSTM). The harness's tensors stay float32, so each forward() converts x, h0, c0 into FP16/BF16
 * buffers first (round to nearest even) and y, hy, cy back after, on the same stream, inside the
 * timed region: a few element-wise kernels over T*B*(I+H) elements, which PyTorch, whose tensors
 * already are FP16, does not pay. The weights are converted once, in prepare(). The harness has
 * already rounded every input to the precision (core/quantize.h), so the conversions in change
 * nothing, and the check measures cuDNN's arithmetic and the rounding of its outputs, against
 * reduced_precision_tolerance (provisional bounds).
 *
 * How PyTorch's layout maps onto cuDNN's weight space: cuDNN keeps every weight and bias in one
 * buffer (the "weight space", cudnnGetRNNWeightSpaceSize). cudnnGetRNNWeightParams gives, for a
 * layer and a "linear layer" ID, the address and shape of one matrix and its bias:
 *   linLayerID 0, 1, 2, 3  input weights W of gates i, f, g, o   <- weight_ih rows q*H..(q+1)*H
 *                          and input biases                     <- bias_ih[q*H..(q+1)*H)
 *   linLayerID 4, 5, 6, 7  recurrent weights R of gates i, f, g, o <- weight_hh rows q*H..
 *                          and recurrent biases                 <- bias_hh[q*H..(q+1)*H)
 * Each matrix is a row-major (H, I_l) or (H, H) block: exactly PyTorch's rows of that gate,
 * which is why PyTorch can view its weight_ih as one (4H, I) slice of cuDNN's buffer. The gate
 * order i, f, g, o is the same in both, and CUDNN_RNN_DOUBLE_BIAS gives the two bias vectors of
 * PyTorch's formula. prepare() checks every shape and stride cuDNN reports against that, and
 * that the blocks lie inside the weight space without overlapping, before copying: a layout
 * mismatch is an error, never a silently wrong answer. (That map, the descriptors and the error
 * checks live in cudnn_rnn.cpp, shared with the training baseline, cudnn_training.cpp, which
 * uses the same map the other way round for the weight gradients.)
 *
 * Data layouts: x (T, B, I) and y (T, B, H) are cuDNN's CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
 * with every sequence of length T (packed and unpadded are then the same thing); h0, c0, hy, cy
 * are fully packed (L, B, H) tensors. The harness's buffers are used in place.
 */
#include "cudnn_lstm.h"

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudnn_rnn.h"
#include "harness/cuda_utils.h"

namespace lstm::baseline_cudnn {
namespace {

class CudnnStage final : public Stage {
 public:
  CudnnStage(Algo algo, Precision precision) : algo_(algo), precision_(precision) {}

  Precision precision() const override { return precision_; }

  /// FP32: the FP32 bound; FP16 and BF16: the provisional reduced-precision bounds.
  Tolerance tolerance(const std::string& tensor) const override {
    return reduced_precision_tolerance(precision_, tensor);
  }

  /// An estimate (cuDNN's sizes need a handle, which needs the GPU): the weight space (all
  /// parameters), a workspace of one layer's input-GEMM results (T*B*4H) plus two (T, B, H)
  /// layer outputs, and a margin for the dropout states (a few MiB, unused at dropout 0).
  std::size_t workspace_bytes(const ProblemSize& s) const override {
    return parameter_bytes(s) + estimated_forward_workspace_bytes(s) +
           staging_bytes(s, precision_, /*training=*/false) + kDropoutStatesMargin;
  }

  void prepare(const DeviceTensors& t) override {
    if (lstm_) throw std::logic_error("cuDNN stage: prepare() called twice");
    // Handle, descriptors and the weight space, filled from the harness's PyTorch-layout
    // tensors (cudnn_rnn.cpp: every block cuDNN reports is checked before the copy).
    lstm_ = std::make_unique<CudnnLstm>(algo_, t.size, precision_);
    lstm_->upload_parameters(t);

    // Workspace (and reserve space, which inference does not need: expected 0).
    std::size_t work_bytes = 0, reserve_bytes = 0;
    lstm_->temp_space_sizes(CUDNN_FWD_MODE_INFERENCE, &work_bytes, &reserve_bytes);
    workspace_.allocate(work_bytes);
    reserve_space_.allocate(reserve_bytes);

    // One untimed forward pass now (on the legacy default stream, then waited for), so that a
    // refusal cuDNN reports only when it launches (e.g. a persistent kernel that does not fit the
    // GPU) surfaces here as UnsupportedError rather than as an error in the checked or timed
    // runs. It writes y, hy and cy, which the harness poisons again before its checked run.
    run_forward(t);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    if (!lstm_) throw std::logic_error("cuDNN stage: forward() before prepare()");
    lstm_->set_stream(stream);
    run_forward(t);
  }

 private:
  /// The whole network, every layer and step: one call, enqueued on the handle's stream.
  void run_forward(const DeviceTensors& t) {
    lstm_->forward(CUDNN_FWD_MODE_INFERENCE, t, workspace_, reserve_space_);
  }

  Algo algo_;
  Precision precision_;
  std::unique_ptr<CudnnLstm> lstm_;
  DeviceBuffer<unsigned char> workspace_;
  DeviceBuffer<unsigned char> reserve_space_;
};

}  // namespace

std::vector<Algo> all_algos() {
  return {Algo::kStandard, Algo::kPersistStatic, Algo::kPersistDynamic};
}

std::string algo_name(Algo algo) {
  switch (algo) {
    case Algo::kStandard:
      return "standard";
    case Algo::kPersistStatic:
      return "persist_static";
    case Algo::kPersistDynamic:
      return "persist_dynamic";
  }
  throw std::invalid_argument("unknown cuDNN algorithm");
}

Algo algo_from_name(const std::string& name) {
  for (Algo algo : all_algos())
    if (algo_name(algo) == name) return algo;
  throw std::invalid_argument("unknown cuDNN algorithm \"" + name +
                              "\" (standard, persist_static or persist_dynamic)");
}

std::vector<Precision> all_precisions() {
  return {Precision::kFp32, Precision::kFp16, Precision::kBf16};
}

std::string stage_name(Algo algo, Precision precision, StageKind kind) {
  std::string name = "cudnn_" + algo_name(algo);
  if (precision != Precision::kFp32) name += std::string("_") + precision_name(precision);
  if (kind == StageKind::kTraining) name += "_training";
  return name;
}

std::unique_ptr<Stage> make(Algo algo, Precision precision) {
  return std::make_unique<CudnnStage>(algo, precision);
}

StageInfo stage_info(Algo algo, Precision precision) {
  return {stage_name(algo, precision, StageKind::kForward), "",
          [algo, precision] { return make(algo, precision); }};
}

}  // namespace lstm::baseline_cudnn
