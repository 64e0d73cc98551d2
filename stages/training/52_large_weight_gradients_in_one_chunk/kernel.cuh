/*! \file
 *  \brief The forward's tensor-core kernel (any batch), forward stage 21's: W_hh's slice in
 *         shared memory in FP16 or BF16, as mma fragments, a split-k product with mma.sync (FP32
 *         sums), h_{t-1} staged in 16 bits in double-buffered chunks, the input parts read by
 *         gate row; one launch runs several layers as a wavefront, each on its own blocks, an
 *         upper layer multiplying [W_ih | W_hh] by [h^{l-1}_t ; h^l_{t-1}] over K = 2H. Here it
 *         also keeps the stash the backward reads (keep_stash, primitives.cuh) after h_t is
 *         published, as training stage 28's kernel does. Its mapping: forward stage 13's README;
 *         the wavefront: forward stage 19's README and README.md beside this file. New in
 *         training stage 41: where the plan says so, each warp holds its W fragments in
 *         registers (forward stage 23's). New in training stage 51: a warp's held k tiles add
 *         onto two sets of accumulators, even tiles and odd ones (forward stage 27's).
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// What the shared-memory kernel reads and writes for one layer and one slice of the batch, and
/// its plan (plan.h).
struct SharedKernelArgs {
  const uint4* w_fragments;  // [W_ih |] W_hh as A fragments: [unit block][k tile][row tile][lane]
  const float* input_part;   // (4H, T, B): W_ih · x_t for every step (biases not yet added)
  float* gates;              // (T, B, 4H): the stash's activated gates
  float* cell;               // (T + 1, B, H): the stash's c; slot 0 = c0 (written by the host)
  float* h_seq;              // (T + 1, B, H): the stash's h in FP32; slot 0 = h0
  const float* b_ih;         // (4H)
  const float* b_hh;         // (4H)
  const float* c0;           // (B, H) this layer's initial c
  float* y;                  // (T, B, H) this layer's h at every step, or nullptr: not kept
  float* hy;                 // (B, H) final h
  float* cy;                 // (B, H) final c
  std::uint16_t* exchange;   // (T + P, G, P, H, Bp): published h of the P layers, Element's bits
  int hidden, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block, unit_blocks, batch_groups, group_batch, padded_batch;
  int tile_groups_units, tile_groups_batch, mma_batch, h_stride, k_slices;
  int chunk_rows, chunks;
  int input_rows;   // 0: input_part from cuBLAS; H: W_ih · h^{l-1}_t multiplied here
  int weights_held;  // 1 where the plan holds W (kHeld > 0): as a runtime flag ptxas spills less
  int first_block;  // the layer's first block in the launch
  int lag;          // its place in the wavefront: its step t reads exchange slot t + lag
  int parts;        // P: layers in the launch, each with its part of every exchange slot
};

/// The layers of one launch, bottom first: layer i has blocks layer[i].first_block ..
/// layer[i + 1].first_block - 1 and lag i.
struct SharedLaunchArgs {
  SharedKernelArgs layer[kMaxLaunchLayers];
  int layers;
};

/// [W_ih | W_hh] (4H x (input_rows + H): W_ih's columns first where input_rows = H, an upper
/// layer of a wavefront; FP32, PyTorch's layout) rounded to Element and arranged once as every
/// block's A fragments, [unit block][k tile][row tile][lane] (uint4: four 32-bit words a lane). Row
/// R of a block's product is gate R % 4 of unit R / 4 (J units a block); word r of lane (groupID g,
/// threadID_in_group t) of the fragment of k tile kt and row tile mt holds rows mt*16 + g +
/// 8 (r & 1), k = kt*16 + 2t + 8 (r >> 1) and the next k, the lower k in the low 16 bits (PTX
/// ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"). Zeros past K = input_rows
/// + H (the padding of k) and past H units. Grid-stride over every block's words.
template <typename Element>
__global__ void arrange_fragments(const float* w_ih, const float* w_hh, unsigned* fragments, int H,
                                  int input_rows, int J, int row_tiles, int unit_blocks) {
  const int K = input_rows + H, k_tiles = (K + kMmaK - 1) / kMmaK, rows_w = J * kGates;
  const std::size_t block_words = static_cast<std::size_t>(k_tiles) * row_tiles * kWarpSize * 4;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < unit_blocks * block_words; n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(n % block_words);
    const int first_unit = static_cast<int>(n / block_words) * J;
    const int r = i % 4, fragment_lane = (i / 4) % kWarpSize, tile = i / (4 * kWarpSize);
    const int row = (tile % row_tiles) * kMmaRows + fragment_lane / 4 + 8 * (r & 1);
    const int k = (tile / row_tiles) * kMmaK + 2 * (fragment_lane % 4) + 8 * (r >> 1);
    const int unit = first_unit + row / kGates;
    const bool real = unit < H && row < rows_w;
    const std::size_t w_row = static_cast<std::size_t>(row % kGates) * H + unit;
    const auto weight = [&](int k) {  // column k of [W_ih | W_hh]'s row
      return !real || k >= K  ? 0.0f
             : k < input_rows ? w_ih[w_row * input_rows + k]
                              : w_hh[w_row * H + (k - input_rows)];
    };
    fragments[n] = pack_pair<Element>(weight(k), weight(k + 1));
  }
}

/// The persistent kernel of the layers of one launch (one slice of the batch): all T steps.
/// `Element`: __half or __nv_bfloat16, the type of W and h on the tensor cores. `kHeld`: 0, or
/// the k tiles a warp holds in registers, 8, 16 or 32 (at most kHeldThreads threads a block, so
/// that a thread may have 255 registers), where its layer's weights_held says so (forward 23's).
/// `kByGate`: the cell update a thread a gate, four neighbouring lanes a (unit, batch row) pair
/// (a small batch: J x rows x 4 gates at most the block's threads; plan.cpp, by_gate).
/// Grid: the layers' blocks one after another, U x G per layer (block = first_block + u + U * g),
/// plan.threads threads. Dynamic shared memory, K = input_rows + H:
/// w [k tile of K][row tile][lane] uint4 (A fragments; none where held) | h [2][chunk_rows / 2]
/// [h_stride] 32-bit
/// words (two k of one column) | partial sums [k_slices][rows][mma_batch] | input parts [J][Bp][4]
/// (the launch's first layer only) | c [J][Bp] | biases [J][4].
///
/// Deadlock-freedom: every block is resident (cooperative launch). A layer's blocks wait only for
/// h^l_{t-1} (its own layer's) and h^{l-1}_t (the layer below's), each value written once to a
/// slot of its own and never overwritten in the launch; the bottom layer waits only for itself,
/// as in forward stage 17, and by induction over the layers every value a layer waits for is
/// published.
template <typename Element, int kTileBatch, int kHeld, bool kByGate>
__global__ void __launch_bounds__(kHeld > 0 ? kHeldThreads : kMaxThreads, 1)
    persistent_lstm_kernel(const __grid_constant__ SharedLaunchArgs launch) {
  static_assert(kTileBatch % kMmaColumns == 0, "a warp tile is a whole number of mma tiles");
  constexpr int kTiles = kTileBatch / kMmaColumns;  // mma per k tile of a warp
  extern __shared__ float4 shared[];  // the backward kernel's declaration (one per program)
  int layer = launch.layers - 1;      // this block's layer: the last that starts at or before it
  while (static_cast<int>(blockIdx.x) < launch.layer[layer].first_block)
    --layer;
  const SharedKernelArgs& a = launch.layer[layer];
  const int block = blockIdx.x - a.first_block;
  const int H = a.hidden, J = a.units_per_block, Bp = a.padded_batch, Bp4 = Bp / 4;
  const int K = a.input_rows + H;  // k: the layer below's h_t (if input_rows), then h_{t-1}
  const int Bn = a.mma_batch, S = a.h_stride, k_tiles = (K + kMmaK - 1) / kMmaK;
  const int row_tiles = a.tile_groups_units, rows_mma = row_tiles * kMmaRows;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int unit_block = block % a.unit_blocks, group = block / a.unit_blocks;
  const int first_unit = unit_block * J;
  const int first_row = a.batch_begin + group * a.group_batch;  // batch row of local b = 0
  const int rows = max(0, min(a.group_batch, a.batch_end - first_row));
  const std::size_t part_values = static_cast<std::size_t>(H) * Bp;  // a layer, a group, a step
  const std::size_t group_values = part_values * a.parts;            // every layer of the launch
  // Slot t + lag holds, side by side, the layer below's h_t and this layer's h_{t-1}: an upper
  // layer's K rows of a step are one contiguous range, from the part of the layer below.
  const std::size_t read_offset = (a.lag - (a.input_rows > 0 ? 1 : 0)) * part_values;

  const bool held = kHeld > 0 && a.weights_held;  // W in registers: none in shared memory
  uint4* w_s = reinterpret_cast<uint4*>(shared);  // [k tile][row tile][lane]: A fragments
  unsigned* h_s = reinterpret_cast<unsigned*>(w_s + (held ? 0 : k_tiles * row_tiles * kWarpSize));
  float* sums_s = reinterpret_cast<float*>(h_s + a.chunk_rows * S);     // [slice][row][Bn]
  float* input_s = sums_s + a.k_slices * rows_mma * Bn;                 // [j][Bp][q]
  float* cell_s = input_s + (a.input_rows == 0 ? J * Bp * kGates : 0);  // [J][Bp]
  float* bias_s = cell_s + J * Bp;                                      // [J][4]

  // ---- once per sequence: this block's W_hh fragments (prepared once, arrange_fragments below),
  // copied as they are: 16-byte asynchronous copies, all in flight at once. Its biases and c0.
  const int rows_w = J * kGates;
  const int block_words = k_tiles * row_tiles * kWarpSize;  // uint4, contiguous per unit block
  for (int i = tid; i < (held ? 0 : block_words); i += threads)
    copy_async_16(w_s + i, a.w_fragments + static_cast<std::size_t>(unit_block) * block_words + i);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
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
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // this thread's copies of W
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
  const int last_rows = K - (a.chunks - 1) * a.chunk_rows;
  int full_first, full_count, last_first, last_count;
  k_range(a.chunk_rows / kMmaK, &full_first, &full_count);
  k_range((last_rows + kMmaK - 1) / kMmaK, &last_first, &last_count);
  // Where held (a step's k range is one chunk): this warp's k tiles of it, loaded once; the
  // kernel's kHeld tiles past the warp's share hold zeros.
  uint4 w_held[kHeld > 0 ? kHeld : 1];
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {  // compile-time indices: w_held stays in registers
    const std::size_t at = static_cast<std::size_t>(unit_block) * block_words +
                           ((last_first + i) * row_tiles + row_tile) * kWarpSize + lane;
    w_held[i] = held && computes && i < last_count ? a.w_fragments[at] : make_uint4(0, 0, 0, 0);
  }
  // Where each uint2 this thread stages goes: four 16-bit columns of row k of h_{t-1}, at words
  // (k / 2, column) of a chunk's buffer, in their k % 2 half.
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
  // kByGate: thread tid updates gate g_q of pair g_pair = tid / 4 (unit g_pj, batch row g_pb).
  const int g_q = tid % kGates, g_pair = tid / kGates;
  const int g_pj = rows > 0 ? g_pair / rows : 0, g_pb = rows > 0 ? g_pair % rows : 0;
  const bool g_mine = kByGate && g_pair < J * rows && first_unit + g_pj < H;

  for (int t = 0; t < a.seq_len; ++t) {
    // The hand-up: this layer's step t reads slot t + lag and publishes h_t into slot t + lag + 1,
    // where the layer above reads it beside its own h_{t-1} at its step t.
    const std::size_t slot = static_cast<std::size_t>(t + a.lag);
    const uint2* h_prev = reinterpret_cast<const uint2*>(  // four 16-bit columns of one k
        a.exchange + (slot * a.batch_groups + group) * group_values + read_offset);
    std::uint16_t* h_next =
        a.exchange + ((slot + 1) * a.batch_groups + group) * group_values + a.lag * part_values;
    // Step t's input parts: B neighbouring floats per gate row, T * B floats between gate rows.
    const std::size_t row_stride = static_cast<std::size_t>(a.seq_len) * a.batch;
    const float* input_t = a.input_part + static_cast<std::size_t>(t) * a.batch;

    // The input parts of this thread's cell updates do not depend on h_{t-1}: copy them to
    // shared memory now (cp.async: no registers held), use them after the product.
    for (int pair = tid, pj = first_pj, pb = first_pb; !kByGate && pair < pairs; pair += threads) {
      if (first_unit + pj < H && pb < rows && a.input_rows == 0) {
        // Neighbouring threads have neighbouring batch rows pb: a warp's 32 copies of a gate
        // read 32 neighbouring floats, one or two 128-byte lines instead of 32.
        const float* in = input_t + (first_unit + pj) * row_stride + first_row + pb;
#pragma unroll
        for (int q = 0; q < kGates; ++q)
          copy_async_4(input_s + pair * kGates + q, in + q * H * row_stride);
      }
      pj += pair_step_units;
      pb += pair_step_rows;
      if (pb >= Bp) pb -= Bp, ++pj;
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    float input_gate = 0.0f;  // kByGate: this thread's gate's input part, loaded before the wait
    if (g_mine && a.input_rows == 0)
      input_gate = input_t[(first_unit + g_pj + g_q * H) * row_stride + first_row + g_pb];

    // Stage h_{t-1} chunk by chunk. A thread carries uint2 idx = tid + r * threads of a chunk.
    uint2 staged[kStageRegisters];
    auto issue_loads = [&](int chunk) {
      const int n4 = (chunk == a.chunks - 1 ? last_rows : a.chunk_rows) * Bp4;
      const uint2* source = h_prev + static_cast<std::size_t>(chunk) * a.chunk_rows * Bp4;
#pragma unroll
      for (int r = 0; r < kStageRegisters; ++r) {
        const int idx = tid + r * threads;
        if (idx < n4) staged[r] = load_relaxed(source + idx);  // all in flight at once
      }
    };
    // The warp's mma accumulators (C/D fragments), two sets where W is held: even held k tiles
    // add onto acc, odd ones onto acc_odd, so that an mma waits for the one two tiles back, not
    // for the one before (tiles from shared memory, whose loads pace them, all onto acc).
    float acc[kTiles][4] = {}, acc_odd[kTiles][4] = {};
    issue_loads(0);
    for (int chunk = 0; chunk < a.chunks; ++chunk) {
      const bool last = chunk == a.chunks - 1;
      const int k0 = chunk * a.chunk_rows, n4 = (last ? last_rows : a.chunk_rows) * Bp4;
      const uint2* source = h_prev + static_cast<std::size_t>(k0) * Bp4;
      unsigned* buffer = h_s + (chunk & 1) * (a.chunk_rows / 2) * S;
      wait_published(staged, source, n4, tid, threads);  // every value this thread carries
#pragma unroll
      for (int r = 0; r < kStageRegisters; ++r) {
        const int idx = tid + r * threads;
        if (idx < n4) {  // already Element's bits: copied, not rounded
          std::uint16_t* at = reinterpret_cast<std::uint16_t*>(buffer) + stage_at[r];
          at[0] = staged[r].x & 0xFFFFu;
          at[2] = staged[r].x >> 16;
          at[4] = staged[r].y & 0xFFFFu;
          at[6] = staged[r].y >> 16;
        }
      }
      __syncthreads();                    // the chunk is complete in shared memory
      if (!last) issue_loads(chunk + 1);  // in flight during this chunk's math
      if (computes) {
        // Per k tile: the A fragment (one 16-byte load a lane), then per 8 columns the B
        // fragment, words (k pair t and t + 4, column g) of staged h, and one mma.
        const int first = last ? last_first : full_first, count = last ? last_count : full_count;
        const uint4* w_fragment =
            w_s + ((k0 / kMmaK + first) * row_tiles + row_tile) * kWarpSize + lane;
        const unsigned* h_fragment =
            buffer + (first * kMmaK / 2 + in_group) * S + batch_tile * kTileBatch + group_id;
        if (held) {  // A from this warp's registers, B from shared memory; no branch a tile
#pragma unroll
          for (int i = 0; i < kHeld; ++i) {  // a zero tile times any staged row of h adds 0
            const unsigned* h = h_fragment + max(0, min(i, count - 1)) * (kMmaK / 2 * S);
#pragma unroll
            for (int n = 0; n < kTiles; ++n)
              mma_16x8x16<Element>(i % 2 == 0 ? acc[n] : acc_odd[n], w_held[i], h[n * kMmaColumns],
                                   h[4 * S + n * kMmaColumns]);
          }
          continue;  // the next chunk
        }
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

    // Leave one partial tile per k slice in shared memory: d0, d1 at row groupID, columns
    // 2 threadID_in_group and the next; d2, d3 eight rows down. The two sets added first.
    if (computes) {
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
        if constexpr (kHeld > 0) {
#pragma unroll
          for (int j = 0; j < 4; ++j)
            acc[n][j] += acc_odd[n][j];
        }
        float* out = sums_s + (k_slice * rows_mma + row_tile * kMmaRows + group_id) * Bn +
                     batch_tile * kTileBatch + n * kMmaColumns + 2 * in_group;
        *reinterpret_cast<float2*>(out) = make_float2(acc[n][0], acc[n][1]);
        *reinterpret_cast<float2*>(out + 8 * Bn) = make_float2(acc[n][2], acc[n][3]);
      }
    }
    __syncthreads();

    // The cell update of this thread's (unit, batch row) pairs; publishing h_t is the signal.
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // this thread's input parts
    if constexpr (kByGate) {
      // Four lanes a pair: each sums and activates its gate, then the pair's first lane gathers
      // the four by shuffles, updates c and publishes h. Whole warps that hold no gate skip it.
      if (tid - tid % kWarpSize < J * rows * kGates) {
        float activated = 0.0f;
        if (g_mine) {
          float g = input_gate + bias_s[g_pj * kGates + g_q];
          const float* sums = sums_s + (g_pj * kGates + g_q) * Bn + g_pb;
#pragma unroll 4
          for (int s = 0; s < a.k_slices; ++s)  // fixed order: bitwise reproducible
            g += sums[s * rows_mma * Bn];
          activated = activate(g, g_q);
        }
        float gate[kGates];
#pragma unroll
        for (int q = 0; q < kGates; ++q)
          gate[q] = __shfl_sync(kFullMask, activated, q, kGates);
        if (g_mine) {
          // Only this lane reads its slot of slice 0 (above): now it holds the activated gate,
          // for the stash.
          sums_s[(g_pj * kGates + g_q) * Bn + g_pb] = activated;
          if (g_q == 0)  // the rest of update_cell, its four gates from four lanes
            update_cell_from_activated<Element>(
                gate, cell_s[g_pj * Bp + g_pb],
                h_next + static_cast<std::size_t>(first_unit + g_pj) * Bp + g_pb);
        }
      }
      for (int i = threads - 1 - tid; i < J * (Bp - rows); i += threads) {  // padding: zeros
        const int pj = i / (Bp - rows), pb = rows + i % (Bp - rows);
        if (first_unit + pj < H)
          store_relaxed(h_next + static_cast<std::size_t>(first_unit + pj) * Bp + pb,
                        static_cast<std::uint16_t>(0));
      }
    }
    for (int pair = tid, pj = first_pj, pb = first_pb; !kByGate && pair < pairs; pair += threads) {
      const int unit = first_unit + pj;
      if (unit < H) {
        std::uint16_t* published = h_next + static_cast<std::size_t>(unit) * Bp + pb;
        if (pb >= rows) {  // padding columns: published as zeros, read by nobody's arithmetic
          store_relaxed(published, static_cast<std::uint16_t>(0));
        } else {
          float gate[kGates];
#pragma unroll
          for (int q = 0; q < kGates; ++q)  // an upper layer's input part is in the sums already
            gate[q] =
                (a.input_rows == 0 ? input_s[pair * kGates + q] : 0.0f) + bias_s[pj * kGates + q];
          const float* sums = sums_s + pj * kGates * Bn + pb;
#pragma unroll 4
          for (int s = 0; s < a.k_slices; ++s) {  // fixed order: bitwise reproducible
#pragma unroll
            for (int q = 0; q < kGates; ++q)
              gate[q] += sums[(s * rows_mma + q) * Bn];
          }
          update_cell<Element>(gate, cell_s[pj * Bp + pb], published);
          float* activated = sums_s + pj * kGates * Bn + pb;  // slice 0's sums, read above
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            activated[q * Bn] = gate[q];
        }
      }
      pj += pair_step_units;
      pb += pair_step_rows;
      if (pb >= Bp) pb -= Bp, ++pj;
    }
    __syncthreads();  // every pair's activated gates and c in shared memory

    // The stash, once h_t is published (training stage 28's): a unit a thread, coalesced.
    for (int i = tid; i < J * rows; i += threads) {
      const int pj = i % J, pb = i / J;
      if (first_unit + pj < H) {
        float gate[kGates];
#pragma unroll
        for (int q = 0; q < kGates; ++q)
          gate[q] = sums_s[(pj * kGates + q) * Bn + pb];
        keep_stash(gate, cell_s[pj * Bp + pb], a, t, first_row + pb, first_unit + pj);
      }
    }
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
