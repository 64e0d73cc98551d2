/*! \file stages/forward/07_persistent/stage.cu
 *  \brief Stage 07: one persistent kernel per layer runs every time step; the recurrent
 *         weights stay on chip (registers for small batches, shared memory otherwise) for the
 *         whole sequence, and blocks wait for exactly the values of h they read instead of
 *         meeting at a grid-wide barrier.
 *
 * The index of the stages, the prediction and the measurement: README.md beside this file.
 *
 * What this stage adds (the idea of "Persistent RNNs", Diamos et al. 2016, and of cuDNN's
 * PERSIST_* algorithms):
 *   1. Per layer, ONE kernel runs all T steps. Every step of stages 03-06 launched a GEMM that
 *      read the whole recurrent matrix W_hh (4H x H, 4 MiB at H = 512) from L2 or memory; here
 *      each block loads ITS slice of W_hh once and keeps it on chip.
 *   2. Each step a block reads h_{t-1} (from L2), computes its gates, applies the cell update and
 *      publishes its part of h_t.
 *   3. No grid-wide barrier: h_t is published into a buffer that was filled with a sentinel
 *      (a NaN bit pattern that no arithmetic produces), so a value that is not the sentinel IS
 *      the signal that it is ready. A block waits for exactly the values it reads (Lamport-style
 *      flags in the data, as in NVIDIA's Sparse Persistent RNNs), about one L2 round trip,
 *      instead of a grid.sync() (1.1 µs on the H100).
 *   4. Two kernels, one per regime (plan.h picks one):
 *      - persistent_lstm_registers, for B <= 8 where it fits (H <= 1024 on the H100): each lane
 *        holds 4 x 8 or 4 x 32 weights in REGISTERS (Persistent RNNs' own choice), lanes split
 *        (units x k), warps split k; a warp stages its own rows of h (no block barrier for h),
 *        a "transposing" butterfly sums the lanes, one block barrier per step. Where a lane's
 *        share of W_ih · x_t is small (H = 512, B = 1), the kernel computes the input part
 *        itself, W_ih in shared memory, while the first loads of h_{t-1} fly.
 *      - persistent_lstm_kernel, for larger batches: the slice of W_hh in SHARED MEMORY, a
 *        register-tiled split-k product, batch groups and slices.
 *   5. Otherwise the input part W_ih · x_t of all steps stays one large GEMM before the kernel
 *      (cuBLAS, as since stage 01): only the recurrence is sequential.
 *
 * The shared-memory kernel's mapping (one layer; plan.h chooses the numbers); the register
 * kernel's is at its definition:
 *   - Blocks = U x G, one per SM, all resident at once (a cooperative launch guarantees it, or
 *     refuses). Block (u, g) owns hidden units u*J .. u*J+J-1 for the Bg batch rows of group g.
 *     Its 4J rows of W_hh live in shared memory as w[k][j] = float4 (i, f, g, o of unit j).
 *   - The exchange buffer holds h for every step, transposed: slot t, group g is [H][Bp] (Bp =
 *     Bg rounded up to the tile), so the rows a block stages are contiguous float4 and land in
 *     shared memory in the layout the product reads. Slot 0 is h0; slots 1..T start as sentinel.
 *   - h_{t-1} is staged in chunks of rows, double-buffered: each thread loads up to 8 float4
 *     with ld.relaxed.gpu (L2; other SMs wrote them), re-reads any that still hold the sentinel,
 *     and stores them to shared memory; the loads of the next chunk fly during this chunk's math.
 *   - The product: thread (lane, warp) holds a 4 x kTileBatch register tile, the four gates of
 *     one unit for kTileBatch batch rows, accumulated over its share of k. A warp's lanes cover
 *     a patch of (units x batch tiles) and, when the tiles are few, several phases of k;
 *     warps split k further. Per k: one float4 of W and kTileBatch/4 float4 of h from shared
 *     memory (neighbouring lanes share them, so most are broadcasts) for 4 * kTileBatch FMAs.
 *   - Partial sums: shuffles across the k phases of a warp, then shared memory across the
 *     warps' k slices, summed in a fixed order (so every run gives bitwise the same result).
 *   - Cell update: thread p takes (unit, batch row) pairs p, p + threads, ...; their input parts
 *     were copied to shared memory with cp.async at the start of the step (off the critical
 *     path); c stays in shared memory for the whole sequence; h_t goes to y and, published, to
 *     the exchange buffer.
 *   - Batches too large for one launch run as several launches (slices) of G * Bg batch rows each:
 *     batch rows are independent sequences.
 *   - A value that is never published (a bug) makes the kernel trap after ~2 s of polling: an
 *     error, not a hang. --trace makes block 0 time the phases of its steps (clock64).
 *
 * Prediction for the shared-memory kernel, written before its run (H100, ~1.9 GHz): a step
 * costs the publication latency (~0.5 µs, against the barrier's 1.1 µs), staging h, the product
 * (4J*H*B FMAs per SM: at most 128 per clock) and ~0.3 µs of reduction and cell update.
 * H = 512, B = 1: ~1.2 µs per step; H = 1024, B = 4: ~1.6 µs; canonical config: ~3 ms. It
 * missed the small-batch part by 2-3x (each phase of a step was a chain of dependent
 * instructions), which is why the register kernel was added. Its prediction, written before its
 * first run: H = 512, B = 1: ~1.0-1.2 µs per step (~0.8 µs of publication, ~460 cycles of
 * staging, product, butterfly, barrier and update); H = 1024, B = 4: ~1.6-1.8 µs (the product's
 * FMAs alone take 1,024 cycles per step on 128 SMs). Measured (README.md): 1.8 and 4.4 µs per
 * step, both still ~1.5 µs of latency chain per step above the prediction.
 *
 * Limits (plan.h): the shared-memory kernel needs the 4J x H weight slice, two chunks of h, the
 * partial sums, the input parts and c in a block's shared memory (227 KiB on the H100): H up to
 * 1320 in FP32, at any batch size. Larger H is refused before launch with the reason and the
 * largest H that fits; any batch size runs (in slices). The register kernel needs at most 8 warps
 * of 255 registers (H <= 1024 at B <= 8 on the H100); where it does not fit, the shared-memory
 * kernel runs.
 *
 * Measured: see README.md (generated from results/h100-sxm/).
 */
#include <cublas_v2.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda_utils.h"
#include "harness/stage.h"
#include "persistent_stage.h"
#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build
namespace {

constexpr int kGateG = 2;  // the cell candidate g uses tanh, the others sigmoid
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr unsigned kUnpublished = 0xFFFFFFFFu;  // a NaN no FP32 arithmetic returns (GPUs
                                                // return the canonical NaN 0x7FFFFFFF)
constexpr int kPublishThreads = 256;            // threads per block of the slot-0 kernel
constexpr int kMaxPolls = 1 << 26;              // > 2 s of polling for one value: report an error
constexpr int kSpinPolls = 4;                   // polls before each retry starts with a short sleep
constexpr int kPollSleepNs = 64;  // the sleep: fewer polls of the same lines by every SM
// Where block 0's thread 0 spends a step (--trace): waiting for h_{t-1}, the product,
// the reduction, the cell update; then the whole loop's cycles.
constexpr int kTraceSlots = 5;
constexpr const char* kTraceNames[kTraceSlots - 1] = {"wait for h_{t-1}", "product", "reduction",
                                                      "cell update"};

/// Everything one layer's persistent kernel reads and writes, and its plan.
struct LayerArgs {
  const float* w_hh;        // (4H, H) row-major, PyTorch's layout
  const float* input_part;  // (T, B, 4H): W_ih · x_t for every step (biases not yet added)
  const float* w_ih;        // (4H, I): for the register kernel's own input parts
  const float* x;           // (T, B, I): this layer's input sequence (ditto)
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
  int lanes_batch, lanes_units, phases, tile_groups_units, tile_groups_batch, k_slices;
  int chunk_rows, chunks;
  int input_size;        // I of this layer
  int input_k_per_lane;  // register kernel computing its input parts: the plan's (layout), else 0
  long long* trace;      // nullptr, or kTraceSlots cycle counts of block 0 (--trace)
};

/// A 16-byte load through L2 that is allowed to race with another SM's stores (relaxed, GPU
/// scope): it returns each 4-byte element either before or after that element's store.
__device__ __forceinline__ float4 load_relaxed(const float4* address) {
  float4 v;
  asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(address));
  return v;
}

/// The matching store: publishes one value for other SMs to poll.
__device__ __forceinline__ void store_relaxed(float* address, float value) {
  asm volatile("st.relaxed.gpu.global.f32 [%0], %1;" ::"l"(address), "f"(value) : "memory");
}

__device__ __forceinline__ bool unpublished(float4 v) {
  return __float_as_uint(v.x) == kUnpublished || __float_as_uint(v.y) == kUnpublished ||
         __float_as_uint(v.z) == kUnpublished || __float_as_uint(v.w) == kUnpublished;
}

/// A 4-byte relaxed load, for slots whose length is not a whole number of float4.
__device__ __forceinline__ float load_relaxed(const float* address) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(address));
  return v;
}

__device__ __forceinline__ bool unpublished(float v) {
  return __float_as_uint(v) == kUnpublished;
}

/// Waits until none of staged[r] = source[base + r * stride] (r < kInFlight, index < count)
/// holds the sentinel any more: re-reads all the missing ones at once, so a retry costs one L2
/// round trip, not one per value. A value never published is a bug: the kernel traps after
/// kMaxPolls retries instead of hanging.
template <int kInFlight, typename Value>
__device__ __forceinline__ void wait_published(Value (&staged)[kInFlight], const Value* source,
                                               int count, int base, int stride) {
  for (int polls = 0;; ++polls) {
    bool missing = false;
#pragma unroll
    for (int r = 0; r < kInFlight; ++r)
      missing |= base + r * stride < count && unpublished(staged[r]);
    if (!missing) return;
    if (polls == kMaxPolls) __trap();
    if (polls >= kSpinPolls) __nanosleep(kPollSleepNs);
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      const int idx = base + r * stride;
      if (idx < count && unpublished(staged[r])) staged[r] = load_relaxed(source + idx);
    }
  }
}

__device__ __forceinline__ float sigmoid(float z) {
  // 1 / x by the hardware reciprocal (1 ulp), with no slow path: 1 + e^-z is never tiny, and
  // where it is huge the result 0 is sigmoid's limit. The branch-free form lets the compiler
  // interleave the gates' activations.
  return __fdividef(1.0f, 1.0f + expf(-z));
}

/// Where block 0's thread 0 spends its steps (--trace): clock64() marks charged to the
/// phases of a step; the sums live in shared memory (the register kernel's weights need every
/// register). A no-op everywhere else.
struct PhaseTrace {
  long long* spent;  // [kTraceSlots - 1] cycles per phase, shared memory
  bool on;
  long long mark = 0, loop_start = 0;

  __device__ PhaseTrace(const LayerArgs& a, long long* spent_s)
      : spent(spent_s), on(a.trace != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    if (!on) return;
    for (int i = 0; i < kTraceSlots - 1; ++i)
      spent[i] = 0;
    loop_start = clock64();
  }
  __device__ void start_step() {
    if (on) mark = clock64();
  }
  /// Charges the cycles since the last mark to phase `index`.
  __device__ void phase(int index) {
    if (!on) return;
    const long long now = clock64();
    spent[index] += now - mark;
    mark = now;
  }
  /// Writes the phases' cycles and the whole loop's to `out` (kTraceSlots values).
  __device__ void finish(long long* out) const {
    if (!on) return;
    for (int i = 0; i < kTraceSlots - 1; ++i)
      out[i] = spent[i];
    out[kTraceSlots - 1] = clock64() - loop_start;
  }
};

/// The cell update of one (unit, batch row) at step t, from its four gate pre-activations:
/// updates c, publishes h_t (the signal to every other block), writes it to y and, at the last
/// step, to hy and cy. `out` = batch row * H + unit.
__device__ __forceinline__ void update_cell(const float (&gate)[kGates], float& c, float* published,
                                            const LayerArgs& a, int t, std::size_t out) {
  const float i_gate = sigmoid(gate[0]), f_gate = sigmoid(gate[1]);
  const float g_gate = tanhf(gate[kGateG]), o_gate = sigmoid(gate[3]);
  c = f_gate * c + i_gate * g_gate;
  const float h = o_gate * tanhf(c);
  store_relaxed(published, h);
  a.y[static_cast<std::size_t>(t) * a.batch * a.hidden + out] = h;
  if (t == a.seq_len - 1) {
    a.hy[out] = h;
    a.cy[out] = c;
  }
}

/// Copies 4 bytes from global to shared memory asynchronously (cp.async: completes at the next
/// cp.async.wait_group; no register holds the value meanwhile).
__device__ __forceinline__ void copy_async_4(float* shared_target, const float* source) {
  const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(target), "l"(source) : "memory");
}

/// Slot 0 of the exchange buffer: h0 of this slice's rows, transposed to [g][k][Bp], zeros in
/// the padding. Grid-stride loop over the slot's G * H * Bp floats.
__global__ void publish_initial_state(const float* h0, float* slot0, int hidden, int groups,
                                      int group_batch, int padded_batch, int batch_begin,
                                      int batch_end) {
  const std::size_t total = static_cast<std::size_t>(groups) * hidden * padded_batch;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int b = static_cast<int>(i % padded_batch);
    const int k = static_cast<int>((i / padded_batch) % hidden);
    const int g = static_cast<int>(i / (static_cast<std::size_t>(hidden) * padded_batch));
    const int row = batch_begin + g * group_batch + b;
    slot0[i] = (b < group_batch && row < batch_end) ? h0[static_cast<std::size_t>(row) * hidden + k]
                                                    : 0.0f;
  }
}

/// The persistent kernel of one layer (one slice of the batch): all T steps.
/// Grid: U x G blocks (block = u + U * g), plan.threads threads. Dynamic shared memory:
/// w [H][J] float4 | h [2][chunk_rows][Bp] | partial sums [k_slices][J][4][Bp] |
/// input parts [J][Bp][4] | c [J][Bp] | biases [J][4].
template <int kTileBatch>
__global__ void __launch_bounds__(max_threads_for_tile(kTileBatch), 1)
    persistent_lstm_kernel(const LayerArgs a) {
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

  __shared__ long long trace_spent[kTraceSlots - 1];
  PhaseTrace trace(a, trace_spent);

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
      __syncthreads();  // the chunk is complete in shared memory
      if (chunk == 0) trace.phase(0);
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

/// Copies `count` published values (float or float4) of h_{t-1} from `source` (L2) to
/// `target` (shared memory), waiting for each one; this thread takes indices first,
/// first + stride, ... A thread has kInFlight loads in flight at once and re-reads only the ones
/// that still hold the sentinel. `meanwhile()` runs once, after the first loads are issued.
template <int kInFlight, typename Value, typename Meanwhile>
__device__ __forceinline__ void stage_published(const Value* source, Value* target, int count,
                                                int first, int stride, Meanwhile&& meanwhile) {
  bool first_round = true;
  for (int base = first; base < count || first_round; base += kInFlight * stride) {
    Value staged[kInFlight];
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      const int idx = base + r * stride;
      if (idx < count) staged[r] = load_relaxed(source + idx);
    }
    if (first_round) meanwhile();  // work that hides the loads' round trip
    first_round = false;
    wait_published(staged, source, count, base, stride);
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      const int idx = base + r * stride;
      if (idx < count) target[idx] = staged[r];
    }
  }
}

__host__ __device__ constexpr int log2_of(int n) {
  return n <= 1 ? 0 : 1 + log2_of(n / 2);
}

/// Sums `acc` over the `lanes_k` lowest-bit lanes of a warp (a power of two: lanes l and
/// l ^ offset for offset = lanes_k / 2, ..., 1) with a "transposing" butterfly: at each offset a
/// lane keeps the half of its sums that its lane bit selects and adds its partner's copy of that
/// half; once one sum is left, plain all-reduce steps follow. kCount sums cost
/// kCount / 2 + kCount / 4 + ... shuffles instead of log2(lanes_k) each. Returns how many sums
/// the lane holds afterwards (acc[0 ..)); the first is sum number
/// (lane_k >> (stages - halvings)) * held, where lane_k = lane % lanes_k. Fixed order: bitwise
/// reproducible.
template <int kCount>
__device__ __forceinline__ void sum_over_k_lanes(float (&acc)[kCount], int lane, int lanes_k) {
#pragma unroll
  for (int stage = 0; stage < 5; ++stage) {
    const int offset = lanes_k >> (stage + 1);
    if (offset == 0) break;         // warp-uniform
    const int n = kCount >> stage;  // sums held before this stage (a constant once unrolled)
    if (n > 1) {
      const bool upper = (lane & offset) != 0;
#pragma unroll
      for (int i = 0; i < kCount / 2; ++i) {
        if (i >= n / 2) break;
        const float send = upper ? acc[i] : acc[i + n / 2];
        const float keep = upper ? acc[i + n / 2] : acc[i];
        acc[i] = keep + __shfl_xor_sync(kFullMask, send, offset);
      }
    } else {
      acc[0] += __shfl_xor_sync(kFullMask, acc[0], offset);
    }
  }
}

/// The small-batch kernel of one layer: all T steps, W_hh in REGISTERS (Persistent RNNs' own
/// choice). Grid: U blocks (one batch group). Lanes of a warp = lanes_units x lanes_k: lane
/// (u, kk) = (lane / lanes_k, lane % lanes_k) works for unit u of the block (lanes_units = J
/// rounded up to a power of two), warp w for slice w of k (k_slices * lanes_k * kKPerLane >= H).
/// The lane holds the four gates' weights of its unit at k = k0 + i * lanes_k + kk, i <
/// kKPerLane, k0 = w * lanes_k * kKPerLane, in registers for the whole sequence. A step:
///   1. each warp stages ITS rows of h_{t-1} (k0 .. k0 + lanes_k * kKPerLane) into its own part
///      of shared memory: no block barrier, only __syncwarp; the block's L2 traffic is h once,
///   2. each lane: 4 x kBatchTile sums over its kKPerLane k, weights from registers, h from shared
///      memory; the lanes_units lanes of a k read the same address (a broadcast), so one
///      wavefront serves the warp,
///   3. a "transposing" butterfly sums each unit's sums over its lanes_k lanes (see
///      sum_over_k_lanes), and each warp leaves its partial sums in shared memory,
///   4. one block barrier; then one thread per (unit, batch row) adds the k slices' sums in a
///      fixed order, the input part and the biases, updates c (a register for the whole
///      sequence) and publishes h_t.
/// The input part: either copied from cuBLAS's result (input_part, cp.async) or, where the plan
/// says so (input_k_per_lane > 0), computed by the kernel itself into the same sums as the
/// product (W_ih's slice in shared memory as float4 of the four gates, x_t copied one step ahead
/// with cp.async), while the first loads of h_{t-1} fly (see stage_published's `meanwhile`).
/// One block barrier per step. Dynamic shared memory: W_ih [k_slices][input_k_per_lane][32]
/// float4 | x [2][k_slices][lanes_k * input_k_per_lane][kBatchTile] | h [k_slices * lanes_k *
/// kKPerLane][kBatchTile] | sums [2][k_slices][lanes_units][4 * kBatchTile] | input parts
/// [J * kBatchTile][4] | biases [J][4].
template <int kKPerLane, int kBatchTile>
__global__ void __launch_bounds__(kMaxRegisterThreads, 1)
    persistent_lstm_registers(const LayerArgs a) {
  constexpr int kValues = kGates * kBatchTile;  // sums a lane carries into the butterfly
  constexpr int kStagedLoads = 4;               // h loads in flight per thread
  constexpr int kLoadGroup = 4;  // k values whose h loads the product may issue together
  extern __shared__ float4 shared[];
  const int H = a.hidden, J = a.units_per_block, slices = a.k_slices;
  const int lanes_units = a.lanes_units, lanes_k = a.phases;
  const int warp_rows = lanes_k * kKPerLane;  // rows of k per warp (slice)
  const int padded_k = slices * warp_rows;
  // The input parts' weights and inputs first (float4 arrays need 16-byte alignment).
  const bool own_inputs = a.input_k_per_lane > 0;  // else cuBLAS computed them (input_part)
  const int input_stride = a.input_k_per_lane;     // layout: k' slots per lane and warp
  const int input_rows = lanes_k * input_stride;   // k' rows per warp in the layout
  float4* w_ih_s = shared;  // [slice][i < input_stride][lane]: 4 gates of the lane's unit
  float* x_s = reinterpret_cast<float*>(w_ih_s + slices * input_stride * kWarpSize);
  // x_s: [t % 2][slice][input_rows][kBatchTile]
  float* h_s = x_s + 2 * slices * input_rows * kBatchTile;  // [padded_k][kBatchTile]
  float* sums_s = h_s + padded_k * kBatchTile;              // [t % 2][slice][unit lane][v]
  const int sums_floats = slices * lanes_units * kValues;   // one step's
  float* input_s = sums_s + 2 * sums_floats;                // [j * kBatchTile + b][q]
  float* bias_s = input_s + J * kValues;                    // [j][q]
  const int tid = threadIdx.x, threads = blockDim.x;
  const int slice = tid / kWarpSize, lane = tid % kWarpSize;
  const int lane_unit = lane / lanes_k, lane_k = lane % lanes_k;
  const int first_unit = blockIdx.x * J, unit = first_unit + lane_unit;
  const bool unit_lane = lane_unit < J && unit < H;
  const int k0 = slice * warp_rows;                                    // the warp's first row of h
  const int warp_count = max(0, min(H - k0, warp_rows)) * kBatchTile;  // floats it stages
  float* h_warp = h_s + k0 * kBatchTile;
  const int rows = a.batch_end - a.batch_begin;  // one batch group: the whole slice
  const std::size_t slot_floats = static_cast<std::size_t>(H) * kBatchTile;

  // ---- once per sequence: this lane's weights into registers, zeros for the padding rows of
  // h (k >= H: their weights are zero too, but 0 * garbage could be NaN).
  float w[kGates][kKPerLane];
#pragma unroll
  for (int q = 0; q < kGates; ++q) {
#pragma unroll
    for (int i = 0; i < kKPerLane; ++i) {
      const int k = k0 + i * lanes_k + lane_k;
      w[q][i] = unit_lane && k < H
                    ? __ldg(a.w_hh + (static_cast<std::size_t>(q) * H + unit) * H + k)
                    : 0.0f;
    }
  }
  for (int i = H * kBatchTile + tid; i < padded_k * kBatchTile; i += threads)
    h_s[i] = 0.0f;
  // This layer's input rows: k' = slice * lanes_k * k_input + i * lanes_k + lane_k, i < k_input.
  const int I = a.input_size;
  const int k_input = own_inputs ? (I + slices * lanes_k - 1) / (slices * lanes_k) : 0;
  const int input_k0 = slice * lanes_k * k_input;
  const int input_count = max(0, min(I - input_k0, lanes_k * k_input));  // real k' rows
  float* x_warp = x_s + slice * input_rows * kBatchTile;
  if (own_inputs) {
    for (int i = 0; i < k_input; ++i) {  // weights once, zeros where k' >= I or no unit
      const int k = input_k0 + i * lanes_k + lane_k;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (unit_lane && k < I) {
        const float* row = a.w_ih + static_cast<std::size_t>(unit) * I + k;
        const std::size_t gate = static_cast<std::size_t>(H) * I;
        v = make_float4(__ldg(row), __ldg(row + gate), __ldg(row + 2 * gate),
                        __ldg(row + 3 * gate));
      }
      w_ih_s[(slice * input_stride + i) * kWarpSize + lane] = v;
    }
    // Both buffers of x: zeros, so that rows k' >= I and padding columns stay finite.
    for (int i = lane; i < input_rows * kBatchTile; i += kWarpSize) {
      x_warp[i] = 0.0f;
      x_warp[slices * input_rows * kBatchTile + i] = 0.0f;
    }
    __syncwarp();  // the zeros land before the copies of x_0
  }
  // Copies this warp's rows of x_step (columns b < rows) into x buffer `buffer` (cp.async).
  const auto prefetch_inputs = [&](int step, int buffer) {
    float* target = x_warp + buffer * slices * input_rows * kBatchTile;
    for (int e = lane; e < input_count * rows; e += kWarpSize) {
      const int b = e / input_count, k = e % input_count;
      copy_async_4(
          target + k * kBatchTile + b,
          a.x + (static_cast<std::size_t>(step) * a.batch + a.batch_begin + b) * I + input_k0 + k);
    }
  };
  if (own_inputs) {
    prefetch_inputs(0, 0);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  // acc[q * kBatchTile + b]: the lane's sums, W_ih · x_t + W_hh · h_{t-1}.
  float acc[kValues];
  // Adds the input part of step `step` to acc: x_step is in buffer step % 2 (copied during the
  // step before), and x_{step+1} starts to be copied into the other one.
  const auto add_input_part = [&](int step) {
    if (step + 1 < a.seq_len) prefetch_inputs(step + 1, (step + 1) & 1);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncwarp();
    const float* x_t = x_warp + (step & 1) * slices * input_rows * kBatchTile;
    const float4* w_in = w_ih_s + slice * input_stride * kWarpSize + lane;
#pragma unroll 4
    for (int i = 0; i < k_input; ++i) {
      const float4 wq = w_in[i * kWarpSize];
      const float* x_k = x_t + (i * lanes_k + lane_k) * kBatchTile;  // a broadcast
      const float wg[kGates] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
      for (int b = 0; b < kBatchTile; ++b) {
        const float xb = x_k[b];
#pragma unroll
        for (int q = 0; q < kGates; ++q)
          acc[q * kBatchTile + b] = fmaf(wg[q], xb, acc[q * kBatchTile + b]);
      }
    }
  };
  // This thread's cell update, if any: (unit, batch row) = (tid / kBatchTile, tid % kBatchTile).
  const int update_j = tid / kBatchTile, update_b = tid % kBatchTile;
  const int update_unit = first_unit + update_j, update_row = a.batch_begin + update_b;
  const bool updates = update_j < J && update_unit < H;
  const bool real_row = updates && update_b < rows;  // else a padding column: publishes zeros
  float c = 0.0f;
  if (real_row) {
    c = a.c0[static_cast<std::size_t>(update_row) * H + update_unit];
    if (update_b == 0) {
#pragma unroll
      for (int q = 0; q < kGates; ++q)
        bias_s[update_j * kGates + q] = a.b_ih[q * H + update_unit] + a.b_hh[q * H + update_unit];
    }
  }
  // After the butterfly a lane holds `held` sums, the first of them number first_sum; one lane
  // of each group that holds the same sums writes them.
  const int stages = log2_of(lanes_k), halvings = min(stages, log2_of(kValues));
  const int held = kValues >> halvings;
  const int first_sum = (lane_k >> (stages - halvings)) * held;
  const bool writes_sums = (lane_k & ((1 << (stages - halvings)) - 1)) == 0;
  __syncthreads();  // biases and the zero rows of h

  __shared__ long long trace_spent[kTraceSlots - 1];
  PhaseTrace trace(a, trace_spent);

  for (int t = 0; t < a.seq_len; ++t) {
    trace.start_step();
    const float* h_prev = a.exchange + static_cast<std::size_t>(t) * slot_floats;
    float* h_next = a.exchange + static_cast<std::size_t>(t + 1) * slot_floats;
#pragma unroll
    for (int v = 0; v < kValues; ++v)
      acc[v] = 0.0f;
    if (!own_inputs && real_row) {
      // The input part of this thread's update, which cuBLAS computed before the launch: copied
      // to shared memory while the warp waits for h (cp.async: no registers held).
      const float* in = a.input_part +
                        (static_cast<std::size_t>(t) * a.batch + update_row) * kGates * H +
                        update_unit;
#pragma unroll
      for (int q = 0; q < kGates; ++q)
        copy_async_4(input_s + tid * kGates + q, in + q * H);
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    // This warp's rows of h_{t-1}: they start at a multiple of 8 rows, so float4 fits whenever
    // every slot starts at a multiple of 4 floats.
    const float* source = h_prev + static_cast<std::size_t>(k0) * kBatchTile;
    // While the first loads of h fly (an L2 round trip at least), the input part of this step,
    // which does not depend on h.
    const auto input_part = [&] {
      if (own_inputs) add_input_part(t);
    };
    if (slot_floats % 4 == 0) {
      stage_published<kStagedLoads>(reinterpret_cast<const float4*>(source),
                                    reinterpret_cast<float4*>(h_warp), warp_count / 4, lane,
                                    kWarpSize, input_part);
    } else {
      stage_published<kStagedLoads>(source, h_warp, warp_count, lane, kWarpSize, input_part);
    }
    __syncwarp();  // the warp's rows are complete in shared memory
    trace.phase(0);

#pragma unroll
    for (int i = 0; i < kKPerLane; ++i) {
      const float* h_k = h_warp + (i * lanes_k + lane_k) * kBatchTile;
      float h[kBatchTile];
      if constexpr (kBatchTile % 4 == 0) {
#pragma unroll
        for (int v = 0; v < kBatchTile / 4; ++v) {
          const float4 h4 = reinterpret_cast<const float4*>(h_k)[v];
          h[4 * v] = h4.x, h[4 * v + 1] = h4.y, h[4 * v + 2] = h4.z, h[4 * v + 3] = h4.w;
        }
      } else if constexpr (kBatchTile == 2) {
        const float2 h2 = *reinterpret_cast<const float2*>(h_k);
        h[0] = h2.x, h[1] = h2.y;
      } else {
        h[0] = h_k[0];
      }
#pragma unroll
      for (int q = 0; q < kGates; ++q) {
#pragma unroll
        for (int b = 0; b < kBatchTile; ++b)
          acc[q * kBatchTile + b] = fmaf(w[q][i], h[b], acc[q * kBatchTile + b]);
      }
      // Keeps the compiler from hoisting every h load to the top: registers hold weights.
      if (i % kLoadGroup == kLoadGroup - 1) asm volatile("" ::: "memory");
    }
    trace.phase(1);

    // Two buffers of sums, by step parity: a warp that runs ahead (its rows of h_t came from
    // other blocks) writes step t + 1's sums while this block's updates still read step t's.
    float* step_sums = sums_s + (t & 1) * sums_floats;
    sum_over_k_lanes(acc, lane, lanes_k);
    if (writes_sums) {
      float* out = step_sums + (slice * lanes_units + lane_unit) * kValues + first_sum;
#pragma unroll
      for (int i = 0; i < kValues; ++i) {
        if (i >= held) break;
        out[i] = acc[i];
      }
    }
    __syncthreads();  // every slice's sums are in shared memory
    trace.phase(2);

    if (updates) {
      float* published = h_next + static_cast<std::size_t>(update_unit) * kBatchTile + update_b;
      if (!real_row) {
        store_relaxed(published, 0.0f);  // padding column: read by nobody's arithmetic
      } else {
        float gate[kGates];
        if (own_inputs) {  // the input part is in the sums already
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            gate[q] = bias_s[update_j * kGates + q];
        } else {
          asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // this thread's input parts
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            gate[q] = input_s[tid * kGates + q] + bias_s[update_j * kGates + q];
        }
        const float* sums = step_sums + update_j * kValues + update_b;
        for (int s = 0; s < slices; ++s) {  // fixed order: bitwise reproducible
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            gate[q] += sums[s * lanes_units * kValues + q * kBatchTile];
        }
        update_cell(gate, c, published, a, t,
                    static_cast<std::size_t>(update_row) * H + update_unit);
      }
    }
    trace.phase(3);
  }
  trace.finish(a.trace);
}

template <int kKPerLane>
const void* register_kernel_for(int tile_batch) {
  switch (tile_batch) {
    case 1:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 1>);
    case 2:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 2>);
    case 4:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 4>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_registers<kKPerLane, 8>);
  }
}

/// The kernel that runs `plan`.
const void* kernel_for(const Plan& plan) {
  if (plan.weights_in_registers) {
    return plan.k_per_lane == 8 ? register_kernel_for<8>(plan.tile_batch)
                                : register_kernel_for<32>(plan.tile_batch);
  }
  switch (plan.tile_batch) {
    case 16:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<16>);
    case 8:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<8>);
    default:
      return reinterpret_cast<const void*>(&persistent_lstm_kernel<4>);
  }
}

class PersistentStage final : public Stage {
 public:
  /// `request` pins plan choices for the tests; the flags (add_flags) can pin them instead.
  explicit PersistentStage(PlanRequest request) { flags_.request = request; }
  ~PersistentStage() override {
    if (trace_.size()) print_trace();
    if (cublas_) cublasDestroy(cublas_);
  }

  void add_flags(CLI::App& app) override { add_stage_flags(app, flags_); }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    const DeviceLimits limits = device_limits(device);
    const Plan plan = make_plan(s, limits, flags_.request);
    std::ostringstream why;
    if (!plan.fits) {
      why << "the recurrent weights do not fit on chip: " << plan.why << " (" << device.name << ", "
          << limits.sm_count << " SMs, " << limits.shared_bytes / 1024
          << " KiB of shared memory per block); the largest H that fits at B = " << s.batch
          << " is " << largest_hidden_that_fits(s, limits);
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    int per_sm = 0;
    const void* kernel = kernel_for(plan);
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(plan.shared_bytes));
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, plan.threads, plan.shared_bytes);
    cudaGetLastError();
    if (per_sm * limits.sm_count < plan.blocks()) {
      why << plan.blocks() << " blocks of " << plan.threads << " threads and "
          << plan.shared_bytes / 1024 << " KiB cannot all be resident at once (" << per_sm
          << " per SM x " << limits.sm_count << " SMs)";
      return why.str();
    }
    return {};
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // The input parts (T, B, 4H), the intermediate layers' h sequences (two, alternating) and
    // the exchange buffer (T + 1 slots of one slice's G x H x Bp).
    std::size_t exchange = 0;
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
      const Plan plan = make_plan(s, device_limits(prop), flags_.request);
      if (plan.fits) exchange = exchange_floats(s, plan);
    }
    cudaGetLastError();
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence + exchange) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    plan_ = make_plan(s, device_limits(prop), flags_.request);
    if (!plan_.fits) throw UnsupportedError(plan_.why);
    if (flags_.verbose) std::cerr << "07_persistent plan: " << plan_.describe() << "\n";
    CUDA_CHECK(cudaFuncSetAttribute(kernel_for(plan_), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan_.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
    exchange_.allocate(exchange_floats(s, plan_));
    seq_len_ = s.seq_len;
    if (flags_.trace) trace_.allocate(kTraceSlots);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const std::size_t slot = static_cast<std::size_t>(plan_.batch_groups) * H * plan_.padded_batch;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    for (int layer = 0; layer < s.layers; ++layer) {
      const int input_size = s.layer_input_size(layer);
      const float* input_sequence = layer == 0 ? t.x : layer_outputs_[(layer - 1) % 2].data();
      float* output_sequence = layer == s.layers - 1 ? t.y : layer_outputs_[layer % 2].data();
      // All steps' input parts at once: W_ih · [x_0 ... x_{T-1}], (4H x I) · (I x T*B), unless
      // the register kernel computes them itself.
      if (plan_.input_k_per_lane == 0) {
        CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B,
                                 input_size, &one, t.w_ih[layer], input_size, input_sequence,
                                 input_size, &zero, input_part_.data(), four_h));
      }
      const int rows_per_slice = plan_.batch_groups * plan_.group_batch;
      for (int begin = 0; begin < B; begin += rows_per_slice) {
        const int end = std::min(B, begin + rows_per_slice);
        // Slot 0 = h0 (transposed); slots 1..T = "not yet published".
        const int publish_blocks = static_cast<int>(
            std::min<std::size_t>(ceil_div<std::size_t>(slot, kPublishThreads), 1024));
        publish_initial_state<<<publish_blocks, kPublishThreads, 0, stream>>>(
            t.h0 + layer * state, exchange_.data(), H, plan_.batch_groups, plan_.group_batch,
            plan_.padded_batch, begin, end);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(exchange_.data() + slot, 0xFF, s.seq_len * slot * sizeof(float),
                                   stream));
        LayerArgs args{};
        args.w_hh = t.w_hh[layer];
        args.input_part = input_part_.data();
        args.w_ih = t.w_ih[layer];
        args.x = input_sequence;
        args.b_ih = t.b_ih[layer];
        args.b_hh = t.b_hh[layer];
        args.c0 = t.c0 + layer * state;
        args.y = output_sequence;
        args.hy = t.hy + layer * state;
        args.cy = t.cy + layer * state;
        args.exchange = exchange_.data();
        args.hidden = H;
        args.batch = B;
        args.seq_len = s.seq_len;
        args.batch_begin = begin;
        args.batch_end = end;
        args.units_per_block = plan_.units_per_block;
        args.unit_blocks = plan_.unit_blocks;
        args.batch_groups = plan_.batch_groups;
        args.group_batch = plan_.group_batch;
        args.padded_batch = plan_.padded_batch;
        args.lanes_batch = plan_.lanes_batch;
        args.lanes_units = plan_.lanes_units;
        args.phases = plan_.phases;
        args.tile_groups_units = plan_.tile_groups_units;
        args.tile_groups_batch = plan_.tile_groups_batch;
        args.k_slices = plan_.k_slices;
        args.chunk_rows = plan_.chunk_rows;
        args.chunks = plan_.chunks;
        args.input_size = input_size;
        args.input_k_per_lane = plan_.input_k_per_lane;
        args.trace = trace_.size() ? trace_.data() : nullptr;
        void* kernel_args[] = {&args};
        // The whole recurrence of the slice: one launch, all blocks resident at once (a block
        // that waits for h must never wait for a block that has not started).
        CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(plan_), dim3(plan_.blocks()),
                                               dim3(plan_.threads), kernel_args, plan_.shared_bytes,
                                               stream));
      }
    }
  }

 private:
  /// Prints where block 0 spent the steps of the last launch, per step (--trace).
  void print_trace() const {
    if (cudaDeviceSynchronize() != cudaSuccess) return;
    const std::vector<long long> cycles = trace_.download();
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    std::cerr << "07_persistent trace (block 0, last launch, per step; cycles at up to "
              << khz / 1000 << " MHz):";
    for (int i = 0; i < kTraceSlots; ++i) {
      const double per_step = static_cast<double>(cycles[i]) / seq_len_;
      std::cerr << "  " << (i < kTraceSlots - 1 ? kTraceNames[i] : "whole step") << " "
                << static_cast<long long>(per_step) << " (" << per_step / khz * 1000 << " us)";
    }
    std::cerr << "\n";
  }

  static std::size_t exchange_floats(const ProblemSize& s, const Plan& plan) {
    return (static_cast<std::size_t>(s.seq_len) + 1) * plan.batch_groups * s.hidden *
           plan.padded_batch;
  }

  StageFlags flags_;
  Plan plan_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<float> input_part_;        // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];  // intermediate layers' h sequences, alternating
  DeviceBuffer<float> exchange_;          // (T + 1, G, H, Bp): published h of one slice
  DeviceBuffer<long long> trace_;         // --trace: block 0's cycles by phase
  int seq_len_ = 0;
};

}  // namespace

DeviceLimits device_limits(const cudaDeviceProp& device) {
  DeviceLimits limits;
  limits.sm_count = device.multiProcessorCount;
  // What a plan may ask for dynamically: the opt-in limit covers static shared memory too, and
  // both kernels declare PhaseTrace's sums statically.
  limits.shared_bytes = device.sharedMemPerBlockOptin - kTraceSlots * sizeof(long long);
  limits.name = device.name;
  return limits;
}

std::unique_ptr<Stage> make_with_plan(const PlanRequest& request) {
  return std::make_unique<PersistentStage>(request);
}

std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>(PlanRequest{});
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
