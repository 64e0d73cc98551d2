/*! \file
 *  \brief The backward recurrence for small batches (one batch group, B <= 8): stage 07's
 *         backward, but every thread keeps its share of W_hh's columns (a slice of W_hhᵀ) in
 *         REGISTERS for all T steps, as the forward's register kernel keeps W_hh (forward stage
 *         12's lesson, applied to the backward). Its mapping, registers and costs: README.md.
 */
#pragma once

#include <cstddef>

#include "backward_kernel.cuh"   // BackwardArgs
#include "kernel_registers.cuh"  // sum_over_k_lanes, log2_of
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// The whole backward recurrence of one layer with W_hh's columns in registers, t = T-1 down
/// to 0, for all B <= kMaxRegisterBatch rows in one launch (BackwardArgs: stage 07's; this kernel
/// reads neither unit_quads, k_slices, lanes_rows, stage_threads nor the chunks).
/// Grid: U blocks, kBackwardRegisterThreads threads, all resident (cooperative launch). Block u
/// owns units u*J .. u*J + J - 1 (J <= 4 * kUnitQuads). Thread tid holds, for its row quads
/// i = tid + kBackwardRegisterThreads * m (m < kRowQuads, i < H: gate rows 4i .. 4i + 3), the
/// weights W_hh[4i + e][u*J + n], e < 4, n < 4 * kUnitQuads (zeros past J and H), for the whole
/// sequence.
/// A step t: (1) cp.async brings the stash of step t; (2) the block stages dz_{t+1} of its rows
/// (all 4H gate rows) into shared memory, polling each value as stage 07 does, up to 16 float4
/// per thread in flight at once; one block barrier; (3) per batch row b,
/// thread tid multiplies its row quads of dz with its weights (4 * kUnitQuads sums) and (4) the
/// butterfly of the forward's register kernel sums them over the warp's 32 lanes; each warp
/// leaves its sums in shared memory; one block barrier; (5) one thread per (unit, batch row) adds
/// the warps' sums in a fixed order (bitwise the same every run) and does stage 07's cell
/// backward. After step 0, one more product gives dh0. Shared memory (plan.cpp sizes it):
/// dz [B][H] float4 | sums [8 warps][8 rows][4 * kUnitQuads] | stash [J * B][7] | dc [J * B].
template <int kRowQuads, int kUnitQuads>
__global__ void __launch_bounds__(kBackwardRegisterThreads, 1)
    backward_registers(const BackwardArgs a) {
  constexpr int kUnits = 4 * kUnitQuads;             // a thread's units: the block's, padded
  constexpr int kSums = kUnits * kMaxRegisterBatch;  // a warp's sums: [row][unit]
  constexpr int kThreads = kBackwardRegisterThreads, kWarps = kThreads / kWarpSize;
  extern __shared__ float4 shared[];
  const int H = a.hidden_size, J = a.units_per_block, tid = threadIdx.x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int first_unit = blockIdx.x * J, first_row = a.batch_begin;
  const int rows = a.batch_end - first_row;  // one batch group: every row, at most 8
  const int pairs = J * rows;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  float4* dz_s = shared;                                            // [rows][H]
  float* sums_s = reinterpret_cast<float*>(dz_s + static_cast<std::size_t>(rows) * H);
  float* stash_s = sums_s + kWarps * kSums;      // [J * rows][7]
  float* dc_s = stash_s + kStashFloats * pairs;  // [J * rows]

  // ---- once per sequence: this thread's weights, into registers (the trick of this stage).
  float w[kRowQuads][4][kUnits];
#pragma unroll
  for (int m = 0; m < kRowQuads; ++m) {
    const int i = tid + kThreads * m;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#pragma unroll
      for (int n = 0; n < kUnits; ++n) {
        const int unit = first_unit + n;
        w[m][e][n] = i < H && n < J && unit < H
                         ? __ldg(a.w_hh + static_cast<std::size_t>(4 * i + e) * H + unit)
                         : 0.0f;
      }
    }
  }
  for (int p = tid; p < pairs; p += blockDim.x) {  // dc from after the last step: dcy
    const int unit = first_unit + p % J, row = first_row + p / J;
    dc_s[p] = unit < H ? a.dcy[static_cast<std::size_t>(row) * H + unit] : 0.0f;
  }

  // ---- (1) the stash of step t for this thread's own pairs (stage 07's).
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

  // ---- (2)-(4) the warps' sums of W_hhᵀ · dz (slot `slot`), into sums_s. The block's rows of
  // dz are one range of rows * H float4 (a batch group's rows are adjacent): staged as the
  // forward stages h (stage_published: thread tid carries float4 tid, tid + 256, ..., up to
  // kRegisterStageDz loads in flight at once). After the butterfly a lane holds one sum (kUnits
  // < 32), number first_sum; 32 / kUnits lanes hold the same one, the first of them writes it.
  constexpr int kStages = log2_of(kWarpSize), kHalvings = log2_of(kUnits);
  const int first_sum = lane >> (kStages - kHalvings);
  const bool writes_sums = (lane & ((1 << (kStages - kHalvings)) - 1)) == 0;
  const auto recurrent_product = [&](int slot) {
    const float4* dz_rows = reinterpret_cast<const float4*>(a.dz) + slot * state +
                            static_cast<std::size_t>(first_row) * H;
    stage_published<kRegisterStageDz>(dz_rows, dz_s, rows * H, tid, kThreads, [] {});
    __syncthreads();                  // dz of every row in shared memory
    for (int b = 0; b < rows; ++b) {  // a row at a time: kUnits sums in registers, not 8x more
      float acc[kUnits] = {};
#pragma unroll
      for (int m = 0; m < kRowQuads; ++m) {
        const int i = tid + kThreads * m;
        if (i >= H) break;
        const float4 value = dz_s[b * H + i];  // a warp: 32 consecutive float4
        const float d[4] = {value.x, value.y, value.z, value.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
#pragma unroll
          for (int n = 0; n < kUnits; ++n)  // weights from registers: no shared-memory read
            acc[n] = fmaf(w[m][e][n], d[e], acc[n]);
        }
      }
      sum_over_k_lanes(acc, lane, kWarpSize);  // the warp's 32 lanes, a fixed order
      if (writes_sums) sums_s[(warp * kMaxRegisterBatch + b) * kUnits + first_sum] = acc[0];
    }
  };
  // The sum over the warps for pair (j, b), in a fixed order: bitwise reproducible.
  const auto dh_recurrent = [&](int j, int b) {
    float sum = 0.0f;
    for (int s = 0; s < kWarps; ++s)
      sum += sums_s[s * kSums + b * kUnits + j];
    return sum;
  };

  // ---- the steps, from the last. Two barriers a step: after the staging (dz_s complete) and
  // after the product (sums_s complete). A thread stages the next step's dz after the second
  // (every product is done with dz_s), and writes its sums after the next step's first, which
  // every thread reaches only when done with this step's cells (and their reads of sums_s).
  for (int t = a.seq_len - 1; t >= 0; --t) {
    fetch_stash(t);
    if (t < a.seq_len - 1) recurrent_product(t + 1);
    __syncthreads();  // every warp's sums in shared memory
    wait_copies();    // this thread's stash of step t

    // (5) The cell's backward of each pair, one thread each (stage 07's; the math: README.md).
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
      store_relaxed(dz, dc * g * i * (1.0f - i));  // published: the signal to every block
      store_relaxed(dz + H, dc * c_prev * f * (1.0f - f));
      store_relaxed(dz + 2 * H, dc * i * (1.0f - g * g));
      store_relaxed(dz + 3 * H, dh * tanh_c * o * (1.0f - o));
      dc_s[p] = dc * f;  // what c_{t-1} receives through the forget gate
    }
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
