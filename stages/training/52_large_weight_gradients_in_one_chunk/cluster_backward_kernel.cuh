/*! \file
 *  \brief The backward recurrence of one layer in clusters of 16 blocks, one or more per batch
 *         group: no dz_t goes through global memory. Block r of cluster c owns units
 *         (16c + r)*J .. + J - 1 and their 4J gate rows; each step it multiplies its own gate
 *         rows' dz_t (16 bits, in its shared memory) by the same rows of W_hh (kept as mma A
 *         fragments of W_hhᵀ), which gives a partial sum of dh_rec for every unit, and sends
 *         each unit's partial sums for two batch rows with one st.async into the shared memory
 *         of block rank (owner % 16) of its own cluster, counted by an mbarrier there. That block
 *         adds its cluster's sums; those of a unit owned in another cluster it publishes through
 *         L2 for the owner. Its mapping: README.md.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "backward_kernel.cuh"  // BackwardArgs
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// W_hh (4H x H, FP32) rounded to Element as the cluster kernel's A fragments of W_hhᵀ:
/// [block n of a group][row tile mt][k tile kt][lane], uint4 (n = 16c + r: rank r of cluster c).
/// Row m of row tile mt is unit mt*16 + m (every unit: the product gives a partial sum for each);
/// k is the block's own gate rows, gate q of its unit j at k = q*J + j, W_hh row q*H + n*J + j.
/// Word w of a lane: row g + 8 (w & 1), k = kt*16 + 2t + 8 (w >> 1) and the next k, the lower k
/// in the low 16 bits (PTX ISA, as arrange_transposed_fragments). Zeros past H units and past
/// the units a block owns.
/// Grid-stride: one thread a 32-bit word of `fragments`, over every block's words.
template <typename Element>
__global__ void arrange_cluster_fragments(const float* w_hh, unsigned* fragments, int H, int J,
                                          int row_tiles, int span) {
  const int k_tiles = kGates * J / kMmaK;
  const std::size_t block_words = static_cast<std::size_t>(row_tiles) * k_tiles * kWarpSize * 4;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < span * kOneCluster * block_words;
       n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(n % block_words), block = static_cast<int>(n / block_words);
    const int w = i % 4, lane = (i / 4) % kWarpSize, tile = i / (4 * kWarpSize);
    const int k_tile = tile % k_tiles, row_tile = tile / k_tiles;
    const int unit = row_tile * kMmaRows + lane / 4 + 8 * (w & 1);
    const int k = k_tile * kMmaK + 2 * (lane % 4) + 8 * (w >> 1);  // k and k + 1: one gate
    const auto weight = [&](int kk) {       // A[unit][kk] = W_hh[gate row of kk][unit]
      const int owned = block * J + kk % J;  // the unit whose gate row kk is
      return unit < H && owned < H ? w_hh[(static_cast<std::size_t>(kk / J) * H + owned) * H + unit]
                                   : 0.0f;
    };
    fragments[n] = pack_pair<Element>(weight(k), weight(k + 1));
  }
}

/// Where a group spans several clusters: the sums of one step for block `rank` of every cluster's
/// units, as its cluster's blocks sent them (buffer `buffer` of `received`, [2][span][16][J][Bp],
/// span index = the owner's cluster). Those for units of another cluster, 16 added in rank order,
/// are published through L2 with `tag` for their owner; this thread's own (unit, row), if `pair`,
/// is returned: its cluster's 16 sums in rank order, then the clusters' sums in cluster order
/// (the published ones waited for).
__device__ __forceinline__ float gather_sums(const BackwardArgs& a, const float* received,
                                             int buffer, unsigned tag, int span, int cluster,
                                             int rank, int group, int senders, int rows, int Bp,
                                             bool pair, int j, int b) {
  const int H = a.hidden_size, J = a.units_per_block, Bg = a.group_rows;
  const auto slot = [&](int owner_cluster, int source, int jj, int bb) {
    return received[(((buffer * span + owner_cluster) * kOneCluster + source) * J + jj) * Bp + bb];
  };
  // published[buffer][group][to][from][rank][J][Bg]: the sums of cluster `from` for units of `to`
  const auto published = [&](int to, int from, int jj, int bb) {
    const int groups = static_cast<int>(gridDim.x) / (kOneCluster * span);
    return a.cluster_sums +
           (((((static_cast<std::size_t>(buffer) * groups + group) * span + to) * span + from) *
                 kOneCluster + rank) * J + jj) * Bg + bb;
  };
  // As the proxy of block `rank` of the other clusters: their units' sums.
  for (int i = threadIdx.x; i < span * J * Bg; i += blockDim.x) {
    const int owner_cluster = i / (J * Bg), jj = i / Bg % J, bb = i % Bg;
    const int owner = owner_cluster * kOneCluster + rank;  // the block whose unit jj it is
    if (owner_cluster == cluster || bb >= rows || owner * J + jj >= H) continue;
    float sum = 0.0f;
    for (int source = 0; source < senders; ++source)
      sum += slot(owner_cluster, source, jj, bb);
    store_tagged(published(owner_cluster, cluster, jj, bb), sum, tag);
  }
  if (!pair) return 0.0f;
  float own = 0.0f;
  for (int source = 0; source < senders; ++source)
    own += slot(cluster, source, j, b);
  float sums[kMaxSpannedClusters];
#pragma unroll
  for (int c = 0; c < kMaxSpannedClusters; ++c)
    sums[c] = c == cluster ? own : 0.0f;
  wait_tagged(sums, [&](int c) { return published(cluster, c, j, b); }, span, cluster, tag);
  float total = 0.0f;
#pragma unroll
  for (int c = 0; c < kMaxSpannedClusters; ++c)
    if (c < span) total += sums[c];
  return total;
}

/// The whole backward recurrence of one layer, t = T-1 down to 0, in a.span clusters of
/// kOneCluster blocks per batch group (a.group_rows <= 8 kColumnTiles rows: mma column tiles),
/// kClusterBackwardThreads threads a block. Block rank r of the group's cluster c owns units
/// (16c + r)*J .. (J = a.units_per_block, a multiple of 4) for the group's rows. A step t:
///   (1) each thread loads the stash of its (unit, row) pair;
///   (2) the partial sums of dh_rec from every block of the cluster (dhy at t = T-1) have
///       arrived: the mbarrier of buffer (step - 1) % 2 counted them; gather_sums adds them, and
///       with several clusters publishes those of the others' units and waits for its own;
///   (3) the cell's backward in FP32: dz_t added to the pair's sums over the steps (its bias
///       gradient, written after step 0), written in 16 bits (the GEMMs' operand) to global
///       memory, and in 16 bits into shared memory;
///   (4) warp w multiplies row tiles w, w + 16, .. of the A fragments (all H units) by the block's
///       4J gate rows of dz_t: FP32 partial sums of dh_rec for every unit;
///   (5) each unit's partial sums of four adjacent rows go with one st.async (a pair, a single
///       one where the rows end before) to block rank (owner % 16) of this cluster, buffer
///       step % 2 there, at the owner's cluster.
/// After step 0 the last sums are dh0. One cluster per group (span 1) waits for no other
/// cluster; with several, the clusters of a group are resident at once (cooperative launch).
/// Shared memory (plan.cpp, cluster_backward_shared_bytes): w [row tile][k tile][lane] uint4 |
/// dz [8 kColumnTiles][stride] words | received [2][span][16][J][Bp] floats (Bp: Bg rounded up
/// to 4) | two mbarriers.
/// kSpanned false: one cluster a group (a.span 1), stage 32's kernel; true: a.span clusters.
/// kColumnTiles 1: up to 8 rows a group; 2: up to 16, each A fragment used for both tiles.
template <typename Element, bool kSpanned, int kColumnTiles>
__global__ void __launch_bounds__(kClusterBackwardThreads, 1)
    cluster_backward(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  constexpr int kWarps = kClusterBackwardThreads / kWarpSize;
  constexpr int kTilesPerWarp = kSpanned ? kMaxSpannedTilesPerWarp : kMaxClusterTilesPerWarp;
  const int H = a.hidden_size, J = a.units_per_block, Bg = a.group_rows;
  const int span = kSpanned ? a.span : 1;
  const int Bp = (Bg + 3) / 4 * 4;  // received_columns(Bg) (plan.h): every quad 16-byte aligned
  const int row_tiles = (H + kMmaRows - 1) / kMmaRows, k_tiles = kGates * J / kMmaK;
  const int stride = a.dz_stride;  // words a column of staged dz (4J gate rows, padded)
  unsigned rank_bits;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank_bits));
  const int rank = static_cast<int>(rank_bits);
  const int group = static_cast<int>(blockIdx.x) / (kOneCluster * span);
  const int cluster = static_cast<int>(blockIdx.x) / kOneCluster % span;
  const int block = cluster * kOneCluster + rank;  // its units: block * J ..
  const int first_row = a.batch_begin + group * Bg;
  const int rows = min(Bg, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty group of the last slice: all its blocks leave together
  const auto units_of = [&](int n) { return max(0, min(J, H - n * J)); };
  // The sums this block receives a step: for its units and those of block `rank` of the other
  // clusters. With one cluster only the blocks that own units send; with several every block
  // does (zeros where it owns none), so that every block hears from every other each step.
  int received_units = units_of(block);
  for (int c = 0; c < span; ++c)
    if (c != cluster) received_units += units_of(c * kOneCluster + rank);
  const int senders = span > 1 ? kOneCluster : (H + J - 1) / J;
  // A block that receives nothing has nothing to send either: were it to step on, its sends
  // would run ahead of the blocks that wait, and an mbarrier armed with 0 bytes completes at once.
  const int steps = received_units > 0 ? a.seq_len : 0;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int group_id = lane / 4, in_group = lane % 4;  // PTX's groupID, threadID_in_group
  uint4* w_s = reinterpret_cast<uint4*>(shared);
  unsigned* dz_s = reinterpret_cast<unsigned*>(w_s + row_tiles * k_tiles * kWarpSize);
  float* received = reinterpret_cast<float*>(dz_s + kColumnTiles * kMmaColumns * stride);
  const unsigned bars =
      (shared_address(received + 2 * span * kOneCluster * J * Bp) + 7u) & ~7u;
  const unsigned bytes = 4u * senders * received_units * rows;  // one step's sums
  const int words = row_tiles * k_tiles * kWarpSize;
  for (int i = tid; i < words; i += kClusterBackwardThreads)
    copy_async_16(w_s + i, a.w_fragments + static_cast<std::size_t>(block) * words + i);
  commit_copies();
  for (int i = tid; i < kColumnTiles * kMmaColumns * stride; i += kClusterBackwardThreads)
    dz_s[i] = 0u;  // columns past the rows and k past the units stay 0
  if (tid == 0) {
    mbarrier_init(bars);
    mbarrier_init(bars + 8);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  wait_copies();
  __syncthreads();  // the compiler may init on the warp's uniform path: armed after the barrier
  if (tid == 0) {
    mbarrier_arm(bars, bytes);
    mbarrier_arm(bars + 8, bytes);
  }
  cluster_barrier();  // every block's mbarriers armed before any sum is sent

  const int j = tid % J, b = tid / J, unit = block * J + j, row = first_row + b;
  const bool pair = b < rows && unit < H;  // this thread's (unit, batch row)
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;
  const std::size_t out = static_cast<std::size_t>(row) * H + unit;
  std::uint16_t* dz_bits = reinterpret_cast<std::uint16_t*>(dz_s);
  float dc = pair ? a.dcy[out] : 0.0f;
  float db[kGates] = {};  // this pair's dz summed over the steps: its bias gradient
  for (int step = 0; step < steps; ++step) {
    const int t = a.seq_len - 1 - step;
    float kept[kStashFloats] = {};  // (1) i, f, g, o, c_t, c_{t-1}, d_above: loaded before (2)
    if (pair) {
      const float* gates = a.gates + (t * state + out - unit) * kGates + unit;
      for (int q = 0; q < kGates; ++q)
        kept[q] = gates[q * H];
      kept[4] = a.cell[(t + 1) * state + out];
      kept[5] = a.cell[t * state + out];
      kept[6] = a.d_above[t * state + out];
    }
    float dh_rec = pair && step == 0 ? a.dhy[out] : 0.0f;
    if (step > 0) {  // (2)
      const int buffer = (step - 1) % 2;
      mbarrier_wait(bars + 8 * buffer, ((step - 1) / 2) % 2);
      if constexpr (kSpanned)  // and the other clusters' sums, step - 1's product tagged step
        dh_rec = gather_sums(a, received, buffer, step, span, cluster, rank, group, senders, rows,
                             Bp, pair, j, b);
      else if (pair)
        for (int source = 0; source < senders; ++source)
          dh_rec += received[((buffer * kOneCluster + source) * J + j) * Bp + b];
    }
    if (pair) {  // (3) the cell's backward (README.md)
      const float i = kept[0], f = kept[1], g = kept[kGateG], o = kept[3];
      const float tanh_c = tanhf(kept[4]), c_prev = kept[5];
      const float dh = kept[6] + dh_rec;
      dc += dh * o * (1.0f - tanh_c * tanh_c);
      const float d[kGates] = {dc * g * i * (1.0f - i), dc * c_prev * f * (1.0f - f),
                               dc * i * (1.0f - g * g), dh * tanh_c * o * (1.0f - o)};
      const std::size_t at = (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
      for (int q = 0; q < kGates; ++q) {
        const std::uint16_t bits = element_bits<Element>(d[q]);
        db[q] += d[q];                               // the bias gradient, in FP32
        a.dz16[at + q * H] = bits;                   // the GEMMs' operand
        dz_bits[b * 2 * stride + q * J + j] = bits;  // column b, k = q*J + j
      }
      dc *= f;  // what c_{t-1} receives through the forget gate
    }
    __syncthreads();  // dz_t complete in shared memory
    if (tid == 0) count_chunk_done(a, t, units_of(block) * rows);
    // Every thread has waited on buffer (step - 1) % 2: armed now for step + 1's sums, which
    // cannot arrive before this block's sends below.
    if (tid == 0 && step > 0) mbarrier_arm(bars + 8 * ((step - 1) % 2), bytes);
    // (4) the product: row tiles warp, warp + 16, ..; all of the block's k tiles.
    float acc[kTilesPerWarp][kColumnTiles][4] = {};
    for (int kt = 0; kt < k_tiles; ++kt) {
      unsigned b0[kColumnTiles], b1[kColumnTiles];
#pragma unroll
      for (int c = 0; c < kColumnTiles; ++c) {  // column tile c: batch columns 8c ..
        const unsigned* column =
            dz_s + (c * kMmaColumns + group_id) * stride + kt * kMmaK / 2 + in_group;
        b0[c] = column[0];
        b1[c] = column[4];
      }
#pragma unroll
      for (int n = 0; n < kTilesPerWarp; ++n) {
        const int tile = warp + n * kWarps;
        if (tile < row_tiles)
#pragma unroll
          for (int c = 0; c < kColumnTiles; ++c)  // one A fragment for both column tiles
            mma_16x8x16<Element>(acc[n][c], w_s[(tile * k_tiles + kt) * kWarpSize + lane], b0[c],
                                 b1[c]);
      }
    }
    // (5) each unit's sums to block rank (owner % 16) of this cluster:
    // received[step % 2][owner / 16][rank][unit % J][column] there. Lanes t and t ^ 1 swap half
    // their sums first: lane t then holds columns 4 (t / 2) .. + 3 of one row, row groupID for
    // an even t, eight rows down for an odd t, and sends them with one message.
    const int buffer = step % 2;
    const bool upper = in_group % 2 == 0;  // keeps row groupID; gives the row below to t + 1
#pragma unroll
    for (int n = 0; n < kTilesPerWarp; ++n) {
      const int tile = warp + n * kWarps;
      if (tile >= row_tiles) break;  // the same for every lane of the warp: they all shuffle
#pragma unroll
      for (int c = 0; c < kColumnTiles; ++c) {  // column tile c: its quad 8c + 4 (t / 2) ..
        const float* d = acc[n][c];
        const float got0 = __shfl_xor_sync(kFullMask, upper ? d[2] : d[0], 1);
        const float got1 = __shfl_xor_sync(kFullMask, upper ? d[3] : d[1], 1);
        const float v0 = upper ? d[0] : got0, v1 = upper ? d[1] : got1;
        const float v2 = upper ? got0 : d[2], v3 = upper ? got1 : d[3];
        const int m = tile * kMmaRows + group_id + (upper ? 0 : 8);
        const int column = c * kMmaColumns + 4 * (in_group / 2);
        if (m >= H || column >= rows) continue;
        const int owner = m / J;  // its block in the group: rank owner % 16 of its cluster
        const int owner_cluster = kSpanned ? owner / kOneCluster : 0;
        const int owner_rank = kSpanned ? owner % kOneCluster : owner;
        const unsigned local = shared_address(
            received +
            (((buffer * span + owner_cluster) * kOneCluster + rank) * J + m % J) * Bp + column);
        const unsigned bar = cluster_rank_shared(bars + 8 * buffer, owner_rank);
        const int count = min(4, rows - column);  // the columns left: the same bytes counted
        if (count == 4) {
          store_async_quad(cluster_rank_shared(local, owner_rank), v0, v1, v2, v3, bar);
        } else {
          if (count >= 2) store_async_pair(cluster_rank_shared(local, owner_rank), v0, v1, bar);
          if (count % 2 == 1)
            store_async(cluster_rank_shared(local + 4u * (count - 1), owner_rank),
                        count == 1 ? v0 : v2, bar);
        }
      }
    }
    __syncthreads();  // dz_s is written again next step
  }
  // dh0: the sums of the product with dz_0, tagged seq_len; dc0; the pair's bias gradient.
  const int buffer = (a.seq_len - 1) % 2;
  if (steps > 0) mbarrier_wait(bars + 8 * buffer, ((a.seq_len - 1) / 2) % 2);
  float dh0 = 0.0f;
  if constexpr (kSpanned)  // every block of a spanned group steps (plan.cpp)
    dh0 = gather_sums(a, received, buffer, a.seq_len, span, cluster, rank, group, senders, rows,
                      Bp, pair, j, b);
  if (pair) {
    if constexpr (!kSpanned)
      for (int source = 0; source < senders; ++source)
        dh0 += received[((buffer * kOneCluster + source) * J + j) * Bp + b];
    a.dh0[out] = dh0;
    a.dc0[out] = dc;
    for (int q = 0; q < kGates; ++q)
      a.db_rows[(out - unit) * kGates + unit + q * H] = db[q];
  }
  cluster_barrier();  // no block leaves while another may still send into its shared memory
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
