/*! \file environment.h
 *  \brief The environment a result was measured in: GPU, clocks, driver, CUDA, cuBLAS, cuDNN,
 *         commit and date. Every result record carries it (harness/device_environment.h
 *         reads it off the device).
 */
#pragma once

#include <cstddef>
#include <string>

namespace lstm {

/// The commit the binary was built from (`git describe --always --dirty`), or "unknown".
const char* git_commit();

/// Facts about the GPU and software a measurement ran on. Unreadable fields say "unavailable".
struct Environment {
  std::string gpu_name;            ///< e.g. "NVIDIA H100 80GB HBM3"
  std::string compute_capability;  ///< e.g. "9.0"
  int sm_count = 0;                ///< streaming multiprocessors
  std::size_t l2_bytes = 0;        ///< L2 cache size
  std::size_t memory_bytes = 0;    ///< device memory
  int sm_clock_max_mhz = 0;        ///< peak SM clock the runtime reports
  int memory_clock_max_mhz = 0;    ///< peak memory clock the runtime reports
  std::string clocks_now;          ///< current/max SM and memory clocks from nvidia-smi, if any
  std::string driver;              ///< driver version (nvidia-smi), else the CUDA driver API one
  std::string cuda_runtime;        ///< e.g. "13.0"
  std::string cuda_driver_api;     ///< highest CUDA version the driver supports, e.g. "13.0"
  std::string cublas;              ///< e.g. "13.1.0"
  std::string cudnn;               ///< e.g. "9.14.0", or "not linked"
  std::string git_commit;          ///< see git_commit()
  std::string date_utc;            ///< ISO 8601, when collected
};

/// A short folder name for results of this GPU: "h100-sxm", "h100-pcie", "h100-nvl", "h200" (where
/// H100 or H200 is a word of the name: a GH200 is not an H200), else the name lower-cased, each
/// run of other characters than letters and digits as one '-', without a leading "nvidia-" or a
/// trailing '-' ("unknown-gpu" if nothing is left).
std::string gpu_folder_name(const std::string& gpu_name);

}  // namespace lstm
