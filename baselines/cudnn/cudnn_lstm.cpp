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
 *   PERSIST_STATIC   a persistent kernel (Diamos et al., "Persistent RNNs", 2016; our stage 07):
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
 * mismatch is an error, never a silently wrong answer.
 *
 * Data layouts: x (T, B, I) and y (T, B, H) are cuDNN's CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
 * with every sequence of length T (packed and unpadded are then the same thing); h0, c0, hy, cy
 * are fully packed (L, B, H) tensors. The harness's buffers are used in place.
 */
#include "cudnn_lstm.h"

#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "harness/cuda_utils.h"

namespace lstm::baseline_cudnn {
namespace {

constexpr int kGates = 4;                       // i, f, g, o
constexpr int kLinearLayers = 2 * kGates;       // W (input) and R (recurrent) per gate
constexpr unsigned long long kDropoutSeed = 1;  // unused: the dropout probability is 0

/// Whether `status` means "cuDNN does not support this configuration": the 3000-3999 range
/// (CUDNN_STATUS_NOT_SUPPORTED and its cuDNN 9 sub-codes), or any status cuDNN names so.
bool is_not_supported(cudnnStatus_t status) {
  const int code = static_cast<int>(status);
  if (code >= 3000 && code < 4000) return true;
  const char* name = cudnnGetErrorString(status);
  static constexpr char kPrefix[] = "CUDNN_STATUS_NOT_SUPPORTED";
  return name != nullptr && std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) == 0;
}

/// Throws for a failed cuDNN call (used by CUDNN_CHECK): UnsupportedError with cuDNN's message
/// when cuDNN refuses the configuration, CudaError naming the call, file and line otherwise.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line) {
  char detail[1024] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  const char* name = cudnnGetErrorString(status);
  const std::string function(call, std::strcspn(call, "("));
  std::ostringstream text;
  if (is_not_supported(status)) {
    const std::size_t version = cudnnGetVersion();  // e.g. 91400 for 9.14.0
    text << "cuDNN " << version / 10000 << "." << version % 10000 / 100 << "." << version % 100
         << " refuses it: " << function << " returned " << (name ? name : "?") << " ("
         << static_cast<int>(status) << ")";
    if (detail[0] != '\0') text << ": " << detail;
    throw UnsupportedError(text.str());
  }
  text << file << ":" << line << ": cuDNN error in " << call << ": " << (name ? name : "?") << " ("
       << static_cast<int>(status) << ")";
  if (detail[0] != '\0') text << ": " << detail;
  throw CudaError(text.str());
}

}  // namespace
}  // namespace lstm::baseline_cudnn

/// Checks a cuDNN call; on failure throws lstm::UnsupportedError (a NOT_SUPPORTED status) or
/// lstm::CudaError naming the call, file and line (any other status).
#define CUDNN_CHECK(call)                                                                       \
  do {                                                                                          \
    const cudnnStatus_t lstm_cudnn_status_ = (call);                                            \
    if (lstm_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                           \
      ::lstm::baseline_cudnn::throw_cudnn_error(lstm_cudnn_status_, #call, __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

namespace lstm::baseline_cudnn {
namespace {

cudnnRNNAlgo_t to_cudnn(Algo algo) {
  switch (algo) {
    case Algo::kStandard:
      return CUDNN_RNN_ALGO_STANDARD;
    case Algo::kPersistStatic:
      return CUDNN_RNN_ALGO_PERSIST_STATIC;
    case Algo::kPersistDynamic:
      return CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
  }
  throw std::invalid_argument("unknown cuDNN algorithm");
}

/// One weight or bias block of the weight space, for the overlap check.
struct Block {
  std::size_t offset = 0;  ///< bytes from the start of the weight space
  std::size_t bytes = 0;
  std::string label;  ///< "layer 1 linLayerID 5 matrix"
};

/// Requires that `desc` (as cudnnGetRNNWeightParams filled it) describes float32 data laid out
/// exactly as a packed row-major array of shape `expected` (unit dimensions aside), and that
/// `address` lies, 4-byte aligned, inside the weight space. Returns the block it occupies.
/// \throws std::runtime_error naming the block and both shapes otherwise.
Block check_block(cudnnTensorDescriptor_t desc, const void* address, const void* space_begin,
                  std::size_t space_bytes, const std::vector<int>& expected,
                  const std::string& label) {
  constexpr int kMaxDims = 8;
  cudnnDataType_t type{};
  int dims_count = 0;
  int dims[kMaxDims] = {};
  int strides[kMaxDims] = {};
  CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc, kMaxDims, &type, &dims_count, dims, strides));

  std::ostringstream reported;
  reported << "dims {";
  for (int d = 0; d < std::min(dims_count, kMaxDims); ++d)
    reported << (d ? ", " : "") << dims[d];
  reported << "} strides {";
  for (int d = 0; d < std::min(dims_count, kMaxDims); ++d)
    reported << (d ? ", " : "") << strides[d];
  reported << "}";
  std::ostringstream wanted;
  wanted << "row-major {";
  for (std::size_t d = 0; d < expected.size(); ++d)
    wanted << (d ? ", " : "") << expected[d];
  wanted << "} float32";
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("cuDNN weight space, " + label + ": " + why + " (cuDNN reports " +
                             reported.str() + "; the PyTorch block copied into it is " +
                             wanted.str() + ")");
  };

  if (dims_count < 1 || dims_count > kMaxDims) fail("unexpected number of dimensions");
  if (type != CUDNN_DATA_FLOAT) fail("data type is not CUDNN_DATA_FLOAT");
  // The dimensions larger than 1 must be the expected ones, in order; those of size 1 (e.g. the
  // leading 1 of cuDNN's {1, rows, cols}) do not change the memory layout.
  std::vector<int> reported_big, expected_big;
  for (int d = 0; d < dims_count; ++d)
    if (dims[d] != 1) reported_big.push_back(dims[d]);
  for (int extent : expected)
    if (extent != 1) expected_big.push_back(extent);
  if (reported_big != expected_big) fail("shape differs");
  // Packed row-major: a dimension's stride is the product of the dimensions after it.
  long long inner = 1;
  for (int d = dims_count - 1; d >= 0; --d) {
    if (dims[d] != 1 && strides[d] != inner) fail("not a packed row-major block");
    inner *= dims[d];
  }

  const auto* begin = static_cast<const unsigned char*>(space_begin);
  const auto* at = static_cast<const unsigned char*>(address);
  Block block;
  block.bytes = static_cast<std::size_t>(inner) * sizeof(float);
  block.label = label;
  if (at == nullptr || at < begin || static_cast<std::size_t>(at - begin) > space_bytes ||
      space_bytes - static_cast<std::size_t>(at - begin) < block.bytes) {
    fail("address outside the weight space");
  }
  block.offset = static_cast<std::size_t>(at - begin);
  if (block.offset % sizeof(float) != 0) fail("address not aligned to a float");
  return block;
}

/// Owns one cuDNN tensor descriptor (for the weight-parameter queries).
class TensorDescriptor {
 public:
  TensorDescriptor() { CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class CudnnStage final : public Stage {
 public:
  explicit CudnnStage(Algo algo) : algo_(algo) {}

  ~CudnnStage() override {
    // Errors cannot be reported from a destructor; the buffers are freed after this body.
    if (c_desc_) cudnnDestroyTensorDescriptor(c_desc_);
    if (h_desc_) cudnnDestroyTensorDescriptor(h_desc_);
    if (y_desc_) cudnnDestroyRNNDataDescriptor(y_desc_);
    if (x_desc_) cudnnDestroyRNNDataDescriptor(x_desc_);
    if (rnn_desc_) cudnnDestroyRNNDescriptor(rnn_desc_);
    if (dropout_desc_) cudnnDestroyDropoutDescriptor(dropout_desc_);
    if (handle_) cudnnDestroy(handle_);
  }

  /// An estimate (cuDNN's sizes need a handle, which needs the GPU): the weight space (all
  /// parameters), a workspace of one layer's input-GEMM results (T*B*4H) plus two (T, B, H)
  /// layer outputs, and a margin for the dropout states (a few MiB, unused at dropout 0).
  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t H = s.hidden, B = s.batch, T = s.seq_len;
    std::size_t parameters = 0;
    for (int layer = 0; layer < s.layers; ++layer)
      parameters += 4 * H * (static_cast<std::size_t>(s.layer_input_size(layer)) + H) + 8 * H;
    const std::size_t workspace = T * B * 4 * H + 2 * T * B * H;
    constexpr std::size_t kDropoutStatesMargin = std::size_t{16} << 20;
    return (parameters + workspace) * sizeof(float) + kDropoutStatesMargin;
  }

  void prepare(const DeviceTensors& t) override {
    if (handle_) throw std::logic_error("cuDNN stage: prepare() called twice");
    const ProblemSize& s = t.size;
    const int H = s.hidden, I = s.input_size, B = s.batch, T = s.seq_len, L = s.layers;
    CUDNN_CHECK(cudnnCreate(&handle_));  // its stream: the legacy default stream, until forward

    // Dropout 0 (an inference forward pass never drops out, but the descriptor is required).
    CUDNN_CHECK(cudnnCreateDropoutDescriptor(&dropout_desc_));
    std::size_t states_bytes = 0;
    CUDNN_CHECK(cudnnDropoutGetStatesSize(handle_, &states_bytes));
    dropout_states_.allocate(states_bytes);
    CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_desc_, handle_, 0.0f, dropout_states_.data(),
                                          states_bytes, kDropoutSeed));

    // The network: PyTorch's nn.LSTM, FP32 data, FP32 FMA math (no TF32).
    CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn_desc_));
    CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_desc_, to_cudnn(algo_), CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, I, H,
        /*projSize=*/H, L, dropout_desc_, CUDNN_RNN_PADDED_IO_DISABLED));
    // PERSIST_DYNAMIC: compile the persistent kernel for this exact batch (NVRTC; seconds).
    if (algo_ == Algo::kPersistDynamic) CUDNN_CHECK(cudnnBuildRNNDynamic(handle_, rnn_desc_, B));

    // x (T, B, I) and y (T, B, H): sequence-major, every sequence T steps long. cuDNN reads the
    // lengths from the host array here and from the device copy in cudnnRNNForward.
    const std::vector<int> lengths(static_cast<std::size_t>(B), T);
    seq_lengths_.upload(lengths);
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x_desc_));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_desc_, CUDNN_DATA_FLOAT,
                                          CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B, I,
                                          lengths.data(), nullptr));
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y_desc_));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_desc_, CUDNN_DATA_FLOAT,
                                          CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B, H,
                                          lengths.data(), nullptr));

    // h0, c0, hy, cy: (L, B, H), fully packed.
    const int state_dims[3] = {L, B, H};
    const int state_strides[3] = {B * H, H, 1};
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&h_desc_));
    CUDNN_CHECK(
        cudnnSetTensorNdDescriptor(h_desc_, CUDNN_DATA_FLOAT, 3, state_dims, state_strides));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&c_desc_));
    CUDNN_CHECK(
        cudnnSetTensorNdDescriptor(c_desc_, CUDNN_DATA_FLOAT, 3, state_dims, state_strides));

    // The weight space, filled from the harness's PyTorch-layout tensors.
    std::size_t weight_bytes = 0;
    CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle_, rnn_desc_, &weight_bytes));
    weight_space_.allocate(weight_bytes);
    if (weight_bytes > 0) CUDA_CHECK(cudaMemset(weight_space_.data(), 0, weight_bytes));
    copy_weights(t);

    // Workspace (and reserve space, which inference does not need: expected 0).
    std::size_t work_bytes = 0, reserve_bytes = 0;
    CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle_, rnn_desc_, CUDNN_FWD_MODE_INFERENCE, x_desc_,
                                          &work_bytes, &reserve_bytes));
    workspace_.allocate(work_bytes);
    reserve_space_.allocate(reserve_bytes);

    // The copies above (device to device: asynchronous to the host) and the dropout-state
    // initialisation ran on the legacy default stream, which does not order the harness's
    // non-blocking stream: wait for them here.
    CUDA_CHECK(cudaDeviceSynchronize());

    // One untimed forward pass now, so that a refusal cuDNN reports only when it launches (e.g.
    // a persistent kernel that does not fit the GPU) surfaces here as UnsupportedError rather
    // than as an error in the checked or timed runs. It writes y, hy and cy, which the harness
    // poisons again before its checked run.
    run_forward(t);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    if (!handle_) throw std::logic_error("cuDNN stage: forward() before prepare()");
    CUDNN_CHECK(cudnnSetStream(handle_, stream));
    run_forward(t);
  }

 private:
  /// The whole network, every layer and step: one call, enqueued on the handle's stream.
  void run_forward(const DeviceTensors& t) {
    CUDNN_CHECK(cudnnRNNForward(
        handle_, rnn_desc_, CUDNN_FWD_MODE_INFERENCE, seq_lengths_.data(), x_desc_, t.x, y_desc_,
        t.y, h_desc_, t.h0, t.hy, c_desc_, t.c0, t.cy, weight_space_.bytes(), weight_space_.data(),
        workspace_.bytes(), workspace_.data(), reserve_space_.bytes(), reserve_space_.data()));
  }

  /// Copies every layer's W (linLayerID 0-3) and R (4-7) gate blocks and their biases from
  /// PyTorch's (4H, I_l) / (4H, H) / (4H) tensors into the weight space, after checking every
  /// block cuDNN reports (shape, strides, type, address) against what is copied into it.
  void copy_weights(const DeviceTensors& t) {
    const ProblemSize& s = t.size;
    const std::size_t H = static_cast<std::size_t>(s.hidden);
    TensorDescriptor matrix_desc, bias_desc;
    std::vector<Block> blocks;
    for (int layer = 0; layer < s.layers; ++layer) {
      for (int lin = 0; lin < kLinearLayers; ++lin) {
        const bool recurrent = lin >= kGates;
        const std::size_t gate = static_cast<std::size_t>(lin % kGates);
        const int cols = recurrent ? s.hidden : s.layer_input_size(layer);
        void* matrix = nullptr;
        void* bias = nullptr;
        CUDNN_CHECK(cudnnGetRNNWeightParams(handle_, rnn_desc_, layer, weight_space_.bytes(),
                                            weight_space_.data(), lin, matrix_desc.get(), &matrix,
                                            bias_desc.get(), &bias));
        const std::string label =
            "layer " + std::to_string(layer) + " linLayerID " + std::to_string(lin);
        blocks.push_back(check_block(matrix_desc.get(), matrix, weight_space_.data(),
                                     weight_space_.bytes(), {s.hidden, cols}, label + " matrix"));
        blocks.push_back(check_block(bias_desc.get(), bias, weight_space_.data(),
                                     weight_space_.bytes(), {s.hidden}, label + " bias"));

        // Gate q's rows of weight_ih / weight_hh, and its slice of bias_ih / bias_hh.
        const float* source_matrix = (recurrent ? t.w_hh : t.w_ih)[layer] + gate * H * cols;
        const float* source_bias = (recurrent ? t.b_hh : t.b_ih)[layer] + gate * H;
        CUDA_CHECK(
            cudaMemcpy(matrix, source_matrix, H * cols * sizeof(float), cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaMemcpy(bias, source_bias, H * sizeof(float), cudaMemcpyDeviceToDevice));
      }
    }
    // No two blocks may share a byte (each PyTorch element has its own place).
    std::sort(blocks.begin(), blocks.end(),
              [](const Block& a, const Block& b) { return a.offset < b.offset; });
    for (std::size_t i = 1; i < blocks.size(); ++i) {
      if (blocks[i].offset < blocks[i - 1].offset + blocks[i - 1].bytes) {
        throw std::runtime_error("cuDNN weight space: " + blocks[i - 1].label + " and " +
                                 blocks[i].label + " overlap");
      }
    }
  }

  Algo algo_;
  cudnnHandle_t handle_ = nullptr;
  cudnnDropoutDescriptor_t dropout_desc_ = nullptr;
  cudnnRNNDescriptor_t rnn_desc_ = nullptr;
  cudnnRNNDataDescriptor_t x_desc_ = nullptr;  // (T, B, I)
  cudnnRNNDataDescriptor_t y_desc_ = nullptr;  // (T, B, H)
  cudnnTensorDescriptor_t h_desc_ = nullptr;   // (L, B, H): h0 and hy
  cudnnTensorDescriptor_t c_desc_ = nullptr;   // (L, B, H): c0 and cy
  DeviceBuffer<unsigned char> dropout_states_;
  DeviceBuffer<unsigned char> weight_space_;
  DeviceBuffer<unsigned char> workspace_;
  DeviceBuffer<unsigned char> reserve_space_;
  DeviceBuffer<int> seq_lengths_;  // B entries, all T: cudnnRNNForward's devSeqLengths
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

std::unique_ptr<Stage> make(Algo algo) {
  return std::make_unique<CudnnStage>(algo);
}

StageInfo stage_info(Algo algo) {
  return {"cudnn_" + algo_name(algo), "", [algo] { return make(algo); }};
}

}  // namespace lstm::baseline_cudnn
