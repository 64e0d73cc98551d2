/*! \file cuda_utils.h
 *  \brief CUDA and cuBLAS error checks that name the call, file and line; RAII device buffers.
 */
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/problem_size.h"  // ceil_div

namespace lstm {

/// A failed CUDA runtime or cuBLAS call; what() names the call, the file, the line and the error.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws CudaError for a failed CUDA runtime call (used by CUDA_CHECK).
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);
/// Throws CudaError for a failed cuBLAS call (used by CUBLAS_CHECK).
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

/// Whether a usable CUDA GPU is present: a driver, a device, and one this build has code for; if
/// not, `why` (if given) says plainly what is missing (and, for a GPU older than the build's
/// architectures, how to rebuild).
bool cuda_device_available(std::string* why = nullptr);

/// Owns `count` elements of device memory (cudaMalloc / cudaFree); move-only.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) { allocate(count); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);  // errors cannot be reported from a destructor
  }

  /// Frees what is held and allocates `count` elements (uninitialised).
  void allocate(std::size_t count);
  /// allocate(count), unless exactly `count` elements are held already: then the same memory
  /// (and its contents) is kept, so that a graph recorded with its address stays valid.
  void allocate_once(std::size_t count) {
    if (count != count_) allocate(count);  // a failed allocate() leaves count_ 0
  }
  /// Allocates and copies `host` to the device (synchronous).
  void upload(const std::vector<T>& host);
  /// Copies the device contents to a new host vector (synchronous).
  std::vector<T> download() const;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace lstm

/// Checks a CUDA runtime call; on failure throws lstm::CudaError naming the call, file and line.
#define CUDA_CHECK(call)                                                \
  do {                                                                  \
    const cudaError_t lstm_error_ = (call);                             \
    if (lstm_error_ != cudaSuccess) {                                   \
      ::lstm::throw_cuda_error(lstm_error_, #call, __FILE__, __LINE__); \
    }                                                                   \
  } while (0)

/// Checks a cuBLAS call; on failure throws lstm::CudaError naming the call, file and line.
#define CUBLAS_CHECK(call)                                                 \
  do {                                                                     \
    const cublasStatus_t lstm_status_ = (call);                            \
    if (lstm_status_ != CUBLAS_STATUS_SUCCESS) {                           \
      ::lstm::throw_cublas_error(lstm_status_, #call, __FILE__, __LINE__); \
    }                                                                      \
  } while (0)

/// Checks that the kernel launch just made was accepted (bad grid, too many resources, ...).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

namespace lstm {

template <typename T>
void DeviceBuffer<T>::allocate(std::size_t count) {
  if (data_) {
    CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    count_ = 0;
  }
  if (count > 0) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  count_ = count;
}

template <typename T>
void DeviceBuffer<T>::upload(const std::vector<T>& host) {
  allocate(host.size());
  if (!host.empty()) {
    CUDA_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
}

template <typename T>
std::vector<T> DeviceBuffer<T>::download() const {
  std::vector<T> host(count_);
  if (count_ > 0) CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace lstm
