/*! \file
 *  \brief The forward-with-stash for small batches (B <= 8): forward stage 12's register kernel
 *         (each lane holds its share of W_hh in registers for the whole sequence; each warp
 *         stages its own rows of h_{t-1}; a "transposing" butterfly sums the lanes), which also
 *         keeps what the backward needs (update_cell, primitives.cuh). Its mapping: forward
 *         stage 12's README.md and the comment at the kernel; what it keeps: README.md here.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// What the register kernel reads and writes for one layer, and its plan (plan.h). One batch
/// group: the launch covers batch rows batch_begin .. batch_end - 1 (at most kMaxRegisterBatch).
struct RegisterKernelArgs {
  const float* w_hh;  // (4H, H) row-major, PyTorch's layout
  const float* w_ih;  // (4H, I): for the input parts the kernel computes itself
  const float* x;     // (T, B, I): this layer's input sequence (ditto)
  const float* b_ih;  // (4H)
  const float* b_hh;  // (4H)
  const float* c0;    // (B, H) this layer's initial c
  // The stash (the whole batch's rows; a launch writes its own): gates (T, B, 4H): in, W_ih · x_t
  // from cuBLAS (if input_k_per_lane == 0); out, the activated gates. cell and h_seq
  // (T + 1, B, H): out, c_t and h_t at slot t + 1 (slot 0 = c0 and h0, copied before).
  float* gates;
  float* cell;
  float* h_seq;
  float* y;         // (T, B, H) the last layer's output, or nullptr
  float* hy;        // (B, H) final h
  float* cy;        // (B, H) final c
  float* exchange;  // (T + 1, H, Bp): published h, transposed; slot 0 = h0
  int hidden, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch
  int units_per_block;         // J
  int lanes_units, phases;     // lanes of a warp along the units and along k
  int k_slices;                // warps along k
  int input_size;              // I of this layer
  int input_k_per_lane;        // > 0: the kernel computes its input parts (the plan's layout)
};

// ---------------------------------------------------------------------------------------------
// Helpers: staging a warp's rows of h, and the butterfly
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------------

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
/// The input part: either copied from cuBLAS's result (in `gates`, cp.async) or, where the plan
/// says so (input_k_per_lane > 0), computed by the kernel itself into the same sums as the
/// product (W_ih's slice in shared memory as float4 of the four gates, x_t copied one step ahead
/// with cp.async), while the first loads of h_{t-1} fly (see stage_published's `meanwhile`).
/// One block barrier per step. Dynamic shared memory: W_ih [k_slices][input_k_per_lane][32]
/// float4 | x [2][k_slices][lanes_k * input_k_per_lane][kBatchTile] | h [k_slices * lanes_k *
/// kKPerLane][kBatchTile] | sums [2][k_slices][lanes_units][4 * kBatchTile] | input parts
/// [J * kBatchTile][4] | biases [J][4].
template <int kKPerLane, int kBatchTile>
__global__ void __launch_bounds__(kMaxRegisterThreads, 1)
    persistent_lstm_registers(const RegisterKernelArgs a) {
  constexpr int kValues = kGates * kBatchTile;  // sums a lane carries into the butterfly
  constexpr int kStagedLoads = 4;               // h loads in flight per thread
  constexpr int kLoadGroup = 4;  // k values whose h loads the product may issue together
  extern __shared__ float4 shared[];
  const int H = a.hidden, J = a.units_per_block, slices = a.k_slices;
  const int lanes_units = a.lanes_units, lanes_k = a.phases;
  const int warp_rows = lanes_k * kKPerLane;  // rows of k per warp (slice)
  const int padded_k = slices * warp_rows;
  // The input parts' weights and inputs first (float4 arrays need 16-byte alignment).
  const bool own_inputs = a.input_k_per_lane > 0;  // else cuBLAS computed them (in gates)
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

  for (int t = 0; t < a.seq_len; ++t) {
    const float* h_prev = a.exchange + static_cast<std::size_t>(t) * slot_floats;
    float* h_next = a.exchange + static_cast<std::size_t>(t + 1) * slot_floats;
#pragma unroll
    for (int v = 0; v < kValues; ++v)
      acc[v] = 0.0f;
    if (!own_inputs && real_row) {
      // The input part of this thread's update, which cuBLAS computed before the launch: copied
      // to shared memory while the warp waits for h (cp.async: no registers held).
      const float* in =
          a.gates + (static_cast<std::size_t>(t) * a.batch + update_row) * kGates * H + update_unit;
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
        update_cell(gate, c, published, a, t, update_row, update_unit);
      }
    }
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
