/*! \file
 *  \brief The stage with chosen plan parameters, and the device limits its planner uses, for the
 *         tests that reach every code path.
 */
#pragma once

#include <memory>

#include "harness/stage.h"
#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// What the planner may use of `device`: its SM count, and the shared memory a block may ask for
/// dynamically (the opt-in limit less the kernels' static shared memory).
DeviceLimits device_limits(const cudaDeviceProp& device);

/// The stage with the plan choices of `request` pinned (0 fields are chosen by the planner).
std::unique_ptr<Stage> make_with_plan(const PlanRequest& request);

/// The stage as its executable makes it (the planner's choices; its flags can pin them).
std::unique_ptr<Stage> make();

}  // namespace lstm::LSTM_STAGE_NAMESPACE
