/*! \file
 *  \brief The tensor-core kernel (any batch): W_hh's slice in shared memory in FP16 or BF16, as
 *         mma fragments, a split-k product with mma.sync (FP32 sums), h_{t-1} staged in 16 bits
 *         in double-buffered chunks. Its mapping: stage 13's README.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"
#include "harness/phase_trace.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

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
  float* exchange;          // (T + 1, G, H, Bp): published h, transposed; slot 0 = h0
  int hidden, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block, unit_blocks, batch_groups, group_batch, padded_batch;
  int tile_groups_units, tile_groups_batch, mma_batch, h_stride, k_slices;
  int chunk_rows, chunks;
  long long* trace;  // nullptr, or kTraceSlots cycle counts of block 0 (--trace)
};

/// The persistent kernel of one layer (one slice of the batch): all T steps. `Element`: __half
/// or __nv_bfloat16, the type of W_hh and h_{t-1} on the tensor cores.
/// Grid: U x G blocks (block = u + U * g), plan.threads threads. Dynamic shared memory:
/// w [k tile][row tile][lane] uint4 (A fragments) | h [2][chunk_rows / 2][h_stride] 32-bit words
/// (two k of one column) | partial sums [k_slices][rows][mma_batch] | input parts [J][Bp][4] |
/// c [J][Bp] | biases [J][4].
template <typename Element, int kTileBatch>
__global__ void __launch_bounds__(kMaxThreads, 1)
    persistent_lstm_kernel(const SharedKernelArgs a) {
  static_assert(kTileBatch % kMmaColumns == 0, "a warp tile is a whole number of mma tiles");
  constexpr int kTiles = kTileBatch / kMmaColumns;  // mma per k tile of a warp
  extern __shared__ uint4 shared[];
  const int H = a.hidden, J = a.units_per_block, Bp = a.padded_batch, Bp4 = Bp / 4;
  const int Bn = a.mma_batch, S = a.h_stride, k_tiles = (H + kMmaK - 1) / kMmaK;
  const int row_tiles = a.tile_groups_units, rows_mma = row_tiles * kMmaRows;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int unit_block = blockIdx.x % a.unit_blocks, group = blockIdx.x / a.unit_blocks;
  const int first_unit = unit_block * J;
  const int first_row = a.batch_begin + group * a.group_batch;  // batch row of local b = 0
  const int rows = max(0, min(a.group_batch, a.batch_end - first_row));
  const std::size_t slot_floats = static_cast<std::size_t>(H) * Bp;  // one group, one step

  uint4* w_s = shared;  // [k tile][row tile][lane]: a warp's A fragment, 16 bytes a lane
  unsigned* h_s = reinterpret_cast<unsigned*>(w_s + k_tiles * row_tiles * kWarpSize);
  float* sums_s = reinterpret_cast<float*>(h_s + a.chunk_rows * S);  // [slice][row][Bn]
  float* input_s = sums_s + a.k_slices * rows_mma * Bn;                // [j][Bp][q]
  float* cell_s = input_s + J * Bp * kGates;                           // [J][Bp]
  float* bias_s = cell_s + J * Bp;                                     // [J][4]

  // ---- once per sequence: this block's rows of W_hh, rounded to Element, its biases and c0,
  // into shared memory. Row R of the block's product is gate R % 4 of unit R / 4; W is stored
  // as the mma's A fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
  // type"): word r of lane (groupID g, threadID_in_group t) of the fragment of k tile kt and row
  // tile mt holds rows mt*16 + g + 8 (r & 1), k = kt*16 + 2t + 8 (r >> 1) and the next k, the
  // lower k in the low 16 bits. Zeros past H (the padding of k and of the units).
  unsigned* w_words = reinterpret_cast<unsigned*>(w_s);
  const int rows_w = J * kGates;
  for (int i = tid; i < k_tiles * row_tiles * kWarpSize * 4; i += threads) {
    const int r = i % 4, fragment_lane = (i / 4) % kWarpSize, tile = i / (4 * kWarpSize);
    const int row = (tile % row_tiles) * kMmaRows + fragment_lane / 4 + 8 * (r & 1);
    const int k = (tile / row_tiles) * kMmaK + 2 * (fragment_lane % 4) + 8 * (r >> 1);
    const int unit = first_unit + row / kGates;
    const bool real = unit < H && row < rows_w;
    const float* w_row = a.w_hh + (static_cast<std::size_t>(row % kGates) * H + unit) * H;
    w_words[i] = pack_pair<Element>(real && k < H ? __ldg(w_row + k) : 0.0f,
                                    real && k + 1 < H ? __ldg(w_row + k + 1) : 0.0f);
  }
  // Staged h starts as zeros: the padding columns (past Bp) are never written, and rows past H
  // must not hold a NaN (multiplied by W's zero padding, any finite value gives 0).
  for (int i = tid; i < a.chunk_rows * S; i += threads)
    h_s[i] = 0u;
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

  // ---- this warp's mma tile: row tile (four units), batch tile, and k slice.
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int group_id = lane / 4, in_group = lane % 4;  // PTX's groupID, threadID_in_group
  const int tile_groups = row_tiles * a.tile_groups_batch;
  const int tile_group = warp % tile_groups, k_slice = warp / tile_groups;
  const int row_tile = tile_group / a.tile_groups_batch;
  const int batch_tile = tile_group % a.tile_groups_batch;
  const bool computes = k_slice < a.k_slices;  // warp-uniform: spare warps only stage
  // The k tiles of a chunk of n k tiles this warp multiplies: k slice k_slice of the chunk.
  // Computed once for full chunks and once for the last one, so that the step loop has no
  // divisions.
  const auto k_range = [&](int n, int* first, int* count) {
    const int begin = k_slice * n / a.k_slices, end = (k_slice + 1) * n / a.k_slices;
    *first = begin;
    *count = end - begin;
  };
  const int last_rows = H - (a.chunks - 1) * a.chunk_rows;
  int full_first, full_count, last_first, last_count;
  k_range(a.chunk_rows / kMmaK, &full_first, &full_count);
  k_range((last_rows + kMmaK - 1) / kMmaK, &last_first, &last_count);
  // Where each float4 this thread stages goes: four columns of row k of h_{t-1}, rounded to
  // Element, at words (k / 2, column) of a chunk's buffer, in their k % 2 half.
  int stage_at[kStageRegisters];
#pragma unroll
  for (int r = 0; r < kStageRegisters; ++r) {
    const int idx = tid + r * threads, k = idx / Bp4;
    stage_at[r] = ((k / 2) * S + 4 * (idx % Bp4)) * 2 + k % 2;
  }
  // This thread's cell updates: pairs (unit pj, batch row pb) = tid, tid + threads, ...
  const int pairs = J * Bp;
  const int first_pj = tid / Bp, first_pb = tid % Bp;
  const int pair_step_units = threads / Bp, pair_step_rows = threads % Bp;

  __shared__ long long trace_spent[kTraceSlots - 1];
  PhaseTrace trace(a.trace, trace_spent);

  for (int t = 0; t < a.seq_len; ++t) {
    trace.start_step();
    const float4* h_prev = reinterpret_cast<const float4*>(
        a.exchange + (static_cast<std::size_t>(t) * a.batch_groups + group) * slot_floats);
    float* h_next =
        a.exchange + (static_cast<std::size_t>(t + 1) * a.batch_groups + group) * slot_floats;
    const float* input_t = a.input_part + static_cast<std::size_t>(t) * a.batch * kGates * H;

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
    float acc[kTiles][4] = {};  // the warp's mma accumulators (C/D fragments)
    issue_loads(0);
    for (int chunk = 0; chunk < a.chunks; ++chunk) {
      const bool last = chunk == a.chunks - 1;
      const int k0 = chunk * a.chunk_rows, n4 = (last ? last_rows : a.chunk_rows) * Bp4;
      const float4* source = h_prev + static_cast<std::size_t>(k0) * Bp4;
      unsigned* buffer = h_s + (chunk & 1) * (a.chunk_rows / 2) * S;
      wait_published(staged, source, n4, tid, threads);  // every value this thread carries
#pragma unroll
      for (int r = 0; r < kStageRegisters; ++r) {
        const int idx = tid + r * threads;
        if (idx < n4) {
          Element* at = reinterpret_cast<Element*>(buffer) + stage_at[r];
          at[0] = to_element<Element>(staged[r].x);
          at[2] = to_element<Element>(staged[r].y);
          at[4] = to_element<Element>(staged[r].z);
          at[6] = to_element<Element>(staged[r].w);
        }
      }
      __syncthreads();  // the chunk is complete in shared memory
      if (chunk == 0) trace.phase(0);
      if (!last) issue_loads(chunk + 1);  // in flight during this chunk's math
      if (computes) {
        // Per k tile: the A fragment (one 16-byte load a lane), then per 8 columns the B
        // fragment, words (k pair t and t + 4, column g) of staged h, and one mma.
        const int first = last ? last_first : full_first, count = last ? last_count : full_count;
        const uint4* w_fragment =
            w_s + ((k0 / kMmaK + first) * row_tiles + row_tile) * kWarpSize + lane;
        const unsigned* h_fragment =
            buffer + (first * kMmaK / 2 + in_group) * S + batch_tile * kTileBatch + group_id;
#pragma unroll 4
        for (int step = 0; step < count;
             ++step, w_fragment += row_tiles * kWarpSize, h_fragment += kMmaK / 2 * S) {
          const uint4 w = *w_fragment;
#pragma unroll
          for (int n = 0; n < kTiles; ++n)
            mma_16x8x16<Element>(acc[n], w, h_fragment[n * kMmaColumns],
                                 h_fragment[4 * S + n * kMmaColumns]);
        }
      }
    }
    trace.phase(1);

    // Leave one partial tile per k slice in shared memory: d0, d1 at row groupID, columns
    // 2 threadID_in_group and the next; d2, d3 eight rows down.
    if (computes) {
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
        float* out = sums_s + (k_slice * rows_mma + row_tile * kMmaRows + group_id) * Bn +
                     batch_tile * kTileBatch + n * kMmaColumns + 2 * in_group;
        *reinterpret_cast<float2*>(out) = make_float2(acc[n][0], acc[n][1]);
        *reinterpret_cast<float2*>(out + 8 * Bn) = make_float2(acc[n][2], acc[n][3]);
      }
    }
    __syncthreads();
    trace.phase(2);

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
          const float* sums = sums_s + pj * kGates * Bn + pb;
#pragma unroll 4
          for (int s = 0; s < a.k_slices; ++s) {  // fixed order: bitwise reproducible
#pragma unroll
            for (int q = 0; q < kGates; ++q)
              gate[q] += sums[(s * rows_mma + q) * Bn];
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
