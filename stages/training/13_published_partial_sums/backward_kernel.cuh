/*! \file
 *  \brief The backward recurrence of one layer in one persistent kernel: every block keeps the
 *         rows of W_hh of its hidden units' four gates in shared memory for all T steps, computes
 *         the cell's backward for its units, multiplies its own dz_t by its own rows and
 *         publishes that partial sum of dh_{t-1} (H values per batch row), each value tagged with
 *         its step; a block then reads, for its own units only, the partial sums of every block
 *         of its batch group. Its mapping and costs: README.md.
 */
#pragma once

#include <cstddef>

#include "plan.h"
#include "primitives.cuh"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kMaxTileRows = 8;  // batch rows of a thread's product tile at most: 8 sums

/// What the backward kernel reads and writes for one layer and one slice of the batch (a
/// launch). Every buffer has the whole batch's rows; a launch touches its own rows only.
struct BackwardArgs {
  const float* w_hh;     // (4H, H) row-major, PyTorch's layout
  const float* gates;    // (T, B, 4H): the activated gates i, f, g, o the forward kept
  const float* cell;     // (T + 1, B, H): c0, then c_t at slot t + 1, as the forward kept it
  const float* d_above;  // (T, B, H): dy, or the gradient of this layer's h from the layer above
  const float* dhy;      // (B, H) the gradient of this layer's final h
  const float* dcy;      // (B, H) the gradient of this layer's final c
  float* dz;             // (T, B, 4H) written: the weight gradients' GEMMs read it after
  unsigned long long* partials;  // [2][U readers][U writers][B][J] tagged partial sums of dh
  unsigned tag_base;             // the tag of step t is tag_base + t (unique per layer and pass)
  float* dh0;                    // (B, H) written: the gradient of this layer's h0
  float* dc0;                    // (B, H) written: the gradient of this layer's c0
  int hidden_size, batch, seq_len;
  int batch_begin, batch_end;  // the batch rows of this launch (a slice)
  int units_per_block;         // J
  int unit_blocks;             // U: block = u + U * g
  int group_rows;              // Bg: batch rows per block
  int gather_lanes;            // L: threads that share one pair's U partial sums
  int sum_lanes;               // Q: lanes that add up the L sums of one pair (a power of two)
};

/// Step t's slot of partial sums, [U readers][U writers][B][J]: slot t mod 2 of two.
__device__ __forceinline__ unsigned long long* partial_sums_slot(const BackwardArgs& a, int t) {
  return a.partials + (t & 1) * static_cast<std::size_t>(a.unit_blocks) * a.unit_blocks * a.batch *
                          a.units_per_block;
}

/// (4) of the kernel below: block `u`'s partial sum of dh_{t-1} for every unit k < H and its
/// `rows` batch rows from `first_row`: the sum over its 4J gate rows r of W_hh[r][k] * dz_t[r][b],
/// published with step t's tag where block k / J reads it: partials[t & 1][k / J][u][row][k % J].
/// Thread item = (k, tile of kTileRows rows): consecutive threads take consecutive k (conflict-free
/// in w_s, whole sectors in the stores); dz_s is broadcast. kTileRows = the block's rows rounded up
/// to a power of two, at most 8: no multiplications for rows a block does not have.
template <int kTileRows>
__device__ __forceinline__ void publish_partial_sums(const BackwardArgs& a, const float* w_s,
                                                     const float* dz_s, int rows8, int rows,
                                                     int first_row, int unit_block, int t) {
  const int H = a.hidden_size, J = a.units_per_block;
  const unsigned tag = a.tag_base + t;
  unsigned long long* slot = partial_sums_slot(a, t);
  const int tiles = (rows + kTileRows - 1) / kTileRows;
  for (int item = threadIdx.x; item < H * tiles; item += blockDim.x) {
    const int k = item % H, tile = item / H;
    float acc[kTileRows] = {};
#pragma unroll 4  // four rows' loads in flight before their FMAs: at B = 1 the loop is all latency
    for (int r = 0; r < kGates * J; ++r) {
      const float w = w_s[r * H + k];
      const float* d = dz_s + r * rows8 + tile * kTileRows;
      float dz[kTileRows];
      if constexpr (kTileRows >= 4) {  // 16-byte loads of the broadcast dz
#pragma unroll
        for (int b = 0; b < kTileRows; b += 4)
          *reinterpret_cast<float4*>(dz + b) = *reinterpret_cast<const float4*>(d + b);
      } else {
#pragma unroll
        for (int b = 0; b < kTileRows; ++b)
          dz[b] = d[b];
      }
#pragma unroll
      for (int b = 0; b < kTileRows; ++b)
        acc[b] = fmaf(w, dz[b], acc[b]);
    }
    unsigned long long* to =
        slot + (static_cast<std::size_t>(k / J) * a.unit_blocks + unit_block) * a.batch * J + k % J;
#pragma unroll
    for (int b = 0; b < kTileRows; ++b) {
      const int row = first_row + tile * kTileRows + b;
      if (tile * kTileRows + b < rows) store_tagged(to + row * J, acc[b], tag);
    }
  }
}

/// The whole backward recurrence of one layer (one slice of the batch), t = T-1 down to 0.
/// Grid: U x G blocks (block = u + U * g), kBackwardThreads threads, all resident (cooperative
/// launch). Block (u, g) owns units u*J .. u*J + J - 1 for the Bg batch rows of group g.
/// A step t: (1) cp.async brings the stash of step t for the block's (unit, row) pairs into
/// shared memory; (2) dh_rec of the pairs: the sum over the group's U blocks of their partial
/// sums of step t+1 (dhy at t = T-1), L threads per pair polling U / L tagged values each, then
/// Q lanes adding the L sums, each in a fixed order; (3) one thread per pair: the cell's backward,
/// dz_t into global memory and into shared memory, dc_{t-1} kept; (4) the block's partial sum
/// W_hh[rows of its units]ᵀ · dz_t for all H units, published, tagged with step t
/// (publish_partial_sums above). After step 0, one more gather gives dh0. Shared memory (plan.cpp
/// sizes it): w [4J][H] | dz [4J][Bg8] | sums [max(512, P)] | dh [P] | stash [P][7] | dc [P], P = J
/// * Bg pairs, Bg8 = Bg rounded up to a multiple of 8.
__global__ void __launch_bounds__(kBackwardThreads, 1) backward_persistent(const BackwardArgs a) {
  extern __shared__ float4 shared[];
  const int H = a.hidden_size, J = a.units_per_block, U = a.unit_blocks, tid = threadIdx.x;
  const int unit_block = blockIdx.x % U, group = blockIdx.x / U;
  const int first_unit = unit_block * J, first_row = a.batch_begin + group * a.group_rows;
  const int rows = min(a.group_rows, a.batch_end - first_row);
  if (rows <= 0) return;  // an empty group of the last slice: nobody waits for it
  const int pairs = J * rows, rows8 = (a.group_rows + kMaxTileRows - 1) / kMaxTileRows * 8;
  const int L = a.gather_lanes, Q = a.sum_lanes;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  float* w_s = reinterpret_cast<float*>(shared);                    // [4J][H]
  float* dz_s = w_s + static_cast<std::size_t>(kGates) * J * H;     // [4J][rows8]
  float* sums_s = dz_s + kGates * J * rows8;                        // [max(512, P)]
  float* dh_s = sums_s + max(kBackwardThreads, J * a.group_rows);   // [P]
  float* stash_s = dh_s + J * a.group_rows;                         // [P][7]
  float* dc_s = stash_s + kStashFloats * J * a.group_rows;          // [P]

  // ---- once per sequence: the rows of W_hh of this block's units, gate q of unit j at row
  // q * J + j (zeros past H), as the forward keeps them; dz's padding zero; dc from dcy.
  for (int i = tid; i < kGates * J * H; i += blockDim.x) {
    const int r = i / H, k = i % H, unit = first_unit + r % J;
    w_s[i] = unit < H ? a.w_hh[(static_cast<std::size_t>(r / J) * H + unit) * H + k] : 0.0f;
  }
  for (int i = tid; i < kGates * J * rows8; i += blockDim.x)
    dz_s[i] = 0.0f;
  for (int p = tid; p < pairs; p += blockDim.x) {
    const int unit = first_unit + p % J, row = first_row + p / J;
    dc_s[p] = unit < H ? a.dcy[static_cast<std::size_t>(row) * H + unit] : 0.0f;
  }
  __syncthreads();

  // ---- (1) the stash of step t for this thread's own pairs, copied while it waits.
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

  // ---- (2) dh_s[p] = the sum over the group's U blocks of their partial sums of step t for
  // pair p = (row b, unit j) = b * J + j. Thread (l, p) polls the sums of blocks l, l + L, ...
  // (contiguous in p for one block: the writers lay them out for the reader), adds them in that
  // order into sums_s[l * P + p]; then Q lanes per pair add the L sums, l = q, q + Q, ..., and
  // their Q results by shuffles: a fixed order, bitwise reproducible.
  const auto gather = [&](int t) {
    const unsigned tag = a.tag_base + t;
    const auto other_step = [tag](unsigned long long got) {
      return static_cast<unsigned>(got >> 32) != tag;
    };
    const unsigned long long* mine =
        partial_sums_slot(a, t) + static_cast<std::size_t>(unit_block) * U * a.batch * J;
    for (int item = tid; item < L * pairs; item += blockDim.x) {
      const int p = item % pairs, l = item / pairs;
      float sum = 0.0f;
      if (first_unit + p % J < H) {          // a padding unit of the last block: nobody writes it
        const auto of_writer = [&](int v) {  // writer v's partial sum for pair p
          return mine + (static_cast<std::size_t>(v) * a.batch + first_row) * J + p;
        };
        for (int v0 = l; v0 < U; v0 += kPartialsInFlight * L) {
          unsigned long long got[kPartialsInFlight];
#pragma unroll
          for (int r = 0; r < kPartialsInFlight; ++r)  // all in flight at once
            if (v0 + r * L < U) got[r] = load_relaxed(of_writer(v0 + r * L));
          wait_published_at(got, of_writer, other_step, U, v0, L);  // writers v0, v0 + L, ...
#pragma unroll
          for (int r = 0; r < kPartialsInFlight; ++r)
            if (v0 + r * L < U) sum += __uint_as_float(static_cast<unsigned>(got[r]));
        }
      }
      sums_s[l * pairs + p] = sum;
    }
    __syncthreads();
    const int per_round = blockDim.x / Q;  // pairs per round; a round's lanes all shuffle
    for (int first = 0; first < pairs; first += per_round) {
      const int p = first + tid / Q, q = tid % Q;
      float sum = 0.0f;
      if (p < pairs)
        for (int l = q; l < L; l += Q)
          sum += sums_s[l * pairs + p];
      for (int offset = Q / 2; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(kFullMask, sum, offset);
      if (q == 0 && p < pairs) dh_s[p] = sum;
    }
    __syncthreads();
  };

  // ---- the steps, from the last.
  for (int t = a.seq_len - 1; t >= 0; --t) {
    fetch_stash(t);
    if (t < a.seq_len - 1) gather(t + 1);  // every pair's dh_rec in dh_s
    wait_copies();                         // this thread's stash of step t

    // (3) The cell's backward of each pair, one thread each (the math: README.md).
    for (int p = tid; p < pairs; p += blockDim.x) {
      const int j = p % J, b = p / J, unit = first_unit + j;
      if (unit >= H) continue;
      const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
      const float* kept = stash_s + p * kStashFloats;
      const float i = kept[0], f = kept[1], g = kept[kGateG], o = kept[3];
      const float tanh_c = tanhf(kept[4]), c_prev = kept[5];
      const float dh = kept[6] + (t == a.seq_len - 1 ? a.dhy[out] : dh_s[p]);
      const float dc = dc_s[p] + dh * o * (1.0f - tanh_c * tanh_c);
      const float dz[kGates] = {dc * g * i * (1.0f - i), dc * c_prev * f * (1.0f - f),
                                dc * i * (1.0f - g * g), dh * tanh_c * o * (1.0f - o)};
      float* dz_out = a.dz + (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
      for (int q = 0; q < kGates; ++q) {
        dz_out[q * H] = dz[q];                  // for the weight gradients, after the kernel
        dz_s[(q * J + j) * rows8 + b] = dz[q];  // for this block's product
      }
      dc_s[p] = dc * f;  // what c_{t-1} receives through the forget gate
    }
    __syncthreads();  // dz_t of every pair in shared memory
    if (a.group_rows >= 5) {
      publish_partial_sums<8>(a, w_s, dz_s, rows8, rows, first_row, unit_block, t);
    } else if (a.group_rows >= 3) {
      publish_partial_sums<4>(a, w_s, dz_s, rows8, rows, first_row, unit_block, t);
    } else if (a.group_rows == 2) {
      publish_partial_sums<2>(a, w_s, dz_s, rows8, rows, first_row, unit_block, t);
    } else {
      publish_partial_sums<1>(a, w_s, dz_s, rows8, rows, first_row, unit_block, t);
    }
  }

  // ---- after step 0: dh0 = the sums of step 0, and dc0.
  gather(0);
  for (int p = tid; p < pairs; p += blockDim.x) {
    const int j = p % J, b = p / J, unit = first_unit + j;
    if (unit >= H) continue;
    const std::size_t out = static_cast<std::size_t>(first_row + b) * H + unit;
    a.dh0[out] = dh_s[p];
    a.dc0[out] = dc_s[p];
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
