// Experiment (not a stage): the 16-bit backward recurrence of one LSTM layer inside one cluster of
// 16 blocks, with no dz_t through global memory. Block r owns hidden units r*J .. r*J + J - 1
// (J = H / 16) and their 4J gate rows. Each step it
//   1. sums the 16 partial sums of dh_rec for its units that the blocks sent into its shared memory
//      (an mbarrier counts their bytes),
//   2. runs the cell's backward of its (unit, batch row) pairs in FP32, giving dz_t of its gate
//   rows,
//   3. multiplies its own gate rows' dz_t (16 bits, in its shared memory) by the same rows of W_hh
//      (16 bits, kept in shared memory as mma A fragments of W_hhᵀ): a partial dh_rec for every
//      unit, FP32 sums,
//   4. sends each unit's partial sum into the shared memory of the unit's owner with st.async.
// The question it answers: how long a step takes when the exchange is the cluster's (~0.25 us on
// an H200, results/h200/exchange_floors.jsonl) instead of published dz polled from L2.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90 bench/experiments/cluster_backward.cu -o cluster_backward
// Run:   ./cluster_backward H B [CLUSTERS [THREADS [VARIANT]]]   (H = 256 or 512; B <= 8 *
//        CLUSTERS, the batch split over CLUSTERS independent clusters, 1 by default; THREADS 256
//        (default) or 512; VARIANT how the sums are sent, below); prints one JSON line per T,
//        and one with where a step's clocks go (thread 0 of the first block, T = 1000).
// Variants: scalar (one st.async of 4 bytes a sum), pairs (st.async.v2: the two batch columns a
// lane holds at once, where the cluster's rows are even), bulk (the sums staged by owner in this
// block's shared memory, then one cp.async.bulk an owner), prefetch (scalar, the stash of the
// next step loaded during this one), quads (st.async.v4: four batch columns of one unit, two
// lanes trading a pair with shuffles, where the cluster's rows are a multiple of 4; else pairs).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

constexpr int kBlocks = 16;   // a cluster: every block of the recurrence of its batch rows
constexpr int kMaxBatch = 8;  // batch rows a cluster: one mma column tile

struct Args {
  const uint4* w_fragments;  // [block][row tile][k tile][lane]: A of W_hhᵀ for the block's k
  const float* gates;        // (T, B, 4, H) activated i, f, g, o
  const float* cell;         // (T + 1, B, H): c0, then c_t at t + 1
  const float* d_above;      // (T, B, H)
  float* dz;                 // (T, B, 4, H) written, FP32
  float* dh0;                // (B, H) written
  int H, B, T;
  int cluster_rows;  // Bc <= 8: cluster g takes batch rows g * Bc .. g * Bc + Bc - 1
};

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ unsigned remote(unsigned local, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}
__device__ __forceinline__ void arm(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void wait_phase(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}
/// One, two or four floats into block memory of the cluster (`there`, aligned to their size),
/// their bytes counted on the mbarrier `bar` there.
__device__ __forceinline__ void send(unsigned there, float v, unsigned bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(there),
      "r"(__float_as_uint(v)), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void send_pair(unsigned there, float v0, float v1, unsigned bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(
          there),
      "r"(__float_as_uint(v0)), "r"(__float_as_uint(v1)), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void send_quad(unsigned there, float v0, float v1, float v2, float v3,
                                          unsigned bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(there),
      "r"(__float_as_uint(v0)), "r"(__float_as_uint(v1)), "r"(__float_as_uint(v2)),
      "r"(__float_as_uint(v3)), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void send_bulk(unsigned dst, unsigned src, unsigned bytes,
                                          unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];" ::"r"(dst),
      "r"(src), "r"(bytes), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void mma(float (&c)[4], uint4 a, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

enum Variant { kScalar, kPairs, kBulk, kPrefetch, kQuads };
constexpr int kVariants = 5;
constexpr const char* kVariantNames[kVariants] = {"scalar", "pairs", "bulk", "prefetch", "quads"};
constexpr int kPhases = 5;  // wait_and_sums, cell, product, sends, barrier
constexpr const char* kPhaseNames[kPhases] = {"wait_and_sums", "cell", "product", "sends",
                                              "barrier"};

/// Shared memory: w [row tile][k tile][lane] uint4 | dz [8][stride] words (two 16-bit k a word) |
/// recv [2][16][J][Bc] floats | (bulk) to_send [2][16][J][Bc] floats | two mbarriers. kThreads:
/// 256 or 512 (J * Bc pairs, one a thread). kTimed: thread 0 of block 0 adds up the clocks of
/// each phase of a step into phase_clocks.
template <int kThreads, int kVariant, bool kTimed>
__global__ void __launch_bounds__(kThreads, 1)
    cluster_backward(const Args a, long long* phase_clocks) {
  extern __shared__ uint4 smem[];
  constexpr int kWarps = kThreads / 32;
  const int H = a.H, J = H / kBlocks, K = 4 * J, B = a.cluster_rows;  // B: recv's column count
  const int first_row = blockIdx.x / kBlocks * B, rows = min(B, a.B - first_row);
  const int row_tiles = H / 16, k_tiles = K / 16, tiles_per_warp = row_tiles / kWarps;
  const int stride = K / 2 + 4;  // words a dz column; % 8 == 4 spreads a fragment's banks
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  uint4* w_s = smem;
  unsigned* dz_s = reinterpret_cast<unsigned*>(w_s + row_tiles * k_tiles * 32);
  float* recv = reinterpret_cast<float*>(dz_s + kMaxBatch * stride);  // [2][16][J][B]
  float* to_send = recv + 2 * kBlocks * J * B;  // bulk: [2][owner][J][B], 16-byte aligned
  const int staged = kVariant == kBulk ? 2 * kBlocks * J * B : 0;
  const unsigned bars = (shared_address(to_send + staged) + 7u) & ~7u;
  // Pairs, quads and bulk send every column of the cluster's B (zeros past its rows); scalar only
  // its rows.
  const bool quads = kVariant == kQuads && B % 4 == 0;
  const bool pairs = (kVariant == kPairs || kVariant == kQuads) && B % 2 == 0;
  const int sent_cols = kVariant == kBulk || pairs ? B : rows;
  const unsigned bytes = 4u * kBlocks * J * sent_cols;
  const int words = row_tiles * k_tiles * 32;
  for (int i = tid; i < words; i += kThreads)
    w_s[i] = a.w_fragments[rank * words + i];
  for (int i = tid; i < kMaxBatch * stride; i += kThreads)
    dz_s[i] = 0u;
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bars) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bars + 8) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    arm(bars, bytes);
    arm(bars + 8, bytes);
  }
  __syncthreads();
  cluster_barrier();  // every block's mbarriers armed before anything is sent

  const int j = tid % J, b = tid / J, unit = rank * J + j, row = first_row + b;  // my pair
  const bool pair = b < rows;
  const std::size_t state = static_cast<std::size_t>(a.B) * H;
  __half* dz_half = reinterpret_cast<__half*>(dz_s);
  const bool timer = kTimed && tid == 0 && blockIdx.x == 0;
  long long clocks[kPhases] = {}, tick = 0;
  const auto lap = [&](int phase) {  // the clocks since the last lap go to phase
    if (!timer) return;
    const long long now = clock64();
    clocks[phase] += now - tick;
    tick = now;
  };
  float i_, f_, g_, o_, c, c_prev, dy;  // the stash of the step
  const auto load_stash = [&](int t) {
    if (!pair) return;
    const float* gates = a.gates + (t * state + row * H) * 4 + unit;
    i_ = gates[0];
    f_ = gates[H];
    g_ = gates[2 * H];
    o_ = gates[3 * H];
    c = a.cell[(t + 1) * state + row * H + unit];
    c_prev = a.cell[t * state + row * H + unit];
    dy = a.d_above[t * state + row * H + unit];
  };
  if (kVariant == kPrefetch) load_stash(a.T - 1);
  float dc = 0.0f;
  if (timer) tick = clock64();
  for (int s = 0; s < a.T; ++s) {
    const int t = a.T - 1 - s;
    if (kVariant != kPrefetch) load_stash(t);  // loaded before the wait
    float dh = 0.0f;                           // dhy = 0
    if (s > 0) {                               // 1. the 16 partial sums of step s - 1's product
      const int buf = (s - 1) % 2;
      wait_phase(bars + 8 * buf, ((s - 1) / 2) % 2);
      if (pair)
        for (int src = 0; src < kBlocks; ++src)
          dh += recv[((buf * kBlocks + src) * J + j) * B + b];
      if (tid == 0) arm(bars + 8 * buf, bytes);  // for step s + 1's sums
    }
    lap(0);
    if (pair) {  // 2. the cell's backward
      dh += dy;
      const float tanh_c = tanhf(c);
      dc += dh * o_ * (1.0f - tanh_c * tanh_c);
      const float d[4] = {dc * g_ * i_ * (1.0f - i_), dc * c_prev * f_ * (1.0f - f_),
                          dc * i_ * (1.0f - g_ * g_), dh * tanh_c * o_ * (1.0f - o_)};
      for (int q = 0; q < 4; ++q) {
        a.dz[(t * state + row * H) * 4 + q * H + unit] = d[q];
        dz_half[b * 2 * stride + q * J + j] = __float2half_rn(d[q]);
      }
      dc *= f_;
    }
    if (kVariant == kPrefetch && t > 0) load_stash(t - 1);  // the next step's, off its chain
    __syncthreads();
    lap(1);
    // 3. partial dh_rec for the warp's row tiles (units) from this block's k (gate rows).
    float acc[4][4] = {};  // tiles_per_warp <= 4 (H <= 512)
    for (int kt = 0; kt < k_tiles; ++kt) {
      const unsigned b0 = dz_s[g * stride + kt * 8 + t4], b1 = dz_s[g * stride + kt * 8 + t4 + 4];
#pragma unroll
      for (int rt = 0; rt < 4; ++rt)
        if (rt < tiles_per_warp)
          mma(acc[rt], w_s[((warp * tiles_per_warp + rt) * k_tiles + kt) * 32 + lane], b0, b1);
    }
    if (timer && acc[0][0] == 1.25e-38f) tick -= 1;  // waits for the product before the lap
    lap(2);
    // 4. each partial sum to its unit's owner: recv[s % 2][rank][unit % J][col] there.
    const int buf = s % 2;
#pragma unroll
    for (int rt = 0; rt < 4; ++rt) {
      if (rt >= tiles_per_warp) break;
      if (quads) {  // lanes t4 and t4 ^ 1 trade a pair: four columns of one row a message
        const bool odd = t4 & 1;  // odd: row g + 8, columns 2 (t4 - 1) ..; even: row g, 2 t4 ..
        const float give0 = odd ? acc[rt][0] : acc[rt][2], give1 = odd ? acc[rt][1] : acc[rt][3];
        const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1);
        const float got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
        const float v0 = odd ? got0 : acc[rt][0], v1 = odd ? got1 : acc[rt][1];
        const float v2 = odd ? acc[rt][2] : got0, v3 = odd ? acc[rt][3] : got1;
        const int m = (warp * tiles_per_warp + rt) * 16 + g + (odd ? 8 : 0), col = 2 * (t4 & ~1);
        const unsigned owner = m / J;
        const unsigned local =
            shared_address(recv + ((buf * kBlocks + rank) * J + m % J) * B + col);
        if (col < B)  // B = 4: lanes t4 = 2, 3 hold columns past B (zeros): nothing to send
          send_quad(remote(local, owner), v0, v1, v2, v3, remote(bars + 8 * buf, owner));
        continue;
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // fragment rows g and g + 8: two columns each
        const int m = (warp * tiles_per_warp + rt) * 16 + g + 8 * half, col = 2 * t4;
        const unsigned owner = m / J;  // unit m's block
        const float lo = acc[rt][2 * half], hi = acc[rt][2 * half + 1];
        if (kVariant == kBulk) {  // staged by owner; sent after the barrier below
          float* slot = to_send + ((buf * kBlocks + owner) * J + m % J) * B + col;
          if (col < B) slot[0] = lo;
          if (col + 1 < B) slot[1] = hi;
          continue;
        }
        const unsigned local =
            shared_address(recv + ((buf * kBlocks + rank) * J + m % J) * B + col);
        const unsigned there = remote(local, owner), bar = remote(bars + 8 * buf, owner);
        if (pairs) {
          if (col < B) send_pair(there, lo, hi, bar);
          continue;
        }
        if (col < rows) send(there, lo, bar);
        if (col + 1 < rows) send(there + 4, hi, bar);
      }
    }
    // The staged sums, written through the generic proxy, are read by the bulk copies' proxy.
    if (kVariant == kBulk) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    lap(3);
    __syncthreads();  // dz_s is written again next step; (bulk) every sum staged
    // Bulk: thread r sends owner r its J x B sums in one copy. to_send[buf] is written again at
    // step s + 2, after this block has waited for step s + 1's sums, which every owner sent only
    // once this step's copies had landed there.
    if (kVariant == kBulk && tid < kBlocks)
      send_bulk(remote(shared_address(recv + (buf * kBlocks + rank) * J * B), tid),
                shared_address(to_send + (buf * kBlocks + tid) * J * B), 4u * J * B,
                remote(bars + 8 * buf, tid));
    lap(4);
  }
  if (timer)
    for (int p = 0; p < kPhases; ++p)
      phase_clocks[p] = clocks[p];
  // dh0: the sums of the last step's product.
  const int buf = (a.T - 1) % 2;
  wait_phase(bars + 8 * buf, ((a.T - 1) / 2) % 2);
  if (pair) {
    float dh = 0.0f;
    for (int src = 0; src < kBlocks; ++src)
      dh += recv[((buf * kBlocks + src) * J + j) * B + b];
    a.dh0[row * H + unit] = dh;
  }
  cluster_barrier();  // nobody leaves while a block may still send into its shared memory
}

static float half_round(float x) {
  return __half2float(__float2half_rn(x));
}
static unsigned pack(float lo, float hi) {
  __half l = __float2half_rn(lo), h = __float2half_rn(hi);
  std::uint16_t lb, hb;
  std::memcpy(&lb, &l, 2);
  std::memcpy(&hb, &h, 2);
  return lb | (static_cast<unsigned>(hb) << 16);
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    std::fprintf(stderr, "usage: %s H B [CLUSTERS [THREADS [scalar|pairs|bulk|prefetch|quads]]]\n",
                 argv[0]);
    return 2;
  }
  const int H = std::atoi(argv[1]), B = std::atoi(argv[2]);
  const int G = argc > 3 ? std::atoi(argv[3]) : 1, threads = argc > 4 ? std::atoi(argv[4]) : 256;
  int variant = argc > 5 ? -1 : kScalar;
  for (int v = 0; v < kVariants && argc > 5; ++v)
    if (std::strcmp(argv[5], kVariantNames[v]) == 0) variant = v;
  const int Bc = G > 0 ? (B + G - 1) / G : 0;
  if ((H != 256 && H != 512) || B < 1 || G < 1 || Bc > kMaxBatch ||
      (threads != 256 && threads != 512) || (B + Bc - 1) / Bc != G || variant < 0) {
    std::fprintf(
        stderr,
        "H must be 256 or 512, B 1 to 8 a cluster with no cluster empty, THREADS 256 or "
        "512, VARIANT scalar, pairs, bulk, prefetch or quads (got H = %d, B = %d, CLUSTERS = "
        "%d, THREADS = %d, VARIANT = %s)\n",
        H, B, G, threads, argc > 5 ? argv[5] : "scalar");
    return 2;
  }
  const int J = H / kBlocks, K = 4 * J, row_tiles = H / 16, k_tiles = K / 16;
  const int Tmax = 1000;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<float> w(4 * H * H);  // W_hh (4H, H), 16-bit values
  for (float& x : w)
    x = half_round(u(rng) * scale);
  const auto sig = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  std::vector<float> gates(static_cast<std::size_t>(Tmax) * B * 4 * H), cell((Tmax + 1) * B * H),
      dy(Tmax * B * H);
  for (std::size_t n = 0; n < gates.size(); ++n) {
    const int q = static_cast<int>(n / H % 4);
    gates[n] = q == 2 ? std::tanh(2 * u(rng)) : sig(2 * u(rng));
  }
  for (float& x : cell)
    x = u(rng);
  for (float& x : dy)
    x = 0.1f * u(rng);
  // W_hhᵀ's A fragments: block r, row tile mt (units), k tile kt of the block's gate rows.
  std::vector<unsigned> frag(static_cast<std::size_t>(kBlocks) * row_tiles * k_tiles * 32 * 4);
  const auto gate_row = [&](int r, int kl) { return (kl / J) * H + r * J + kl % J; };
  for (int r = 0; r < kBlocks; ++r)
    for (int mt = 0; mt < row_tiles; ++mt)
      for (int kt = 0; kt < k_tiles; ++kt)
        for (int lane = 0; lane < 32; ++lane)
          for (int word = 0; word < 4; ++word) {
            const int row = mt * 16 + lane / 4 + 8 * (word & 1);
            const int kl = kt * 16 + 2 * (lane % 4) + 8 * (word >> 1);
            frag[((((static_cast<std::size_t>(r) * row_tiles + mt) * k_tiles + kt) * 32 + lane) *
                  4) +
                 word] = pack(w[static_cast<std::size_t>(gate_row(r, kl)) * H + row],
                              w[static_cast<std::size_t>(gate_row(r, kl + 1)) * H + row]);
          }
  uint4* d_frag;
  float *d_gates, *d_cell, *d_dy, *d_dz, *d_dh0;
  CHECK(cudaMalloc(&d_frag, frag.size() * 4));
  CHECK(cudaMalloc(&d_gates, gates.size() * 4));
  CHECK(cudaMalloc(&d_cell, cell.size() * 4));
  CHECK(cudaMalloc(&d_dy, dy.size() * 4));
  CHECK(cudaMalloc(&d_dz, gates.size() * 4));
  CHECK(cudaMalloc(&d_dh0, B * H * 4));
  CHECK(cudaMemcpy(d_frag, frag.data(), frag.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_gates, gates.data(), gates.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_cell, cell.data(), cell.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_dy, dy.data(), dy.size() * 4, cudaMemcpyHostToDevice));

  const std::size_t staged = variant == kBulk ? 2 * kBlocks * J * Bc * 4 : 0;
  const std::size_t smem = static_cast<std::size_t>(row_tiles) * k_tiles * 32 * 16 +
                           kMaxBatch * (K / 2 + 4) * 4 + 2 * kBlocks * J * Bc * 4 + staged + 16 + 8;
  using Kernel = void (*)(const Args, long long*);
  // [threads 256, 512][variant][timed]
  const Kernel kernels[2][kVariants][2] = {
      {{cluster_backward<256, kScalar, false>, cluster_backward<256, kScalar, true>},
       {cluster_backward<256, kPairs, false>, cluster_backward<256, kPairs, true>},
       {cluster_backward<256, kBulk, false>, cluster_backward<256, kBulk, true>},
       {cluster_backward<256, kPrefetch, false>, cluster_backward<256, kPrefetch, true>},
       {cluster_backward<256, kQuads, false>, cluster_backward<256, kQuads, true>}},
      {{cluster_backward<512, kScalar, false>, cluster_backward<512, kScalar, true>},
       {cluster_backward<512, kPairs, false>, cluster_backward<512, kPairs, true>},
       {cluster_backward<512, kBulk, false>, cluster_backward<512, kBulk, true>},
       {cluster_backward<512, kPrefetch, false>, cluster_backward<512, kPrefetch, true>},
       {cluster_backward<512, kQuads, false>, cluster_backward<512, kQuads, true>}}};
  const void* kernel = reinterpret_cast<const void*>(kernels[threads / 512][variant][0]);
  const void* timed_kernel = reinterpret_cast<const void*>(kernels[threads / 512][variant][1]);
  for (const void* k : {kernel, timed_kernel}) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)));
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  long long* d_clocks;
  CHECK(cudaMalloc(&d_clocks, kPhases * sizeof(long long)));
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kBlocks;
  attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kBlocks * G);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  if (clusters < 1) {
    std::fprintf(stderr, "a cluster of 16 blocks with %zu bytes each cannot be resident\n", smem);
    return 1;
  }
  for (int T : {100, 1000}) {
    Args args{d_frag, d_gates, d_cell, d_dy, d_dz, d_dh0, H, B, T, Bc};
    long long* no_clocks = nullptr;
    void* params[] = {&args, &no_clocks};
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    std::vector<float> times;
    for (int run = 0; run < 11; ++run) {
      CHECK(cudaEventRecord(start));
      CHECK(cudaLaunchKernelExC(&config, kernel, params));
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (run > 0) times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    // The reference in double, with the kernel's 16-bit W and 16-bit dz in the product.
    std::vector<float> dz(gates.size()), dh0(B * H);
    CHECK(cudaMemcpy(dz.data(), d_dz, static_cast<std::size_t>(T) * B * 4 * H * 4,
                     cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(dh0.data(), d_dh0, B * H * 4, cudaMemcpyDeviceToHost));
    std::vector<double> dh_rec(B * H, 0.0), dcr(B * H, 0.0), zr(4 * H);
    double dz_err = 0, dz_max = 0, dh_err = 0, dh_max = 0;
    const bool checked = T <= 100;  // the reference's product is 4H * H * B a step on the CPU
    for (int t = T - 1; checked && t >= 0; --t) {
      std::vector<double> next(B * H, 0.0);
      for (int bb = 0; bb < B; ++bb) {
        for (int un = 0; un < H; ++un) {
          const std::size_t at = (static_cast<std::size_t>(t) * B + bb) * 4 * H + un;
          const double i_ = gates[at], f_ = gates[at + H], g_ = gates[at + 2 * H],
                       o_ = gates[at + 3 * H];
          const double c = cell[(static_cast<std::size_t>(t) + 1) * B * H + bb * H + un];
          const double cp = cell[static_cast<std::size_t>(t) * B * H + bb * H + un];
          const double dh =
              dh_rec[bb * H + un] + dy[static_cast<std::size_t>(t) * B * H + bb * H + un];
          const double tc = std::tanh(c);
          double& dcc = dcr[bb * H + un];
          dcc += dh * o_ * (1 - tc * tc);
          const double d[4] = {dcc * g_ * i_ * (1 - i_), dcc * cp * f_ * (1 - f_),
                               dcc * i_ * (1 - g_ * g_), dh * tc * o_ * (1 - o_)};
          dcc *= f_;
          for (int q = 0; q < 4; ++q) {
            zr[q * H + un] = d[q];
            dz_err = std::max(dz_err, std::fabs(d[q] - dz[at + q * H]));
            dz_max = std::max(dz_max, std::fabs(d[q]));
          }
        }
        for (int k = 0; k < 4 * H; ++k) {  // the product with dz rounded to 16 bits, as the kernel
          const double z = half_round(static_cast<float>(zr[k]));
          if (z == 0) continue;
          const float* wr = &w[static_cast<std::size_t>(k) * H];
          for (int un = 0; un < H; ++un)
            next[bb * H + un] += wr[un] * z;
        }
      }
      dh_rec = next;
    }
    for (int n = 0; checked && n < B * H; ++n) {
      dh_err = std::max(dh_err, std::fabs(dh_rec[n] - dh0[n]));
      dh_max = std::max(dh_max, std::fabs(dh_rec[n]));
    }
    std::printf(
        "{\"H\": %d, \"B\": %d, \"clusters\": %d, \"resident_clusters\": %d, \"threads\": %d, "
        "\"variant\": \"%s\", \"T\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"us_per_step\": "
        "%.3f, \"checked\": %s, \"dz_max_error_rel\": %.3g, \"dh0_max_error_rel\": %.3g, "
        "\"smem_bytes\": %zu}\n",
        H, B, G, clusters, threads, kVariantNames[variant], T, times[times.size() / 2],
        times.front(), 1e3 * times[times.size() / 2] / T, checked ? "true" : "false",
        checked ? dz_err / dz_max : 0.0, checked ? dh_err / dh_max : 0.0, smem);
  }
  // Where a step goes: the timed kernel once at T = 1000 (after one launch to warm up). The
  // phases are thread 0's (block 0), each the clocks from the end of the one before; their
  // sum is the step. Their µs share the timed launch's step in proportion.
  const int T = 1000;
  Args args{d_frag, d_gates, d_cell, d_dy, d_dz, d_dh0, H, B, T, Bc};
  void* params[] = {&args, &d_clocks};
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  float ms = 0.0f;
  for (int run = 0; run < 2; ++run) {
    CHECK(cudaEventRecord(start));
    CHECK(cudaLaunchKernelExC(&config, timed_kernel, params));
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&ms, start, stop));
  }
  long long clocks[kPhases];
  CHECK(cudaMemcpy(clocks, d_clocks, sizeof clocks, cudaMemcpyDeviceToHost));
  long long total = 0;
  for (long long c : clocks)
    total += c;
  const double us_step = 1e3 * ms / T;
  std::printf(
      "{\"H\": %d, \"B\": %d, \"clusters\": %d, \"threads\": %d, \"variant\": \"%s\", "
      "\"T\": %d, \"timed_us_per_step\": %.3f, \"clocks_per_step_thread0\": %.0f",
      H, B, G, threads, kVariantNames[variant], T, us_step, static_cast<double>(total) / T);
  for (int p = 0; p < kPhases; ++p)
    std::printf(", \"%s_us\": %.3f", kPhaseNames[p],
                total > 0 ? us_step * static_cast<double>(clocks[p]) / total : 0.0);
  std::printf("}\n");
  return 0;
}
