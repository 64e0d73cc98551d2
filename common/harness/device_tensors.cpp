#include "harness/device_tensors.h"

#include <algorithm>
#include <cmath>

namespace lstm {

DeviceProblem::DeviceProblem(const LstmParams& params) {
  const TensorCounts counts = count_tensors(params.size);
  tensors_.size = params.size;
  x_.upload(params.x);
  h0_.upload(params.h0);
  c0_.upload(params.c0);
  y_.allocate(counts.y);
  hy_.allocate(counts.state);
  cy_.allocate(counts.state);
  tensors_.x = x_.data();
  tensors_.h0 = h0_.data();
  tensors_.c0 = c0_.data();
  tensors_.y = y_.data();
  tensors_.hy = hy_.data();
  tensors_.cy = cy_.data();
  for (const LayerWeights& layer : params.layers) {
    for (const std::vector<float>* host : {&layer.w_ih, &layer.w_hh, &layer.b_ih, &layer.b_hh}) {
      weights_.emplace_back();
      weights_.back().upload(*host);
    }
    const std::size_t first = weights_.size() - 4;
    tensors_.w_ih.push_back(weights_[first + 0].data());
    tensors_.w_hh.push_back(weights_[first + 1].data());
    tensors_.b_ih.push_back(weights_[first + 2].data());
    tensors_.b_hh.push_back(weights_[first + 3].data());
  }
}

void DeviceProblem::poison_outputs(cudaStream_t stream) {
  // 0xFF in every byte is a NaN in float32: the check rejects any element left unwritten.
  CUDA_CHECK(cudaMemsetAsync(y_.data(), 0xFF, y_.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(hy_.data(), 0xFF, hy_.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(cy_.data(), 0xFF, cy_.bytes(), stream));
}

LstmOutputs DeviceProblem::download_outputs() const {
  return {y_.download(), hy_.download(), cy_.download()};
}

LstmOutputs run_forward_for_check(Stage& stage, DeviceProblem& problem, cudaStream_t stream) {
  problem.poison_outputs(stream);
  stage.forward(problem.tensors(), stream);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaDeviceSynchronize());  // also surfaces errors from any stream the stage used
  return problem.download_outputs();
}

int reference_steps(const ProblemSize& size) {
  const double flops = size.flop_count();
  if (flops <= kReferenceFlopBudget) return size.seq_len;
  const int steps = static_cast<int>(std::floor(size.seq_len * kReferenceFlopBudget / flops));
  return std::max(1, steps);
}

CheckReport compare_with_reference(const ProblemSize& s, const LstmOutputs& outputs,
                                   const ReferenceOutputs& reference, const Tolerance& tolerance) {
  return check_outputs(s.batch, s.hidden, s.layers, s.seq_len, reference.steps, outputs.y,
                       outputs.hy, outputs.cy, reference.y, reference.hy, reference.cy, tolerance);
}

CheckReport check_against_reference(const LstmParams& params, const LstmOutputs& outputs, int steps,
                                    const Tolerance& tolerance) {
  return compare_with_reference(params.size, outputs, reference_forward(params, steps), tolerance);
}

void device_memory(std::size_t* free_bytes, std::size_t* total_bytes) {
  CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

}  // namespace lstm
