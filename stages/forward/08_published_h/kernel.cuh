/*! \file
 *  \brief The persistent kernel of one layer: all T steps, W_hh's slice in shared memory, no
 *         grid-wide barrier: each block waits for exactly the values of h_{t-1} it reads.
 *         Its mapping and costs: README.md beside this file.
 */
#pragma once

#include <cstddef>

#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kGates = 4;          // i, f, g, o
constexpr int kGateG = 2;          // the cell candidate g uses tanh, the others sigmoid
constexpr int kThreads = 256;      // threads per block
constexpr int kMaxKSlices = 32;    // at most this many threads share one dot product
constexpr int kLoadsInFlight = 8;  // loads of h_{t-1} a thread issues before it waits for any

/// What the kernel reads and writes for one layer and one slice of the batch (a launch).
struct KernelArgs {
  const float* w_hh;        // (4H, H) row-major, PyTorch's layout
  const float* input_part;  // (T, B, 4H): W_ih · x_t for every step (cuBLAS, before the launch)
  const float* b_ih;        // (4H)
  const float* b_hh;        // (4H)
  const float* c0;          // (B, H) this layer's initial c
  float* y;                 // (T, B, H) this layer's h at every step
  float* hy;                // (B, H) final h
  float* cy;                // (B, H) final c
  float* exchange;          // (T + 1, rows, H): published h of this launch's rows; slot 0 = h0
  int hidden, batch, seq_len;
  int batch_begin, rows;  // this launch's batch rows: batch_begin .. batch_begin + rows - 1
  int units_per_block;    // J
  int k_slices;           // S: threads that share one dot product (each takes every S-th k)
};

/// Shared memory of one block: W_hh's slice, the partial sums, h_{t-1} of the launch's batch
/// rows (each row padded by 4 floats, so that the 8 rows a warp reads sit on different banks),
/// c and the biases. The host sizes the launch with it.
__host__ __device__ inline std::size_t shared_floats(int hidden, int units, int rows, int slices) {
  const std::size_t pairs = static_cast<std::size_t>(units) * rows;
  return static_cast<std::size_t>(kGates) * units * hidden  // w [H][J] float4
         + kGates * slices * pairs                          // partial sums [S][pairs] float4
         + rows * (static_cast<std::size_t>(hidden) + 4)    // h [rows][H + 4]
         + pairs                                            // c [pairs]
         + kGates * units;                                  // biases [J][4]
}

__device__ __forceinline__ float sigmoid(float z) {
  return 1.0f / (1.0f + expf(-z));
}

// ---------------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------------

/// The whole recurrence of one layer, for batch rows batch_begin .. batch_begin + rows - 1.
/// Grid: U blocks, one per SM, all resident (cooperative launch). Block u owns hidden units
/// u*J .. u*J + J - 1: their four gate rows of W_hh stay in its shared memory for all T steps.
/// A step: (1) the block copies h_{t-1} (all its rows) from the exchange buffer into shared
/// memory, waiting for each value until it is published; (2) thread items (pair, k slice)
/// compute partial dot products, pair p = (unit j = p % J, batch row b = p / J); (3) one thread
/// per pair adds the slices in a fixed order, the input part and the biases, updates c and
/// publishes h_t (the signal to every other block), then writes it to y. No grid barrier.
__global__ void __launch_bounds__(kThreads, 1) persistent_lstm_published(const KernelArgs a) {
  extern __shared__ float4 shared[];
  const int H = a.hidden, J = a.units_per_block, S = a.k_slices, rows = a.rows;
  const int tid = threadIdx.x, first_unit = blockIdx.x * J, pairs = J * rows;
  const int h_stride = H + 4;
  float4* w_s = shared;                                             // [H][J]: i, f, g, o
  float4* sums_s = w_s + static_cast<std::size_t>(H) * J;           // [S][pairs]
  float* h_s = reinterpret_cast<float*>(sums_s + S * pairs);        // [rows][H + 4]
  float* c_s = h_s + static_cast<std::size_t>(rows) * h_stride;     // [pairs]
  float* bias_s = c_s + pairs;                                      // [J][4]
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of y

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
  for (int p = tid; p < pairs; p += blockDim.x) {
    const int unit = first_unit + p % J, row = a.batch_begin + p / J;
    c_s[p] = unit < H ? a.c0[static_cast<std::size_t>(row) * H + unit] : 0.0f;
  }

  for (int t = 0; t < a.seq_len; ++t) {
    // (1) h_{t-1} of the launch's rows into shared memory. Other SMs publish it: relaxed loads
    // through L2, kLoadsInFlight per thread at once, re-read until none holds the sentinel.
    const float* h_prev = a.exchange + static_cast<std::size_t>(t) * rows * H;
    float* h_next = a.exchange + static_cast<std::size_t>(t + 1) * rows * H;
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
        if (i < rows * H) h_s[(i / H) * h_stride + i % H] = staged[r];
      }
    }
    __syncthreads();  // h_{t-1} complete in shared memory

    // (2) Partial sums of item (pair p, k slice s): the four gates of unit j for row b over
    // k = s, s + S, ... Neighbouring threads take neighbouring units and slices, so a warp reads
    // neighbouring float4 of w and a few rows of h.
    for (int item = tid; item < pairs * S; item += blockDim.x) {
      const int p = item % pairs, s = item / pairs, j = p % J, b = p / J;
      const float* h_row = h_s + b * h_stride;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int k = s; k < H; k += S) {
        const float4 w = w_s[k * J + j];
        const float h = h_row[k];
        acc.x = fmaf(w.x, h, acc.x);
        acc.y = fmaf(w.y, h, acc.y);
        acc.z = fmaf(w.z, h, acc.z);
        acc.w = fmaf(w.w, h, acc.w);
      }
      sums_s[s * pairs + p] = acc;
    }
    __syncthreads();  // every partial sum in shared memory

    // (3) The cell update of each pair: one thread each.
    for (int p = tid; p < pairs; p += blockDim.x) {
      const int j = p % J, unit = first_unit + j;
      if (unit >= H) continue;  // the last block's spare units
      const int row = a.batch_begin + p / J;
      const std::size_t out = static_cast<std::size_t>(row) * H + unit;  // in (B, H)
      const float* in =
          a.input_part + (static_cast<std::size_t>(t) * a.batch + row) * kGates * H + unit;
      float gate[kGates];
      for (int q = 0; q < kGates; ++q)
        gate[q] = in[q * H] + bias_s[j * kGates + q];
      for (int s = 0; s < S; ++s) {  // fixed order: bitwise reproducible
        const float4 sum = sums_s[s * pairs + p];
        gate[0] += sum.x, gate[1] += sum.y, gate[2] += sum.z, gate[3] += sum.w;
      }
      const float i_gate = sigmoid(gate[0]), f_gate = sigmoid(gate[1]);
      const float g_gate = tanhf(gate[kGateG]), o_gate = sigmoid(gate[3]);
      const float c = f_gate * c_s[p] + i_gate * g_gate;
      const float h = o_gate * tanhf(c);
      c_s[p] = c;
      store_relaxed(h_next + (p / J) * H + unit, h);  // published: the signal
      a.y[t * state + out] = h;
      if (t == a.seq_len - 1) {
        a.hy[out] = h;
        a.cy[out] = c;
      }
    }
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
