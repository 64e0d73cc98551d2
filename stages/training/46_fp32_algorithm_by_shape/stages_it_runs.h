/*! \file
 *  \brief The four stages training stage 46 runs (their libraries are linked into its own:
 *         CMakeLists.txt): their factories, and short names for their namespaces.
 */
#pragma once

#include <memory>

#include "harness/stage.h"

namespace lstm::stage_training_04_cuda_graph {
std::unique_ptr<Stage> make();
}  // namespace lstm::stage_training_04_cuda_graph
namespace lstm::stage_training_05_layer_wavefront {
std::unique_ptr<Stage> make();
}  // namespace lstm::stage_training_05_layer_wavefront
namespace lstm::stage_training_13_published_partial_sums {
std::unique_ptr<Stage> make();
}  // namespace lstm::stage_training_13_published_partial_sums
namespace lstm::stage_training_25_graphs_of_a_pass {
std::unique_ptr<Stage> make();
}  // namespace lstm::stage_training_25_graphs_of_a_pass

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace layer_by_layer = stage_training_04_cuda_graph;        ///< a GEMM a step, layer by layer
namespace layer_wavefront = stage_training_05_layer_wavefront;  ///< a GEMM a step, layers at once
namespace partial_sums = stage_training_13_published_partial_sums;  ///< persistent, dh's sums
namespace persistent = stage_training_25_graphs_of_a_pass;          ///< persistent, graphs
}  // namespace lstm::LSTM_STAGE_NAMESPACE
