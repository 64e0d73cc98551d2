/*! \file device_problem.h
 *  \brief One problem on the device: uploaded inputs and parameters, output buffers, and the
 *         checked run every stage goes through.
 */
#pragma once

#include <string>

#include "harness/cuda_utils.h"
#include "lstm_reference.h"
#include "core/lstm_data.h"
#include "harness/stage.h"
#include "core/check.h"

namespace lstm {

/// Owns the device copies of a problem's inputs, parameters and outputs.
class DeviceProblem {
 public:
  /// Uploads `params` and allocates y, hy and cy.
  explicit DeviceProblem(const LstmParams& params);

  /// Pointers for the stage.
  const DeviceTensors& tensors() const { return tensors_; }

  /// Fills y, hy and cy with NaN (all bits set), so an element the stage never writes fails.
  void poison_outputs(cudaStream_t stream);

  /// Copies y, hy and cy to the host (synchronous).
  LstmOutputs download_outputs() const;

 private:
  DeviceBuffer<float> x_, h0_, c0_, y_, hy_, cy_;
  std::vector<DeviceBuffer<float>> weights_;
  DeviceTensors tensors_;
};

/// Runs one forward pass for checking: poisons the outputs, enqueues stage.forward on `stream`,
/// waits for the stream (no events, no timing code), checks for errors, downloads the outputs.
LstmOutputs run_forward_for_check(Stage& stage, DeviceProblem& problem, cudaStream_t stream);

/// The reference costs roughly flop_count() double-precision FLOPs; above this budget only a
/// prefix of the sequence is checked (a few seconds on a 16-core CPU).
constexpr double kReferenceFlopBudget = 2.5e11;

/// Time steps the reference computes for `size`: all T, or the longest prefix within the budget.
int reference_steps(const ProblemSize& size);

/// Compares `outputs` with reference outputs computed for the same parameters.
CheckReport compare_with_reference(const ProblemSize& size, const LstmOutputs& outputs,
                                   const ReferenceOutputs& reference,
                                   const Tolerance& tolerance = {});

/// Runs the CPU reference for `steps` steps (see reference_steps) and compares `outputs` with it.
CheckReport check_against_reference(const LstmParams& params, const LstmOutputs& outputs, int steps,
                                    const Tolerance& tolerance = {});

/// Bytes of device memory free now and in total (cudaMemGetInfo).
void device_memory(std::size_t* free_bytes, std::size_t* total_bytes);

}  // namespace lstm
