/*! \file
 *  \brief The shared-memory kernel (any batch): W_hh's slice in shared memory, a register-tiled
 *         split-k product, all of h_{t-1} staged each step. Its mapping: README.md.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"
#include "harness/phase_trace.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kLoadsInFlight = 8;  // loads of h_{t-1} a thread issues before it waits for any

/// What the shared-memory kernel reads and writes for one layer and one slice of the batch, and
/// its plan (plan.h).
struct SharedKernelArgs {
  const float* w_hh;        // (4H, H) row-major, PyTorch's layout
  const float* input_part;  // (T, B, 4H): W_ih · x_t for every step (biases not yet added)
  const float* b_ih;        // (4H)
  const float* b_hh;        // (4H)
  const float* c0;          // (B, H) this layer's initial c
  float* y;                 // (T, B, H) this layer's h at every step
  float* hy;                // (B, H) final h
  float* cy;                // (B, H) final c
  float* exchange;          // (T + 1, rows, H): published h of the launch's rows; slot 0 = h0
  int hidden, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block, padded_batch;
  int lanes_batch, lanes_units, phases, tile_groups_units, tile_groups_batch, k_slices;
  long long* trace;  // nullptr, or kTraceSlots cycle counts of block 0 (--trace)
};

/// The persistent kernel of one layer (one slice of the batch): all T steps.
/// Grid: U blocks, plan.threads threads. Dynamic shared memory:
/// w [H][J] float4 | h [H][Bh] | partial sums [k_slices][J][4][Bp] | c [J][Bp] | biases [J][4],
/// Bh = Bp rounded up to an odd number of float4 (as plan.cpp sizes it).
template <int kTileBatch>
__global__ void __launch_bounds__(max_threads_for_tile(kTileBatch), 1)
    persistent_lstm_kernel(const SharedKernelArgs a) {
  static_assert(kTileBatch % 4 == 0, "a tile row is a whole number of float4");
  constexpr int kTile4 = kTileBatch / 4;  // float4 of h per k in a thread's tile
  extern __shared__ float4 shared[];
  const int H = a.hidden, J = a.units_per_block, Bp = a.padded_batch, Bp4 = Bp / 4;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int first_unit = blockIdx.x * J;
  const int first_row = a.batch_begin;  // batch row of local b = 0
  const int rows = a.batch_end - a.batch_begin;
  // float4 per row of staged h: odd, so that a warp's stores to 32 consecutive k rows fall on 8
  // different groups of 4 banks (a 4-way conflict, not up to 32-way).
  const int Bh4 = Bp4 | 1;

  float4* w_s = shared;                                     // [H][J]: (i, f, g, o) of unit j at k
  float4* h_s = w_s + static_cast<std::size_t>(H) * J;      // [H][Bh4]
  float* sums_s = reinterpret_cast<float*>(h_s + H * Bh4);  // [slice][j][q][Bp]
  float* cell_s = sums_s + a.k_slices * J * kGates * Bp;    // [J][Bp]
  float* bias_s = cell_s + J * Bp;                          // [J][4]
  float* h_flat = reinterpret_cast<float*>(h_s);            // h_flat[k * 4 Bh4 + b]

  // ---- once per sequence: this block's rows of W_hh, its biases and c0, into shared memory.
  float* w_flat = reinterpret_cast<float*>(w_s);  // w_flat[k * 4J + 4j + q]
  for (int i = tid; i < kGates * J * H; i += blockDim.x) {
    const int k = i % H, row = i / H, j = row / kGates, q = row % kGates, unit = first_unit + j;
    w_flat[k * kGates * J + row] =
        unit < H ? a.w_hh[(static_cast<std::size_t>(q) * H + unit) * H + k] : 0.0f;
  }
  for (int i = tid; i < kGates * J; i += blockDim.x) {
    const int unit = first_unit + i / kGates, q = i % kGates;
    bias_s[i] = unit < H ? a.b_ih[q * H + unit] + a.b_hh[q * H + unit] : 0.0f;
  }
  for (int i = tid; i < J * Bp; i += threads) {
    const int unit = first_unit + i / Bp, b = i % Bp;
    cell_s[i] =
        (unit < H && b < rows) ? a.c0[static_cast<std::size_t>(first_row + b) * H + unit] : 0.0f;
  }
  for (int i = tid; i < H * Bh4; i += threads)  // the padding columns of h stay zero
    h_s[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncthreads();

  // ---- this thread's register tile: unit j (local), batch tile, k phase and k slice.
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int lane_b = lane % a.lanes_batch;
  const int lane_u = (lane / a.lanes_batch) % a.lanes_units;
  const int phase = lane / (a.lanes_batch * a.lanes_units);
  const int tile_groups = a.tile_groups_units * a.tile_groups_batch;
  const int tile_group = warp % tile_groups, k_slice = warp / tile_groups;
  const int j = (tile_group / a.tile_groups_batch) * a.lanes_units + lane_u;
  const int batch_tile = (tile_group % a.tile_groups_batch) * a.lanes_batch + lane_b;
  const bool warp_computes = k_slice < a.k_slices;  // warp-uniform: spare warps only stage
  const bool computes = warp_computes && j < J && batch_tile * kTileBatch < Bp;
  // Columns past the block's batch rows hold padding: the warp's reduction skips them.
  const int warp_columns = rows - (tile_group % a.tile_groups_batch) * a.lanes_batch * kTileBatch;
  // The k rows this thread multiplies: k slice k_slice of the H rows, every phases-th row from
  // its phase.
  const int k_first = k_slice * H / a.k_slices + phase, k_end = (k_slice + 1) * H / a.k_slices;
  const int k_count = k_first < k_end ? (k_end - k_first + a.phases - 1) / a.phases : 0;
  const int w_stride = a.phases * J, h_stride = a.phases * Bh4;
  // This thread's cell updates: pairs (unit pj, batch row pb) = tid, tid + threads, ...
  const int pairs = J * Bp;
  const int first_pj = tid / Bp, first_pb = tid % Bp;
  const int pair_step_units = threads / Bp, pair_step_rows = threads % Bp;

  __shared__ long long trace_spent[kTraceSlots - 1];
  PhaseTrace trace(a.trace, trace_spent);

  for (int t = 0; t < a.seq_len; ++t) {
    trace.start_step();
    // h_{t-1} of the launch's rows into shared memory, transposed to [k][b]. Other SMs publish
    // it: relaxed loads through L2, kLoadsInFlight per thread at once, re-read until none holds
    // the sentinel.
    const float* h_prev = a.exchange + static_cast<std::size_t>(t) * rows * H;
    float* h_next = a.exchange + static_cast<std::size_t>(t + 1) * rows * H;
    const float* input_t = a.input_part + static_cast<std::size_t>(t) * a.batch * kGates * H;
    for (int base = tid; base < rows * H; base += kLoadsInFlight * blockDim.x) {
      float staged[kLoadsInFlight];
#pragma unroll
      for (int r = 0; r < kLoadsInFlight; ++r) {
        const int i = base + r * blockDim.x;
        if (i < rows * H) staged[r] = load_relaxed(h_prev + i);
      }
      wait_published(staged, h_prev, rows * H, base, blockDim.x);
#pragma unroll
      for (int r = 0; r < kLoadsInFlight; ++r) {
        const int i = base + r * blockDim.x;
        if (i < rows * H) h_flat[(i % H) * 4 * Bh4 + i / H] = staged[r];  // b = i / H, k = i % H
      }
    }
    __syncthreads();  // h_{t-1} complete in shared memory
    trace.phase(0);

    float acc[kGates][kTileBatch] = {};
    if (computes) {
      const float4* w_row = w_s + k_first * J + j;  // i, f, g, o of unit j at row k
      const float4* h_row = h_s + k_first * Bh4 + batch_tile * kTile4;
#pragma unroll 4
      for (int step = 0; step < k_count; ++step, w_row += w_stride, h_row += h_stride) {
        const float4 w = *w_row;
        float4 h[kTile4];
#pragma unroll
        for (int v = 0; v < kTile4; ++v)
          h[v] = h_row[v];
#pragma unroll
        for (int v = 0; v < kTile4; ++v) {
          const float hb[4] = {h[v].x, h[v].y, h[v].z, h[v].w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[0][4 * v + e] = fmaf(w.x, hb[e], acc[0][4 * v + e]);
            acc[1][4 * v + e] = fmaf(w.y, hb[e], acc[1][4 * v + e]);
            acc[2][4 * v + e] = fmaf(w.z, hb[e], acc[2][4 * v + e]);
            acc[3][4 * v + e] = fmaf(w.w, hb[e], acc[3][4 * v + e]);
          }
        }
      }
    }
    trace.phase(1);

    // Sum the k phases of a warp (lanes lanes_batch * lanes_units apart), then leave one
    // partial tile per k slice in shared memory.
    if (warp_computes) {
      for (int offset = a.lanes_batch * a.lanes_units; offset < kWarpSize; offset *= 2) {
#pragma unroll
        for (int e = 0; e < kTileBatch; ++e) {
          if (e >= warp_columns) break;
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            acc[q][e] += __shfl_xor_sync(kFullMask, acc[q][e], offset);
        }
      }
      if (computes && phase == 0) {
#pragma unroll
        for (int q = 0; q < kGates; ++q) {
          float4* out = reinterpret_cast<float4*>(sums_s + ((k_slice * J + j) * kGates + q) * Bp +
                                                  batch_tile * kTileBatch);
#pragma unroll
          for (int v = 0; v < kTile4; ++v)
            out[v] =
                make_float4(acc[q][4 * v], acc[q][4 * v + 1], acc[q][4 * v + 2], acc[q][4 * v + 3]);
        }
      }
    }
    __syncthreads();
    trace.phase(2);

    // The cell update of this thread's (unit, batch row) pairs; publishing h_t is the signal.
    for (int pair = tid, pj = first_pj, pb = first_pb; pair < pairs; pair += threads) {
      const int unit = first_unit + pj;
      if (unit < H) {
        if (pb < rows) {  // padding columns: nothing to publish
          float* published = h_next + static_cast<std::size_t>(pb) * H + unit;
          const float* in = input_t + static_cast<std::size_t>(first_row + pb) * kGates * H + unit;
          float gate[kGates];
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            gate[q] = in[q * H] + bias_s[pj * kGates + q];
          const float* sums = sums_s + pj * kGates * Bp + pb;
#pragma unroll 4
          for (int s = 0; s < a.k_slices; ++s) {  // fixed order: bitwise reproducible
#pragma unroll
            for (int q = 0; q < kGates; ++q)
              gate[q] += sums[(s * J * kGates + q) * Bp];
          }
          update_cell(gate, cell_s[pj * Bp + pb], published, a, t,
                      static_cast<std::size_t>(first_row + pb) * H + unit);
        }
      }
      pj += pair_step_units;
      pb += pair_step_rows;
      if (pb >= Bp) pb -= Bp, ++pj;
    }
    trace.phase(3);
  }
  trace.finish(a.trace);
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
