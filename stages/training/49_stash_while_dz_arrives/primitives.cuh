/*! \file
 *  \brief The device primitives of the publication protocol (relaxed stores publish a value,
 *         relaxed loads through L2 poll for it, a value that is not the sentinel is the signal
 *         that it is there), asynchronous copies, the activations, the forward's cell update
 *         (which keeps the stash) and slot 0 of the forward's exchange buffer.
 *
 * A copy of forward stage 12's primitives, kept here on purpose: every stage stays
 * self-contained. What differs from stage 12's: the cell update also keeps what the backward
 * needs (the activated gates, c_t and h_t), and cp.async has named commit and wait helpers for
 * the backward. The protocol and why it is correct: forward stage 08's README, "Publishing h
 * without a barrier"; what this stage publishes with it (h in the forward, dz in the backward):
 * README.md beside this file.
 */
#pragma once

#include <cstddef>

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kGateG = 2;  // the cell candidate g uses tanh, the others sigmoid
constexpr unsigned kFullMask = 0xFFFFFFFFu;
// A NaN that no FP32 arithmetic returns (GPUs return the canonical NaN 0x7FFFFFFF).
constexpr unsigned kUnpublished = 0xFFFFFFFFu;
constexpr unsigned long long kMaxWaitNs = 5'000'000'000ull;  // 5 s for one value: a bug, trap
constexpr int kSpinPolls = 4;     // polls before each retry starts with a short sleep
constexpr int kPollSleepNs = 64;  // the sleep: fewer polls of the same lines by every SM

// ---------------------------------------------------------------------------------------------
// Publication: relaxed loads and stores through L2, and waiting for a published value
// ---------------------------------------------------------------------------------------------

/// A 4-byte load through L2 that is allowed to race with another SM's store (relaxed, GPU
/// scope): it returns the value either before or after that store, never a mix.
__device__ __forceinline__ float load_relaxed(const float* address) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(address));
  return v;
}

/// The same for 16 bytes: each 4-byte element comes either before or after its own store.
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

__device__ __forceinline__ bool unpublished(float v) {
  return __float_as_uint(v) == kUnpublished;
}
__device__ __forceinline__ bool unpublished(float4 v) {  // any of the four
  return unpublished(v.x) || unpublished(v.y) || unpublished(v.z) || unpublished(v.w);
}

/// Nanoseconds on the GPU's global timer (the same clock on every SM).
__device__ __forceinline__ unsigned long long global_time_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Waits until none of staged[r] = source[base + r * stride] (r < kInFlight, index < count)
/// holds the sentinel any more: re-reads all the missing ones at once, so a retry costs one L2
/// round trip, not one per value. A value never published is a bug: the kernel traps after
/// kMaxWaitNs of waiting (the timer read every 1024 polls) instead of hanging.
template <int kInFlight, typename Value>
__device__ __forceinline__ void wait_published(Value (&staged)[kInFlight], const Value* source,
                                               int count, int base, int stride) {
  unsigned long long started = 0;
  for (int polls = 0;; ++polls) {
    bool missing = false;
#pragma unroll
    for (int r = 0; r < kInFlight; ++r)
      missing |= base + r * stride < count && unpublished(staged[r]);
    if (!missing) return;
    if (polls == kSpinPolls) started = global_time_ns();
    if (polls > kSpinPolls && polls % 1024 == 0 && global_time_ns() - started > kMaxWaitNs)
      __trap();
    if (polls >= kSpinPolls) __nanosleep(kPollSleepNs);
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      const int idx = base + r * stride;
      if (idx < count && unpublished(staged[r])) staged[r] = load_relaxed(source + idx);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Asynchronous copies and the activations
// ---------------------------------------------------------------------------------------------

/// Copies 4 bytes from global to shared memory asynchronously (cp.async: complete for this
/// thread after its next cp.async.wait_group; no register holds the value meanwhile).
__device__ __forceinline__ void copy_async_4(float* shared_target, const float* source) {
  const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(target), "l"(source) : "memory");
}
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void wait_copies() {  // this thread's copies are in shared memory
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
__device__ __forceinline__ void wait_copies_but_newest() {  // all but the last group committed
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

__device__ __forceinline__ float sigmoid(float z) {
  // 1 / x by the hardware reciprocal (1 ulp), with no slow path: 1 + e^-z is never tiny, and
  // where it is huge the result 0 is sigmoid's limit. The branch-free form lets the compiler
  // interleave the gates' activations.
  return __fdividef(1.0f, 1.0f + expf(-z));
}

// ---------------------------------------------------------------------------------------------
// The forward's cell update, which keeps the stash, and slot 0 of its exchange buffer
// ---------------------------------------------------------------------------------------------

/// The cell update of one (unit, batch row) at step t, from its four gate pre-activations:
/// updates c, publishes h_t (the signal to every other block) and keeps what the backward needs:
/// the activated gates at gates[t][row][q * H + unit], c_t and h_t at slot t + 1 of cell and
/// h_seq (slot 0 holds c0 and h0); writes h_t to y (the last layer) and, at the last step, h and
/// c to hy and cy. `a`: either forward kernel's arguments (gates, cell, h_seq, y, hy, cy, hidden,
/// batch, seq_len). Plain stores but for the published h: the stash is read after the kernel.
template <typename Args>
__device__ __forceinline__ void update_cell(const float (&gate)[kGates], float& c, float* published,
                                            const Args& a, int t, int row, int unit) {
  const float i_gate = sigmoid(gate[0]), f_gate = sigmoid(gate[1]);
  const float g_gate = tanhf(gate[kGateG]), o_gate = sigmoid(gate[3]);
  c = f_gate * c + i_gate * g_gate;
  const float h = o_gate * tanhf(c);
  store_relaxed(published, h);
  const int H = a.hidden;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  const std::size_t out = static_cast<std::size_t>(row) * H + unit;
  float* gates = a.gates + (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
  gates[0] = i_gate, gates[H] = f_gate, gates[2 * H] = g_gate, gates[3 * H] = o_gate;
  a.cell[(t + 1) * state + out] = c;
  a.h_seq[(t + 1) * state + out] = h;
  if (a.y) a.y[t * state + out] = h;
  if (t == a.seq_len - 1) {
    a.hy[out] = h;
    a.cy[out] = c;
  }
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

}  // namespace lstm::LSTM_STAGE_NAMESPACE
