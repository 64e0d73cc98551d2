#include "harness/device_environment.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef LSTM_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "harness/cuda_utils.h"

namespace lstm {
namespace {

std::string version_string(int encoded) {  // CUDA encodes 13.0 as 13000
  return std::to_string(encoded / 1000) + "." + std::to_string((encoded % 1000) / 10);
}

std::string trim(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.pop_back();
  return text;
}

/// One line of `nvidia-smi --query-gpu=...` for the GPU at `pci_bus_id`, or "" if unavailable.
std::string query_nvidia_smi(const std::string& pci_bus_id, const std::string& fields) {
  const std::string command = "nvidia-smi --query-gpu=" + fields + " --format=csv,noheader -i " +
                              pci_bus_id + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {};
  std::array<char, 512> buffer{};
  std::string line;
  if (std::fgets(buffer.data(), buffer.size(), pipe)) line = buffer.data();
  const int status = pclose(pipe);
  return status == 0 ? trim(line) : std::string();
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

int attribute(cudaDeviceAttr which, int device) {
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, which, device));
  return value;
}

}  // namespace

Environment collect_environment(int device) {
  Environment env;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  env.gpu_name = prop.name;
  env.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  env.sm_count = prop.multiProcessorCount;
  env.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  env.memory_bytes = prop.totalGlobalMem;
  env.sm_clock_max_mhz = attribute(cudaDevAttrClockRate, device) / 1000;  // reported in kHz
  env.memory_clock_max_mhz = attribute(cudaDevAttrMemoryClockRate, device) / 1000;

  int runtime = 0, driver_api = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaDriverGetVersion(&driver_api));
  env.cuda_runtime = version_string(runtime);
  env.cuda_driver_api = version_string(driver_api);

  int major = 0, minor = 0, patch = 0;
  const bool cublas_known = cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
                            cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
                            cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS;
  env.cublas = cublas_known ? std::to_string(major) + "." + std::to_string(minor) + "." +
                                  std::to_string(patch)
                            : "unavailable";
#ifdef LSTM_HAVE_CUDNN
  const std::size_t cudnn = cudnnGetVersion();  // 9.14.0 is 91400
  env.cudnn = std::to_string(cudnn / 10000) + "." + std::to_string((cudnn % 10000) / 100) + "." +
              std::to_string(cudnn % 100);
#else
  env.cudnn = "not linked";
#endif

  char pci_bus_id[32] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(pci_bus_id, sizeof pci_bus_id, device));
  const std::string driver = query_nvidia_smi(pci_bus_id, "driver_version");
  env.driver = driver.empty() ? "CUDA " + env.cuda_driver_api + " driver" : driver;
  const std::string clocks =
      query_nvidia_smi(pci_bus_id, "clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem");
  env.clocks_now = clocks.empty() ? "unavailable" : "sm, max sm, mem, max mem: " + clocks;
  env.git_commit = git_commit();
  env.date_utc = utc_now();
  return env;
}

}  // namespace lstm
