#include "harness/cuda_utils.h"

#include <dlfcn.h>

#include <sstream>
#include <string>

namespace lstm {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  std::ostringstream text;
  text << file << ":" << line << ": CUDA error in " << call << ": " << cudaGetErrorName(error)
       << " (" << cudaGetErrorString(error) << ")";
  throw CudaError(text.str());
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  std::ostringstream text;
  text << file << ":" << line << ": cuBLAS error in " << call << ": " << cublasGetStatusName(status)
       << " (" << cublasGetStatusString(status) << ")";
  throw CudaError(text.str());
}

namespace {

/// The CUDA architectures this build has machine code or PTX for (CMAKE_CUDA_ARCHITECTURES:
/// "90", "80;90", "90-real", or "native"/"all"), the lowest as a number like 90, or 0 if unknown.
int lowest_built_architecture() {
  const std::string list = LSTM_CUDA_ARCHITECTURES;
  int lowest = 0;
  std::size_t at = 0;
  while (at < list.size()) {
    if (list[at] >= '0' && list[at] <= '9') {
      std::size_t end = at;
      while (end < list.size() && list[end] >= '0' && list[end] <= '9')
        ++end;
      const int arch = std::stoi(list.substr(at, end - at));
      if (lowest == 0 || arch < lowest) lowest = arch;
      at = end;
    } else {
      ++at;
    }
  }
  return lowest;
}

}  // namespace

bool cuda_device_available(std::string* why) {
  auto say = [why](const std::string& text) {
    if (why) *why = text;
    return false;
  };
  // The runtime reports a missing driver as "CUDA driver version is insufficient": look first.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) {
    return say(
        "no NVIDIA driver is installed here (libcuda.so.1 not found); the stages need an "
        "NVIDIA GPU and its driver");
  }
  dlclose(driver);
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls start clean
    return say(std::string("the CUDA runtime found no usable GPU: ") + cudaGetErrorName(error) +
               " (" + cudaGetErrorString(error) + ")");
  }
  if (count == 0) return say("the CUDA runtime found no GPU");
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    return say("cannot read the GPU's properties");
  }
  const int device_arch = prop.major * 10 + prop.minor;
  const int built = lowest_built_architecture();
  if (built > device_arch) {
    return say(std::string("this build runs on GPUs of compute capability ") +
               std::to_string(built / 10) + "." + std::to_string(built % 10) + " and newer (sm_" +
               std::to_string(built) + "), but the GPU here, " + prop.name + ", is " +
               std::to_string(prop.major) + "." + std::to_string(prop.minor) +
               ": rebuild for it with ./scripts/run.sh --cuda-arch " + std::to_string(device_arch) +
               " (or configure CMake with " +
               "-DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(device_arch) + ")");
  }
  return true;
}

}  // namespace lstm
