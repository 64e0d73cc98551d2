/*! \file baselines/cudnn/cudnn_lstm.h
 *  \brief The cuDNN baseline: the same LSTM forward pass through cuDNN 9's RNN API (the C API,
 *         cudnnRNNForward), one Stage per cuDNN algorithm, and the training pass (forward with a
 *         reserve space, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8), one
 *         TrainingStage per algorithm. See cudnn_lstm.cpp and cudnn_training.cpp for the lessons.
 *
 * This header does not include cudnn.h: the tests, the benchmark and main.cpp see only the
 * Stage interface.
 */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/stage.h"

namespace lstm::baseline_cudnn {

/// cuDNN's three recurrence algorithms (cudnnRNNAlgo_t), as this baseline measures them.
enum class Algo {
  kStandard,        ///< CUDNN_RNN_ALGO_STANDARD: GEMMs and fused element-wise kernels
  kPersistStatic,   ///< CUDNN_RNN_ALGO_PERSIST_STATIC: precompiled persistent kernel
  kPersistDynamic,  ///< CUDNN_RNN_ALGO_PERSIST_DYNAMIC: persistent kernel compiled at run time
};

/// Every algorithm, in the order `--algo all` runs them.
std::vector<Algo> all_algos();

/// "standard", "persist_static" or "persist_dynamic" (the values of --algo).
std::string algo_name(Algo algo);

/// The algorithm named `name` (as algo_name writes it).
/// \throws std::invalid_argument for any other name.
Algo algo_from_name(const std::string& name);

/// A fresh cuDNN stage running `algo`. Its prepare() throws UnsupportedError (with cuDNN's
/// message) when cuDNN refuses the configuration for that algorithm.
std::unique_ptr<Stage> make(Algo algo);

/// Name ("cudnn_" + algo_name, e.g. "cudnn_standard") and factory of the stage for `algo`.
StageInfo stage_info(Algo algo);

/// A fresh cuDNN training stage (kind() == StageKind::kTraining) running `algo`: forward() is
/// cuDNN's training-mode forward pass, backward() its data and weight gradients, written into
/// the harness's PyTorch-layout gradient buffers. Its prepare() throws UnsupportedError (with
/// cuDNN's message) when cuDNN refuses the configuration for that algorithm.
std::unique_ptr<TrainingStage> make_training(Algo algo);

/// Name ("cudnn_" + algo_name + "_training", e.g. "cudnn_standard_training"), series "" and
/// factory of the training stage for `algo`.
StageInfo training_stage_info(Algo algo);

}  // namespace lstm::baseline_cudnn
