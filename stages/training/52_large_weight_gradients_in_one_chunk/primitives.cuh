/*! \file
 *  \brief The kernels' device primitives: relaxed loads and stores through L2, waiting for a
 *         published value (h in the forward, dz in the backward, both in 16 bits), 16-bit
 *         values and the tensor-core instruction, asynchronous copies, the forward's cell update
 *         (which keeps the stash), and each layer's first slot of the forward's exchange buffer.
 *
 * Forward stage 17's primitives, with what the backward needs beside them (waiting for values
 * at any addresses, named cp.async commit and wait) and its cell update keeping the stash. The
 * protocol and why it is correct: forward stage 08's README, "Publishing h without a barrier"; this
 * stage: README.md beside this file.
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

/// An 8-byte load through L2 that may race with other SMs' stores (relaxed, GPU scope): four
/// published 16-bit values, each either before or after its store.
__device__ __forceinline__ uint2 load_relaxed(const uint2* address) {
  uint2 v;
  asm volatile("ld.relaxed.gpu.global.v2.b32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(address));
  return v;
}
/// The same for a tagged 8-byte value (store_tagged, below).
__device__ __forceinline__ unsigned long long load_relaxed(const unsigned long long* address) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(address));
  return v;
}

/// A 4-byte load through L2 that sees every store made visible before the count it reads
/// (acquire, GPU scope): for a count that other SMs add to after a fence.
__device__ __forceinline__ unsigned load_acquire(const unsigned* address) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(address) : "memory");
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

/// The 32-bit shared-memory address of `p`, and the same variable's address in block `rank` of
/// the cluster (shared::cluster: what st.async and a remote mbarrier take).
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ unsigned cluster_rank_shared(unsigned local, int rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
/// An mbarrier in shared memory that one arrival and the bytes of transfers complete: init, then
/// arm (the arrival, and the bytes this phase expects).
__device__ __forceinline__ void mbarrier_init(unsigned bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbarrier_arm(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
/// Stores `value` at `remote` (shared::cluster) asynchronously; its 4 bytes count on the
/// mbarrier `remote_bar` of the receiving block, which makes them visible to whoever waits there.
__device__ __forceinline__ void store_async(unsigned remote, float value, unsigned remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote),
      "r"(__float_as_uint(value)), "r"(remote_bar)
      : "memory");
}
/// The same for two adjacent floats in one message (`remote` 8-byte aligned): 8 bytes counted.
__device__ __forceinline__ void store_async_pair(unsigned remote, float first, float second,
                                                 unsigned remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(
          remote),
      "r"(__float_as_uint(first)), "r"(__float_as_uint(second)), "r"(remote_bar)
      : "memory");
}
/// The same for four adjacent floats in one message (`remote` 16-byte aligned): 16 bytes counted.
__device__ __forceinline__ void store_async_quad(unsigned remote, float v0, float v1, float v2,
                                                 float v3, unsigned remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(remote),
      "r"(__float_as_uint(v0)), "r"(__float_as_uint(v1)), "r"(__float_as_uint(v2)),
      "r"(__float_as_uint(v3)), "r"(remote_bar)
      : "memory");
}
/// Waits until the phase of parity `parity` of the mbarrier `bar` is complete (acquire). New in
/// training 36: polled with test_wait, which answers at once, instead of try_wait, which may
/// suspend the thread until the phase completes or a time limit passes and wakes it late.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}

/// Every thread of every block of the cluster: what each wrote before (into any block's shared
/// memory) is visible to all after (arrive.release, wait.acquire).
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/// Nanoseconds on the GPU's global timer (the same clock on every SM).
__device__ __forceinline__ unsigned long long global_time_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// A value read before its store: the sentinel (what wait_published_at tests by default).
struct Unpublished {
  template <typename Value>
  __device__ bool operator()(Value v) const { return unpublished(v); }
};

/// Waits until none of staged[r] = *address(base + r * stride) (r < kInFlight, index < count)
/// is `stale` any more (holds the sentinel): re-reads all the missing ones at once, so a retry
/// costs one L2 round trip, not one per value. A value never published is a bug: the kernel traps
/// after kMaxWaitNs of waiting (the timer read every 1024 polls) instead of hanging.
template <int kInFlight, typename Value, typename Address, typename Stale = Unpublished>
__device__ __forceinline__ void wait_published_at(Value (&staged)[kInFlight], Address address,
                                                  int count, int base, int stride,
                                                  Stale stale = {}) {
  unsigned long long started = 0;
  for (int polls = 0;; ++polls) {
    bool missing = false;
#pragma unroll
    for (int r = 0; r < kInFlight; ++r)
      missing |= base + r * stride < count && stale(staged[r]);
    if (!missing) return;
    if (polls == kSpinPolls) started = global_time_ns();
    if (polls > kSpinPolls && polls % 1024 == 0 && global_time_ns() - started > kMaxWaitNs)
      __trap();
    if (polls >= kSpinPolls) __nanosleep(kPollSleepNs);
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      const int idx = base + r * stride;
      if (idx < count && stale(staged[r])) staged[r] = load_relaxed(address(idx));
    }
  }
}

/// The same for values at consecutive addresses: staged[r] = source[base + r * stride].
template <int kInFlight, typename Value>
__device__ __forceinline__ void wait_published(Value (&staged)[kInFlight], const Value* source,
                                               int count, int base, int stride) {
  wait_published_at(
      staged, [source](int idx) { return source + idx; }, count, base, stride);
}

/// A cluster's sum for a unit of another cluster travels through L2 as 8 bytes: the float's bits,
/// and above them the tag of the step it belongs to, stored and loaded as one (relaxed, GPU
/// scope), so the tag alone says whether the value is this step's. The buffer is cleared (tag 0)
/// before each launch; tags start at 1.
__device__ __forceinline__ void store_tagged(unsigned long long* address, float value,
                                             unsigned tag) {
  const unsigned long long v = static_cast<unsigned long long>(tag) << 32 | __float_as_uint(value);
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(address), "l"(v) : "memory");
}

/// values[c] = the float at address(c) once it carries `tag`, for every c < count but `skip`:
/// loads them all at once, then waits as wait_published_at does, a stale tag the test.
template <int kCount, typename Address>
__device__ __forceinline__ void wait_tagged(float (&values)[kCount], Address address, int count,
                                            int skip, unsigned tag) {
  const unsigned long long current = static_cast<unsigned long long>(tag) << 32;
  unsigned long long got[kCount];
#pragma unroll
  for (int c = 0; c < kCount; ++c)
    got[c] = c < count && c != skip ? load_relaxed(address(c)) : current;  // skip: never stale
  wait_published_at(got, address, count, 0, 1,
                    [tag](unsigned long long v) { return static_cast<unsigned>(v >> 32) != tag; });
#pragma unroll
  for (int c = 0; c < kCount; ++c)
    if (c < count && c != skip) values[c] = __uint_as_float(static_cast<unsigned>(got[c]));
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

/// The bits of `value` rounded to Element: what h_t and dz are published as.
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

/// Gate q's activation from its pre-activation: tanh for g, the sigmoid for i, f and o.
__device__ __forceinline__ float activate(float z, int q) {
  return q == kGateG ? tanhf(z) : sigmoid(z);
}

/// The cell update of one (unit, batch row) from its four activated gates: updates c and
/// publishes h_t in 16 bits (the signal to every other block).
template <typename Element>
__device__ __forceinline__ void update_cell_from_activated(const float (&gate)[kGates], float& c,
                                                           std::uint16_t* published) {
  // f·c rounded, then i·g + f·c in one FMA: stage 27's order, spelled out (left to the compiler,
  // the new code was contracted the other way round, changing c in its last bit).
  c = __fmaf_rn(gate[0], gate[kGateG], __fmul_rn(gate[1], c));
  store_relaxed(published, element_bits<Element>(gate[3] * tanhf(c)));  // rounded anyway
}

/// The cell update of one (unit, batch row), from its four gate pre-activations: activates the
/// gates in place, then update_cell_from_activated. What the backward needs is kept afterwards,
/// by keep_stash.
template <typename Element>
__device__ __forceinline__ void update_cell(float (&gate)[kGates], float& c,
                                            std::uint16_t* published) {
#pragma unroll
  for (int q = 0; q < kGates; ++q)
    gate[q] = activate(gate[q], q);
  update_cell_from_activated<Element>(gate, c, published);
}

/// What the backward needs of one (unit, batch row) at step t, in FP32 (training stage 07's
/// stash), from its activated gates and c_t: the gates at gates[t][row][q * H + unit], c_t and
/// h_t at slot t + 1 of cell and h_seq; h_t also to y (the last layer) and, at the last step, h
/// and c to hy and cy. h_t = o * tanh(c_t) as update_cell published it. `a`: the kernel's
/// arguments.
template <typename Args>
__device__ __forceinline__ void keep_stash(const float (&gate)[kGates], float c, const Args& a,
                                           int t, int row, int unit) {
  const float h = gate[3] * tanhf(c);
  const int H = a.hidden;
  const std::size_t state = static_cast<std::size_t>(a.batch) * H;  // one step of (B, H)
  const std::size_t out = static_cast<std::size_t>(row) * H + unit;
  float* gates = a.gates + (t * state + out - unit) * kGates + unit;  // gate q at [q * H]
  gates[0] = gate[0], gates[H] = gate[1], gates[2 * H] = gate[kGateG], gates[3 * H] = gate[3];
  a.cell[(t + 1) * state + out] = c;
  a.h_seq[(t + 1) * state + out] = h;
  if (a.y) a.y[t * state + out] = h;
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

__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void wait_copies() {  // this thread's copies are in shared memory
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
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
