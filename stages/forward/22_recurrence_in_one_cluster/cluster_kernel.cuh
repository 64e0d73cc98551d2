/*! \file
 *  \brief The recurrence of one layer inside one cluster of 16 blocks per batch group: h_t never
 *         goes through global memory. Block r owns units r*J .. r*J + J - 1 (their 4J gate rows
 *         of W_hh in its shared memory, as the A fragments of kernel.cuh) and each step sends its
 *         units' h_t into the shared memory of every block of the cluster with st.async, 16 bytes
 *         a message, counted by an mbarrier there. Its mapping: README.md.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "harness/phase_trace.cuh"
#include "kernel.cuh"  // SharedKernelArgs
#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

/// The whole recurrence of one layer, t = 0 .. T-1: one cluster of kOneCluster blocks per batch
/// group of a.group_batch <= kClusterRows rows, kClusterThreads threads a block (a.exchange is
/// not used). Block rank r owns units r*J .. (J = a.units_per_block, a multiple of 8), thread
/// (j, b) = (tid / 8, tid % 8) the cell of unit r*J + j and batch row b. A step t:
///   (1) the input parts of the thread's cell for step t + 1: cp.async into shared memory (step
///       t's were copied a step ago);
///   (2) h_{t-1} of every unit is in buffer t % 2: h0 copied there before step 0, then sent by
///       its owners and counted by the buffer's mbarrier;
///   (3) warp w multiplies its (row tile, k slice) tiles w, w + 16, ..: partial sums in shared
///       memory;
///   (4) the cell update: c_t, h_t to y (hy, cy at the last step), h_t in 16 bits to shared
///       memory;
///   (5) each 8 units' h_t of one batch row to every block's buffer (t + 1) % 2 with st.async.
/// No block waits for a block of another cluster.
/// Shared memory (plan.cpp, cluster_shared_bytes): w [k tile][row tile][lane] uint4 | h [2][8
/// rows][K + 8] halves | sums [k slice][4J][8] | input parts [2][J * 8][4] | biases [4J] | h_t
/// [8][J] halves | two mbarriers.
template <typename Element>
__global__ void __launch_bounds__(kClusterThreads, 1) cluster_recurrence(const SharedKernelArgs a) {
  extern __shared__ uint4 shared[];
  constexpr int kWarps = kClusterThreads / kWarpSize;
  const int H = a.hidden, J = a.units_per_block, K = (H + kMmaK - 1) / kMmaK * kMmaK;
  const int k_tiles = K / kMmaK, row_tiles = a.tile_groups_units, rows_w = kGates * J;
  const int slices = a.k_slices, h_row = K + 8;  // halves a batch row of staged h (bank-free)
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int first_row = a.batch_begin + static_cast<int>(blockIdx.x) / kOneCluster * a.group_batch;
  const int rows = min(a.group_batch, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty cluster: all its blocks leave together
  const int first_unit = static_cast<int>(rank) * J, my_units = max(0, min(J, H - first_unit));
  const int owners = (H + J - 1) / J;  // the blocks that own units (16 J may pass H)
  // One step's bytes for this block: every owner's units, rounded up to 8, for each row.
  const int last_units = H - (owners - 1) * J;
  const unsigned bytes = 2u * rows * ((owners - 1) * J + (last_units + 7) / 8 * 8);
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int group_id = lane / 4, in_group = lane % 4;  // PTX's groupID, threadID_in_group

  uint4* w_s = shared;
  std::uint16_t* h_s = reinterpret_cast<std::uint16_t*>(w_s + k_tiles * row_tiles * kWarpSize);
  float* sums_s = reinterpret_cast<float*>(h_s + 2 * kClusterRows * h_row);
  float* input_s = sums_s + slices * rows_w * kClusterRows;
  float* bias_s = input_s + 2 * rows_w * kClusterRows;
  std::uint16_t* out_s = reinterpret_cast<std::uint16_t*>(bias_s + rows_w);
  const unsigned bars = shared_address(out_s + kClusterRows * J);

  const int words = k_tiles * row_tiles * kWarpSize;
  for (int i = tid; i < words; i += kClusterThreads)
    copy_async_16(w_s + i, a.w_fragments + static_cast<std::size_t>(rank) * words + i);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  for (int i = tid; i < 2 * kClusterRows * h_row; i += kClusterThreads)
    h_s[i] = 0;  // rows past the group's and k past H stay 0
  for (int i = tid; i < kClusterRows * J; i += kClusterThreads)
    out_s[i] = 0;  // units past H are sent as 0
  for (int i = tid; i < rows_w; i += kClusterThreads) {
    const int unit = first_unit + i / kGates, q = i % kGates;
    bias_s[i] = unit < H ? a.b_ih[q * H + unit] + a.b_hh[q * H + unit] : 0.0f;
  }
  if (tid == 0) {
    mbarrier_init(bars);
    mbarrier_init(bars + 8);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  for (int i = tid; i < rows * H; i += kClusterThreads)  // h0 in buffer 0, rounded to Element
    h_s[i / H * h_row + i % H] =
        element_bits<Element>(a.h0[static_cast<std::size_t>(first_row + i / H) * H + i % H]);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  if (tid == 0) {
    mbarrier_arm(bars, bytes);      // h_1, sent at step 1
    mbarrier_arm(bars + 8, bytes);  // h_0, sent at step 0
  }
  cluster_barrier();  // every block's mbarriers armed before any h is sent

  const int j = tid / kClusterRows, b = tid % kClusterRows;
  const int unit = first_unit + j, row = first_row + b;
  const bool cell = j < my_units && b < rows;
  const std::size_t out = static_cast<std::size_t>(row) * H + unit;
  float c = cell ? a.c0[out] : 0.0f;
  __shared__ long long trace_spent[kTraceSlots - 1];
  PhaseTrace trace(a.trace, trace_spent);          // --trace: wait, product, cell, sends
  const int steps = my_units > 0 ? a.seq_len : 0;  // a block without units only waits at the end
  const auto copy_input_parts = [&](int t) {       // into input_s[t % 2]: one commit group a step
    if (cell && t < a.seq_len) {
      const float* in = a.input_part + (static_cast<std::size_t>(t) * a.batch + row) * kGates * H;
#pragma unroll
      for (int q = 0; q < kGates; ++q)
        copy_async_4(input_s + ((t % 2) * rows_w * kClusterRows + tid * kGates + q),
                     in + q * H + unit);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  copy_input_parts(0);
  for (int t = 0; t < steps; ++t) {
    trace.start_step();
    copy_input_parts(t + 1);   // (1) in flight for a whole step
    const int buffer = t % 2;  // (2)
    if (t > 0) mbarrier_wait(bars + 8 * buffer, ((t - 1) / 2) % 2);
    trace.phase(0);
    // (3) B fragment words: two k of batch row groupID, k pairs threadID_in_group and + 4.
    const unsigned* column =
        reinterpret_cast<const unsigned*>(h_s + buffer * kClusterRows * h_row) +
        group_id * (h_row / 2) + in_group;
    for (int tile = warp; tile < row_tiles * slices; tile += kWarps) {
      const int row_tile = tile % row_tiles, slice = tile / row_tiles;
      const auto multiply = [&](float(&acc)[4], int kt) {
        mma_16x8x16<Element>(acc, w_s[(kt * row_tiles + row_tile) * kWarpSize + lane],
                             column[kt * kMmaK / 2], column[kt * kMmaK / 2 + 4]);
      };
      float acc[2][4] = {};  // two chains of mma, even and odd k tiles
      const int end = (slice + 1) * k_tiles / slices;
      int kt = slice * k_tiles / slices;
      for (; kt + 1 < end; kt += 2) {
        multiply(acc[0], kt);
        multiply(acc[1], kt + 1);
      }
      if (kt < end) multiply(acc[0], kt);
      float* sums = sums_s + (slice * rows_w + row_tile * kMmaRows + group_id) * kClusterRows +
                    2 * in_group;  // d0, d1: row groupID; d2, d3: eight rows down
      sums[0] = acc[0][0] + acc[1][0];
      sums[1] = acc[0][1] + acc[1][1];
      sums[8 * kClusterRows] = acc[0][2] + acc[1][2];
      sums[8 * kClusterRows + 1] = acc[0][3] + acc[1][3];
    }
    __syncthreads();  // the sums are complete, and every thread has waited on buffer t % 2:
    // armed again for h_{t+1}, which no block sends before it has this block's h_t (below).
    if (tid == 0 && t > 0) mbarrier_arm(bars + 8 * buffer, bytes);
    trace.phase(1);
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // step t's input parts, not t + 1's
    if (cell) {  // (4) the cell update, the slices added in a fixed order
      float gate[kGates];
#pragma unroll
      for (int q = 0; q < kGates; ++q) {
        gate[q] =
            input_s[(t % 2) * rows_w * kClusterRows + tid * kGates + q] + bias_s[j * kGates + q];
        for (int s = 0; s < slices; ++s)
          gate[q] += sums_s[(s * rows_w + j * kGates + q) * kClusterRows + b];
      }
      const float i_gate = sigmoid(gate[0]), f_gate = sigmoid(gate[1]);
      const float g_gate = tanhf(gate[kGateG]), o_gate = sigmoid(gate[3]);
      c = f_gate * c + i_gate * g_gate;
      const float h = o_gate * tanhf(c);
      out_s[b * J + j] = element_bits<Element>(h);
      a.y[static_cast<std::size_t>(t) * a.batch * H + out] = h;
      if (t == a.seq_len - 1) {
        a.hy[out] = h;
        a.cy[out] = c;
      }
    }
    __syncthreads();  // h_t of the block's units complete in out_s
    trace.phase(2);
    if (t + 1 < a.seq_len) {  // (5) 8 units of one row a message, to every owner (itself too)
      const int eights = (my_units + 7) / 8, per_owner = eights * rows, next = (t + 1) % 2;
      for (int m = tid; m < owners * per_owner; m += kClusterThreads) {
        const int owner = m / per_owner, r = m % per_owner / eights, e = m % eights;
        const uint4 v = *reinterpret_cast<const uint4*>(out_s + r * J + 8 * e);
        const unsigned local =
            shared_address(h_s + (next * kClusterRows + r) * h_row + first_unit + 8 * e);
        store_async_16(cluster_rank_shared(local, owner), v,
                       cluster_rank_shared(bars + 8 * next, owner));
      }
    }
    trace.phase(3);
  }
  trace.finish(a.trace);
  cluster_barrier();  // no block leaves while another may still send into its shared memory
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
