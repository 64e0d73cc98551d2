/*! \file stages/07_persistent/stage.cu
 *  \brief Stage 07: one persistent kernel per layer runs every time step; the recurrent
 *         weights stay in shared memory for the whole sequence.
 *
 * lstm-stages, one optimization per stage:
 *   00_naive                  8 small GEMMs and 10 element-wise kernels per step
 *   01_combined_gemms         one GEMM for the four gates; one GEMM for a layer's inputs
 *   02_streams                input and recurrent GEMMs on separate streams
 *   03_fused_pointwise        all element-wise work of a step in one kernel
 *   04_transposed_weights     weights re-laid out for cuBLAS's faster operand layout
 *   05_layer_wavefront        layers overlap in a wavefront
 *   06_cuda_graph             the whole forward captured once and replayed
 *   07_persistent          <- this stage: one kernel for the sequence, recurrent weights on chip
 *
 * What this stage adds (the idea of "Persistent RNNs", Diamos et al. 2016, and of cuDNN's
 * PERSIST_* algorithms):
 *   1. Per layer, ONE cooperative kernel runs all T steps. Every step of stages 03-06 launched a
 *      GEMM that read the whole recurrent matrix W_hh (4H x H, 4 MiB at H = 512) from L2 or
 *      memory; here each block loads ITS slice of W_hh into shared memory once, and keeps it
 *      there for the whole sequence.
 *   2. Each step, each block reads h_{t-1} (from L2), computes its gates, applies the cell
 *      update and writes its part of h_t; then the whole grid meets at a barrier
 *      (cooperative_groups grid.sync()) before anyone reads h_t.
 *   3. The input part W_ih · x_t + b_ih + b_hh of all steps stays one large GEMM before the
 *      kernel (cuBLAS, as since stage 01): only the recurrence is sequential.
 *
 * The mapping (one layer):
 *   - Units per block J = ceil(H / SMs); blocks = ceil(H / J) <= SMs (one block per SM, all
 *     co-resident, as a cooperative launch requires). Block k owns hidden units k*J .. k*J+J-1
 *     and, for each, its four gate rows of W_hh: 4J rows of H floats in shared memory.
 *   - G warps per unit: warp w of block k computes all four gates of unit j = k*J + w % J, for
 *     batch tiles (kBatchTile rows each) w / J, w / J + G, ...; G = 1 for a single tile, up to
 *     16 warps per block for large batches, so that an SM has enough warps to keep busy. Lanes
 * split the H-long dot products into float4 pieces (lane l takes k = 4l, 4l + 128, ...), so a lane
 * holds 4 x kBatchTile partial sums.
 *   - h_{t-1} of the batch tile is staged in shared memory by the whole block (every warp of the
 *     block needs all of it), read from global memory through L2 (__ldcg: the L1 caches of the
 *     SMs are not coherent, and h_{t-1} was written by other blocks).
 *   - The partial sums are reduced across the warp by recursive halving: log2(32) rounds of
 *     shuffles leave lane l with the full sum of one (gate, batch) pair. Four shuffles gather a
 *     unit's i, f, g, o for one batch row into one lane, which applies the cell update: c stays
 *     in shared memory (each (b, j) has one owner for the whole sequence), h_t goes to global.
 *   - grid.sync() ends the step: it orders every block's h_t writes before any block's reads.
 *   The reduction order is fixed, so the outputs are bitwise identical from run to run.
 *
 * What one step costs (prediction, H100): the grid barrier ~1.1 µs (BASELINES.md); reading
 * h_{t-1} from L2 (B*H*4 bytes per block: 16 KiB at H = 1024, B = 4) and staging it, ~0.5 µs;
 * the arithmetic 2*4H*H*B/(132 SMs) per SM, ~0.3 µs at H = 1024, B = 4 (smem-bound at about
 * half the FMA rate); the reduction and the cell update, ~0.2 µs. So ~2-2.5 µs per step at
 * H = 1024, B = 4 (cuDNN's fastest: ~4.8 µs) and ~1.5 µs at H = 512, B = 1 (cuDNN's
 * PERSIST_STATIC: ~1.6 µs). At B = 64 the arithmetic grows 16x (~4 µs at H = 512): the
 * canonical config should take ~L * (input GEMM 0.3 ms + 100 steps * ~6 µs) ≈ 3.5 ms.
 *
 * Limits: the weight slice (4J rows of H floats) and one batch tile of h must fit in a block's
 * shared memory (227 KiB on the H100): H up to ~1200 in FP32. Larger H is refused before launch
 * with the limit; so is a grid that cannot be co-resident.
 *
 * Measured: see README.md (generated from results/h100-sxm/).
 */
#include <cooperative_groups.h>
#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "cuda_utils.h"
#include "stage.h"

namespace lstm::stage_07_persistent {
namespace {

namespace cg = cooperative_groups;

constexpr int kGates = 4;      // i, f, g, o
constexpr int kGateG = 2;      // the cell candidate g uses tanh, the others sigmoid
constexpr int kWarpSize = 32;  // lanes per warp: one warp per hidden unit
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kMaxThreads = 512;  // 16 warps: up to 128 registers per thread, no spills

/// H rounded up to a multiple of 4, so every row is a whole number of float4.
__host__ __device__ int padded_hidden(int hidden) {
  return (hidden + 3) / 4 * 4;
}

/// Everything one layer's persistent kernel reads and writes.
struct LayerArgs {
  const float* w_hh;        // (4H, H) row-major, PyTorch's layout
  const float* input_part;  // (T, B, 4H): W_ih · x_t for every step (biases not yet added)
  const float* b_ih;        // (4H)
  const float* b_hh;        // (4H)
  const float* h0;          // (B, H) this layer's initial h
  const float* c0;          // (B, H) this layer's initial c
  float* h_sequence;        // (T, B, H) this layer's h at every step (y for the last layer)
  float* hy;                // (B, H) final h
  float* cy;                // (B, H) final c
  int hidden, batch, seq_len, units_per_block;
  int rows_staged;  // rows of h_{t-1} staged in shared memory at once (a multiple of the tile)
  int tile_groups;  // G: warps per unit; warp group g takes batch tiles g, g + G, ...
};

/// Copies rows [first, first + rows) of h (B x H floats, row-major, global memory) into
/// `stage` (rows x Hp floats; zeros past B and past H) with every copy in flight at once.
/// cp.async.cg goes through L2 only: h was just written by other SMs, and the SMs' L1 caches
/// are not coherent. (For H not a multiple of 4, rows are not 16-byte aligned: plain loads.)
__device__ void stage_h_rows(float4* stage, const float* h, int first, int rows, int B, int H,
                             int Hp) {
  const int rows4 = Hp / 4;
  if (H % 4 == 0) {
    for (int i = threadIdx.x; i < rows * rows4; i += blockDim.x) {
      const int b = first + i / rows4;
      const float4* source =
          reinterpret_cast<const float4*>(h + static_cast<std::size_t>(min(b, B - 1)) * H) +
          i % rows4;
      const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(stage + i));
      const int bytes = b < B ? 16 : 0;  // rows past B: zero-filled, nothing read
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(target), "l"(source),
                   "r"(bytes));
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
  } else {
    float* out = reinterpret_cast<float*>(stage);
    for (int i = threadIdx.x; i < rows * Hp; i += blockDim.x) {
      const int b = first + i / Hp, k = i % Hp;
      out[i] = (b < B && k < H) ? __ldcg(h + static_cast<std::size_t>(b) * H + k) : 0.0f;
    }
  }
}

/// One round of recursive halving: lanes that differ in bit `kWidth * (32 / kValues)` swap
/// halves of their first 2 * kWidth values, each keeping (and adding into) one half.
template <int kValues, int kWidth>
__device__ void halving_round(float (&values)[kValues], int lane) {
  if constexpr (kWidth >= 1) {
    constexpr int kOffset = kWidth * (kWarpSize / kValues);  // 16, 8, ...
    const bool upper = lane & kOffset;
#pragma unroll
    for (int i = 0; i < kWidth; ++i) {
      const float send = upper ? values[i] : values[i + kWidth];
      const float keep = upper ? values[i + kWidth] : values[i];
      values[i] = keep + __shfl_xor_sync(kFullMask, send, kOffset);
    }
    halving_round<kValues, kWidth / 2>(values, lane);
  }
}

/// Sums `values` (kValues per lane) across the warp by recursive halving: after the call, lane
/// l holds in values[0] the warp-wide sum of index l / (32 / kValues). Each round sends half of
/// the remaining values to the partner lane and keeps the other half (kValues - 1 shuffles in
/// all, instead of 5 * kValues for a butterfly per value); lanes left sharing an index finish
/// with a plain butterfly.
template <int kValues>
__device__ void warp_reduce_halving(float (&values)[kValues], int lane) {
  static_assert(kValues >= 1 && kValues <= kWarpSize && (kValues & (kValues - 1)) == 0,
                "a power of two up to 32 values per lane");
  halving_round<kValues, kValues / 2>(values, lane);
#pragma unroll
  for (int offset = kWarpSize / kValues / 2; offset >= 1; offset /= 2) {
    values[0] += __shfl_xor_sync(kFullMask, values[0], offset);
  }
}

/// The persistent kernel of one layer: all T steps.
/// Mapping: grid = ceil(H / J) blocks, J warps per block; warp w of block k owns hidden unit
/// j = k*J + w (its 4 gate rows of W_hh live in this block's shared memory for the whole
/// sequence). Dynamic shared memory: W slice (J*4 rows x Hp floats), staged rows of h_{t-1}
/// (rows_staged x Hp), cell state (B x J).
template <int kBatchTile>
__global__ void __launch_bounds__(kMaxThreads) persistent_lstm_kernel(LayerArgs a) {
  constexpr int kValues = kGates * kBatchTile;  // partial sums per lane: (gate, batch row)
  constexpr int kLanesPerValue = kWarpSize / kValues;
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float4 shared[];
  const int H = a.hidden, B = a.batch, J = a.units_per_block, Hp = padded_hidden(H);
  const int rows4 = Hp / 4;                                                // float4 per row
  float4* w_slice = shared;                                                // [J][4][rows4]
  float4* h_rows = w_slice + J * kGates * rows4;                           // [rows_staged][rows4]
  float* cell = reinterpret_cast<float*>(h_rows + a.rows_staged * rows4);  // [B][J]

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int local_unit = warp % J, group = warp / J, G = a.tile_groups;
  const int unit = blockIdx.x * J + local_unit;  // this warp's hidden unit
  const bool unit_valid = unit < H;

  // Once per sequence: this block's rows of W_hh into shared memory (zero-padded), c0 into c.
  for (int i = threadIdx.x; i < J * kGates * Hp; i += blockDim.x) {
    const int col = i % Hp, row = i / Hp;  // row = local unit * 4 + gate
    const int j = blockIdx.x * J + row / kGates, gate = row % kGates;
    reinterpret_cast<float*>(w_slice)[i] =
        (j < H && col < H) ? a.w_hh[static_cast<std::size_t>(gate * H + j) * H + col] : 0.0f;
  }
  for (int i = threadIdx.x; i < B * J; i += blockDim.x) {
    const int j = blockIdx.x * J + i % J;
    cell[i] = j < H ? a.c0[static_cast<std::size_t>(i / J) * H + j] : 0.0f;
  }
  // This lane's (gate, batch) pair after the reduction, and the biases it will need.
  const int my_batch = (lane / kLanesPerValue) % kBatchTile;
  const bool owner = lane % kLanesPerValue == 0 && lane / kLanesPerValue < kBatchTile;
  float bias[kGates];
#pragma unroll
  for (int q = 0; q < kGates; ++q)
    bias[q] = unit_valid ? a.b_ih[q * H + unit] + a.b_hh[q * H + unit] : 0.0f;
  __syncthreads();

  const float4* my_rows = w_slice + local_unit * kGates * rows4;
  for (int t = 0; t < a.seq_len; ++t) {
    const float* h_prev = t == 0 ? a.h0 : a.h_sequence + static_cast<std::size_t>(t - 1) * B * H;
    float* h_out = a.h_sequence + static_cast<std::size_t>(t) * B * H;
    for (int first = 0; first < B; first += a.rows_staged) {
      // Stage as many rows of h_{t-1} as fit (all of them when shared memory allows).
      stage_h_rows(h_rows, h_prev, first, a.rows_staged, B, H, Hp);
      __syncthreads();
      for (int b0 = first + group * kBatchTile; b0 < min(B, first + a.rows_staged);
           b0 += G * kBatchTile) {
        const float4* h_tile = h_rows + (b0 - first) * rows4;
        // The input part of this lane's (unit, batch row): loaded now, used after the FMAs.
        const int b = b0 + my_batch;
        const bool writes = owner && unit_valid && b < B;
        float input_part[kGates] = {};
        if (writes) {
          const float* in = a.input_part + (static_cast<std::size_t>(t) * B + b) * 4 * H;
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            input_part[q] = in[q * H + unit];
        }

        // Partial dot products of this unit's 4 gate rows with the tile's h rows.
        float sums[kValues] = {};  // index q * kBatchTile + b
        for (int k4 = lane; k4 < rows4; k4 += kWarpSize) {
          float4 w[kGates];
#pragma unroll
          for (int q = 0; q < kGates; ++q)
            w[q] = my_rows[q * rows4 + k4];
#pragma unroll
          for (int row = 0; row < kBatchTile; ++row) {
            const float4 h = h_tile[row * rows4 + k4];
#pragma unroll
            for (int q = 0; q < kGates; ++q) {
              float& s = sums[q * kBatchTile + row];
              s = fmaf(w[q].x, h.x, s);
              s = fmaf(w[q].y, h.y, s);
              s = fmaf(w[q].z, h.z, s);
              s = fmaf(w[q].w, h.w, s);
            }
          }
        }
        warp_reduce_halving(sums, lane);  // lane l: the sum of index l / kLanesPerValue

        // Gather i, f, g, o of batch row my_batch into the lane that owns it.
        float pre[kGates];
#pragma unroll
        for (int q = 0; q < kGates; ++q) {
          const int source = (q * kBatchTile + my_batch) * kLanesPerValue;
          pre[q] = __shfl_sync(kFullMask, sums[0], source);
        }
        if (writes) {
          float act[kGates];
#pragma unroll
          for (int q = 0; q < kGates; ++q) {
            const float z = pre[q] + input_part[q] + bias[q];
            act[q] = q == kGateG ? tanhf(z) : 1.0f / (1.0f + expf(-z));
          }
          float& c = cell[b * J + local_unit];
          c = act[1] * c + act[0] * act[kGateG];                              // c = f*c + i*g
          h_out[static_cast<std::size_t>(b) * H + unit] = act[3] * tanhf(c);  // h = o*tanh(c)
        }
      }
      __syncthreads();  // the next chunk of rows overwrites h_rows
    }
    grid.sync();  // every block's h_t is written before any block reads it
  }

  // The layer's final states.
  const float* h_last = a.h_sequence + static_cast<std::size_t>(a.seq_len - 1) * B * H;
  for (int i = threadIdx.x; i < B * J; i += blockDim.x) {
    const int b = i / J, j = blockIdx.x * J + i % J;
    if (j >= H) continue;
    a.hy[static_cast<std::size_t>(b) * H + j] = h_last[static_cast<std::size_t>(b) * H + j];
    a.cy[static_cast<std::size_t>(b) * H + j] = cell[i];
  }
}

/// The batch tile for B: the smallest of 1, 2, 4, 8 that covers B (larger B loops over tiles).
int batch_tile(int batch) {
  return batch <= 1 ? 1 : batch <= 2 ? 2 : batch <= 4 ? 4 : 8;
}

/// Launch shape of one layer's kernel on `device`.
struct Launch {
  int units_per_block = 0, blocks = 0, threads = 0, tile = 0, rows_staged = 0, tile_groups = 0;
  std::size_t shared_bytes = 0;
};

Launch plan_launch(const ProblemSize& s, int sm_count, std::size_t shared_limit) {
  Launch launch;
  launch.units_per_block = ceil_div(s.hidden, sm_count);
  launch.blocks = ceil_div(s.hidden, launch.units_per_block);
  launch.tile = batch_tile(s.batch);
  // More warps per block than units when the batch has several tiles: G warps share a unit.
  launch.tile_groups =
      std::max(1, std::min(ceil_div(s.batch, launch.tile),
                           kMaxThreads / kWarpSize / std::max(1, launch.units_per_block)));
  launch.threads = launch.units_per_block * launch.tile_groups * kWarpSize;
  const std::size_t hp = padded_hidden(s.hidden);
  const std::size_t fixed = (static_cast<std::size_t>(launch.units_per_block) * kGates * hp +
                             static_cast<std::size_t>(s.batch) * launch.units_per_block) *
                            sizeof(float);
  // Stage all of h_{t-1} at once if it fits, else as many whole tiles as fit (at least one).
  const std::size_t row_bytes = hp * sizeof(float);
  const int all_rows = ceil_div(s.batch, launch.tile) * launch.tile;
  const std::size_t fit = shared_limit > fixed ? (shared_limit - fixed) / row_bytes : 0;
  launch.rows_staged =
      std::max(launch.tile, std::min(all_rows, static_cast<int>(fit / launch.tile * launch.tile)));
  launch.shared_bytes = fixed + launch.rows_staged * row_bytes;
  return launch;
}

template <int kBatchTile>
const void* kernel_for_tile() {
  return reinterpret_cast<const void*>(&persistent_lstm_kernel<kBatchTile>);
}

const void* kernel_for(int tile) {
  switch (tile) {
    case 1:
      return kernel_for_tile<1>();
    case 2:
      return kernel_for_tile<2>();
    case 4:
      return kernel_for_tile<4>();
    default:
      return kernel_for_tile<8>();
  }
}

class PersistentStage final : public Stage {
 public:
  ~PersistentStage() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  std::string unsupported_reason(const ProblemSize& s,
                                 const cudaDeviceProp& device) const override {
    const Launch launch = plan_launch(s, device.multiProcessorCount, device.sharedMemPerBlockOptin);
    std::ostringstream why;
    if (launch.units_per_block * kWarpSize > kMaxThreads) {
      why << "H = " << s.hidden << " needs " << launch.units_per_block
          << " warps per block (at most " << kMaxThreads / kWarpSize << "): H may be at most "
          << kMaxThreads / kWarpSize * device.multiProcessorCount;
      return why.str();
    }
    const std::size_t limit = device.sharedMemPerBlockOptin;
    if (launch.shared_bytes > limit) {
      // Find the largest H that fits, to say what would work.
      ProblemSize fits = s;
      while (fits.hidden > 1 &&
             plan_launch(fits, device.multiProcessorCount, limit).shared_bytes > limit)
        --fits.hidden;
      why << "the recurrent weights do not fit on chip: a block would need "
          << launch.shared_bytes / 1024 << " KiB of shared memory for " << launch.units_per_block
          << " units x 4 gates x H floats plus one batch tile of h, and " << device.name << " has "
          << limit / 1024 << " KiB per block; at B = " << s.batch << " the largest H that fits is "
          << fits.hidden;
      return why.str();
    }
    if (!device.cooperativeLaunch) return "the device does not support cooperative launches";
    int per_sm = 0;
    cudaFuncSetAttribute(kernel_for(launch.tile), cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(launch.shared_bytes));
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(launch.tile), launch.threads,
                                                  launch.shared_bytes);
    cudaGetLastError();
    if (per_sm * device.multiProcessorCount < launch.blocks) {
      why << launch.blocks << " blocks of " << launch.threads << " threads and "
          << launch.shared_bytes / 1024 << " KiB cannot all be resident at once (" << per_sm
          << " per SM x " << device.multiProcessorCount << " SMs)";
      return why.str();
    }
    return {};
  }

  std::size_t workspace_bytes(const ProblemSize& s) const override {
    const std::size_t state = static_cast<std::size_t>(s.batch) * s.hidden;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * state;
    // The input parts (T, B, 4H) and the intermediate layers' h sequences (two, alternating).
    return (kGates * sequence + std::min(s.layers - 1, 2) * sequence) * sizeof(float);
  }

  void prepare(const DeviceTensors& t) override {
    const ProblemSize& s = t.size;
    const std::size_t sequence = static_cast<std::size_t>(s.seq_len) * s.batch * s.hidden;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    launch_ = plan_launch(s, prop.multiProcessorCount, prop.sharedMemPerBlockOptin);
    CUDA_CHECK(cudaFuncSetAttribute(kernel_for(launch_.tile),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(launch_.shared_bytes)));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // FP32 FMA, never TF32
    input_part_.allocate(kGates * sequence);
    for (int i = 0; i < std::min(s.layers - 1, 2); ++i)
      layer_outputs_[i].allocate(sequence);
  }

  void forward(const DeviceTensors& t, cudaStream_t stream) override {
    const ProblemSize& s = t.size;
    const int H = s.hidden, B = s.batch, four_h = kGates * H;
    const std::size_t state = static_cast<std::size_t>(B) * H;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    for (int layer = 0; layer < s.layers; ++layer) {
      const int input_size = s.layer_input_size(layer);
      const float* input_sequence = layer == 0 ? t.x : layer_outputs_[(layer - 1) % 2].data();
      float* output_sequence = layer == s.layers - 1 ? t.y : layer_outputs_[layer % 2].data();
      // All steps' input parts at once: W_ih · [x_0 ... x_{T-1}], (4H x I) · (I x T*B)
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, four_h, s.seq_len * B, input_size,
                               &one, t.w_ih[layer], input_size, input_sequence, input_size, &zero,
                               input_part_.data(), four_h));
      LayerArgs args{t.w_hh[layer],
                     input_part_.data(),
                     t.b_ih[layer],
                     t.b_hh[layer],
                     t.h0 + layer * state,
                     t.c0 + layer * state,
                     output_sequence,
                     t.hy + layer * state,
                     t.cy + layer * state,
                     H,
                     B,
                     s.seq_len,
                     launch_.units_per_block,
                     launch_.rows_staged,
                     launch_.tile_groups};
      void* kernel_args[] = {&args};
      // The whole recurrence of the layer: one launch, all blocks resident at once.
      CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_for(launch_.tile), dim3(launch_.blocks),
                                             dim3(launch_.threads), kernel_args,
                                             launch_.shared_bytes, stream));
    }
  }

 private:
  Launch launch_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<float> input_part_;        // (T, B, 4H): the input GEMM's result, one layer
  DeviceBuffer<float> layer_outputs_[2];  // intermediate layers' h sequences, alternating
};

}  // namespace

std::unique_ptr<Stage> make() {
  return std::make_unique<PersistentStage>();
}

}  // namespace lstm::stage_07_persistent
