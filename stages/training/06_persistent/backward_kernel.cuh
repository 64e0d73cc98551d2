/*! \file
 *  \brief The backward recurrence of one layer in one persistent kernel: every block keeps the
 *         columns of W_hh of its hidden units (a slice of W_hhᵀ) in shared memory for all T steps,
 *         computes the cell's backward for its units and publishes dz_t, which every block of its
 *         batch group reads, without a grid barrier. Its mapping and costs: README.md.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kLoadsInFlightDz = 8;  // float4 loads of dz a thread issues before it waits for any
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
};

/// The whole backward recurrence of one layer (one slice of the batch), t = T-1 down to 0.
/// Grid: U x G blocks (block = u + U * g), kBackwardThreads threads, all resident (cooperative
/// launch). Block (u, g) owns units u*J .. u*J + J - 1 for the Bg batch rows of group g.
/// A step t: (1) cp.async brings the stash of step t for the block's (unit, row) pairs into
/// shared memory; (2) dh_rec = W_hhᵀ · dz_{t+1} for the pairs (dhy at t = T-1): lane (k, row) of
/// a warp reads 16 bytes of dz_{t+1} (4 consecutive gate rows k) straight from L2, waiting until
/// they are published, and multiplies them with the 4 x J weights of those rows from shared
/// memory; sums over a warp's 8 k lanes by shuffles, over the k slices in shared memory, each in
/// a fixed order; (3) one thread per pair: the cell's backward, dz_t published (the signal to
/// every block of the group) and dc_{t-1} kept. After step 0, one more product gives dh0.
/// Shared memory (plan.cpp sizes it): w [4 * J4][H] float4 | sums [S][Bg][J4] float4 |
/// stash [J * Bg][7] | dc [J * Bg].
__global__ void __launch_bounds__(kBackwardThreads, 1) backward_persistent(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  const int H = a.hidden_size, J = a.units_per_block, J4 = a.unit_quads, S = a.k_slices;
  const int Bg = a.group_rows, tid = threadIdx.x;
  const int unit_block = blockIdx.x % a.unit_blocks, group = blockIdx.x / a.unit_blocks;
  const int first_unit = unit_block * J, first_row = a.batch_begin + group * Bg;
  const int rows = min(Bg, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty group of the last slice: nobody waits for it
  const int pairs = J * rows;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  float4* w_s = shared;                                             // [4 * J4][H]
  float4* sums_s = w_s + static_cast<std::size_t>(4) * J4 * H;      // [S][Bg][J4]
  float* stash_s = reinterpret_cast<float*>(sums_s + S * Bg * J4);  // [J * Bg][7]
  float* dc_s = stash_s + kStashFloats * J * Bg;                    // [J * Bg]
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

  // ---- (2) partial sums of W_hhᵀ · dz (slot `slot`) for the block's pairs, into sums_s.
  // Item (row quad, k slice s) of a warp: lane (lane_k, lane_row) takes batch row
  // 4 * quad + lane_row and the float4 i = 8 * (s + S * m) + lane_k of its dz row, m = 0, 1, ...
  const int warp = tid / kWarpSize, lane_k = tid % kLanesK, lane_row = tid % kWarpSize / kLanesK;
  const int warps = blockDim.x / kWarpSize, items = (Bg + kLanesRows - 1) / kLanesRows * S;
  const int stride = kLanesK * S;  // float4 between a lane's consecutive loads
  const auto recurrent_product = [&](int slot) {
    const float4* dz_slot = reinterpret_cast<const float4*>(a.dz) + slot * state;  // H per row
    for (int item = warp; item < items; item += warps) {                           // warp-uniform
      const int s = item % S, b = item / S * kLanesRows + lane_row;
      const float4* dz_row = dz_slot + static_cast<std::size_t>(first_row + b) * H;
      const int count = b < rows ? H : 0;  // float4 in this lane's row
      float4 acc[kMaxUnitQuads] = {};
      for (int base = kLanesK * s + lane_k; base - lane_k < H; base += kLoadsInFlightDz * stride) {
        float4 staged[kLoadsInFlightDz];
#pragma unroll
        for (int r = 0; r < kLoadsInFlightDz; ++r) {
          const int i = base + r * stride;
          if (i < count) staged[r] = load_relaxed(dz_row + i);  // all in flight at once
        }
        wait_published(staged, dz_row, count, base, stride);
#pragma unroll
        for (int r = 0; r < kLoadsInFlightDz; ++r) {
          const int i = base + r * stride;
          if (i >= count) continue;
          const float d[4] = {staged[r].x, staged[r].y, staged[r].z, staged[r].w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
#pragma unroll
            for (int v = 0; v < kMaxUnitQuads; ++v) {
              if (v >= J4) break;
              const float4 w = w_s[(4 * v + e) * H + i];  // 8 lanes: 128 contiguous bytes
              acc[v].x = fmaf(w.x, d[e], acc[v].x);
              acc[v].y = fmaf(w.y, d[e], acc[v].y);
              acc[v].z = fmaf(w.z, d[e], acc[v].z);
              acc[v].w = fmaf(w.w, d[e], acc[v].w);
            }
          }
        }
      }
#pragma unroll
      for (int v = 0; v < kMaxUnitQuads; ++v) {
        if (v >= J4) break;
        for (int offset = 1; offset < kLanesK; offset *= 2) {  // the 8 k lanes, a fixed order
          acc[v].x += __shfl_xor_sync(kFullMask, acc[v].x, offset);
          acc[v].y += __shfl_xor_sync(kFullMask, acc[v].y, offset);
          acc[v].z += __shfl_xor_sync(kFullMask, acc[v].z, offset);
          acc[v].w += __shfl_xor_sync(kFullMask, acc[v].w, offset);
        }
        if (lane_k == 0 && b < rows) sums_s[(s * Bg + b) * J4 + v] = acc[v];
      }
    }
  };
  // The sum over the k slices for pair (j, b), in a fixed order: bitwise reproducible.
  const auto dh_recurrent = [&](int j, int b) {
    float sum = 0.0f;
    for (int s = 0; s < S; ++s)
      sum += sums_flat[(s * Bg + b) * 4 * J4 + j];
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
      float* dz = a.dz + (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
      store_relaxed(dz, dc * g * i * (1.0f - i));  // published: the signal to the group
      store_relaxed(dz + H, dc * c_prev * f * (1.0f - f));
      store_relaxed(dz + 2 * H, dc * i * (1.0f - g * g));
      store_relaxed(dz + 3 * H, dh * tanh_c * o * (1.0f - o));
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
