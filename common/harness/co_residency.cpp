#include "harness/co_residency.h"

#include <initializer_list>
#include <sstream>
#include <string>

#include "harness/cuda_utils.h"

namespace lstm {

namespace {
/// " (CUDA: <why>)" for the first of `errors` that is not cudaSuccess, else "": what made a query
/// answer 0 (e.g. more shared memory than the device allows a block).
std::string cuda_reason(std::initializer_list<cudaError_t> errors) {
  for (cudaError_t error : errors)
    if (error != cudaSuccess) return std::string(" (CUDA: ") + cudaGetErrorString(error) + ")";
  return {};
}

int resident_clusters(const void* kernel, int threads, std::size_t shared, int cluster,
                      std::string& error) {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = cluster;
  attribute.val.clusterDim.y = attribute.val.clusterDim.z = 1;
  config.gridDim = dim3(cluster);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  const cudaError_t allowed = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  const cudaError_t queried = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
  if (queried != cudaSuccess) clusters = 0;
  cudaGetLastError();  // an error here shows as 0 clusters, and in `error`
  error = cuda_reason({allowed, queried});
  return clusters;
}
}  // namespace

int resident_clusters(const void* kernel, int threads, std::size_t shared, int cluster) {
  std::string error;
  return resident_clusters(kernel, threads, shared, cluster, error);
}

std::string check_co_resident(const void* kernel, const char* name, int threads, std::size_t shared,
                              int blocks, int sm_count, int cluster) {
  if (cluster > 1) {
    std::string error;
    const int clusters = resident_clusters(kernel, threads, shared, cluster, error);
    if (clusters * cluster >= blocks) return {};
    std::ostringstream why;
    why << "the " << name << " kernel's " << blocks << " blocks in clusters of " << cluster
        << " cannot all be resident at once (" << clusters << " clusters fit)" << error;
    return why.str();
  }
  int per_sm = 0;
  const cudaError_t allowed = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  const cudaError_t queried =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared);
  cudaGetLastError();  // an error here shows as per_sm == 0, and in the reason
  if (per_sm * sm_count >= blocks) return {};
  std::ostringstream why;
  why << "the " << name << " kernel's " << blocks << " blocks of " << threads << " threads and "
      << shared / 1024 << " KiB cannot all be resident at once (" << per_sm << " per SM x "
      << sm_count << " SMs)" << cuda_reason({allowed, queried});
  return why.str();
}

void launch_cooperative(const void* kernel, void* args, int blocks, int threads, std::size_t shared,
                        cudaStream_t stream) {
  void* kernel_args[] = {args};
  CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(threads), kernel_args, shared,
                                         stream));
}

void launch_in_clusters(const void* kernel, void* args, int blocks, int threads, std::size_t shared,
                        cudaStream_t stream, int cluster, bool cooperative, cudaEvent_t started) {
  if (cluster == 1 && !started) {
    launch_cooperative(kernel, args, blocks, threads, shared, stream);
    return;
  }
  void* kernel_args[] = {args};
  cudaLaunchAttribute attributes[3] = {};
  unsigned count = 0;
  if (cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster;
    attributes[count].val.clusterDim.y = attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (cooperative) {
    attributes[count].id = cudaLaunchAttributeCooperative;
    attributes[count++].val.cooperative = 1;
  }
  if (started) {
    attributes[count].id = cudaLaunchAttributeLaunchCompletionEvent;
    attributes[count++].val.launchCompletionEvent.event = started;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  CUDA_CHECK(cudaLaunchKernelExC(&config, kernel, kernel_args));
}

}  // namespace lstm
