/*! \file device_environment.h
 *  \brief Reads the Environment (core/environment.h) of a CUDA device.
 */
#pragma once

#include "core/environment.h"

namespace lstm {

/// Reads the environment of CUDA device `device` (call once per run; it runs nvidia-smi twice).
Environment collect_environment(int device);

}  // namespace lstm
