/*! \file device_tensors.h
 *  \brief One problem on the device: uploaded inputs, parameters (and upstream gradients), the
 *         buffers an implementation writes, poisoning them and downloading them by name.
 */
#pragma once

#include <vector>

#include "core/lstm_data.h"
#include "core/named_tensor.h"
#include "harness/cuda_utils.h"
#include "harness/stage.h"

namespace lstm {

/// Owns the device copies of a problem's inputs, parameters and outputs.
class DeviceProblem {
 public:
  /// Uploads `params` and allocates y, hy and cy; with `upstream`, a training problem: uploads
  /// dy, dhy, dcy too and allocates every gradient.
  explicit DeviceProblem(const LstmParams& params, const UpstreamGradients* upstream = nullptr);

  /// Pointers for the implementation.
  const DeviceTensors& tensors() const { return tensors_; }

  /// Whether the problem holds upstream gradients and gradient buffers.
  bool is_training() const { return tensors_.dy != nullptr; }

  /// Fills every output buffer with NaN (all bits set), so an element left unwritten fails.
  void poison_outputs(cudaStream_t stream);

  /// Copies the outputs an implementation of `kind` writes to the host (synchronous), named and
  /// shaped as output_layouts(size, kind).
  std::vector<OutputTensor> download_outputs(StageKind kind) const;

  /// Device bytes of a problem of `size` (of a training problem, with `training`).
  static std::size_t bytes_needed(const ProblemSize& size, bool training);

 private:
  DeviceBuffer<float> x_, h0_, c0_, dy_, dhy_, dcy_;
  std::vector<DeviceBuffer<float>> weights_;
  std::vector<DeviceBuffer<float>> outputs_;  ///< one per output_layouts(size, kind), in order
  DeviceTensors tensors_;
};

/// Bytes of device memory free now and in total (cudaMemGetInfo).
void device_memory(std::size_t* free_bytes, std::size_t* total_bytes);

}  // namespace lstm
