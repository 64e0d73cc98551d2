/*! \file grid_barrier.h
 *  \brief The measured cost of one grid-wide barrier (cooperative_groups grid.sync()): the floor
 *         stage 07's per-step time is compared with.
 */
#pragma once

namespace lstm::bench {

/// Runs a cooperative kernel of `blocks` x `threads_per_block` threads that meets at `barriers`
/// (>= 2) grid barriers; returns the microseconds per barrier, launch overhead removed: the fastest
/// times t(N) of N = `barriers` and t(1) of one barrier give (t(N) - t(1)) / (N - 1). Throws
/// std::runtime_error where the device has no cooperative launch or the blocks cannot all be
/// resident at once.
double measure_grid_sync_us(int blocks, int threads_per_block, int barriers);

}  // namespace lstm::bench
