/*! \file
 *  \brief The backward recurrence of one layer inside one cluster of 16 blocks per batch group:
 *         no dz_t goes through global memory. Block r owns units r*J .. r*J + J - 1 and their 4J
 *         gate rows; each step it multiplies its own gate rows' dz_t (16 bits, in its shared
 *         memory) by the same rows of W_hh (kept as mma A fragments of W_hhᵀ), which gives a
 *         partial sum of dh_rec for every unit, and sends each unit's partial sums for two batch
 *         rows into the shared memory of the unit's owner with one st.async, counted by an
 *         mbarrier there. Its mapping: README.md.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "backward_kernel.cuh"  // BackwardArgs
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// W_hh (4H x H, FP32) rounded to Element as the cluster kernel's A fragments of W_hhᵀ:
/// [rank r][row tile mt][k tile kt][lane], uint4. Row m of row tile mt is unit mt*16 + m (every
/// unit: the product gives a partial sum for each); k is the block's own gate rows, gate q of its
/// unit j at k = q*J + j, W_hh row q*H + r*J + j. Word w of a lane: row g + 8 (w & 1),
/// k = kt*16 + 2t + 8 (w >> 1) and the next k, the lower k in the low 16 bits (PTX ISA, as
/// arrange_transposed_fragments). Zeros past H units and past the units a block owns.
/// Grid-stride: one thread a 32-bit word of `fragments`, over every block's words.
template <typename Element>
__global__ void arrange_cluster_fragments(const float* w_hh, unsigned* fragments, int H, int J,
                                          int row_tiles) {
  const int k_tiles = kGates * J / kMmaK;
  const std::size_t block_words = static_cast<std::size_t>(row_tiles) * k_tiles * kWarpSize * 4;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < kOneCluster * block_words; n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(n % block_words), rank = static_cast<int>(n / block_words);
    const int w = i % 4, lane = (i / 4) % kWarpSize, tile = i / (4 * kWarpSize);
    const int k_tile = tile % k_tiles, row_tile = tile / k_tiles;
    const int unit = row_tile * kMmaRows + lane / 4 + 8 * (w & 1);
    const int k = k_tile * kMmaK + 2 * (lane % 4) + 8 * (w >> 1);  // k and k + 1: one gate
    const auto weight = [&](int kk) {       // A[unit][kk] = W_hh[gate row of kk][unit]
      const int owned = rank * J + kk % J;  // the unit whose gate row kk is
      return unit < H && owned < H ? w_hh[(static_cast<std::size_t>(kk / J) * H + owned) * H + unit]
                                   : 0.0f;
    };
    fragments[n] = pack_pair<Element>(weight(k), weight(k + 1));
  }
}

/// The whole backward recurrence of one layer, t = T-1 down to 0, one cluster of kOneCluster
/// blocks per batch group (a.group_rows <= 8 rows: one mma column tile), kClusterBackwardThreads
/// threads a block. Block rank r owns units r*J .. (J = a.units_per_block, a multiple of 4) for
/// the group's rows. A step t:
///   (1) each thread loads the stash of its (unit, row) pair;
///   (2) the partial sums of dh_rec for its units from every block that owns units (dhy at
///       t = T-1) have arrived: the mbarrier of buffer (step - 1) % 2 counted them; summed in
///       rank order;
///   (3) the cell's backward in FP32: dz_t written in FP32 (the bias gradient's) and in 16 bits
///       (the GEMMs' operand) to global memory, and in 16 bits into shared memory;
///   (4) warp w multiplies row tiles w, w + 16, .. of the A fragments (all H units) by the block's
///       4J gate rows of dz_t: FP32 partial sums of dh_rec for every unit;
///   (5) each unit's partial sums of two adjacent rows go to its owner with one st.async (buffer
///       step % 2 there); a single one where the rows end on an odd count.
/// After step 0 the last sums are dh0. No block waits for a block of another cluster.
/// Shared memory (plan.cpp, cluster_backward_shared_bytes): w [row tile][k tile][lane] uint4 |
/// dz [8][stride] words | received [2][16][J][Bp] floats (Bp: Bg rounded up to even) | two
/// mbarriers.
template <typename Element>
__global__ void __launch_bounds__(kClusterBackwardThreads, 1)
    cluster_backward(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  constexpr int kWarps = kClusterBackwardThreads / kWarpSize;
  const int H = a.hidden_size, J = a.units_per_block, Bg = a.group_rows;
  const int Bp = Bg + Bg % 2;  // received_columns(Bg) (plan.h): every pair 8-byte aligned
  const int row_tiles = (H + kMmaRows - 1) / kMmaRows, k_tiles = kGates * J / kMmaK;
  const int stride = a.dz_stride;  // words a column of staged dz (4J gate rows, padded)
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int first_row = a.batch_begin + static_cast<int>(blockIdx.x) / kOneCluster * Bg;
  const int rows = min(Bg, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty cluster of the last slice: all its blocks leave together
  const int my_units = max(0, min(J, H - static_cast<int>(rank) * J));
  const int sources = (H + J - 1) / J;  // the blocks that own units (16 J may pass H)
  // A block past H's units has nothing to receive or to send: were it to step on, its sends would
  // run ahead of the blocks that wait, and an mbarrier armed with 0 bytes completes at once.
  const int steps = my_units > 0 ? a.seq_len : 0;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int group_id = lane / 4, in_group = lane % 4;  // PTX's groupID, threadID_in_group
  uint4* w_s = reinterpret_cast<uint4*>(shared);
  unsigned* dz_s = reinterpret_cast<unsigned*>(w_s + row_tiles * k_tiles * kWarpSize);
  float* received = reinterpret_cast<float*>(dz_s + kMmaColumns * stride);  // [2][16][J][Bp]
  const unsigned bars = (shared_address(received + 2 * kOneCluster * J * Bp) + 7u) & ~7u;
  const unsigned bytes = 4u * sources * my_units * rows;  // one step's sums for my units
  const int words = row_tiles * k_tiles * kWarpSize;
  for (int i = tid; i < words; i += kClusterBackwardThreads)
    copy_async_16(w_s + i, a.w_fragments + static_cast<std::size_t>(rank) * words + i);
  commit_copies();
  for (int i = tid; i < kMmaColumns * stride; i += kClusterBackwardThreads)
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

  const int j = tid % J, b = tid / J, unit = static_cast<int>(rank) * J + j, row = first_row + b;
  const bool pair = b < rows && unit < H;  // this thread's (unit, batch row)
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;
  const std::size_t out = static_cast<std::size_t>(row) * H + unit;
  std::uint16_t* dz_bits = reinterpret_cast<std::uint16_t*>(dz_s);
  float dc = pair ? a.dcy[out] : 0.0f;
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
      if (pair)
        for (int source = 0; source < sources; ++source)
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
        a.dz[at + q * H] = d[q];                     // FP32, for the bias gradient
        a.dz16[at + q * H] = bits;                   // the GEMMs' operand
        dz_bits[b * 2 * stride + q * J + j] = bits;  // column b, k = q*J + j
      }
      dc *= f;  // what c_{t-1} receives through the forget gate
    }
    __syncthreads();  // dz_t complete in shared memory
    // Every thread has waited on buffer (step - 1) % 2: armed now for step + 1's sums, which
    // cannot arrive before this block's sends below.
    if (tid == 0 && step > 0) mbarrier_arm(bars + 8 * ((step - 1) % 2), bytes);
    // (4) the product: row tiles warp, warp + 16, ..; all of the block's k tiles.
    float acc[kMaxClusterTilesPerWarp][4] = {};
    for (int kt = 0; kt < k_tiles; ++kt) {
      const unsigned* column = dz_s + group_id * stride + kt * kMmaK / 2 + in_group;
      const unsigned b0 = column[0], b1 = column[4];
#pragma unroll
      for (int n = 0; n < kMaxClusterTilesPerWarp; ++n) {
        const int tile = warp + n * kWarps;
        if (tile < row_tiles)
          mma_16x8x16<Element>(acc[n], w_s[(tile * k_tiles + kt) * kWarpSize + lane], b0, b1);
      }
    }
    // (5) each unit's sums to its owner: received[step % 2][rank][unit % J][column] there.
    const int buffer = step % 2;
#pragma unroll
    for (int n = 0; n < kMaxClusterTilesPerWarp; ++n) {
      const int tile = warp + n * kWarps;
      if (tile >= row_tiles) break;
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // d0, d1: row groupID; d2, d3: eight rows down
        const int m = tile * kMmaRows + group_id + 8 * half, column = 2 * in_group;
        if (m >= H || column >= rows) continue;
        const int owner = m / J;
        const unsigned local = shared_address(
            received + ((buffer * kOneCluster + static_cast<int>(rank)) * J + m % J) * Bp + column);
        const unsigned there = cluster_rank_shared(local, owner);
        const unsigned bar = cluster_rank_shared(bars + 8 * buffer, owner);
        // Columns 2t and 2t + 1 of the fragment: one message for both (the same bytes counted).
        if (column + 1 < rows)
          store_async_pair(there, acc[n][2 * half], acc[n][2 * half + 1], bar);
        else
          store_async(there, acc[n][2 * half], bar);
      }
    }
    __syncthreads();  // dz_s is written again next step
  }
  // dh0: the sums of the product with dz_0; dc0.
  const int buffer = (a.seq_len - 1) % 2;
  if (steps > 0) mbarrier_wait(bars + 8 * buffer, ((a.seq_len - 1) / 2) % 2);
  if (pair) {
    float dh0 = 0.0f;
    for (int source = 0; source < sources; ++source)
      dh0 += received[((buffer * kOneCluster + source) * J + j) * Bp + b];
    a.dh0[out] = dh0;
    a.dc0[out] = dc;
  }
  cluster_barrier();  // no block leaves while another may still send into its shared memory
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
