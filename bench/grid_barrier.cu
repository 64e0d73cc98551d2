// The cost of one grid-wide barrier alone: a cooperative kernel that does nothing but meet at
// cooperative_groups grid.sync(), timed with CUDA events. Stage 07's persistent kernel pays one
// grid barrier per time step, so this is the floor its per-step time is compared with.
#include "grid_barrier.h"

#include <cooperative_groups.h>

#include <stdexcept>
#include <string>

#include "harness/cuda_utils.h"
#include "launch_timing.h"

namespace lstm::bench {
namespace {

namespace cg = cooperative_groups;

/// Mapping: 1-D grid, all blocks co-resident; each iteration thread 0 of every block stores the
/// iteration to its block's slot, then every thread meets the whole grid at one barrier.
__global__ void grid_sync_kernel(int* slots, int barriers) {
  cg::grid_group grid = cg::this_grid();
  for (int i = 0; i < barriers; ++i) {
    if (threadIdx.x == 0) slots[blockIdx.x] = i;
    grid.sync();
  }
}

}  // namespace

double measure_grid_sync_us(int blocks, int threads_per_block, int barriers) {
  if (blocks < 1 || threads_per_block < 1 || barriers < 2) {
    throw std::invalid_argument("measure_grid_sync_us needs blocks, threads >= 1, barriers >= 2");
  }
  int device = 0, cooperative = 0, sm_count = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (!cooperative) throw std::runtime_error("the device does not support cooperative launches");
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_sync_kernel,
                                                           threads_per_block, 0));
  if (per_sm * sm_count < blocks) {
    throw std::runtime_error(std::to_string(blocks) + " blocks of " +
                             std::to_string(threads_per_block) +
                             " threads cannot all be resident at once (" + std::to_string(per_sm) +
                             " per SM x " + std::to_string(sm_count) + " SMs)");
  }
  DeviceBuffer<int> slots(static_cast<std::size_t>(blocks));
  int* slots_data = slots.data();
  const auto launch = [&](int n, cudaEvent_t start, cudaEvent_t stop) {
    void* kernel_args[] = {&slots_data, &n};
    CUDA_CHECK(cudaEventRecord(start));
    CUDA_CHECK(cudaLaunchCooperativeKernel(grid_sync_kernel, dim3(blocks), dim3(threads_per_block),
                                           kernel_args));
    CUDA_CHECK(cudaEventRecord(stop));
  };
  return us_per_step(launch, barriers);
}

}  // namespace lstm::bench
