/*! \file stages/07_persistent/persistent_stage.h
 *  \brief Stage 07 with chosen plan parameters, and the device limits its planner uses, for the
 *         tests that reach every code path.
 */
#pragma once

#include <memory>

#include "plan.h"
#include "harness/stage.h"

namespace lstm::stage_07_persistent {

/// What the planner may use of `device`: its SM count, and the shared memory a block may ask for
/// dynamically (the opt-in limit less the kernels' static shared memory).
DeviceLimits device_limits(const cudaDeviceProp& device);

/// Stage 07 with the plan choices of `request` pinned (0 fields are chosen by the planner).
std::unique_ptr<Stage> make_with_plan(const PlanRequest& request);

}  // namespace lstm::stage_07_persistent
