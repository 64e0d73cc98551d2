/*! \file stage.h
 *  \brief The interface every stage implements; the harness (stage_main.h) does the rest.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/problem_size.h"

namespace lstm {

/// Non-owning device pointers to one problem's tensors, in PyTorch's layout (see params.h).
struct DeviceTensors {
  ProblemSize size;
  const float* x = nullptr;        ///< (T, B, I)
  const float* h0 = nullptr;       ///< (L, B, H)
  const float* c0 = nullptr;       ///< (L, B, H)
  std::vector<const float*> w_ih;  ///< per layer: (4H, I_l), gate order i, f, g, o
  std::vector<const float*> w_hh;  ///< per layer: (4H, H)
  std::vector<const float*> b_ih;  ///< per layer: (4H)
  std::vector<const float*> b_hh;  ///< per layer: (4H)
  float* y = nullptr;              ///< (T, B, H), written by the stage
  float* hy = nullptr;             ///< (L, B, H), written by the stage
  float* cy = nullptr;             ///< (L, B, H), written by the stage
};

/// Thrown by Stage::prepare() when the implementation finds it cannot run the size after all
/// (e.g. a library refuses the configuration); the harness reports it like unsupported_reason().
class UnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One implementation of the LSTM forward pass.
class Stage {
 public:
  virtual ~Stage() = default;

  /// Why this stage cannot run `size` on the device `device`, or "" when it can. Called before
  /// anything is allocated; a stage with limits states them here, with what would fit.
  virtual std::string unsupported_reason(const ProblemSize& size,
                                         const cudaDeviceProp& device) const {
    (void)size;
    (void)device;
    return {};
  }

  /// Device memory the stage allocates in prepare(), for the harness's free-memory check.
  virtual std::size_t workspace_bytes(const ProblemSize& size) const {
    (void)size;
    return 0;
  }

  /// One-time work outside the timed region: handles, streams, workspaces, weight re-layouts.
  /// \throws UnsupportedError if the size turns out not to be supported.
  virtual void prepare(const DeviceTensors& tensors) = 0;

  /// Enqueues one whole forward pass on `stream`: reads the inputs, writes y, hy and cy.
  /// All work must be ordered before later work on `stream` (join any side streams back).
  virtual void forward(const DeviceTensors& tensors, cudaStream_t stream) = 0;
};

/// Makes a fresh instance of a stage.
using StageFactory = std::function<std::unique_ptr<Stage>()>;

/// A stage's name ("00_naive", "cudnn_standard") and factory.
struct StageInfo {
  std::string name;
  StageFactory make;
};

}  // namespace lstm
