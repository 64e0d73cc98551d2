#include "harness/co_residency.h"

#include <sstream>

#include "harness/cuda_utils.h"

namespace lstm {

int resident_clusters(const void* kernel, int threads, std::size_t shared, int cluster) {
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
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(shared));
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) clusters = 0;
  cudaGetLastError();  // an error here shows as 0 clusters
  return clusters;
}

std::string check_co_resident(const void* kernel, const char* name, int threads, std::size_t shared,
                              int blocks, int sm_count, int cluster) {
  if (cluster > 1) {
    const int clusters = resident_clusters(kernel, threads, shared, cluster);
    if (clusters * cluster >= blocks) return {};
    std::ostringstream why;
    why << "the " << name << " kernel's " << blocks << " blocks in clusters of " << cluster
        << " cannot all be resident at once (" << clusters << " clusters fit)";
    return why.str();
  }
  int per_sm = 0;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(shared));
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared);
  cudaGetLastError();  // an error here shows as per_sm == 0
  if (per_sm * sm_count >= blocks) return {};
  std::ostringstream why;
  why << "the " << name << " kernel's " << blocks << " blocks of " << threads << " threads and "
      << shared / 1024 << " KiB cannot all be resident at once (" << per_sm << " per SM x "
      << sm_count << " SMs)";
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
