/*! \file
 *  \brief The backward recurrence of one layer in one persistent kernel, its product
 *         dh_rec = W_hhᵀ · dz_{t+1} on tensor cores, split over the C blocks of a thread-block
 *         cluster: the cluster's blocks share their units, each keeps the rows of W_hhᵀ of all
 *         of them for its own 1/C of the 4H gate rows (k) in shared memory as 16-bit mma A
 *         fragments, prepared once, and stages only that part of dz_{t+1}; each sends the
 *         partial sums of the other blocks' units into their shared memory (distributed shared
 *         memory) with st.async, each store counted by an mbarrier there that ends the exchange.
 *         FP32 sums and the cell's backward in FP32, as training stage 07's. Its mapping:
 *         README.md.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// The most (unit, batch row) pairs a thread of backward_persistent owns: J * Bg <= 32 * 64 over
/// 512 threads (256 threads only where B <= 4, that is at most 128 pairs).
constexpr int kMaxPairsPerThread = kMaxUnitsPerBlock * kMaxBackwardRows / kBackwardThreads;
static_assert(kMaxUnitsPerBlock * kFewWarpsBatch <= kFewBackwardThreads);

/// What the backward kernel reads and writes for one layer and one slice of the batch (a
/// launch). Every buffer has the whole batch's rows; a launch touches its own rows only.
struct BackwardArgs {
  const uint4* w_fragments;  // W_hhᵀ as A fragments: [unit block][row tile][k tile][lane]
  const float* gates;        // (T, B, 4H): the activated gates i, f, g, o the forward kept
  const float* cell;         // (T + 1, B, H): c0, then c_t at slot t + 1, as the forward kept it
  const float* d_above;  // (T, B, H): dy, or the gradient of this layer's h from the layer above
  const float* dhy;      // (B, H) the gradient of this layer's final h
  const float* dcy;      // (B, H) the gradient of this layer's final c
  float* db_rows;        // (B, 4H) written: each batch row's dz summed over the steps, in FP32
  std::uint16_t* dz16;   // (T, B, 4H) in Element's bits: the sentinel until published; the GEMMs'
                         // operand after
  float* dh0;            // (B, H) written: the gradient of this layer's h0
  float* dc0;            // (B, H) written: the gradient of this layer's c0
  int hidden_size, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block;         // J <= 32: the units whose cell this block updates
  int unit_blocks;             // U, a multiple of C: block = u + U * g
  int k_rows;                  // gate rows (k) of dz a block of a cluster multiplies (mult. of 16)
  int group_rows;              // Bg: batch rows per block
  int batch_tiles;             // mma column tiles: ceil(Bg / 8)
  int k_slices;                // S: warps along k per column tile
  int dz_stride;               // words per staged batch row of dz
  int chunk_rows, chunks;      // gate rows (k) of dz per chunk (a multiple of 16), chunks per step
  // The backward in clusters of 16 (cluster_backward_kernel.cuh): clusters a batch group spans,
  // and where they are more than one, the clusters' sums for each other's units (tagged, 8 bytes):
  // [2][groups][span][span][16][J][Bg], cleared before the launch.
  int span;
  unsigned long long* cluster_sums;
  // The steps, from the last, in chunks of chunk_steps: once a block has stored its dz of a
  // chunk's every step, it adds its (unit, batch row) pairs to that chunk's count (zeroed before
  // the launch); the chunk's gradients wait for H * B.
  unsigned* chunk_done;
  int chunk_steps;
};

/// After step t, from one thread, after a barrier that follows the block's stores of dz_t: where
/// t ends a chunk (the steps run from the last), the block's `pairs` join that chunk's count.
__device__ __forceinline__ void count_chunk_done(const BackwardArgs& a, int t, unsigned pairs) {
  const int step = a.seq_len - 1 - t;  // steps done before this one
  if (pairs == 0 || (t > 0 && (step + 1) % a.chunk_steps != 0)) return;
  __threadfence();  // the block's dz, seen by the barrier, before the count (cumulative)
  atomicAdd(a.chunk_done + step / a.chunk_steps, pairs);
}

/// W_hh (4H x H, FP32, PyTorch's layout) rounded to Element and arranged once as the backward's
/// A fragments of W_hhᵀ, [unit block][row tile][k tile][lane] (uint4: four 32-bit words a lane):
/// block n is rank n % C of its cluster; row m of its rows (row tile m / 16) is unit
/// (n / C) * C * J + m, one of the cluster's C * J units, and its k tiles are gate rows
/// (n % C) * k_rows .. + k_rows of W_hh, A[m][k] = W_hh[k][unit] (the forward's fragments hold
/// W_hh itself). Word r of lane (groupID g, threadID_in_group t) of k tile kt holds row
/// g + 8 (r & 1) of its row tile, k = kt*16 + 2t + 8 (r >> 1) and the next k, the lower k in the
/// low 16 bits (PTX ISA, as arrange_fragments). Zeros past C * J, past H and past 4H.
/// Grid-stride: one thread a 32-bit word of `fragments`, over every unit block's words.
template <typename Element>
__global__ void arrange_transposed_fragments(const float* w_hh, unsigned* fragments, int H, int J,
                                             int row_tiles, int unit_blocks, int C, int k_rows) {
  const int gate_rows = kGates * H, k_tiles = k_rows / kMmaK;
  const std::size_t block_words = static_cast<std::size_t>(row_tiles) * k_tiles * kWarpSize * 4;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < unit_blocks * block_words; n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(n % block_words);
    const int r = i % 4, fragment_lane = (i / 4) % kWarpSize, tile = i / (4 * kWarpSize);
    const int k_tile = tile % k_tiles, row_tile = tile / k_tiles;
    const int row = row_tile * kMmaRows + fragment_lane / 4 + 8 * (r & 1);
    const int block = static_cast<int>(n / block_words), rank = block % C;
    const int k = rank * k_rows + k_tile * kMmaK + 2 * (fragment_lane % 4) + 8 * (r >> 1);
    const int unit = block / C * C * J + row;
    const bool real = row < C * J && unit < H;
    // The transpose: column `unit` of W_hh, gate rows k and k + 1.
    fragments[n] = pack_pair<Element>(
        real && k < gate_rows ? w_hh[static_cast<std::size_t>(k) * H + unit] : 0.0f,
        real && k + 1 < gate_rows ? w_hh[static_cast<std::size_t>(k + 1) * H + unit] : 0.0f);
  }
}

/// The whole backward recurrence of one layer (one slice of the batch), t = T-1 down to 0.
/// `Element`: __half or __nv_bfloat16, the type of W_hhᵀ and dz on the tensor cores; `kRowTiles`:
/// 1 to 4 row tiles of 16 units (R = ceil(C * J / 16)), a template argument so that one row
/// tile compiles to stage 12's loop; `kCluster`: C, 1 or 2 blocks a cluster, a template argument
/// so that C = 1 compiles to training stage 22's kernel.
/// Grid: U x G blocks (block = u + U * g), the plan's threads, all resident (cooperative
/// launch). Block (u, g) owns units u*J .. u*J + J - 1 for the Bg batch rows of group g.
/// A step t: (1) cp.async brings the stash of step t for the block's (unit, row) pairs into
/// shared memory; (2) dh_rec = W_hhᵀ · dz_{t+1} for the pairs (dhy at t = T-1): the block stages
/// dz_{t+1} of its rows, published in 16 bits, into shared memory in chunks of gate rows, every
/// thread's loads of a chunk in flight at once and waited for until published, the next chunk's
/// loads in flight while the block multiplies this one; warp w multiplies the 16 x 16 fragments
/// of each row tile of W_hhᵀ with 16 x 8 tiles of dz (column tile w % batch_tiles, k slice
/// w / batch_tiles of the chunk's k tiles), mma.sync with FP32 sums, the k slices summed in shared
/// memory in a fixed order; (3) one thread per pair: the cell's backward in FP32, dz_t added to
/// the pair's sums over the steps (its bias gradient) and published in 16 bits (the signal to every
/// block of the group), dc_{t-1} kept. After step 0, one more product gives dh0. Shared memory
/// (plan.cpp sizes it): w [row tile][k tile] [lane] uint4 | dz [2][8 * batch_tiles][dz_stride]
/// words (one buffer where one chunk holds all 4H gate rows) | sums [S][16 R][8 * batch_tiles] |
/// stash [J * Bg][7] | dc [J * Bg].
/// With C = 2 the two blocks of a cluster each multiply the rows of W_hhᵀ of the cluster's
/// C * J units by their own k_rows gate rows of dz (from rank * k_rows) and store each unit's
/// partial sums in its owner's buffer, cluster [2][C][J][Bn] floats after dc; the owner adds
/// the C parts in rank order.
/// Two mbarriers follow that buffer, one for each of its halves.
template <typename Element, int kRowTiles, int kCluster>
__global__ void __launch_bounds__(kBackwardThreads, 1) backward_persistent(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  const int H = a.hidden_size, J = a.units_per_block, S = a.k_slices, W = a.dz_stride;
  constexpr int C = kCluster;                      // blocks u .. u + C - 1 share their C * J units
  const int rank = blockIdx.x % C;                 // clusters: C consecutive blocks
  constexpr int R = kRowTiles, MR = R * kMmaRows;  // row tiles, and the rows of W_hhᵀ they hold
  const int Bg = a.group_rows, Bn = a.batch_tiles * kMmaColumns, tid = threadIdx.x;
  const int threads = blockDim.x;  // the plan's: 512, or 256 at small batches
  const int gate_rows = kGates * H, k_tiles = a.k_rows / kMmaK;
  // This block's gate rows of dz: k_rows from rank * k_rows (the last rank's may be fewer, never
  // none: the planner refuses such a split).
  const int first_k = rank * a.k_rows, my_rows = min(a.k_rows, gate_rows - first_k);
  const int chunks = (my_rows + a.chunk_rows - 1) / a.chunk_rows;
  const int unit_block = blockIdx.x % a.unit_blocks, group = blockIdx.x / a.unit_blocks;
  const int first_unit = unit_block * J, first_row = a.batch_begin + group * Bg;
  const int rows = min(Bg, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty group of the last slice: nobody waits for it
  const int pairs = J * rows;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  const int staged_words = (a.chunks > 1 ? 2 : 1) * Bn * W;
  uint4* w_s = reinterpret_cast<uint4*>(shared);  // [row tile][k tile][lane]
  unsigned* dz_s = reinterpret_cast<unsigned*>(w_s + R * k_tiles * kWarpSize);  // [2 or 1][Bn][W]
  float* sums_s = reinterpret_cast<float*>(dz_s + staged_words);                // [S][16 R][Bn]
  float* stash_s = sums_s + S * MR * Bn;                                        // [J * Bg][7]
  float* dc_s = stash_s + kStashFloats * J * Bg;                                // [J * Bg]
  float* cluster_s = dc_s + J * Bg;  // [2][C][J][Bn]: the cluster's partial sums for my units
  // Two mbarriers (8 bytes each, 8-aligned), one per buffer of cluster_s: a buffer's exchange is
  // complete when its mbarrier has counted the C blocks' stores, C * J * rows floats.
  const unsigned bars = (shared_address(cluster_s + 2 * C * J * Bn) + 7u) & ~7u;
  const unsigned exchange_bytes = 4u * C * J * rows;
  if (C > 1 && tid == 0) {
    mbarrier_init(bars);
    mbarrier_init(bars + 8);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // seen by the partner
    mbarrier_arm(bars, exchange_bytes);
    mbarrier_arm(bars + 8, exchange_bytes);
  }

  // ---- once per sequence: this block's fragments of W_hhᵀ (prepared once,
  // arrange_transposed_fragments), copied as they are, all in flight at once.
  const int block_words = R * k_tiles * kWarpSize;  // uint4, contiguous per unit block
  for (int i = tid; i < block_words; i += blockDim.x)
    copy_async_16(w_s + i, a.w_fragments + static_cast<std::size_t>(unit_block) * block_words + i);
  commit_copies();
  // Staged dz starts as zeros: k past 4H in the last chunk meets W's zero padding, and must not
  // be a NaN (any finite value gives 0); columns past the group's rows are never read back.
  for (int i = tid; i < staged_words; i += blockDim.x)
    dz_s[i] = 0u;
  for (int p = tid; p < pairs; p += blockDim.x) {  // dc from after the last step: dcy
    const int unit = first_unit + p % J, row = first_row + p / J;
    dc_s[p] = unit < H ? a.dcy[static_cast<std::size_t>(row) * H + unit] : 0.0f;
  }
  wait_copies();
  __syncthreads();
  if constexpr (C > 1)
    cluster_barrier();  // every block of the cluster running: its shared memory and mbarriers exist

  // ---- (1) the stash of step t for this thread's own pairs, copied while it waits for dz.
  const auto fetch_stash = [&](int t) {
    for (int p = tid; p < pairs; p += blockDim.x) {
      const int unit = first_unit + p % J;
      if (unit >= H) continue;
      const std::size_t out = static_cast<std::size_t>(first_row + p / J) * H + unit;
      const float* gates = a.gates + (t * state + out - unit) * kGates + unit;  // q at [q * H]
      float* kept = stash_s + p * kStashFloats;
      for (int q = 0; q < kGates; ++q)
        copy_async_4(kept + q, gates + q * H);
      copy_async_4(kept + 4, a.cell + (t + 1) * state + out);  // c_t
      copy_async_4(kept + 5, a.cell + t * state + out);        // c_{t-1}
      copy_async_4(kept + 6, a.d_above + t * state + out);
    }
    commit_copies();
  };

  // ---- (2) W_hhᵀ · dz (slot `slot`) for the block's pairs, partial sums per k slice in sums_s.
  // Staging: thread tid carries uint2 idx = tid + r * threads of a chunk (four 16-bit values of
  // dz: batch row idx / n4, gate rows 4 (idx % n4) ..) and stores it as two words (two k each) at
  // [row][2 (idx % n4)]. Product: warp `warp` takes column tile batch_tile and k slice k_slice.
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int group_id = lane / 4, in_group = lane % 4;  // PTX's groupID, threadID_in_group
  const int batch_tile = warp % a.batch_tiles, k_slice = warp / a.batch_tiles;
  const bool computes = k_slice < S;                         // warp-uniform: spare warps only stage
  const auto k_range = [&](int n, int* first, int* count) {  // k slice k_slice of n k tiles
    *first = k_slice * n / S;
    *count = (k_slice + 1) * n / S - *first;
  };
  const int last_rows = my_rows - (chunks - 1) * a.chunk_rows;  // a multiple of 4
  int full_first, full_count, last_first, last_count;
  k_range(a.chunk_rows / kMmaK, &full_first, &full_count);
  k_range((last_rows + kMmaK - 1) / kMmaK, &last_first, &last_count);
  const auto recurrent_product = [&](int slot) {
    const std::uint16_t* dz_rows =  // [row][4H]: the published dz of this group's rows, from k
        a.dz16 + (slot * state + static_cast<std::size_t>(first_row) * H) * kGates + first_k;
    const auto source = [&](int chunk, int n4, int idx) {  // uint2 idx of a chunk
      return reinterpret_cast<const uint2*>(
                 dz_rows + static_cast<std::size_t>(idx / n4) * gate_rows + chunk * a.chunk_rows) +
             idx % n4;
    };
    uint2 staged[kStageRegistersDz];
    const auto issue_loads = [&](int chunk) {
      const int n4 = (chunk == chunks - 1 ? last_rows : a.chunk_rows) / 4, count = rows * n4;
#pragma unroll
      for (int r = 0; r < kStageRegistersDz; ++r) {
        const int idx = tid + r * threads;
        if (idx < count) staged[r] = load_relaxed(source(chunk, n4, idx));  // all in flight
      }
    };
    float acc[R][4] = {};  // the warp's mma accumulators, one per row tile
    issue_loads(0);
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const bool last = chunk == chunks - 1;
      const int n4 = (last ? last_rows : a.chunk_rows) / 4, count = rows * n4;
      unsigned* buffer = dz_s + (chunk & 1) * Bn * W;  // [Bn][W]
      wait_published_at(
          staged, [&](int idx) { return source(chunk, n4, idx); }, count, tid, threads);
      __syncwarp();  // the warp whole again after its poll: a 1.4x slower backward without (README)
#pragma unroll
      for (int r = 0; r < kStageRegistersDz; ++r) {
        const int idx = tid + r * threads;
        if (idx < count)  // already Element's bits, two k a word: copied, not rounded
          *reinterpret_cast<uint2*>(buffer + idx / n4 * W + 2 * (idx % n4)) = staged[r];
      }
      __syncthreads();                    // the chunk is complete in shared memory
      if (!last) issue_loads(chunk + 1);  // in flight during this chunk's product
      if (computes) {
        // Per k tile: the B fragment, words (k pair t and t + 4, column g) of staged dz, and for
        // each row tile its A fragment (one 16-byte load a lane) and one mma: the second row tile
        // multiplies the same dz, read once.
        const int first = last ? last_first : full_first, count_k = last ? last_count : full_count;
        const int tile_stride = k_tiles * kWarpSize;  // uint4 from one row tile to the next
        const uint4* w_fragment = w_s + (chunk * a.chunk_rows / kMmaK + first) * kWarpSize + lane;
        const unsigned* dz_fragment =
            buffer + (batch_tile * kMmaColumns + group_id) * W + first * kMmaK / 2 + in_group;
#pragma unroll 4
        for (int step = 0; step < count_k;
             ++step, w_fragment += kWarpSize, dz_fragment += kMmaK / 2) {
          const unsigned b0 = dz_fragment[0], b1 = dz_fragment[4];
#pragma unroll
          for (int rt = 0; rt < R; ++rt)
            mma_16x8x16<Element>(acc[rt], w_fragment[rt * tile_stride], b0, b1);
        }
      }
    }
    // One partial tile per k slice and row tile: d0, d1 at row (unit) 16 rt + groupID, columns
    // 2 threadID_in_group and the next; d2, d3 eight rows down.
    if (!computes) return;  // warp-uniform
#pragma unroll
    for (int rt = 0; rt < R; ++rt) {
      float* out = sums_s + (k_slice * MR + rt * kMmaRows + group_id) * Bn +
                   batch_tile * kMmaColumns + 2 * in_group;
      *reinterpret_cast<float2*>(out) = make_float2(acc[rt][0], acc[rt][1]);
      *reinterpret_cast<float2*>(out + 8 * Bn) = make_float2(acc[rt][2], acc[rt][3]);
    }
  };
  // The sum over the k slices for row m of the block's product and batch row b, in a fixed
  // order: bitwise reproducible.
  const auto slice_sum = [&](int m, int b) {
    float sum = 0.0f;
    for (int s = 0; s < S; ++s)
      sum += sums_s[(s * MR + m) * Bn + b];
    return sum;
  };
  // With a cluster: every block sends its sums for each of the cluster's units to the block that
  // owns the unit (rank m / J), into buffer `slot % 2` there (slot: the step of dz multiplied),
  // with st.async: each store counts its bytes on that buffer's mbarrier in the owner. No block
  // waits for another to arrive anywhere; each waits for its own buffer to be full (below).
  const auto share_partial_sums = [&](int slot) {
    if constexpr (C == 1) return;  // stage 22's path
    const unsigned buffer = shared_address(cluster_s + (slot % 2) * C * J * Bn);
    for (int i = tid; i < C * J * rows; i += blockDim.x) {
      const int m = i % (C * J), b = i / (C * J), owner = m / J;
      store_async(cluster_rank_shared(buffer + 4u * ((rank * J + m % J) * Bn + b), owner),
                  slice_sum(m, b), cluster_rank_shared(bars + 8 * (slot % 2), owner));
    }
  };
  // Every thread: the sums of exchange `slot` (the partner's and this block's own) have arrived.
  // A buffer's n-th use waits for phase parity n % 2. Thread 0 arms it again for its next use
  // (slot - 2): the partner cannot send that exchange before it has this block's next sums,
  // which follow this block's reading of the buffer (and a barrier), so no sum lands early.
  const auto wait_exchange = [&](int slot) {
    if constexpr (C == 1) return;
    const unsigned bar = bars + 8 * (slot % 2);
    mbarrier_wait(bar, ((a.seq_len - 1 - slot) / 2) & 1);
    if (tid == 0 && slot >= 2) mbarrier_arm(bar, exchange_bytes);
  };
  // dh_rec for pair (j, b) from the product with dz's step `slot`: the k slices' sums (C = 1), or
  // the C blocks' partial sums in rank order.
  const auto dh_recurrent = [&](int j, int b, int slot) {
    if constexpr (C == 1) return slice_sum(j, b);
    const float* buffer = cluster_s + (slot % 2) * C * J * Bn;
    float sum = 0.0f;
    for (int r = 0; r < C; ++r)
      sum += buffer[(r * J + j) * Bn + b];
    return sum;
  };

  // Each of this thread's pairs' dz summed over the steps: its bias gradient (written at the end).
  float db[kMaxPairsPerThread][kGates] = {};

  // ---- the steps, from the last.
  for (int t = a.seq_len - 1; t >= 0; --t) {
    fetch_stash(t);
    if (t < a.seq_len - 1) {
      recurrent_product(t + 1);
      __syncthreads();  // every partial sum in shared memory
      share_partial_sums(t + 1);
      wait_exchange(t + 1);
    }
    wait_copies();  // this thread's stash of step t

    // (3) The cell's backward of each pair, one thread each (the math: README.md).
#pragma unroll
    for (int n = 0; n < kMaxPairsPerThread; ++n) {  // a register array needs a fixed count
      const int p = tid + n * threads, j = p % J, b = p / J, unit = first_unit + j;
      if (p >= pairs || unit >= H) continue;
      const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
      const float* kept = stash_s + p * kStashFloats;
      const float i = kept[0], f = kept[1], g = kept[kGateG], o = kept[3];
      const float tanh_c = tanhf(kept[4]), c_prev = kept[5];
      const float dh = kept[6] + (t == a.seq_len - 1 ? a.dhy[out] : dh_recurrent(j, b, t + 1));
      const float dc = dc_s[p] + dh * o * (1.0f - tanh_c * tanh_c);
      const float d[kGates] = {dc * g * i * (1.0f - i), dc * c_prev * f * (1.0f - f),
                               dc * i * (1.0f - g * g), dh * tanh_c * o * (1.0f - o)};
      const std::size_t at = (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
#pragma unroll
      for (int q = 0; q < kGates; ++q) {
        db[n][q] += d[q];  // the bias gradient: dz summed over the steps, in FP32
        store_relaxed(a.dz16 + at + q * H, element_bits<Element>(d[q]));  // the signal
      }
      dc_s[p] = dc * f;  // what c_{t-1} receives through the forget gate
    }
    __syncthreads();  // the next product writes sums_s again
    if (tid == 0) count_chunk_done(a, t, max(0, min(J, H - first_unit)) * rows);
  }

  // ---- after step 0: dh0 = W_hhᵀ · dz_0, dc0, and each pair's dz summed over the steps.
  recurrent_product(0);
  __syncthreads();
  share_partial_sums(0);
  wait_exchange(0);
#pragma unroll
  for (int n = 0; n < kMaxPairsPerThread; ++n) {
    const int p = tid + n * threads, j = p % J, b = p / J, unit = first_unit + j;
    if (p >= pairs || unit >= H) continue;
    const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
    a.dh0[out] = dh_recurrent(j, b, 0);
    a.dc0[out] = dc_s[p];
    for (int q = 0; q < kGates; ++q)
      a.db_rows[(out - unit) * kGates + unit + q * H] = db[n][q];
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
