/*! \file stage_registry.h
 *  \brief Every stage of the build, in order (generated from the add_lstm_stage() lines).
 */
#pragma once

#include <vector>

#include "harness/stage.h"

namespace lstm {

/// All stages added with add_lstm_stage(), in the order of CMakeLists.txt.
const std::vector<StageInfo>& all_stages();

}  // namespace lstm
