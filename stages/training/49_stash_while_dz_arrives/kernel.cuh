/*! \file
 *  \brief The forward-with-stash for any batch: forward stage 12's shared-memory kernel (W_hh's
 *         slice in shared memory, a register-tiled split-k product, h_{t-1} staged in
 *         double-buffered chunks), which also keeps what the backward needs (update_cell,
 *         primitives.cuh). Its mapping: forward stage 11's README.md; what it keeps: README.md
 *         here.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// What the shared-memory kernel reads and writes for one layer and one slice of the batch, and
/// its plan (plan.h).
struct SharedKernelArgs {
  const float* w_hh;  // (4H, H) row-major, PyTorch's layout
  const float* b_ih;  // (4H)
  const float* b_hh;  // (4H)
  const float* c0;    // (B, H) this layer's initial c
  // The stash (the whole batch's rows; a launch writes its own): gates (T, B, 4H): in, W_ih · x_t
  // for every step (biases not yet added); out, the activated gates. cell and h_seq
  // (T + 1, B, H): out, c_t and h_t at slot t + 1 (slot 0 = c0 and h0, copied before).
  float* gates;
  float* cell;
  float* h_seq;
  float* y;         // (T, B, H) the last layer's output, or nullptr
  float* hy;        // (B, H) final h
  float* cy;        // (B, H) final c
  float* exchange;  // (T + 1, G, H, Bp): published h, transposed; slot 0 = h0
  int hidden, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block, unit_blocks, batch_groups, group_batch, padded_batch;
  int lanes_batch, lanes_units, phases, tile_groups_units, tile_groups_batch, k_slices;
  int chunk_rows, chunks;
};

/// The persistent kernel of one layer (one slice of the batch): all T steps.
/// Grid: U x G blocks (block = u + U * g), plan.threads threads. Dynamic shared memory:
/// w [H][J] float4 | h [2][chunk_rows][Bp] | partial sums [k_slices][J][4][Bp] |
/// input parts [J][Bp][4] | c [J][Bp] | biases [J][4].
template <int kTileBatch>
__global__ void __launch_bounds__(max_threads_for_tile(kTileBatch), 1)
    persistent_lstm_kernel(const SharedKernelArgs a) {
  static_assert(kTileBatch % 4 == 0, "a tile row is a whole number of float4");
  constexpr int kTile4 = kTileBatch / 4;  // float4 of h per k in a thread's tile
  extern __shared__ float4 shared[];
  const int H = a.hidden, J = a.units_per_block, Bp = a.padded_batch, Bp4 = Bp / 4;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int unit_block = blockIdx.x % a.unit_blocks, group = blockIdx.x / a.unit_blocks;
  const int first_unit = unit_block * J;
  const int first_row = a.batch_begin + group * a.group_batch;  // batch row of local b = 0
  const int rows = max(0, min(a.group_batch, a.batch_end - first_row));
  const std::size_t slot_floats = static_cast<std::size_t>(H) * Bp;  // one group, one step

  float4* w_s = shared;                                 // [H][J]: (i, f, g, o) of unit j at k
  float4* h_s = w_s + static_cast<std::size_t>(H) * J;  // [2][chunk_rows][Bp4]
  float* sums_s = reinterpret_cast<float*>(h_s + 2 * a.chunk_rows * Bp4);  // [slice][j][q][Bp]
  float* input_s = sums_s + a.k_slices * J * kGates * Bp;                  // [j][Bp][q]
  float* cell_s = input_s + J * Bp * kGates;                               // [J][Bp]
  float* bias_s = cell_s + J * Bp;                                         // [J][4]

  // ---- once per sequence: this block's rows of W_hh, its biases and c0, into shared memory.
  float* w_flat = reinterpret_cast<float*>(w_s);  // w_flat[k * 4J + 4j + q]
  const int rows_w = J * kGates;
  if (H % 4 == 0) {  // 16-byte reads along a row, four scalar writes to four k's
    for (int i = tid; i < rows_w * (H / 4); i += threads) {
      const int row = i % rows_w, k4 = i / rows_w, unit = first_unit + row / kGates;
      const float4 v =
          unit < H ? __ldg(reinterpret_cast<const float4*>(
                               a.w_hh + (static_cast<std::size_t>(row % kGates) * H + unit) * H) +
                           k4)
                   : make_float4(0.f, 0.f, 0.f, 0.f);
      w_flat[(4 * k4 + 0) * rows_w + row] = v.x;
      w_flat[(4 * k4 + 1) * rows_w + row] = v.y;
      w_flat[(4 * k4 + 2) * rows_w + row] = v.z;
      w_flat[(4 * k4 + 3) * rows_w + row] = v.w;
    }
  } else {
    for (int i = tid; i < rows_w * H; i += threads) {
      const int row = i % rows_w, k = i / rows_w, unit = first_unit + row / kGates;
      w_flat[i] = unit < H
                      ? __ldg(a.w_hh + (static_cast<std::size_t>(row % kGates) * H + unit) * H + k)
                      : 0.0f;
    }
  }
  for (int i = tid; i < rows_w; i += threads) {
    const int unit = first_unit + i / kGates, q = i % kGates;
    bias_s[i] = unit < H ? a.b_ih[q * H + unit] + a.b_hh[q * H + unit] : 0.0f;
  }
  for (int i = tid; i < J * Bp; i += threads) {
    const int unit = first_unit + i / Bp, b = i % Bp;
    cell_s[i] =
        (unit < H && b < rows) ? a.c0[static_cast<std::size_t>(first_row + b) * H + unit] : 0.0f;
  }
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
  // The k rows of a chunk of n rows this thread multiplies: k slice k_slice of the chunk, every
  // phases-th row from its phase. Computed once for full chunks and once for the last one, so
  // that the step loop has no divisions.
  const auto k_range = [&](int n, int* first, int* count) {
    const int begin = k_slice * n / a.k_slices + phase, end = (k_slice + 1) * n / a.k_slices;
    *first = begin;
    *count = begin < end ? (end - begin + a.phases - 1) / a.phases : 0;
  };
  const int last_rows = H - (a.chunks - 1) * a.chunk_rows;
  int full_first, full_count, last_first, last_count;
  k_range(a.chunk_rows, &full_first, &full_count);
  k_range(last_rows, &last_first, &last_count);
  const int w_stride = a.phases * J, h_stride = a.phases * Bp4;
  // This thread's cell updates: pairs (unit pj, batch row pb) = tid, tid + threads, ...
  const int pairs = J * Bp;
  const int first_pj = tid / Bp, first_pb = tid % Bp;
  const int pair_step_units = threads / Bp, pair_step_rows = threads % Bp;

  for (int t = 0; t < a.seq_len; ++t) {
    const float4* h_prev = reinterpret_cast<const float4*>(
        a.exchange + (static_cast<std::size_t>(t) * a.batch_groups + group) * slot_floats);
    float* h_next =
        a.exchange + (static_cast<std::size_t>(t + 1) * a.batch_groups + group) * slot_floats;
    const float* input_t = a.gates + static_cast<std::size_t>(t) * a.batch * kGates * H;

    // The input parts of this thread's cell updates do not depend on h_{t-1}: copy them to
    // shared memory now (cp.async: no registers held), use them after the product.
    for (int pair = tid, pj = first_pj, pb = first_pb; pair < pairs; pair += threads) {
      if (first_unit + pj < H && pb < rows) {
        const float* in =
            input_t + static_cast<std::size_t>(first_row + pb) * kGates * H + first_unit + pj;
#pragma unroll
        for (int q = 0; q < kGates; ++q)
          copy_async_4(input_s + pair * kGates + q, in + q * H);
      }
      pj += pair_step_units;
      pb += pair_step_rows;
      if (pb >= Bp) pb -= Bp, ++pj;
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");

    // Stage h_{t-1} chunk by chunk. A thread carries float4 idx = tid + r * threads of a chunk.
    float4 staged[kStageRegisters];
    auto issue_loads = [&](int chunk) {
      const int n4 = (chunk == a.chunks - 1 ? last_rows : a.chunk_rows) * Bp4;
      const float4* source = h_prev + static_cast<std::size_t>(chunk) * a.chunk_rows * Bp4;
#pragma unroll
      for (int r = 0; r < kStageRegisters; ++r) {
        const int idx = tid + r * threads;
        if (idx < n4) staged[r] = load_relaxed(source + idx);  // all in flight at once
      }
    };
    float acc[kGates][kTileBatch] = {};
    issue_loads(0);
    for (int chunk = 0; chunk < a.chunks; ++chunk) {
      const bool last = chunk == a.chunks - 1;
      const int k0 = chunk * a.chunk_rows, n4 = (last ? last_rows : a.chunk_rows) * Bp4;
      const float4* source = h_prev + static_cast<std::size_t>(k0) * Bp4;
      float4* buffer = h_s + (chunk & 1) * a.chunk_rows * Bp4;
      wait_published(staged, source, n4, tid, threads);  // every value this thread carries
#pragma unroll
      for (int r = 0; r < kStageRegisters; ++r) {
        const int idx = tid + r * threads;
        if (idx < n4) buffer[idx] = staged[r];
      }
      __syncthreads();                    // the chunk is complete in shared memory
      if (!last) issue_loads(chunk + 1);  // in flight during this chunk's math
      if (computes) {
        const int first = last ? last_first : full_first, count = last ? last_count : full_count;
        const float4* w_row = w_s + (k0 + first) * J + j;  // i, f, g, o of unit j at row k
        const float4* h_row = buffer + first * Bp4 + batch_tile * kTile4;
#pragma unroll 4
        for (int step = 0; step < count; ++step, w_row += w_stride, h_row += h_stride) {
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
    }

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

    // The cell update of this thread's (unit, batch row) pairs; publishing h_t is the signal.
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // this thread's input parts
    for (int pair = tid, pj = first_pj, pb = first_pb; pair < pairs; pair += threads) {
      const int unit = first_unit + pj;
      if (unit < H) {
        float* published = h_next + static_cast<std::size_t>(unit) * Bp + pb;
        if (pb >= rows) {  // padding columns: published as zeros, read by nobody's arithmetic
          store_relaxed(published, 0.0f);
        } else {
          float gate[kGates];
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            gate[q] = input_s[pair * kGates + q] + bias_s[pj * kGates + q];
          const float* sums = sums_s + pj * kGates * Bp + pb;
#pragma unroll 4
          for (int s = 0; s < a.k_slices; ++s) {  // fixed order: bitwise reproducible
#pragma unroll
            for (int q = 0; q < kGates; ++q)
              gate[q] += sums[(s * J * kGates + q) * Bp];
          }
          update_cell(gate, cell_s[pj * Bp + pb], published, a, t, first_row + pb, unit);
        }
      }
      pj += pair_step_units;
      pb += pair_step_rows;
      if (pb >= Bp) pb -= Bp, ++pj;
    }
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
