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

/// Every precision the baseline runs in, FP32 first: FP32 (FMA math, no TF32), then FP16 and
/// BF16 (tensor-op math, FP32 accumulation).
std::vector<Precision> all_precisions();

/// The name of the stage for `algo` in `precision` and of `kind`: "cudnn_" + algo_name, then
/// "_fp16" or "_bf16" for a reduced precision (nothing for FP32, the names the records have
/// always had), then "_training" for a training stage. E.g. "cudnn_standard",
/// "cudnn_persist_static_fp16", "cudnn_standard_bf16_training".
std::string stage_name(Algo algo, Precision precision, StageKind kind);

/// A fresh cuDNN stage running `algo` in `precision`. Its prepare() throws UnsupportedError (with
/// cuDNN's message) when cuDNN refuses the configuration for that algorithm and precision.
std::unique_ptr<Stage> make(Algo algo, Precision precision = Precision::kFp32);

/// Name (stage_name, e.g. "cudnn_standard", "cudnn_standard_fp16") and factory of the stage for
/// `algo` in `precision`.
StageInfo stage_info(Algo algo, Precision precision = Precision::kFp32);

/// A fresh cuDNN training stage (kind() == StageKind::kTraining) running `algo` in `precision`:
/// forward() is cuDNN's training-mode forward pass, backward() its data and weight gradients,
/// written into the harness's PyTorch-layout gradient buffers. Its prepare() throws
/// UnsupportedError (with cuDNN's message) when cuDNN refuses the configuration for that
/// algorithm and precision.
std::unique_ptr<TrainingStage> make_training(Algo algo, Precision precision = Precision::kFp32);

/// Name (stage_name, e.g. "cudnn_standard_training", "cudnn_standard_bf16_training"), series ""
/// and factory of the training stage for `algo` in `precision`.
StageInfo training_stage_info(Algo algo, Precision precision = Precision::kFp32);

}  // namespace lstm::baseline_cudnn
