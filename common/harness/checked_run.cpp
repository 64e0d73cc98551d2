#include "harness/checked_run.h"

#include <iomanip>
#include <sstream>

#include "harness/event_timing.h"
#include "lstm_reference.h"
#include "lstm_reference_backward.h"

namespace lstm {
namespace {

/// Fills the values of `layouts` (in output_layouts' order) from the reference's vectors.
std::vector<ReferenceTensor> with_values(std::vector<OutputTensor> layouts,
                                         const std::vector<const std::vector<double>*>& values) {
  std::vector<ReferenceTensor> tensors;
  for (std::size_t i = 0; i < values.size(); ++i) {
    tensors.push_back({layouts[i].name, layouts[i].shape, layouts[i].axes, *values[i]});
  }
  return tensors;
}

std::string gib(std::size_t bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return text.str();
}

}  // namespace

ReferenceForCheck compute_reference(const LstmParams& params, StageKind kind,
                                    const UpstreamGradients* upstream) {
  const ProblemSize& size = params.size;
  ReferenceForCheck check;
  if (kind == StageKind::kTraining) {
    if (upstream == nullptr)
      throw std::invalid_argument("compute_reference: no upstream gradients");
    if (training_reference_fits(size)) {
      check.tensors = training_tensors(size, reference_training(params, *upstream));
      return check;
    }
    std::ostringstream note;
    note << "the gradients were NOT checked: the training reference of " << size.describe() << " ("
         << size.training_flop_count() << " FLOP) is over the CPU reference's budget ("
         << kReferenceFlopBudget << " FLOP)";
    check.not_checked.push_back(note.str());
  }
  const int steps = reference_steps(size);
  const ReferenceOutputs ref = reference_forward(params, steps);
  std::vector<OutputTensor> layouts = output_layouts(size, StageKind::kForward);
  if (steps < size.seq_len) {
    layouts[0].shape[0] = static_cast<std::size_t>(steps);  // y: the prefix the reference covers
    check.tensors = with_values(layouts, {&ref.y});
    check.not_checked.push_back("y compared for the first " + std::to_string(steps) + " of " +
                                std::to_string(size.seq_len) +
                                " steps (the CPU reference was limited to a prefix); hy and cy "
                                "NOT checked");
  } else {
    check.tensors = with_values(layouts, {&ref.y, &ref.hy, &ref.cy});
  }
  return check;
}

ReferenceForCheck load_reference(const std::string& dir, const ProblemSize& size, StageKind kind) {
  return {load_reference_tensors(dir, output_layouts(size, kind)), {}};
}

std::string prepare_stage(Stage& stage, const DeviceProblem& problem) {
  const ProblemSize& size = problem.tensors().size;
  if (stage.kind() == StageKind::kTraining && !problem.is_training()) {
    return "a training implementation needs a training problem (upstream gradients)";
  }
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string refused = stage.unsupported_reason(size, prop);
  if (!refused.empty()) return refused;
  std::size_t free_bytes = 0, total_bytes = 0;
  device_memory(&free_bytes, &total_bytes);
  const std::size_t workspace = stage.workspace_bytes(size);
  if (workspace > free_bytes) {
    return "its workspace needs " + gib(workspace) + " of device memory; " + gib(free_bytes) +
           " of " + gib(total_bytes) + " are free";
  }
  try {
    stage.prepare(problem.tensors());  // one-time work, outside every timed region
  } catch (const UnsupportedError& error) {
    return error.what();
  }
  return {};
}

std::vector<OutputTensor> run_for_check(Stage& stage, DeviceProblem& problem, cudaStream_t stream) {
  problem.poison_outputs(stream);
  stage.forward(problem.tensors(), stream);
  if (stage.kind() == StageKind::kTraining) {
    static_cast<TrainingStage&>(stage).backward(problem.tensors(), stream);
  }
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaDeviceSynchronize());  // also surfaces errors from any stream the stage used
  return problem.download_outputs(stage.kind());
}

CheckReport check_run(const Stage& stage, const std::vector<OutputTensor>& outputs,
                      const ReferenceForCheck& reference) {
  return check_tensors(
      outputs, reference.tensors,
      [&stage](const std::string& name) { return stage.tolerance(name); }, reference.not_checked);
}

StageTimes time_stage(Stage& stage, DeviceProblem& problem, cudaStream_t stream, int warmup,
                      int iters) {
  const DeviceTensors& t = problem.tensors();
  auto forward = [&](cudaStream_t s) { stage.forward(t, s); };
  StageTimes times;
  if (stage.kind() != StageKind::kTraining) {
    times.total = time_on_stream(forward, stream, warmup, iters);
    return times;
  }
  auto& training = static_cast<TrainingStage&>(stage);
  auto backward = [&](cudaStream_t s) { training.backward(t, s); };
  times.total = time_on_stream(
      [&](cudaStream_t s) {
        forward(s);
        backward(s);
      },
      stream, warmup, iters);
  times.forward = time_on_stream(forward, stream, warmup, iters);
  // The last forward left what backward needs; a backward writes its gradients afresh each time.
  times.backward = time_on_stream(backward, stream, warmup, iters);
  return times;
}

}  // namespace lstm
