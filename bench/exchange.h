/*! \file exchange.h
 *  \brief The measured floor of a persistent kernel's step: every block hands one value to every
 *         other block and waits for all of theirs, through global memory or within one
 *         thread-block cluster.
 */
#pragma once

namespace lstm::bench {

/// `blocks` co-resident blocks (one an SM) exchange one value each for `steps` (>= 2) steps
/// through global memory: each block stores its value, then polls every other block's until it
/// appears (relaxed loads at GPU scope, as the persistent stages poll published values). Returns
/// microseconds per step, launch overhead removed as in measure_grid_sync_us. Throws
/// std::runtime_error where the blocks cannot all be resident at once.
double measure_global_exchange_us(int blocks, int steps);

/// The same exchange among the 2 to 16 blocks of one thread-block cluster (one an SM): each value
/// goes into the receiving block's shared memory with st.async, counted by an mbarrier there that
/// the receiver waits on. Throws std::runtime_error where the device has no clusters or such a
/// cluster cannot be resident.
double measure_cluster_exchange_us(int blocks, int steps);

}  // namespace lstm::bench
