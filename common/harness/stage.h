/*! \file stage.h
 *  \brief The interface every stage and baseline implements; the harness (stage_main.h) does the
 *         rest: data, the checked run, timing and the report.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kind_and_precision.h"
#include "core/problem_size.h"

namespace CLI {
class App;
}

namespace lstm {

/// Non-owning device pointers to one problem's tensors, in PyTorch's layout (core/lstm_data.h).
/// The training fields are null for a forward problem. A field added here must be added to
/// same_tensors() (device_tensors.cpp) too.
struct DeviceTensors {
  ProblemSize size;
  const float* x = nullptr;        ///< (T, B, I)
  const float* h0 = nullptr;       ///< (L, B, H)
  const float* c0 = nullptr;       ///< (L, B, H)
  std::vector<const float*> w_ih;  ///< per layer: (4H, I_l), gate order i, f, g, o
  std::vector<const float*> w_hh;  ///< per layer: (4H, H)
  std::vector<const float*> b_ih;  ///< per layer: (4H)
  std::vector<const float*> b_hh;  ///< per layer: (4H)
  float* y = nullptr;              ///< (T, B, H), written by the forward
  float* hy = nullptr;             ///< (L, B, H), written by the forward
  float* cy = nullptr;             ///< (L, B, H), written by the forward

  // A training problem: the upstream gradients (read by the backward) and the gradients it
  // writes (written, never accumulated into).
  const float* dy = nullptr;      ///< (T, B, H)
  const float* dhy = nullptr;     ///< (L, B, H)
  const float* dcy = nullptr;     ///< (L, B, H)
  float* dx = nullptr;            ///< (T, B, I)
  float* dh0 = nullptr;           ///< (L, B, H)
  float* dc0 = nullptr;           ///< (L, B, H)
  std::vector<float*> grad_w_ih;  ///< per layer: (4H, I_l)
  std::vector<float*> grad_w_hh;  ///< per layer: (4H, H)
  std::vector<float*> grad_b_ih;  ///< per layer: (4H)
  std::vector<float*> grad_b_hh;  ///< per layer: (4H)
};

/// Whether `a` and `b` are the same problem: the same size and every pointer of every field the
/// same. A stage that records its pass as a CUDA graph replays the graph only for the tensors it
/// was recorded with (the graph holds their addresses) and records it again for any others.
bool same_tensors(const DeviceTensors& a, const DeviceTensors& b);

/// Thrown by Stage::prepare() when the implementation finds it cannot run the size after all
/// (e.g. a library refuses the configuration); the harness reports it like unsupported_reason().
class UnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One implementation of the LSTM forward pass (kind() == StageKind::kForward); a training
/// implementation derives from TrainingStage.
class Stage {
 public:
  virtual ~Stage() = default;

  /// What the implementation computes: the forward pass, or (TrainingStage) a training pass.
  virtual StageKind kind() const { return StageKind::kForward; }

  /// The precision it computes in (FP32 unless it says otherwise).
  virtual Precision precision() const { return Precision::kFp32; }

  /// The bound the output named `tensor` ("y", "hy", "dx", "grad_weight_hh_l0", ...) is checked
  /// against. FP32 implementations get the FP32 bound; others must override this.
  virtual Tolerance tolerance(const std::string& tensor) const {
    (void)tensor;
    return default_tolerance(precision());
  }

  /// Adds the implementation's own command-line flags (tuning knobs, tracing) to `app`; called
  /// before parsing, so the flags' values are in place before unsupported_reason().
  virtual void add_flags(CLI::App& app) { (void)app; }

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
  /// A stage may keep its own copy of the weights made here (re-laid out, rounded to 16 bits),
  /// as cuDNN keeps its weight space, and make it again when a pass brings other weight
  /// tensors; a caller that changes the weights' values in place (an optimizer step) calls
  /// prepare() again before the next pass.
  /// \throws UnsupportedError if the size turns out not to be supported.
  virtual void prepare(const DeviceTensors& tensors) = 0;

  /// Enqueues one whole forward pass on `stream`: reads the inputs, writes y, hy and cy (a
  /// training stage also keeps what its backward needs). All work must be ordered before later
  /// work on `stream` (join any side streams back).
  virtual void forward(const DeviceTensors& tensors, cudaStream_t stream) = 0;
};

/// A training implementation: forward() keeps what the backward needs, backward() then writes
/// every gradient.
class TrainingStage : public Stage {
 public:
  StageKind kind() const final { return StageKind::kTraining; }

  /// Enqueues the backward pass on `stream`, after a forward() on the same tensors: reads dy,
  /// dhy, dcy and what the forward kept, writes dx, dh0, dc0 and every parameter's gradient.
  virtual void backward(const DeviceTensors& tensors, cudaStream_t stream) = 0;

  /// Called with a layer and a stream: that layer's weight and bias gradients are complete once
  /// the work enqueued on the stream so far is.
  using GradientsReadyHook = std::function<void(int layer, cudaStream_t stream)>;

  /// Registers `hook` (an empty one clears it), for a caller that starts work on a layer's
  /// gradients while backward() is still enqueueing the layers below (data-parallel training
  /// all-reduces them: stages/multigpu/00_data_parallel). Optional for a stage: one that never
  /// calls gradients_ready() stays correct, its caller waits for backward() to return.
  void set_gradients_ready_hook(GradientsReadyHook hook) { gradients_ready_ = std::move(hook); }

 protected:
  /// For backward(): call it right after enqueueing the last work that writes layer `layer`'s
  /// weight and bias gradients, on `stream`, the stream that work went to.
  void gradients_ready(int layer, cudaStream_t stream) {
    if (gradients_ready_) gradients_ready_(layer, stream);
  }

 private:
  GradientsReadyHook gradients_ready_;
};

/// Makes a fresh instance of a stage.
using StageFactory = std::function<std::unique_ptr<Stage>()>;

/// A stage's name ("forward/00_naive", "cudnn_standard"), its series ("forward", or "" for a
/// baseline) and factory.
struct StageInfo {
  std::string name;
  std::string series;
  StageFactory make;
};

}  // namespace lstm
