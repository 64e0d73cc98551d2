/*! \file
 *  \brief The kernel's device primitives: relaxed loads and stores through L2, waiting for a
 *         published value of h, 16-bit values and the tensor-core instruction, asynchronous
 *         copies, the cell update, and slot 0 of the exchange buffer.
 *
 * Stages 08-10 each keep their own copy of these primitives, on purpose: every stage stays
 * self-contained, and the diff between two stages shows what changed in them. The protocol and
 * why it is correct: README.md beside this file, "Publishing h without a barrier".
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "plan.h"

namespace lstm::LSTM_STAGE_NAMESPACE {  // stage_<series>_<NN_slug>, named by the build

constexpr int kGateG = 2;  // the cell candidate g uses tanh, the others sigmoid
constexpr unsigned kFullMask = 0xFFFFFFFFu;
// A 16-bit NaN that no rounding returns (a NaN rounds to the canonical 0x7FFF, in FP16 and BF16).
constexpr unsigned kUnpublished16 = 0xFFFFu;
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

/// An 8-byte load through L2 that may race with other SMs' stores (relaxed, GPU scope): four
/// published 16-bit values, each either before or after its store.
__device__ __forceinline__ uint2 load_relaxed(const uint2* address) {
  uint2 v;
  asm volatile("ld.relaxed.gpu.global.v2.b32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(address));
  return v;
}

/// The matching store: publishes one 16-bit value (its bits) for other SMs to poll.
__device__ __forceinline__ void store_relaxed(std::uint16_t* address, std::uint16_t bits) {
  asm volatile("st.relaxed.gpu.global.b16 [%0], %1;" ::"l"(address), "h"(bits) : "memory");
}

__device__ __forceinline__ bool unpublished(uint2 v) {
  return (v.x & 0xFFFFu) == kUnpublished16 || (v.x >> 16) == kUnpublished16 ||
         (v.y & 0xFFFFu) == kUnpublished16 || (v.y >> 16) == kUnpublished16;
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
// 16-bit values and the tensor-core instruction
// ---------------------------------------------------------------------------------------------

/// `value` rounded to Element (__half or __nv_bfloat16), to nearest, ties to even.
template <typename Element>
__device__ __forceinline__ Element to_element(float value) {
  if constexpr (std::is_same_v<Element, __half>) {
    return __float2half_rn(value);
  } else {
    return __float2bfloat16_rn(value);
  }
}

/// The bits of `value` rounded to Element: what h_t is published as.
template <typename Element>
__device__ __forceinline__ std::uint16_t element_bits(float value) {
  const Element element = to_element<Element>(value);
  std::uint16_t bits;
  memcpy(&bits, &element, sizeof(bits));
  return bits;
}

/// Two values rounded to Element and packed in 32 bits, `low` in the low half: one register of
/// an mma fragment (the lower-indexed element in the lower bits).
template <typename Element>
__device__ __forceinline__ unsigned pack_pair(float low, float high) {
  const Element pair[2] = {to_element<Element>(low), to_element<Element>(high)};
  unsigned word;
  memcpy(&word, pair, sizeof(word));
  return word;
}

/// d += a · b on the tensor cores, one warp: a 16 x 16 tile of Element (A fragment, four
/// registers a lane), a 16 x 8 tile (B fragment, two registers), FP32 sums (C/D fragment, four
/// floats a lane). Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating
/// point type".
template <typename Element>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint4& a, unsigned b0,
                                            unsigned b1) {
  if constexpr (std::is_same_v<Element, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
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
/// step, to hy and cy. `out` = batch row * H + unit. `a`: the kernel's arguments (y, hy, cy,
/// hidden, batch, seq_len); y == nullptr: a wavefront's layer whose h sequence nobody reads.
template <typename Element, typename Args>
__device__ __forceinline__ void update_cell(const float (&gate)[kGates], float& c,
                                            std::uint16_t* published, const Args& a, int t,
                                            std::size_t out) {
  const float i_gate = sigmoid(gate[0]), f_gate = sigmoid(gate[1]);
  const float g_gate = tanhf(gate[kGateG]), o_gate = sigmoid(gate[3]);
  c = f_gate * c + i_gate * g_gate;
  const float h = o_gate * tanhf(c);
  store_relaxed(published, element_bits<Element>(h));  // the next step rounds h to Element anyway
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

/// Copies 16 bytes from global to shared memory asynchronously (cp.async, L2 only: completes at
/// the next cp.async.wait_group).
__device__ __forceinline__ void copy_async_16(uint4* shared_target, const uint4* source) {
  const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(target), "l"(source) : "memory");
}

/// A layer's part of its first exchange slot: h0 of this slice's rows rounded to Element,
/// transposed to [g][k][Bp] with groups `group_stride` values apart (P x H x Bp: a launch's P
/// layers side by side), zeros in the padding. Grid-stride loop over the part's G * H * Bp values.
template <typename Element>
__global__ void publish_initial_state(const float* h0, std::uint16_t* slot0, int hidden, int groups,
                                      int group_batch, int padded_batch, int batch_begin,
                                      int batch_end, std::size_t group_stride) {
  const std::size_t total = static_cast<std::size_t>(groups) * hidden * padded_batch;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int b = static_cast<int>(i % padded_batch);
    const int k = static_cast<int>((i / padded_batch) % hidden);
    const int g = static_cast<int>(i / (static_cast<std::size_t>(hidden) * padded_batch));
    const int row = batch_begin + g * group_batch + b;
    slot0[g * group_stride + i % (static_cast<std::size_t>(hidden) * padded_batch)] =
        element_bits<Element>((b < group_batch && row < batch_end)
                                  ? h0[static_cast<std::size_t>(row) * hidden + k]
                                  : 0.0f);
  }
}

}  // namespace lstm::LSTM_STAGE_NAMESPACE
