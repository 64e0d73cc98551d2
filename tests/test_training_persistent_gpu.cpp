// A persistent training stage on the GPU (training/06_persistent to
// 20_persistent_with_16_bit_gemms, 25_graphs_of_a_pass and 49_stash_while_dz_arrives, FP32 or
// 16-bit: a 16-bit stage's inputs are rounded first, as run_stages does): this source is compiled
// once per stage, in the stage's namespace beside its headers, with LSTM_STAGE_DISPLAY_NAME naming
// it and LSTM_PLAN_HAS_BACKWARD_CHUNKS where the backward stages dz in chunks,
// LSTM_PLAN_HAS_BACKWARD_REGISTERS where it has a register kernel, LSTM_PLAN_HAS_PARTIAL_SUMS where
// it publishes partial sums of dh (then also a second pass with other gradients),
// LSTM_PLAN_HAS_STASH_AHEAD where its stash holds two steps (one more chunk); tests/CMakeLists.txt)
// with its plans pinned through its own flags (--plan, --weights, --input, --backward-weights, as
// its executable takes them), so that every path of the persistent kernels runs. The forward's two
// kernels (forward stage 12's, keeping the stash): the register kernel with 8 and 32 weights per
// lane, batch tiles 1, 2, 4 and 8 with padding columns, float4 and scalar staging, a partly empty
// last block, input parts computed in the kernel (I != H, three layers) or by cuBLAS, T = 1; the
// shared-memory kernel at B = 1, B odd and B > 8, with batch groups, batch slices (a partly empty
// last one), several chunks of h, tiles 4, 8 and 16, H not a multiple of 4. The backward: batch
// slices, batch groups (one partly filled, one empty), a last block with fewer units, units not a
// multiple of 4, one batch row per block; where dz is staged in chunks, also several chunks with a
// short last one (at one, two, four and many batch rows per block, H odd, L = 3, batch slices) and
// one chunk of all 4H gate rows; where the product is register-tiled over the rows, tiles with a
// short last one (Bg = 5, 13, 64); where the backward has a register kernel, 1 to 4 float4 of gate
// rows and 1 or 2 float4 of units per thread, B = 1 to 8 (dz in one round or two), a partly empty
// last block, H not a multiple of 4 or of the block's 256 threads, T = 1, three layers, and each
// backward kernel forced. Each case is checked against the CPU reference on every gradient and must
// repeat bit for bit. Also: a hidden size too large for the chip is refused before launch, saying
// why and what fits. Skipped without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/quantize.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "plan.h"

#ifndef LSTM_PLAN_HAS_BACKWARD_CHUNKS
#define LSTM_PLAN_HAS_BACKWARD_CHUNKS 0
#endif
#ifndef LSTM_PLAN_HAS_BACKWARD_TILES
#define LSTM_PLAN_HAS_BACKWARD_TILES 0
#endif
#ifndef LSTM_PLAN_HAS_STASH_AHEAD
#define LSTM_PLAN_HAS_STASH_AHEAD 0
#endif
#ifndef LSTM_PLAN_HAS_BACKWARD_REGISTERS
#define LSTM_PLAN_HAS_BACKWARD_REGISTERS 0
#endif
#ifndef LSTM_PLAN_HAS_PARTIAL_SUMS
#define LSTM_PLAN_HAS_PARTIAL_SUMS 0
#endif

namespace lstm::LSTM_STAGE_NAMESPACE {  // the stage's, as its build names it
std::unique_ptr<Stage> make();

namespace {

/// Which forward kernel a case must reach (checked against the planner: cases cannot drift).
enum class Forward { kAny, kRegisters, kShared };
/// Which backward kernel a case must reach, where the stage has a register kernel.
enum class Backward { kAny, kRegisters, kShared };

struct PinnedCase {
  const char* label;
  ProblemSize size;
  /// The stage's flags: --plan tile,threads,groups,rows,backward_groups,backward_rows[,chunk] (0
  /// or left out = automatic), --weights registers,K|shared and --input kernel|gemm (the
  /// forward's).
  const char* flags;
  Forward forward = Forward::kAny;
  int backward_chunks = 0;  ///< where dz is staged in chunks: how many the plan must have (0: any)
  Backward backward = Backward::kAny;
  int gather_lanes = 0;  ///< where the backward gathers partial sums: the plan's L (0: any)
};

const std::vector<PinnedCase>& cases() {
  constexpr Forward kRegisters = Forward::kRegisters, kShared = Forward::kShared;
  static const std::vector<PinnedCase> list = {
    // The backward's paths (the forward: the planner's choice unless pinned).
    {"forward_slices", ProblemSize{48, 20, 5, 4, 2}, "--weights shared --plan 4,0,1,2", kShared},
    {"groups2_slices_short_group", ProblemSize{70, 33, 7, 5, 2}, "--plan 0,0,0,0,2,2"},
    {"groups3_empty_groups", ProblemSize{40, 16, 4, 3, 2}, "--plan 0,0,0,0,3,1"},
    {"units_not_multiple_of_4", ProblemSize{301, 40, 6, 3, 1}, "--plan 0,0,0,0,2"},
    {"one_row_per_block", ProblemSize{64, 64, 3, 3, 2}, "--weights shared --plan 4,0,1,1,1,1",
     kShared},
    {"groups4_B64", ProblemSize{128, 32, 64, 3, 1}, "--plan 0,0,0,0,4"},
    {"auto_large_batch", ProblemSize{96, 40, 300, 3, 1}, ""},
    {"all_six_pinned", ProblemSize{130, 20, 10, 5, 2}, "--plan 8,128,2,2,2,3", kShared},
    // The forward's register kernel.
    {"fwd_registers_k8_b1_odd_h_three_layers", ProblemSize{201, 20, 1, 5, 3},
     "--weights registers,8 --input kernel", kRegisters},
    {"fwd_registers_k8_b3_t1_input_gemm", ProblemSize{130, 50, 3, 1, 2},
     "--weights registers,8 --input gemm", kRegisters},
    {"fwd_registers_k8_b3_backward_groups3_rows1", ProblemSize{130, 20, 3, 5, 2},
     "--weights registers,8 --input kernel --plan 0,0,0,0,3,1", kRegisters},
    {"fwd_registers_k8_b7_backward_groups3", ProblemSize{101, 37, 7, 4, 3},
     "--weights registers,8 --plan 0,0,0,0,3", kRegisters},
    {"fwd_registers_k32_b5_partial_block", ProblemSize{700, 33, 5, 4, 2},
     "--weights registers,32 --input gemm", kRegisters},
    {"fwd_registers_k32_b5_input_kernel", ProblemSize{700, 33, 5, 4, 2},
     "--weights registers,32 --input kernel", kRegisters},
    {"fwd_registers_k32_b2_h1023", ProblemSize{1023, 100, 2, 3, 1},
     "--weights registers,32 --input kernel", kRegisters},
    {"fwd_auto_h512_b1", ProblemSize{512, 512, 1, 3, 1}, "", kRegisters},
    // The forward's shared-memory kernel.
    {"fwd_shared_b1_t1_odd_h_three_layers", ProblemSize{257, 31, 1, 1, 3}, "--weights shared",
     kShared},
    {"fwd_shared_b9_groups3_tile8", ProblemSize{203, 50, 9, 4, 3},
     "--weights shared --plan 8,128,3", kShared},
    {"fwd_shared_b13_slices_tile16", ProblemSize{150, 20, 13, 3, 2},
     "--weights shared --plan 16,128,2,3", kShared},
    {"fwd_shared_b17_chunks", ProblemSize{300, 50, 17, 5, 2}, "--weights shared --plan 4,64,1",
     kShared},
    {"fwd_shared_b11_auto_three_layers", ProblemSize{99, 45, 11, 3, 3}, "", kShared},
#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
    // The backward's chunks of dz (4H gate rows, staged chunk_rows at a time; the last shorter).
    {"chunks_b1_odd_h_three_layers", ProblemSize{101, 30, 1, 5, 3}, "--plan 0,0,0,0,0,0,40",
     Forward::kAny, 11},
    {"chunks_b2_short_last", ProblemSize{130, 20, 2, 4, 2}, "--plan 0,0,0,0,1,0,96", Forward::kAny,
     6},
    {"chunks_b4_groups2_slices", ProblemSize{75, 40, 11, 4, 3}, "--plan 0,0,0,0,2,4,64",
     Forward::kAny, 5},
    {"chunks_b13_slices_short_group", ProblemSize{203, 20, 37, 3, 2}, "--plan 0,0,0,0,2,13,100",
     kShared, 9},
    {"chunks_of_4_rows", ProblemSize{33, 17, 3, 3, 1}, "--plan 0,0,0,0,0,0,4", Forward::kAny, 33},
    {"one_chunk_of_all_rows_b1", ProblemSize{257, 60, 1, 4, 2}, "", Forward::kAny, 1},
    {"auto_h1024_b4_one_chunk", ProblemSize{1024, 64, 4, 3, 1}, "", kRegisters, 1},
    // (stage 08: the k slices' sums take more room, stage 16: the stash's second step; so 4
    // chunks)
    {"auto_h512_b64_chunks", ProblemSize{512, 64, 64, 3, 1}, "", kShared,
     3 + (LSTM_PLAN_HAS_BACKWARD_TILES || LSTM_PLAN_HAS_STASH_AHEAD)},
#endif
#if LSTM_PLAN_HAS_BACKWARD_TILES
    // The product's tiles of rows (from Bg = 5), the last tile of a block short or empty.
    {"tiles_b5_short_last_tile_chunks", ProblemSize{130, 20, 5, 4, 2}, "--plan 0,0,0,0,1,5,96",
     Forward::kAny, 6},
    {"tiles_b13_groups4_units_10", ProblemSize{301, 40, 13, 3, 1}, "--plan 0,0,0,0,4,13"},
    {"tiles_b64_groups4_j16_chunks", ProblemSize{512, 16, 256, 2, 1}, "--plan 0,0,0,0,4,64"},
#endif
#if LSTM_PLAN_HAS_PARTIAL_SUMS
    // The gather of partial sums: L threads per pair over U blocks (Q lanes adding them), one
    // thread per pair past 512 pairs, product tiles of 8 rows with a short last one, padding
    // units in the last block, batch slices, T = 1 (only the gather of dh0), three layers.
    {"sums_h512_b1_l128", ProblemSize{512, 64, 1, 5, 1}, "", Forward::kAny, 0, Backward::kAny, 128},
    {"sums_h1024_b4_l16", ProblemSize{1024, 64, 4, 3, 1}, "", Forward::kAny, 0, Backward::kAny, 16},
    {"sums_1024_pairs_l1", ProblemSize{512, 16, 64, 3, 1}, "--plan 0,0,0,0,4,64", kShared, 0,
     Backward::kAny, 1},
    {"sums_b13_short_tile_three_layers", ProblemSize{130, 20, 13, 4, 3}, "--plan 0,0,0,0,1,13",
     Forward::kAny, 0, Backward::kAny, 39},
    {"sums_h301_padding_units_groups2", ProblemSize{301, 40, 6, 3, 2}, "--plan 0,0,0,0,2",
     Forward::kAny, 0, Backward::kAny, 34},
    {"sums_h3_b2", ProblemSize{3, 5, 2, 4, 2}, "", Forward::kAny, 0, Backward::kAny, 3},
    {"sums_slices_t1", ProblemSize{200, 33, 9, 1, 2}, "--plan 0,0,0,0,2,2", Forward::kAny, 0,
     Backward::kAny, 50},
#endif
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
    // The backward's register kernel (row quads x unit quads per thread): the planner's
    // choice, or forced where stage 07's batch groups are estimated faster; and stage 07's
    // kernel forced where the register kernel would run.
    {"bwd_registers_h512_b1", ProblemSize{512, 64, 1, 4, 1}, "", Forward::kAny, 1,
     Backward::kRegisters},  // 2 x 1 quads
    {"bwd_registers_h130_b2_three_layers", ProblemSize{130, 20, 2, 5, 3}, "", Forward::kAny, 1,
     Backward::kRegisters},  // 1 x 1, J = 1
    {"bwd_registers_h301_b3_t1", ProblemSize{301, 40, 3, 1, 2}, "", Forward::kAny, 1,
     Backward::kRegisters},  // 2 x 1, J = 3, T = 1: only the product for dh0
    {"bwd_registers_h509_b8_three_layers", ProblemSize{509, 30, 8, 3, 3},
     "--backward-weights registers", Forward::kAny, 1,
     Backward::kRegisters},  // 2 x 1, a last block of one unit, dz in one round
    {"bwd_registers_h200_b5_forward_shared", ProblemSize{200, 33, 5, 4, 2}, "--weights shared",
     kShared, 1, Backward::kRegisters},  // 1 x 1, J = 2
    {"bwd_registers_h520_b4", ProblemSize{520, 24, 4, 3, 1}, "--backward-weights registers",
     Forward::kAny, 1, Backward::kRegisters},  // 3 x 1, 130 blocks
    {"bwd_registers_h700_b3_units_6", ProblemSize{700, 40, 3, 3, 2}, "--backward-weights registers",
     Forward::kAny, 1, Backward::kRegisters},  // 3 x 2, J = 6
    {"bwd_registers_h1023_b2", ProblemSize{1023, 50, 2, 3, 1}, "", Forward::kAny, 1,
     Backward::kRegisters},  // 4 x 2, a last block of 7 units
    {"bwd_registers_h1000_b8_two_rounds", ProblemSize{1000, 16, 8, 3, 1},
     "--backward-weights registers", Forward::kAny, 1, Backward::kRegisters},  // 4 x 2
    {"bwd_registers_h3_b1", ProblemSize{3, 5, 1, 4, 2}, "", Forward::kAny, 1,
     Backward::kRegisters},  // 3 blocks of one unit
    {"bwd_shared_forced_h257_b1", ProblemSize{257, 60, 1, 4, 2}, "--backward-weights shared",
     Forward::kAny, 1, Backward::kShared},
    {"bwd_shared_forced_h1024_b4", ProblemSize{1024, 64, 4, 3, 1}, "--backward-weights shared",
     kRegisters, 1, Backward::kShared},
#endif
  };
  return list;
}

class Pinned : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Pinned, MatchesTheCpuReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const PinnedCase& c = cases()[GetParam()];
  const std::vector<std::string> flags = testing::words(c.flags);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  // The plans the flags give: they fit, and the forward's reach the kernel, weights per lane and
  // input parts the case names.
  const PlanRequest request = testing::parse_stage_flags<StageFlags>(flags).request;
  const Plan plan = make_plan(c.size, device_limits(prop), request);
  ASSERT_TRUE(plan.fits) << c.flags << ": " << plan.why;
  if (c.forward != Forward::kAny) {
    EXPECT_EQ(plan.forward.weights_in_registers, c.forward == Forward::kRegisters)
        << plan.describe();
  }
  if (request.k_per_lane) {
    EXPECT_EQ(plan.forward.k_per_lane, request.k_per_lane) << plan.describe();
  }
  if (request.input != InputParts::kAuto) {
    EXPECT_EQ(plan.forward.input_k_per_lane == 0, request.input == InputParts::kGemm)
        << plan.describe();
  }
#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
  if (c.backward_chunks) {
    EXPECT_EQ(plan.backward.chunks, c.backward_chunks) << plan.describe();
  }
#endif
#if LSTM_PLAN_HAS_PARTIAL_SUMS
  if (c.gather_lanes) {
    EXPECT_EQ(plan.backward.gather_lanes, c.gather_lanes) << plan.describe();
  }
#endif
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
  if (c.backward != Backward::kAny) {
    EXPECT_EQ(plan.backward.weights_in_registers, c.backward == Backward::kRegisters)
        << plan.describe();
  }
#endif
  LstmParams params = generate_params(c.size, 7);
  UpstreamGradients upstream = generate_upstream(c.size, 8);
  std::unique_ptr<Stage> stage = testing::make_with_flags(make, flags);
  ASSERT_TRUE(stage);
  quantize_problem(stage->precision(), params,
                   &upstream);  // a 16-bit stage's inputs, as run_stages
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME " ") + c.label;
  const auto first = testing::run_twice(*stage, params, name, &upstream);
  const CheckReport report = testing::check_against_reference(*stage, params, first, &upstream);
  EXPECT_TRUE(report.passed()) << name << " " << c.size.describe() << " " << c.flags << " ("
                               << plan.describe() << ")\n"
                               << report.describe();
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Plans, Pinned, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

#if LSTM_PLAN_HAS_PARTIAL_SUMS
// The partial sums' tags repeat from pass to pass: a pass must not take the last pass's sums for
// its own. Two passes with other upstream gradients, the second checked.
TEST(PartialSums, ASecondPassWithOtherGradientsIsRight) {
  SKIP_WITHOUT_GPU();
  const ProblemSize size{256, 32, 8, 20, 2};
  const LstmParams params = generate_params(size, 7);
  const UpstreamGradients first_upstream = generate_upstream(size, 8);
  const UpstreamGradients second_upstream = generate_upstream(size, 9);
  DeviceProblem first(params, &first_upstream), second(params, &second_upstream);
  std::unique_ptr<Stage> stage = make();
  const std::vector<OutputTensor> outputs = testing::run_second_pass(*stage, first, second);
  const CheckReport report =
      testing::check_against_reference(*stage, params, outputs, &second_upstream);
  EXPECT_TRUE(report.passed()) << report.describe();
}
#endif

TEST(Limits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why = make()->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

TEST(Flags, TheStageRefusesBadOrContradictoryPins) {  // no GPU needed
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "x"}), std::invalid_argument);
#if LSTM_PLAN_HAS_BACKWARD_CHUNKS
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "0,0,0,0,0,0,6"}), std::invalid_argument);
#endif
  EXPECT_THROW(apply_stage_flags(*make(), {"--weights", "smem"}), std::invalid_argument);
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "4,256", "--weights", "registers"}),
               std::invalid_argument);
#if LSTM_PLAN_HAS_BACKWARD_REGISTERS
  EXPECT_THROW(apply_stage_flags(*make(), {"--backward-weights", "smem"}), std::invalid_argument);
  EXPECT_THROW(
      apply_stage_flags(*make(), {"--plan", "0,0,0,0,2", "--backward-weights", "registers"}),
      std::invalid_argument);
#endif
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
