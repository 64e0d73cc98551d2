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

#include "convert.h"
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
  void* place = nullptr;   ///< the block in the weight space (packed row-major, as checked), of
                           ///< the space's element type
};

/// One device-to-device copy of `count` elements, converting where the two types differ (the
/// weight space of an FP16 or BF16 network, filled from the harness's float32 tensors).
struct DeviceCopy {
  void* destination = nullptr;
  ElementType destination_type = ElementType::kFloat;
  const void* source = nullptr;
  ElementType source_type = ElementType::kFloat;
  std::size_t count = 0;  ///< elements
};

/// The copies that fill the weight-space `blocks` (elements of `space_type`) from the float32
/// parameters of `t` (w_ih, w_hh, b_ih, b_hh): PyTorch layout into cuDNN's, rounded to
/// `space_type` where it is not float32. Copies of one tensor that are contiguous on both sides
/// are merged.
/// \throws std::invalid_argument if `t` lacks a layer's parameter pointer.
std::vector<DeviceCopy> copies_into_space(const std::vector<ParameterBlock>& blocks,
                                          const DeviceTensors& t,
                                          ElementType space_type = ElementType::kFloat);

/// The copies that carry the gradient-space `blocks` (elements of `space_type`) out into the
/// float32 gradient buffers of `t` (grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh): cuDNN's layout
/// into PyTorch's, the inverse of copies_into_space. Copies of one tensor that are contiguous on
/// both sides are merged.
/// \throws std::invalid_argument if `t` lacks a layer's gradient pointer.
std::vector<DeviceCopy> copies_out_of_space(const std::vector<ParameterBlock>& blocks,
                                            const DeviceTensors& t,
                                            ElementType space_type = ElementType::kFloat);

/// Enqueues `copies` on `stream` (cudaMemcpyAsync, or the conversion kernel where the types
/// differ).
void enqueue_copies(const std::vector<DeviceCopy>& copies, cudaStream_t stream);

/// Bytes of every weight and bias of `size` (what cuDNN's weight space holds, before any padding
/// of its own), for the stages' workspace estimates.
std::size_t parameter_bytes(const ProblemSize& size);

/// Bytes of the estimated cuDNN workspace of a forward pass of `size` (one layer's input-GEMM
/// results, T*B*4H, plus two (T, B, H) layer outputs), for the stages' workspace estimates.
std::size_t estimated_forward_workspace_bytes(const ProblemSize& size);

/// Bytes of the device buffers a reduced-precision network converts the harness's float32
/// tensors into and out of (0 for FP32): x, y, h0, hy, c0, cy, and for `training` also dy, dx,
/// dhy, dcy, dh0, dc0, each in 2-byte elements.
std::size_t staging_bytes(const ProblemSize& size, Precision precision, bool training);

/// A margin for cuDNN's dropout states (a few MiB; unused at dropout 0, but allocated).
constexpr std::size_t kDropoutStatesMargin = std::size_t{16} << 20;

/// The device buffers cuDNN reads and writes for one problem: the harness's own float32 tensors
/// for an FP32 network, the network's staging buffers (FP16 or BF16) otherwise.
struct CudnnIo {
  const void* x = nullptr;
  void* y = nullptr;
  const void* h0 = nullptr;
  void* hy = nullptr;
  const void* c0 = nullptr;
  void* cy = nullptr;
  const void* dy = nullptr;   ///< training only
  const void* dhy = nullptr;  ///< training only
  const void* dcy = nullptr;  ///< training only
  void* dx = nullptr;         ///< training only
  void* dh0 = nullptr;        ///< training only
  void* dc0 = nullptr;        ///< training only
};

/// PyTorch's nn.LSTM as cuDNN sees it, for one problem size, algorithm and precision: the
/// handle, the dropout (0), RNN, data and state descriptors, the device sequence lengths, the
/// weight space, and for FP16 or BF16 the buffers the harness's float32 tensors are converted
/// into and out of. Host code; every cuDNN status is checked (CUDNN_CHECK).
class CudnnLstm {
 public:
  /// Creates the handle and descriptors for `size` and allocates the weight space, zeroed; for
  /// PERSIST_DYNAMIC compiles the persistent kernel (cudnnBuildRNNDynamic, seconds). FP32: FP32
  /// data, CUDNN_FMA_MATH (no TF32). FP16 or BF16: data of that type, CUDNN_TENSOR_OP_MATH with
  /// FP32 math precision (FP32 accumulation), and staging buffers for x, y, h0, hy, c0, cy.
  /// Returns with the device idle.
  /// \throws UnsupportedError with cuDNN's message when cuDNN refuses the configuration.
  CudnnLstm(Algo algo, const ProblemSize& size, Precision precision = Precision::kFp32);
  ~CudnnLstm();
  CudnnLstm(const CudnnLstm&) = delete;
  CudnnLstm& operator=(const CudnnLstm&) = delete;

  const ProblemSize& size() const { return size_; }
  Precision precision() const { return precision_; }
  ElementType element() const { return element_; }  ///< the type of cuDNN's data and weights
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

  /// Copies the PyTorch-layout parameters of `t` into the weight space (rounding them to FP16 or
  /// BF16 for such a network) and waits for the copy.
  void upload_parameters(const DeviceTensors& t);

  /// Allocates the staging buffers of a training pass (dy, dhy, dcy, dx, dh0, dc0; none for
  /// FP32).
  void allocate_training_staging();

  /// The buffers cuDNN is to read and write for the harness's tensors `t` (see CudnnIo).
  CudnnIo io(const DeviceTensors& t);

  /// Enqueues on the handle's stream the conversion of x, h0, c0 of `t` into the staging buffers
  /// (nothing for FP32).
  void stage_inputs(const DeviceTensors& t);
  /// Enqueues on the handle's stream the conversion of the staged y, hy, cy out into `t`.
  void unstage_outputs(const DeviceTensors& t);
  /// Enqueues on the handle's stream the conversion of dy, dhy, dcy of `t` into staging.
  void stage_upstream(const DeviceTensors& t);
  /// Enqueues on the handle's stream the conversion of the staged dx, dh0, dc0 out into `t`.
  void unstage_gradients(const DeviceTensors& t);

  /// cuDNN's workspace and reserve-space sizes for a forward pass in `mode`
  /// (cudnnGetRNNTempSpaceSizes).
  void temp_space_sizes(cudnnForwardMode_t mode, std::size_t* workspace_bytes,
                        std::size_t* reserve_bytes) const;

  /// Makes the handle enqueue its work on `stream` (cudnnSetStream), and the conversions too.
  void set_stream(cudaStream_t stream);
  cudaStream_t stream() const { return stream_; }

  /// Enqueues cudnnRNNForward in `mode` on the handle's stream: reads x, h0, c0 of `t` and the
  /// weight space, writes y, hy, cy of `t` (and, in training mode, the reserve space). For FP16
  /// or BF16 the inputs are converted in first and the outputs out after, on the same stream;
  /// the staged y stays for the backward calls.
  void forward(cudnnForwardMode_t mode, const DeviceTensors& t, DeviceBuffer<unsigned char>& work,
               DeviceBuffer<unsigned char>& reserve);

 private:
  /// Destroys the handle and descriptors made so far (each at most once).
  void release() noexcept;

  ProblemSize size_;
  Precision precision_ = Precision::kFp32;
  ElementType element_ = ElementType::kFloat;
  cudnnDataType_t data_type_ = CUDNN_DATA_FLOAT;
  cudaStream_t stream_ = nullptr;  ///< the handle's stream (the legacy default until set)
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
  // Staging (FP16 or BF16 only): x, y, h0, hy, c0, cy; then dy, dhy, dcy, dx, dh0, dc0.
  DeviceBuffer<unsigned char> x_, y_, h0_, hy_, c0_, cy_;
  DeviceBuffer<unsigned char> dy_, dhy_, dcy_, dx_, dh0_, dc0_;
};

}  // namespace lstm::baseline_cudnn
