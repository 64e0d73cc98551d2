#include "harness/cuda_utils.h"

#include <sstream>

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

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (why) *why = std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  if (count == 0) {
    if (why) *why = "the CUDA runtime found no device";
    return false;
  }
  return true;
}

}  // namespace lstm
