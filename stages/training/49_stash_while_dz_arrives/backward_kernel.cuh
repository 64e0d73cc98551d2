/*! \file
 *  \brief The backward recurrence of one layer in one persistent kernel: every block keeps the
 *         columns of W_hh of its hidden units (a slice of W_hhᵀ) in shared memory for all T steps,
 *         computes the cell's backward for its units and publishes dz_t, which every block of its
 *         batch group stages into shared memory in double-buffered chunks, without a grid
 *         barrier. Its mapping and costs: README.md.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kMaxUnitQuads = kMaxUnitsPerBlock / 4;  // a thread's float4 sums

/// What the backward kernel reads and writes for one layer and one slice of the batch (a
/// launch). Every buffer has the whole batch's rows; a launch touches its own rows only.
struct BackwardArgs {
  const float* w_hh;     // (4H, H) row-major, PyTorch's layout
  const float* gates;    // (T, B, 4H): the activated gates i, f, g, o the forward kept
  const float* cell;     // (T + 1, B, H): c0, then c_t at slot t + 1, as the forward kept it
  const float* d_above;  // (T, B, H): dy, or the gradient of this layer's h from the layer above
  const float* dhy;      // (B, H) the gradient of this layer's final h
  const float* dcy;      // (B, H) the gradient of this layer's final c
  float* dz;   // (T, B, 4H): the sentinel until published; the weight gradients read it after
  float* dh0;  // (B, H) written: the gradient of this layer's h0
  float* dc0;  // (B, H) written: the gradient of this layer's c0
  int hidden_size, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block;         // J
  int unit_quads;              // J4 = ceil(J / 4)
  int unit_blocks;             // U: block = u + U * g
  int group_rows;              // Bg: batch rows per block
  int k_slices;                // S: warps that share one row quad's dot products
  int lanes_rows;              // batch rows of a warp's lanes: 1, 2 or 4
  int stage_threads;           // threads that stage one batch row of dz
  int chunk_rows, chunks;      // gate rows of dz per chunk (a multiple of 4), chunks per step
};

/// The whole backward recurrence of one layer (one slice of the batch), t = T-1 down to 0.
/// Grid: U x G blocks (block = u + U * g), kBackwardThreads threads, all resident (cooperative
/// launch). Block (u, g) owns units u*J .. u*J + J - 1 for the Bg batch rows of group g.
/// Where the plan says so (one chunk, one float4 a lane), step (2) reads dz_{t+1} straight
/// from L2 into the lanes that multiply it, each value polled by its one reader, and the block
/// neither stages it in shared memory nor waits at a barrier for it.
/// A step t: (1) the cell's backward of step t waits only for dh_rec: its seven factors (what
/// does not depend on dz_{t+1}) were computed at the end of step t + 1, from a stash copied
/// (cp.async) at the end of step t + 2; (2) dh_rec = W_hhᵀ · dz_{t+1} for the pairs (dhy at t =
/// T-1): the block stages dz_{t+1} of its rows into shared memory in chunks of gate rows, every
/// thread's loads of a chunk in flight at once and waited for until published, the next chunk's
/// loads in flight while the block multiplies this one; lane (k, row) of a warp multiplies 16 bytes
/// of the chunk (4 consecutive gate rows k) with the 4 x J weights of those rows; sums over a
/// warp's k lanes by shuffles, over the k slices in shared memory, each in a fixed order; (3) one
/// thread per pair: the cell's backward from the factors, dz_t published (the signal to every block
/// of the group) and dc_{t-1} kept. The stash of step t - 2 is copied and the factors of step t - 1
/// computed: where the lanes read dz directly, in the next step's product, between issuing its
/// loads of dz_t and waiting for them, while they fly; where dz is staged, before the barrier
/// that ends step t. After step 0, one more product gives dh0. Shared memory
/// (plan.cpp sizes it): w [4 * J4][H] float4 | dz [2][Bg][chunk_rows / 4] float4 (one buffer
/// where one chunk holds all 4H gate rows) | sums [S][Bg][J4] float4 | stash [2][J * Bg][7]
/// (slot t % 2) | dc [J * Bg].
/// kDirect: the float4 of dz a lane loads itself (plan.h, dz_direct_float4); 0: dz is staged. One
/// instantiation each, so that the direct path's registers do not add to the staged path's.
template <int kDirect>
__global__ void __launch_bounds__(kBackwardThreads, 1) backward_persistent(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  const int H = a.hidden_size, J = a.units_per_block, J4 = a.unit_quads, S = a.k_slices;
  const int Bg = a.group_rows, tid = threadIdx.x;
  const int unit_block = blockIdx.x % a.unit_blocks, group = blockIdx.x / a.unit_blocks;
  const int first_unit = unit_block * J, first_row = a.batch_begin + group * Bg;
  const int rows = min(Bg, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty group of the last slice: nobody waits for it
  const int C4 = a.chunk_rows / 4, last4 = H - (a.chunks - 1) * C4;  // float4 of a chunk's row
  const int pairs = J * rows;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  float4* w_s = shared;                                             // [4 * J4][H]
  float4* dz_s = w_s + static_cast<std::size_t>(4) * J4 * H;        // [2 or 1][Bg][C4]
  float4* sums_s = dz_s + (a.chunks > 1 ? 2 : 1) * Bg * C4;         // [S][Bg][J4]
  float* stash_s = reinterpret_cast<float*>(sums_s + S * Bg * J4);  // [J * Bg][7]
  float* dc_s = stash_s + kStashSteps * kStashFloats * J * Bg;      // [J * Bg]
  const float* sums_flat = reinterpret_cast<const float*>(sums_s);  // [S][Bg][4 * J4]

  // ---- once per sequence: the columns of W_hh of this block's units, read from the parameter
  // and transposed on the way: w_s[(4v + e) * H + i] = W_hh[4i + e][4 units from first_unit + 4v].
  float* w_flat = reinterpret_cast<float*>(w_s);
  const int padded_units = 4 * J4;  // zeros past J (and past H in the last block)
  for (int i = tid; i < kGates * H * padded_units; i += blockDim.x) {
    const int k = i / padded_units, j = i % padded_units, unit = first_unit + j;
    w_flat[((4 * (j / 4) + k % 4) * H + k / 4) * 4 + j % 4] =
        j < J && unit < H ? a.w_hh[static_cast<std::size_t>(k) * H + unit] : 0.0f;
  }
  for (int p = tid; p < pairs; p += blockDim.x) {  // dc from after the last step: dcy
    const int unit = first_unit + p % J, row = first_row + p / J;
    dc_s[p] = unit < H ? a.dcy[static_cast<std::size_t>(row) * H + unit] : 0.0f;
  }
  __syncthreads();

  // ---- (1) the stash of step t for this thread's own pairs, copied two steps ahead into slot
  // t % 2, and the factors of the cell's backward computed from it in place one step ahead:
  // neither depends on dz, so neither needs to wait for it.
  const auto kept_of = [&](int t, int p) { return stash_s + ((t & 1) * pairs + p) * kStashFloats; };
  const auto fetch_stash = [&](int t) {
    for (int p = tid; p < pairs; p += blockDim.x) {
      const int unit = first_unit + p % J;
      if (unit >= H) continue;
      const std::size_t out = static_cast<std::size_t>(first_row + p / J) * H + unit;
      const float* gates = a.gates + (t * state + out - unit) * kGates + unit;  // q at [q * H]
      float* kept = kept_of(t, p);
      for (int q = 0; q < kGates; ++q)
        copy_async_4(kept + q, gates + q * H);
      copy_async_4(kept + 4, a.cell + (t + 1) * state + out);  // c_t
      copy_async_4(kept + 5, a.cell + t * state + out);        // c_{t-1}
      copy_async_4(kept + 6, a.d_above + t * state + out);
    }
    commit_copies();
  };
  // i, f, g, o, c_t, c_{t-1}, dh from above -> the factors of dz_i, dz_f, dz_g, dz_o by dc (or
  // dh for o), of dc by dh, f, dh from above. Called once step t's copies have arrived.
  const auto prepare_factors = [&](int t) {
    for (int p = tid; p < pairs; p += blockDim.x) {
      if (first_unit + p % J >= H) continue;
      float* kept = kept_of(t, p);
      const float i = kept[0], f = kept[1], g = kept[kGateG], o = kept[3];
      const float tanh_c = tanhf(kept[4]), c_prev = kept[5];
      kept[0] = g * i * (1.0f - i);
      kept[1] = c_prev * f * (1.0f - f);
      kept[kGateG] = i * (1.0f - g * g);
      kept[3] = tanh_c * o * (1.0f - o);
      kept[4] = o * (1.0f - tanh_c * tanh_c);
      kept[5] = f;  // kept[6], dh from above, stays
    }
  };

  // ---- (2) partial sums of W_hhᵀ · dz (slot `slot`) for the block's pairs, into sums_s; every
  // thread calls while_loads_fly() once, after its first loads of dz are issued and before it
  // waits for them.
  // Staging: thread tid carries float4 i = stage_first + r * stage_threads of batch row
  // stage_row of each chunk. Product: warp `warp` takes k slice k_slice of one row group; its
  // lane (lane_k, lane_row) takes batch_row = lanes_rows * group + lane_row and the float4
  // i = lanes_k * (k_slice + S * m) + lane_k, m = 0, 1, ..., of each chunk.
  const int stage_row = tid / a.stage_threads, stage_first = tid % a.stage_threads;
  const int lanes_k = kWarpSize / a.lanes_rows, warp = tid / kWarpSize, lane_k = tid % lanes_k;
  const int items = (Bg + a.lanes_rows - 1) / a.lanes_rows * S;  // at most one per warp
  const int k_slice = warp % S, batch_row = warp / S * a.lanes_rows + tid % kWarpSize / lanes_k;
  const int stride = lanes_k * S;  // float4 between a lane's consecutive ones in a chunk
  const auto recurrent_product = [&](int slot, auto while_loads_fly) {
    const float4* dz_row = reinterpret_cast<const float4*>(a.dz) + slot * state +
                           static_cast<std::size_t>(first_row + stage_row) * H;  // H per row
    float4 staged[kStageRegistersDz];
    const auto issue_loads = [&](int chunk) {
      const int count = stage_row < rows ? (chunk == a.chunks - 1 ? last4 : C4) : 0;
#pragma unroll
      for (int r = 0; r < kStageRegistersDz; ++r) {
        const int i = stage_first + r * a.stage_threads;
        if (i < count) staged[r] = load_relaxed(dz_row + chunk * C4 + i);  // all in flight at once
      }
    };
    float4 acc[kMaxUnitQuads] = {};
    // One lane multiplies each float4 of dz, by all the block's units: where the plan says so the
    // lane loads and polls its share itself, and no other thread waits for it.
    const bool direct = kDirect > 0 && warp < items && batch_row < rows;
    const float4* row = reinterpret_cast<const float4*>(a.dz) + slot * state +
                        static_cast<std::size_t>(first_row + batch_row) * H;
    const int first = lanes_k * k_slice + lane_k;
    float4 mine[kDirect > 0 ? kDirect : 1];
    if (direct) {
#pragma unroll
      for (int r = 0; r < kDirect; ++r)
        if (first + r * stride < H) mine[r] = load_relaxed(row + first + r * stride);
    }
    if constexpr (kDirect == 0) issue_loads(0);
    while_loads_fly();  // work that does not need dz, while the loads are in flight
    if (direct) {
      wait_published(mine, row, H, first, stride);
#pragma unroll
      for (int r = 0; r < kDirect; ++r) {
        const int i = first + r * stride;
        if (i >= H) break;
        const float d[4] = {mine[r].x, mine[r].y, mine[r].z, mine[r].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
#pragma unroll
          for (int v = 0; v < kMaxUnitQuads; ++v) {
            if (v >= J4) break;
            const float4 w = w_s[(4 * v + e) * H + i];
            acc[v].x = fmaf(w.x, d[e], acc[v].x);
            acc[v].y = fmaf(w.y, d[e], acc[v].y);
            acc[v].z = fmaf(w.z, d[e], acc[v].z);
            acc[v].w = fmaf(w.w, d[e], acc[v].w);
          }
        }
      }
    }
    for (int chunk = 0; chunk < (kDirect > 0 ? 0 : a.chunks); ++chunk) {
      const bool last = chunk == a.chunks - 1;
      const int n4 = last ? last4 : C4, count = stage_row < rows ? n4 : 0;
      float4* buffer = dz_s + (chunk & 1) * Bg * C4;  // [Bg][C4]
      wait_published(staged, dz_row + chunk * C4, count, stage_first, a.stage_threads);
#pragma unroll
      for (int r = 0; r < kStageRegistersDz; ++r) {
        const int i = stage_first + r * a.stage_threads;
        if (i < count) buffer[stage_row * C4 + i] = staged[r];
      }
      __syncthreads();                    // the chunk is complete in shared memory
      if (!last) issue_loads(chunk + 1);  // in flight during this chunk's product
      if (warp >= items || batch_row >= rows) continue;
      const float4* w_chunk = w_s + chunk * C4;  // row 4i + e of the chunk: [(4v + e) * H + i]
#pragma unroll 1  // unrolled, the loop spills (128 registers at 512 threads)
      for (int i = lanes_k * k_slice + lane_k; i < n4; i += stride) {
        const float4 value = buffer[batch_row * C4 + i];
        const float d[4] = {value.x, value.y, value.z, value.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
#pragma unroll
          for (int v = 0; v < kMaxUnitQuads; ++v) {
            if (v >= J4) break;
            const float4 w = w_chunk[(4 * v + e) * H + i];  // lanes_k lanes: contiguous bytes
            acc[v].x = fmaf(w.x, d[e], acc[v].x);
            acc[v].y = fmaf(w.y, d[e], acc[v].y);
            acc[v].z = fmaf(w.z, d[e], acc[v].z);
            acc[v].w = fmaf(w.w, d[e], acc[v].w);
          }
        }
      }
    }
    if (warp >= items) return;  // warp-uniform
#pragma unroll
    for (int v = 0; v < kMaxUnitQuads; ++v) {
      if (v >= J4) break;
      for (int offset = 1; offset < lanes_k; offset *= 2) {  // the k lanes, a fixed order
        acc[v].x += __shfl_xor_sync(kFullMask, acc[v].x, offset);
        acc[v].y += __shfl_xor_sync(kFullMask, acc[v].y, offset);
        acc[v].z += __shfl_xor_sync(kFullMask, acc[v].z, offset);
        acc[v].w += __shfl_xor_sync(kFullMask, acc[v].w, offset);
      }
      if (lane_k == 0 && batch_row < rows) sums_s[(k_slice * Bg + batch_row) * J4 + v] = acc[v];
    }
  };
  // The sum over the k slices for pair (j, b), in a fixed order: bitwise reproducible.
  const auto dh_recurrent = [&](int j, int b) {
    float sum = 0.0f;
    for (int s = 0; s < S; ++s)
      sum += sums_flat[(s * Bg + b) * 4 * J4 + j];
    return sum;
  };

  // ---- the steps, from the last. Before them: the stash of steps T-1 and T-2, the factors of
  // step T-1.
  fetch_stash(a.seq_len - 1);
  if (a.seq_len > 1) fetch_stash(a.seq_len - 2);
  a.seq_len > 1 ? wait_copies_but_newest() : wait_copies();
  prepare_factors(a.seq_len - 1);
  // The stash of step u - 2 into the slot step u has read, and the factors of step u - 1 (its
  // copies, started a step before, have arrived).
  const auto stash_ahead = [&](int u) {
    if (u >= 2) fetch_stash(u - 2);
    if (u >= 1) {
      u >= 2 ? wait_copies_but_newest() : wait_copies();
      prepare_factors(u - 1);
    }
  };
  for (int t = a.seq_len - 1; t >= 0; --t) {
    if (t < a.seq_len - 1) {
      recurrent_product(t + 1, [&] {
        if constexpr (kDirect > 0) stash_ahead(t + 1);  // where the lanes read dz themselves
      });
      __syncthreads();  // every partial sum and factor in shared memory
    }

    // (3) The cell's backward of each pair, one thread each, from its factors (README.md): all
    // that is left between dh_rec and dz_t is a sum and five products.
    for (int p = tid; p < pairs; p += blockDim.x) {
      const int j = p % J, b = p / J, unit = first_unit + j;
      if (unit >= H) continue;
      const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
      const float* factor = kept_of(t, p);
      const float dh = factor[6] + (t == a.seq_len - 1 ? a.dhy[out] : dh_recurrent(j, b));
      const float dc = dc_s[p] + dh * factor[4];
      float* dz = a.dz + (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
      store_relaxed(dz, dc * factor[0]);  // published: the signal to the group
      store_relaxed(dz + H, dc * factor[1]);
      store_relaxed(dz + 2 * H, dc * factor[kGateG]);
      store_relaxed(dz + 3 * H, dh * factor[3]);
      dc_s[p] = dc * factor[5];  // what c_{t-1} receives through the forget gate
    }
    // Where dz is staged, stage 25's order (the early loads of every value staged cost more than
    // the stash work they hide: README.md).
    if constexpr (kDirect == 0) stash_ahead(t);
    __syncthreads();  // dz_t visible to the block's loads; the next product writes sums_s again
  }

  // ---- after step 0: dh0 = W_hhᵀ · dz_0, and dc0.
  recurrent_product(0, [] {});
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
