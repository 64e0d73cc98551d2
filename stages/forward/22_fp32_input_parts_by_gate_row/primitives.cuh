/*! \file
 *  \brief The device primitives both persistent kernels share: relaxed loads and stores through
 *         L2, waiting for a published value of h, asynchronous copies, the cell update, and
 *         slot 0 of the exchange buffer.
 *
 * Stages 08-12 each keep their own copy of these primitives, on purpose: every stage stays
 * self-contained, and the diff between two stages shows what changed in them. The protocol and
 * why it is correct: README.md beside this file, "Publishing h without a barrier".
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
// The cell update
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ float sigmoid(float z) {
  // 1 / x by the hardware reciprocal (1 ulp), with no slow path: 1 + e^-z is never tiny, and
  // where it is huge the result 0 is sigmoid's limit. The branch-free form lets the compiler
  // interleave the gates' activations.
  return __fdividef(1.0f, 1.0f + expf(-z));
}

/// The cell update of one (unit, batch row) at step t, from its four gate pre-activations:
/// updates c, publishes h_t (the signal to every other block), writes it to y and, at the last
/// step, to hy and cy. `out` = batch row * H + unit. `a`: either kernel's arguments (y, hy, cy,
/// hidden, batch, seq_len); y == nullptr: a wavefront's layer whose h sequence nobody reads.
template <typename Args>
__device__ __forceinline__ void update_cell(const float (&gate)[kGates], float& c, float* published,
                                            const Args& a, int t, std::size_t out) {
  const float i_gate = sigmoid(gate[0]), f_gate = sigmoid(gate[1]);
  const float g_gate = tanhf(gate[kGateG]), o_gate = sigmoid(gate[3]);
  c = f_gate * c + i_gate * g_gate;
  const float h = o_gate * tanhf(c);
  store_relaxed(published, h);
  if (a.y != nullptr) a.y[static_cast<std::size_t>(t) * a.batch * a.hidden + out] = h;
  if (t == a.seq_len - 1) {
    a.hy[out] = h;
    a.cy[out] = c;
  }
}

// ---------------------------------------------------------------------------------------------
// Asynchronous copies, and slot 0 of the exchange buffer
// ---------------------------------------------------------------------------------------------

/// Copies 4 bytes from global to shared memory asynchronously (cp.async: completes at the next
/// cp.async.wait_group; no register holds the value meanwhile).
__device__ __forceinline__ void copy_async_4(float* shared_target, const float* source) {
  const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(target), "l"(source) : "memory");
}

/// Slot 0 of the exchange buffer: h0 of this slice's rows, transposed to [g][k][Bp], zeros in
/// the padding. Grid-stride loop over the slot's G * H * Bp floats. (A wavefront launch: one group,
/// slot0 = layer i's part of slot i.)
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
