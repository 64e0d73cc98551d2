/*! \file
 *  \brief The two stages training stage 40 runs (their libraries are linked into its own:
 *         CMakeLists.txt): their factories, and short names for their namespaces.
 */
#pragma once

#include <memory>

#include "harness/stage.h"

namespace lstm::stage_training_15_tensor_core_gemms {
std::unique_ptr<Stage> make();
std::unique_ptr<Stage> make_bf16();
}  // namespace lstm::stage_training_15_tensor_core_gemms
namespace lstm::stage_training_38_weight_gradients_beside_the_recurrence {
std::unique_ptr<Stage> make();
std::unique_ptr<Stage> make_bf16();
}  // namespace lstm::stage_training_38_weight_gradients_beside_the_recurrence

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace gemms = stage_training_15_tensor_core_gemms;  ///< one tensor-core GEMM per step
namespace persistent = stage_training_38_weight_gradients_beside_the_recurrence;  ///< W_hh on chip
}  // namespace lstm::LSTM_STAGE_NAMESPACE
