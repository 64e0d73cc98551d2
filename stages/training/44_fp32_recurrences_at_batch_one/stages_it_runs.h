/*! \file
 *  \brief The three stages training stage 44 runs (their libraries are linked into its own:
 *         CMakeLists.txt): their factories, and short names for their namespaces.
 */
#pragma once

#include <memory>

#include "harness/stage.h"

namespace lstm::stage_training_15_tensor_core_gemms {
std::unique_ptr<Stage> make();
std::unique_ptr<Stage> make_bf16();
}  // namespace lstm::stage_training_15_tensor_core_gemms
namespace lstm::stage_training_20_persistent_with_16_bit_gemms {
std::unique_ptr<Stage> make();
std::unique_ptr<Stage> make_bf16();
}  // namespace lstm::stage_training_20_persistent_with_16_bit_gemms
namespace lstm::stage_training_43_gradients_trailing_the_recurrence {
std::unique_ptr<Stage> make();
std::unique_ptr<Stage> make_bf16();
}  // namespace lstm::stage_training_43_gradients_trailing_the_recurrence

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace gemms = stage_training_15_tensor_core_gemms;  ///< one tensor-core GEMM per step
namespace fp32_recurrences = stage_training_20_persistent_with_16_bit_gemms;  ///< FMA recurrences
namespace persistent = stage_training_43_gradients_trailing_the_recurrence;   ///< tensor-core ones
}  // namespace lstm::LSTM_STAGE_NAMESPACE
