/*! \file co_residency.h
 *  \brief Whether all blocks of a persistent kernel can be resident at once, and its cooperative
 *         launch, also in thread-block clusters.
 *
 * A block that waits for another block's values (a grid barrier, or polling for a published
 * h_t or dz_t) waits for ever if that block never starts: it can start only when a resident
 * block ends, and none ends. So every block of such a kernel must be resident at once. The
 * stages check it before they run (their unsupported_reason(), which refuses the shape with
 * check_co_resident()'s reason) and launch with launch_cooperative() (launch_in_clusters() for
 * a kernel whose blocks form clusters), which the driver refuses rather than start a grid that
 * does not fit.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace lstm {

/// Clusters of `cluster` blocks of `kernel` (`threads` threads, `shared` bytes of dynamic shared
/// memory) that can be resident at once on the current device (cudaOccupancyMaxActiveClusters;
/// 0 where none can, or the device has no clusters).
int resident_clusters(const void* kernel, int threads, std::size_t shared, int cluster);

/// "" if `blocks` blocks of `kernel` (`threads` threads, `shared` bytes of dynamic shared memory,
/// in clusters of `cluster`) can all be resident at once on `sm_count` SMs, which a block that
/// waits for another block's values needs; else why not, naming the kernel `name` ("the
/// forward kernel's 140 blocks of 256 threads and 200 KiB cannot all be resident at once (1 per
/// SM x 132 SMs)"). Allows the kernel `shared` bytes first (cudaFuncSetAttribute), as its launch
/// must. `cluster` = 1: blocks per SM x SMs (cudaOccupancyMaxActiveBlocksPerMultiprocessor);
/// larger: the clusters that fit (resident_clusters()), which the GPCs decide, not the SM count.
std::string check_co_resident(const void* kernel, const char* name, int threads, std::size_t shared,
                              int blocks, int sm_count, int cluster = 1);

/// Launches `kernel` (`blocks` blocks of `threads` threads, `shared` bytes of dynamic shared
/// memory, on `stream`) with its one argument, the struct at `args`: all blocks resident at
/// once, which the cooperative launch (cudaLaunchCooperativeKernel) guarantees or refuses, so
/// that a block that waits for a value never waits for a block that has not started. Throws
/// CudaError (CUDA_CHECK) where the launch fails.
void launch_cooperative(const void* kernel, void* args, int blocks, int threads, std::size_t shared,
                        cudaStream_t stream);

/// Launches `kernel` as launch_cooperative() does, in clusters of `cluster` consecutive blocks
/// (cudaLaunchKernelExC with the cluster dimension and the cooperative launch attributes).
/// `cooperative` false: no cooperative attribute, for clusters that wait for no block outside
/// themselves (a backward in one cluster), which need not all be resident at once. `started`,
/// where given, is recorded once every block has begun (the launch-completion event attribute).
/// With `cluster` = 1 and no `started` this is launch_cooperative(), whatever `cooperative` says.
/// Throws CudaError (CUDA_CHECK) where the launch fails.
void launch_in_clusters(const void* kernel, void* args, int blocks, int threads, std::size_t shared,
                        cudaStream_t stream, int cluster, bool cooperative = true,
                        cudaEvent_t started = nullptr);

}  // namespace lstm
