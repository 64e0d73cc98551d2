/*! \file split.h
 *  \brief Multi-GPU stage 00: how the batch is split over the GPUs, and the sizes refused
 *         (host only, tested on the CPU). README.md says why.
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/problem_size.h"

namespace lstm::LSTM_STAGE_NAMESPACE {

/// One GPU's share of the batch: the rows [begin, begin + rows) of every (.., B, ..) tensor.
struct BatchShare {
  int begin = 0;
  int rows = 0;
};

/// The batch of `batch` rows split over `gpus` GPUs as evenly as it goes: the first batch % gpus
/// GPUs take one row more. Requires 1 <= gpus <= batch (split_refusal() says why not).
std::vector<BatchShare> split_batch(int batch, int gpus);

/// Why `gpus` GPUs cannot split a batch of `batch` rows with `visible` GPUs on the machine, or
/// "" when they can.
std::string split_refusal(int batch, int gpus, int visible);

/// The bytes one training pass all-reduces: every layer's four parameter gradients in FP32,
/// 4 · (4H · (I_l + H) + 8H) per layer.
std::size_t allreduce_bytes(const ProblemSize& size);

}  // namespace lstm::LSTM_STAGE_NAMESPACE
