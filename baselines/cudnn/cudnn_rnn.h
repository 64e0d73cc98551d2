/*! \file baselines/cudnn/cudnn_rnn.h
 *  \brief What the two cuDNN baselines share (the forward pass, cudnn_lstm.cpp, and the training
 *         pass, cudnn_training.cpp): cuDNN's error check, the network as cuDNN sees it
 *         (handle, descriptors, weight space: CudnnLstm), and the map between PyTorch's parameter
 *         tensors and a cuDNN weight space, in both directions.
 *
 * Internal to the baseline library: it includes cudnn.h, which cudnn_lstm.h keeps away from the
 * tests, the benchmark and main.cpp. cudnn_lstm.cpp's header comment is the lesson (algorithms,
 * FMA math, the weight-space layout); this file is its plumbing.
 */
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cudnn_lstm.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm::baseline_cudnn {

/// Throws for a failed cuDNN call (used by CUDNN_CHECK): UnsupportedError with cuDNN's message
/// when cuDNN refuses the configuration (a CUDNN_STATUS_NOT_SUPPORTED* status), CudaError naming
/// the call, file and line otherwise.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line);

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

/// The PyTorch tensor (per layer) that a block of a cuDNN weight space holds part of.
enum class Parameter {
  kWeightIh,  ///< weight_ih_l{k} (4H, I_k): cuDNN's input matrices W, linLayerID 0-3
  kWeightHh,  ///< weight_hh_l{k} (4H, H): cuDNN's recurrent matrices R, linLayerID 4-7
  kBiasIh,    ///< bias_ih_l{k} (4H): the biases of linLayerID 0-3
  kBiasHh,    ///< bias_hh_l{k} (4H): the biases of linLayerID 4-7
};

/// One gate's rows of one layer's PyTorch tensor, and where a cuDNN weight space keeps them.
struct ParameterBlock {
  int layer = 0;
  Parameter parameter = Parameter::kWeightIh;
  std::size_t offset = 0;  ///< first element in the PyTorch tensor (gate q of H rows: q*H*cols)
  std::size_t count = 0;   ///< elements: H*cols for a matrix, H for a bias
  float* place = nullptr;  ///< the block in the weight space (packed row-major, as checked)
};

/// One device-to-device copy.
struct DeviceCopy {
  void* destination = nullptr;
  const void* source = nullptr;
  std::size_t bytes = 0;
};

/// The copies that fill the weight-space `blocks` from the parameters of `t` (w_ih, w_hh, b_ih,
/// b_hh): PyTorch layout into cuDNN's. Copies of one tensor that are contiguous on both sides
/// are merged.
/// \throws std::invalid_argument if `t` lacks a layer's parameter pointer.
std::vector<DeviceCopy> copies_into_space(const std::vector<ParameterBlock>& blocks,
                                          const DeviceTensors& t);

/// The copies that carry the gradient-space `blocks` out into the gradient buffers of `t`
/// (grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh): cuDNN's layout into PyTorch's, the inverse of
/// copies_into_space. Copies of one tensor that are contiguous on both sides are merged.
/// \throws std::invalid_argument if `t` lacks a layer's gradient pointer.
std::vector<DeviceCopy> copies_out_of_space(const std::vector<ParameterBlock>& blocks,
                                            const DeviceTensors& t);

/// Enqueues `copies` on `stream` (cudaMemcpyAsync, device to device).
void enqueue_copies(const std::vector<DeviceCopy>& copies, cudaStream_t stream);

/// Bytes of every weight and bias of `size` (what cuDNN's weight space holds, before any padding
/// of its own), for the stages' workspace estimates.
std::size_t parameter_bytes(const ProblemSize& size);

/// Bytes of the estimated cuDNN workspace of a forward pass of `size` (one layer's input-GEMM
/// results, T*B*4H, plus two (T, B, H) layer outputs), for the stages' workspace estimates.
std::size_t estimated_forward_workspace_bytes(const ProblemSize& size);

/// A margin for cuDNN's dropout states (a few MiB; unused at dropout 0, but allocated).
constexpr std::size_t kDropoutStatesMargin = std::size_t{16} << 20;

/// PyTorch's nn.LSTM as cuDNN sees it, for one problem size and algorithm: the handle, the
/// dropout (0), RNN, data and state descriptors, the device sequence lengths, and the weight
/// space. Host code; every cuDNN status is checked (CUDNN_CHECK).
class CudnnLstm {
 public:
  /// Creates the handle and descriptors for `size` (FP32 data, CUDNN_FMA_MATH: no TF32) and
  /// allocates the weight space, zeroed; for PERSIST_DYNAMIC compiles the persistent kernel
  /// (cudnnBuildRNNDynamic, seconds). Returns with the device idle.
  /// \throws UnsupportedError with cuDNN's message when cuDNN refuses the configuration.
  CudnnLstm(Algo algo, const ProblemSize& size);
  ~CudnnLstm();
  CudnnLstm(const CudnnLstm&) = delete;
  CudnnLstm& operator=(const CudnnLstm&) = delete;

  const ProblemSize& size() const { return size_; }
  cudnnHandle_t handle() const { return handle_; }
  cudnnRNNDescriptor_t rnn() const { return rnn_desc_; }
  cudnnRNNDataDescriptor_t x_desc() const { return x_desc_; }  ///< (T, B, I): x and dx
  cudnnRNNDataDescriptor_t y_desc() const { return y_desc_; }  ///< (T, B, H): y and dy
  cudnnTensorDescriptor_t h_desc() const { return h_desc_; }   ///< (L, B, H): h0, hy, dhy, dh0
  cudnnTensorDescriptor_t c_desc() const { return c_desc_; }   ///< (L, B, H): c0, cy, dcy, dc0
  const int* device_seq_lengths() const { return seq_lengths_.data(); }  ///< B entries, all T
  const void* weight_space() const { return weight_space_.data(); }
  std::size_t weight_space_bytes() const { return weight_space_.bytes(); }

  /// Every gate block of every layer's parameters in a buffer laid out as this network's weight
  /// space (the weight space itself, or a gradient space of the same size) starting at `space`,
  /// each checked: float32, packed row-major, the PyTorch shape of the rows it maps to, inside
  /// the buffer, and no two blocks overlapping. `space_name` names the buffer in errors.
  /// \throws std::runtime_error naming the block and both shapes on any mismatch.
  std::vector<ParameterBlock> map_parameters(void* space, const std::string& space_name) const;

  /// Copies the PyTorch-layout parameters of `t` into the weight space and waits for the copy.
  void upload_parameters(const DeviceTensors& t);

  /// cuDNN's workspace and reserve-space sizes for a forward pass in `mode`
  /// (cudnnGetRNNTempSpaceSizes).
  void temp_space_sizes(cudnnForwardMode_t mode, std::size_t* workspace_bytes,
                        std::size_t* reserve_bytes) const;

  /// Makes the handle enqueue its work on `stream` (cudnnSetStream).
  void set_stream(cudaStream_t stream);

  /// Enqueues cudnnRNNForward in `mode` on the handle's stream: reads x, h0, c0 of `t` and the
  /// weight space, writes y, hy, cy of `t` (and, in training mode, the reserve space).
  void forward(cudnnForwardMode_t mode, const DeviceTensors& t, DeviceBuffer<unsigned char>& work,
               DeviceBuffer<unsigned char>& reserve);

 private:
  /// Destroys the handle and descriptors made so far (each at most once).
  void release() noexcept;

  ProblemSize size_;
  cudnnHandle_t handle_ = nullptr;
  cudnnDropoutDescriptor_t dropout_desc_ = nullptr;
  cudnnRNNDescriptor_t rnn_desc_ = nullptr;
  cudnnRNNDataDescriptor_t x_desc_ = nullptr;
  cudnnRNNDataDescriptor_t y_desc_ = nullptr;
  cudnnTensorDescriptor_t h_desc_ = nullptr;
  cudnnTensorDescriptor_t c_desc_ = nullptr;
  DeviceBuffer<unsigned char> dropout_states_;
  DeviceBuffer<unsigned char> weight_space_;
  DeviceBuffer<int> seq_lengths_;
};

}  // namespace lstm::baseline_cudnn
