/*! \file
 *  \brief The backward recurrence of one layer in one persistent kernel, its product
 *         dh_rec = W_hhᵀ · dz_{t+1} on tensor cores: every block keeps its units' rows of W_hhᵀ
 *         (the columns of W_hh) in shared memory as 16-bit mma A fragments, prepared once; the
 *         cell's backward publishes dz_t in 16 bits, which every block of its batch group stages
 *         in double-buffered chunks as the mma's B operand, without a grid barrier; FP32 sums and
 *         the cell's backward in FP32, as training stage 07's. Its mapping: README.md.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// What the backward kernel reads and writes for one layer and one slice of the batch (a
/// launch). Every buffer has the whole batch's rows; a launch touches its own rows only.
struct BackwardArgs {
  const uint4* w_fragments;  // W_hhᵀ as A fragments: [unit block][k tile][lane] (one row tile)
  const float* gates;        // (T, B, 4H): the activated gates i, f, g, o the forward kept
  const float* cell;         // (T + 1, B, H): c0, then c_t at slot t + 1, as the forward kept it
  const float* d_above;  // (T, B, H): dy, or the gradient of this layer's h from the layer above
  const float* dhy;      // (B, H) the gradient of this layer's final h
  const float* dcy;      // (B, H) the gradient of this layer's final c
  float* dz;             // (T, B, 4H) in FP32, written: the bias gradient reads it after
  std::uint16_t* dz16;   // (T, B, 4H) in Element's bits: the sentinel until published; the GEMMs'
                         // operand after
  float* dh0;  // (B, H) written: the gradient of this layer's h0
  float* dc0;  // (B, H) written: the gradient of this layer's c0
  int hidden_size, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block;         // J <= 16: the rows of the block's mma tile that are units
  int unit_blocks;             // U: block = u + U * g
  int group_rows;              // Bg: batch rows per block
  int batch_tiles;             // mma column tiles: ceil(Bg / 8)
  int k_slices;                // S: warps along k per column tile
  int dz_stride;               // words per staged batch row of dz
  int chunk_rows, chunks;      // gate rows (k) of dz per chunk (a multiple of 16), chunks per step
};

/// W_hh (4H x H, FP32, PyTorch's layout) rounded to Element and arranged once as the backward's
/// A fragments of W_hhᵀ, [unit block][k tile][lane] (uint4: four 32-bit words a lane): row m of
/// a block's tile is unit first_unit + m, k is a gate row of W_hh, A[m][k] = W_hh[k][first_unit +
/// m] (the forward's fragments hold W_hh itself). Word r of lane (groupID g, threadID_in_group
/// t) of k tile kt holds row g + 8 (r & 1), k = kt*16 + 2t + 8 (r >> 1) and the next k, the lower
/// k in the low 16 bits (PTX ISA, as arrange_fragments). Zeros past J, past H and past 4H.
/// Grid-stride: one thread a 32-bit word of `fragments`, over every unit block's words.
template <typename Element>
__global__ void arrange_transposed_fragments(const float* w_hh, unsigned* fragments, int H, int J,
                                             int unit_blocks) {
  const int gate_rows = kGates * H, k_tiles = (gate_rows + kMmaK - 1) / kMmaK;
  const std::size_t block_words = static_cast<std::size_t>(k_tiles) * kWarpSize * 4;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < unit_blocks * block_words; n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(n % block_words);
    const int r = i % 4, fragment_lane = (i / 4) % kWarpSize, k_tile = i / (4 * kWarpSize);
    const int row = fragment_lane / 4 + 8 * (r & 1);
    const int k = k_tile * kMmaK + 2 * (fragment_lane % 4) + 8 * (r >> 1);
    const int unit = static_cast<int>(n / block_words) * J + row;
    const bool real = row < J && unit < H;
    // The transpose: column `unit` of W_hh, gate rows k and k + 1.
    fragments[n] = pack_pair<Element>(
        real && k < gate_rows ? w_hh[static_cast<std::size_t>(k) * H + unit] : 0.0f,
        real && k + 1 < gate_rows ? w_hh[static_cast<std::size_t>(k + 1) * H + unit] : 0.0f);
  }
}

/// The whole backward recurrence of one layer (one slice of the batch), t = T-1 down to 0.
/// `Element`: __half or __nv_bfloat16, the type of W_hhᵀ and dz on the tensor cores.
/// Grid: U x G blocks (block = u + U * g), kBackwardThreads threads, all resident (cooperative
/// launch). Block (u, g) owns units u*J .. u*J + J - 1 for the Bg batch rows of group g.
/// A step t: (1) cp.async brings the stash of step t for the block's (unit, row) pairs into
/// shared memory; (2) dh_rec = W_hhᵀ · dz_{t+1} for the pairs (dhy at t = T-1): the block stages
/// dz_{t+1} of its rows, published in 16 bits, into shared memory in chunks of gate rows, every
/// thread's loads of a chunk in flight at once and waited for until published, the next chunk's
/// loads in flight while the block multiplies this one; warp w multiplies the 16 x 16 fragments
/// of W_hhᵀ with 16 x 8 tiles of dz (column tile w % batch_tiles, k slice w / batch_tiles of the
/// chunk's k tiles), mma.sync with FP32 sums, the k slices summed in shared memory in a fixed
/// order; (3) one thread per pair: the cell's backward in FP32, dz_t written in FP32 and
/// published in 16 bits (the signal to every block of the group), dc_{t-1} kept. After step 0,
/// one more product gives dh0. Shared memory (plan.cpp sizes it): w [k tile][lane] uint4 |
/// dz [2][8 * batch_tiles][dz_stride] words (one buffer where one chunk holds all 4H gate rows)
/// | sums [S][16][8 * batch_tiles] | stash [J * Bg][7] | dc [J * Bg].
template <typename Element>
__global__ void __launch_bounds__(kBackwardThreads, 1) backward_persistent(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  const int H = a.hidden_size, J = a.units_per_block, S = a.k_slices, W = a.dz_stride;
  const int Bg = a.group_rows, Bn = a.batch_tiles * kMmaColumns, tid = threadIdx.x;
  const int gate_rows = kGates * H, k_tiles = (gate_rows + kMmaK - 1) / kMmaK;
  const int unit_block = blockIdx.x % a.unit_blocks, group = blockIdx.x / a.unit_blocks;
  const int first_unit = unit_block * J, first_row = a.batch_begin + group * Bg;
  const int rows = min(Bg, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty group of the last slice: nobody waits for it
  const int pairs = J * rows;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  const int staged_words = (a.chunks > 1 ? 2 : 1) * Bn * W;
  uint4* w_s = reinterpret_cast<uint4*>(shared);                            // [k tile][lane]
  unsigned* dz_s = reinterpret_cast<unsigned*>(w_s + k_tiles * kWarpSize);  // [2 or 1][Bn][W]
  float* sums_s = reinterpret_cast<float*>(dz_s + staged_words);            // [S][16][Bn]
  float* stash_s = sums_s + S * kMmaRows * Bn;                              // [J * Bg][7]
  float* dc_s = stash_s + kStashFloats * J * Bg;                            // [J * Bg]

  // ---- once per sequence: this block's fragments of W_hhᵀ (prepared once,
  // arrange_transposed_fragments), copied as they are, all in flight at once.
  const int block_words = k_tiles * kWarpSize;  // uint4, contiguous per unit block
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
  const int last_rows = gate_rows - (a.chunks - 1) * a.chunk_rows;  // a multiple of 4
  int full_first, full_count, last_first, last_count;
  k_range(a.chunk_rows / kMmaK, &full_first, &full_count);
  k_range((last_rows + kMmaK - 1) / kMmaK, &last_first, &last_count);
  const auto recurrent_product = [&](int slot) {
    const std::uint16_t* dz_rows =  // [row][4H]: the published dz of this group's rows
        a.dz16 + (slot * state + static_cast<std::size_t>(first_row) * H) * kGates;
    const auto source = [&](int chunk, int n4, int idx) {  // uint2 idx of a chunk
      return reinterpret_cast<const uint2*>(
                 dz_rows + static_cast<std::size_t>(idx / n4) * gate_rows + chunk * a.chunk_rows) +
             idx % n4;
    };
    uint2 staged[kStageRegistersDz];
    const auto issue_loads = [&](int chunk) {
      const int n4 = (chunk == a.chunks - 1 ? last_rows : a.chunk_rows) / 4, count = rows * n4;
#pragma unroll
      for (int r = 0; r < kStageRegistersDz; ++r) {
        const int idx = tid + r * kBackwardThreads;
        if (idx < count) staged[r] = load_relaxed(source(chunk, n4, idx));  // all in flight
      }
    };
    float acc[4] = {};  // the warp's mma accumulators (C/D fragment)
    issue_loads(0);
    for (int chunk = 0; chunk < a.chunks; ++chunk) {
      const bool last = chunk == a.chunks - 1;
      const int n4 = (last ? last_rows : a.chunk_rows) / 4, count = rows * n4;
      unsigned* buffer = dz_s + (chunk & 1) * Bn * W;  // [Bn][W]
      wait_published_at(
          staged, [&](int idx) { return source(chunk, n4, idx); }, count, tid, kBackwardThreads);
      __syncwarp();  // the warp whole again after its poll: a 1.4x slower backward without (README)
#pragma unroll
      for (int r = 0; r < kStageRegistersDz; ++r) {
        const int idx = tid + r * kBackwardThreads;
        if (idx < count)  // already Element's bits, two k a word: copied, not rounded
          *reinterpret_cast<uint2*>(buffer + idx / n4 * W + 2 * (idx % n4)) = staged[r];
      }
      __syncthreads();                    // the chunk is complete in shared memory
      if (!last) issue_loads(chunk + 1);  // in flight during this chunk's product
      if (computes) {
        // Per k tile: the A fragment (one 16-byte load a lane) and the B fragment, words (k pair
        // t and t + 4, column g) of staged dz, and one mma.
        const int first = last ? last_first : full_first, count_k = last ? last_count : full_count;
        const uint4* w_fragment = w_s + (chunk * a.chunk_rows / kMmaK + first) * kWarpSize + lane;
        const unsigned* dz_fragment =
            buffer + (batch_tile * kMmaColumns + group_id) * W + first * kMmaK / 2 + in_group;
#pragma unroll 4
        for (int step = 0; step < count_k;
             ++step, w_fragment += kWarpSize, dz_fragment += kMmaK / 2)
          mma_16x8x16<Element>(acc, *w_fragment, dz_fragment[0], dz_fragment[4]);
      }
    }
    // One partial tile per k slice: d0, d1 at row (unit) groupID, columns 2 threadID_in_group
    // and the next; d2, d3 eight rows down.
    if (!computes) return;  // warp-uniform
    float* out =
        sums_s + (k_slice * kMmaRows + group_id) * Bn + batch_tile * kMmaColumns + 2 * in_group;
    *reinterpret_cast<float2*>(out) = make_float2(acc[0], acc[1]);
    *reinterpret_cast<float2*>(out + 8 * Bn) = make_float2(acc[2], acc[3]);
  };
  // The sum over the k slices for pair (j, b), in a fixed order: bitwise reproducible.
  const auto dh_recurrent = [&](int j, int b) {
    float sum = 0.0f;
    for (int s = 0; s < S; ++s)
      sum += sums_s[(s * kMmaRows + j) * Bn + b];
    return sum;
  };

  // ---- the steps, from the last.
  for (int t = a.seq_len - 1; t >= 0; --t) {
    fetch_stash(t);
    if (t < a.seq_len - 1) {
      recurrent_product(t + 1);
      __syncthreads();  // every partial sum in shared memory
    }
    wait_copies();  // this thread's stash of step t

    // (3) The cell's backward of each pair, one thread each (the math: README.md).
    for (int p = tid; p < pairs; p += blockDim.x) {
      const int j = p % J, b = p / J, unit = first_unit + j;
      if (unit >= H) continue;
      const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
      const float* kept = stash_s + p * kStashFloats;
      const float i = kept[0], f = kept[1], g = kept[kGateG], o = kept[3];
      const float tanh_c = tanhf(kept[4]), c_prev = kept[5];
      const float dh = kept[6] + (t == a.seq_len - 1 ? a.dhy[out] : dh_recurrent(j, b));
      const float dc = dc_s[p] + dh * o * (1.0f - tanh_c * tanh_c);
      const float d[kGates] = {dc * g * i * (1.0f - i), dc * c_prev * f * (1.0f - f),
                               dc * i * (1.0f - g * g), dh * tanh_c * o * (1.0f - o)};
      const std::size_t at = (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
#pragma unroll
      for (int q = 0; q < kGates; ++q) {
        a.dz[at + q * H] = d[q];  // FP32, for the bias gradient
        store_relaxed(a.dz16 + at + q * H, element_bits<Element>(d[q]));  // the signal
      }
      dc_s[p] = dc * f;  // what c_{t-1} receives through the forget gate
    }
    __syncthreads();  // the next product writes sums_s again
  }

  // ---- after step 0: dh0 = W_hhᵀ · dz_0, and dc0.
  recurrent_product(0);
  __syncthreads();
  for (int p = tid; p < pairs; p += blockDim.x) {
    const int j = p % J, b = p / J, unit = first_unit + j;
    if (unit >= H) continue;
    const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
    a.dh0[out] = dh_recurrent(j, b);
    a.dc0[out] = dc_s[p];
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
