// Multi-GPU stage 00: the batch split and its refusals (README.md).
#include "split.h"

#include <stdexcept>

namespace lstm::LSTM_STAGE_NAMESPACE {

std::vector<BatchShare> split_batch(int batch, int gpus) {
  if (gpus < 1 || gpus > batch) throw std::invalid_argument(split_refusal(batch, gpus, gpus));
  std::vector<BatchShare> shares(gpus);
  const int rows = batch / gpus, longer = batch % gpus;  // the first `longer` take rows + 1
  int begin = 0;
  for (int g = 0; g < gpus; ++g) {
    shares[g] = {begin, rows + (g < longer ? 1 : 0)};
    begin += shares[g].rows;
  }
  return shares;
}

std::string split_refusal(int batch, int gpus, int visible) {
  if (gpus < 1) return "--gpus " + std::to_string(gpus) + ": at least one GPU";
  if (gpus > visible) {
    return "--gpus " + std::to_string(gpus) + " asks for more GPUs than the " +
           std::to_string(visible) + " visible here (CUDA_VISIBLE_DEVICES sets which are)";
  }
  if (gpus > batch) {
    return "--gpus " + std::to_string(gpus) + " splits a batch of " + std::to_string(batch) +
           " rows: every GPU needs at least one row (at most --gpus " + std::to_string(batch) + ")";
  }
  return {};
}

std::size_t allreduce_bytes(const ProblemSize& size) {
  const std::size_t four_h = 4 * static_cast<std::size_t>(size.hidden);
  std::size_t floats = 0;
  for (int l = 0; l < size.layers; ++l) {
    floats += four_h * (size.layer_input_size(l) + size.hidden) + 2 * four_h;
  }
  return floats * sizeof(float);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
