// A training stage with the forward on tensor cores (training/10_tensor_cores, and
// training/12_tensor_core_backward, whose backward's product is on tensor cores too, and
// training/14_fewer_dz_readers, whose backward blocks hold up to two row tiles: this source is
// compiled once per stage, in the stage's namespace beside its headers, with
// LSTM_STAGE_DISPLAY_NAME naming it; tests/CMakeLists.txt), in FP16 and in BF16, with its plans
// left to the planner or pinned through --plan, so that every path of its kernels runs. The
// forward's tensor-core kernel (forward stage 17's, keeping the stash): H not a multiple of 16
// (k and the unit rows padded with zeros), I != H and I > H, L = 3 and 4 (the layers above the
// first read the layer below's h, rounded to 16 bits for the input GEMM), B = 1, B odd, batch
// groups, batch slices, several chunks of h, the 8-, 16- and 32-column warp tiles, T = 1. The
// backward with batch groups and several chunks of dz; in stage 12 (mma tiles of 16 units, 8
// batch rows, 16 gate rows) also a last chunk of dz of fewer than 16 gate rows, 4H not a multiple
// of 16, groups of 3 and 6 column tiles, k slices over fewer k tiles than warps; in stage 14
// (LSTM_TC_HAS_BACKWARD_ROW_TILES) two row tiles, full and with a second tile of fewer units than
// 16, planned and pinned, and the planner's choice of them (on the CPU); in stage 23
// (LSTM_TC_HAS_BACKWARD_CLUSTERS) the backward split over clusters of two blocks, pinned (odd H,
// a block of padding in the last cluster, three row tiles, chunks, batch slices) and planned, and
// the planner's choice and refusals of clusters (on the CPU), and in stage 24
// (LSTM_TC_HAS_CLUSTER_MBARRIER: its exchange on an mbarrier) clusters at H = 768, B = 16 too; in
// stage 29 (LSTM_TC_HAS_WAVEFRONT: the forward's layers in one launch) wave_* cases with
// --layers-per-launch pinned (L = 2 to 5, odd H, B and I, batch groups, chunks of K = 2H, batch
// slices, two launches, one launch per layer), a refused --layers-per-launch naming the most that
// fit, and the planner's choices at the H100's limits (on the CPU); in stage 30
// (LSTM_TC_HAS_FEW_BACKWARD_WARPS: 256 backward threads at B <= 4) few_warps_* cases with chunks
// of dz, batch groups and slices, and the planner's choice of threads (on the CPU); in stage 33
// (LSTM_TC_HAS_CLUSTER_SPAN: a batch group's backward over several clusters of 16) span* cases
// over two, three and four clusters, and the planner's choice of spans (on the CPU); in stage 35
// (LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS: up to 16 batch rows a cluster) rows16_* cases in one, two and
// four clusters, in groups and slices, and the planner's choice of 16 rows (on the CPU); in stage
// 43 (LSTM_TC_HAS_TRAILING_GRADIENTS: the gradients of each chunk of steps trailing the
// recurrence) a block past H that counts no pair, and the planner's choice of chunks; in stage 45
// (LSTM_TC_HAS_CELL_BY_GATE: the forward's cell update a thread a gate) by_gate_* cases with
// padding columns, units past H and a last group of fewer rows, and the planner's choice; in stage
// 52 (LSTM_TC_HAS_ONE_CHUNK_FOR_LARGE_DW: one chunk where trailing chunks would rewrite a large dW)
// one_chunk_* cases at H = 1024 over one and two layers, and the rule (on the CPU). The
// data are rounded to the precision first, as the harness does (core/quantize.h); each case is
// checked against the FP64 reference on every output and gradient with the precision's bounds,
// must repeat bit for bit, and prints its measured errors ([ MEASURED ]). Also: a pass with other
// tensors than prepare() saw; a too-large H is refused before launch, saying what fits.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/quantize.h"
#include "gpu_test_support.h"
#include "h100_limits.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "plan.h"

#ifndef LSTM_TC_HAS_WAVEFRONT
#define LSTM_TC_HAS_WAVEFRONT 0
#endif
#ifndef LSTM_TC_HAS_FEW_BACKWARD_WARPS
#define LSTM_TC_HAS_FEW_BACKWARD_WARPS 0
#endif
#ifndef LSTM_TC_HAS_ONE_CLUSTER
#define LSTM_TC_HAS_ONE_CLUSTER 0
#endif
#ifndef LSTM_TC_HAS_CLUSTER_SPAN
#define LSTM_TC_HAS_CLUSTER_SPAN 0
#endif
#ifndef LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS
#define LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS 0
#endif
#ifndef LSTM_TC_HAS_HELD_WEIGHTS
#define LSTM_TC_HAS_HELD_WEIGHTS 0
#endif
#ifndef LSTM_TC_HAS_TRAILING_GRADIENTS
#define LSTM_TC_HAS_TRAILING_GRADIENTS 0
#endif
#ifndef LSTM_TC_HAS_ONE_CHUNK_FOR_LARGE_DW
#define LSTM_TC_HAS_ONE_CHUNK_FOR_LARGE_DW 0
#endif
#ifndef LSTM_TC_HAS_CELL_BY_GATE
#define LSTM_TC_HAS_CELL_BY_GATE 0
#endif

namespace lstm::LSTM_STAGE_NAMESPACE {  // the stage's, as its build names it

std::unique_ptr<Stage> make();       // FP16 (stage.cu)
std::unique_ptr<Stage> make_bf16();  // BF16 (stage.cu)

namespace {

struct Case {
  const char* label;
  ProblemSize size;        // H, I, B, T, L
  const char* plan;        // --plan tile,threads,groups,rows,backward_groups,backward_rows,chunk,
                           // and in stage 23 cluster
  int forward_chunks = 0;  ///< how many chunks of h the forward's plan must have (0: any)
  int backward_row_tiles = 0;  ///< how many row tiles the backward's plan must have (0: any)
  int backward_cluster = 0;    ///< how many blocks the backward's clusters must have (0: any)
  int layers_per_launch = 0;   ///< --layers-per-launch (a wavefront stage; 0: the planner's)
  bool held = false;           ///< the forward's plan must hold W in registers
  int trailing_steps = 0;      ///< the steps of a chunk the gradients trail in (0: any)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
    {"B1", ProblemSize{64, 64, 1, 9, 2}, ""},
    {"B3_odd_H_I_ne_H_L3", ProblemSize{37, 19, 3, 7, 3}, ""},
    {"L4_H_gt_I_B20", ProblemSize{96, 40, 20, 6, 4}, ""},
    {"H1", ProblemSize{1, 3, 2, 4, 2}, ""},
    {"T1", ProblemSize{50, 30, 5, 1, 1}, ""},
    {"I_gt_H", ProblemSize{45, 100, 6, 5, 2}, ""},
    {"H520_B1", ProblemSize{520, 520, 1, 6, 1}, ""},
    {"B130_groups", ProblemSize{130, 50, 130, 4, 2}, ""},
    {"fwd_chunks_short_last_tile16", ProblemSize{300, 50, 64, 5, 2}, "16,128,1,0", 5},
    {"fwd_tile8_bwd_chunks_b17", ProblemSize{300, 50, 17, 4, 1}, "8,256,1,0,0,0,96"},
    {"fwd_tile32_groups3_bwd_groups2", ProblemSize{257, 31, 70, 3, 1}, "32,256,3,0,2"},
    {"fwd_slices_bwd_slices", ProblemSize{130, 30, 11, 4, 2}, "16,64,1,4,2,2"},
    {"one_row_per_block", ProblemSize{66, 66, 5, 3, 2}, "8,128,1,1,1,1"},
    {"bwd_chunks_of_32_last_20_B21_L3", ProblemSize{37, 21, 21, 3, 3}, "0,0,0,0,1,0,32"},
    {"bwd_chunks_of_48_last_12_B45", ProblemSize{75, 20, 45, 2, 1}, "0,0,0,0,1,0,48"},
#if LSTM_TC_HAS_BACKWARD_ROW_TILES
    // 8 groups of 16 blocks (132 SMs): J = 19, a second row tile of 3 units; J = 32, the last
    // block 20 units, chunks of 64 gate rows with a last of 16, groups left empty (B = 9).
    {"bwd_two_row_tiles_J19_L2", ProblemSize{300, 50, 16, 4, 2}, "0,0,0,0,8", 0, 2},
    {"bwd_two_row_tiles_J32_B9_chunks", ProblemSize{500, 40, 9, 3, 1}, "0,0,0,0,8,0,64", 0, 2},
    {"bwd_two_row_tiles_planned", ProblemSize{512, 64, 16, 3, 1}, "", 0, 2},
#endif
#if LSTM_TC_HAS_BACKWARD_CLUSTERS
    // Clusters of two: H = 37, 38 blocks (the last owns no unit), the second block's gate rows
    // 68 of 148 (a last k tile of 4); J = 19 in 8 groups, 38 units in three row tiles; chunks of
    // 48 gate rows (a last of 44), batch slices; and the planner's choice at H = 1024, B = 16.
    {"bwd_cluster2_odd_H_L3", ProblemSize{37, 19, 3, 7, 3}, "0,0,0,0,0,0,0,2", 0, 1, 2},
    {"bwd_cluster2_B1", ProblemSize{64, 64, 1, 9, 2}, "0,0,0,0,0,0,0,2", 0, 1, 2},
    {"bwd_cluster2_three_row_tiles", ProblemSize{300, 50, 16, 4, 2}, "0,0,0,0,8,0,64,2", 0, 3, 2},
    {"bwd_cluster2_chunks_slices", ProblemSize{75, 20, 45, 2, 1}, "0,0,0,0,1,8,48,2", 0, 1, 2},
    {"bwd_cluster_planned", ProblemSize{1024, 64, 16, 3, 1}, "", 0, 2, 2},
#endif
#if LSTM_TC_HAS_WAVEFRONT
    {"wave_L2", ProblemSize{64, 40, 5, 7, 2}, "", 0, 0, 0, 2},
    {"wave_L3_odd_H_B_I", ProblemSize{37, 19, 3, 7, 3}, "", 0, 0, 0, 3},
    {"wave_L4_B1", ProblemSize{64, 64, 1, 9, 4}, "", 0, 0, 0, 4},
    {"wave_L4_groups2", ProblemSize{130, 50, 70, 5, 4}, "16,256,2,0", 0, 0, 0, 4},
    {"wave_L4_chunks_short_last", ProblemSize{300, 50, 64, 6, 4}, "32,512,1,0", 0, 0, 0, 4},
    {"wave_L3_slices", ProblemSize{70, 30, 40, 4, 3}, "16,256,1,16", 0, 0, 0, 3},
    {"wave_L5_two_launches", ProblemSize{96, 40, 20, 6, 5}, "", 0, 0, 0, 3},
    {"wave_L2_one_launch_per_layer", ProblemSize{96, 40, 20, 6, 2}, "", 0, 0, 0, 1},
#endif
#if LSTM_TC_HAS_FEW_BACKWARD_WARPS
    // 256 backward threads (B <= 4): dz in chunks of 96 gate rows (a last of 48 at H = 300);
    // two batch groups of one row each, in two slices.
    {"few_warps_bwd_chunks_B4", ProblemSize{300, 50, 4, 4, 1}, "0,0,0,0,1,0,96"},
    {"few_warps_bwd_groups2_slices_B4_L2", ProblemSize{130, 30, 4, 3, 2}, "0,0,0,0,2,1"},
#endif
#if LSTM_TC_HAS_ONE_CLUSTER
    // The backward in one cluster of 16 blocks: J = 4 (H = 64; H = 37, where blocks 10-15 own no
    // unit and block 9 one); J = 36 at H = 520, 33 row tiles, three for some warps, 8 rows; two
    // clusters of 4 rows in three slices, the last with an empty cluster; the planner's choice.
    {"one_cluster_B1_L2", ProblemSize{64, 40, 1, 9, 2}, "0,0,0,0,0,0,0,16", 0, 4, 16},
    {"one_cluster_odd_H_B5_L3", ProblemSize{37, 19, 5, 7, 3}, "0,0,0,0,0,0,0,16", 0, 3, 16},
    {"one_cluster_H520_B8", ProblemSize{520, 64, 8, 4, 1}, "0,0,0,0,0,0,0,16", 0, 33, 16},
    {"one_cluster_groups_slices", ProblemSize{100, 30, 20, 5, 1}, "0,0,0,0,2,4,0,16", 0, 7, 16},
    {"one_cluster_planned_B8", ProblemSize{512, 512, 8, 3, 1}, "", 0, 32, 16},
#endif
#if LSTM_TC_HAS_CLUSTER_SPAN
    // A batch group over several clusters of 16: two (J = 4, H = 100), four (J = 4, H = 200:
    // blocks 50-63 own no unit, 5 rows), three in two groups of 4 rows in three slices (the last
    // with an empty group); the planner's choice at H = 1024, B = 4 (four) and H = 768, B = 16
    // (two groups of three).
    {"span2_B3_L2", ProblemSize{100, 30, 3, 5, 2}, "0,0,0,0,0,0,0,16,2", 0, 7, 16},
    {"span4_empty_blocks_B5", ProblemSize{200, 40, 5, 6, 1}, "0,0,0,0,0,0,0,16,4", 0, 13, 16},
    {"span3_groups_slices", ProblemSize{150, 30, 20, 4, 1}, "0,0,0,0,2,4,0,16,3", 0, 10, 16},
    {"span_planned_H1024_B4", ProblemSize{1024, 64, 4, 3, 1}, "", 0, 64, 16},
    {"span_planned_H768_B16", ProblemSize{768, 32, 16, 3, 1}, "", 0, 48, 16},
#endif
#if LSTM_TC_HAS_HELD_WEIGHTS
    // The forward's W held in registers: 32 k tiles a warp; 15-16 of 16 (zero tiles past it).
    {"fwd_held_H1024_B16_32_tiles", ProblemSize{1024, 64, 16, 3, 1}, "8,256,2,0", 1, 0, 0, 0, true},
    {"fwd_held_H1000_B8_zero_tiles", ProblemSize{1000, 64, 8, 3, 1}, "8,256,1,0", 1, 0, 0, 0, true},
#endif
#if LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS
    // Two mma column tiles a cluster: 13 rows in one cluster (the second tile a quad and a
    // single), 16 over two clusters, 11 over four (blocks 50-63 own no unit; a pair and a single
    // in the second tile), two groups of 12 rows in two slices (the last group 4 rows), 12 rows
    // over four clusters at H = 1024; the planner's choice at H = 512, B = 64 (four groups of 16).
    {"rows16_one_cluster_B13_L2", ProblemSize{64, 40, 13, 6, 2}, "0,0,0,0,1,13,0,16", 0, 4, 16},
    {"rows16_span2_B16", ProblemSize{100, 30, 16, 5, 1}, "0,0,0,0,1,16,0,16,2", 0, 7, 16},
    {"rows16_span4_B11", ProblemSize{200, 40, 11, 4, 1}, "0,0,0,0,1,11,0,16,4", 0, 13, 16},
    {"rows16_groups_slices", ProblemSize{100, 30, 40, 3, 1}, "0,0,0,0,2,12,0,16", 0, 7, 16},
    {"rows16_planned_H512_B64", ProblemSize{512, 64, 64, 3, 1}, "", 0, 32, 16},
    {"rows16_span4_H1024_B12", ProblemSize{1024, 64, 12, 3, 1}, "0,0,0,0,1,12,0,16,4", 0, 64, 16},
#endif
#if LSTM_TC_HAS_TRAILING_GRADIENTS
    // The gradients trailing the recurrence in chunks (every case above of T > 1 whose backward
    // leaves a quarter of the SMs has them too): clusters of two, J = 2 over 68 blocks, the last
    // starting past H = 133 (it counts no pair), three chunks of three steps, two layers.
    {"trailing_blocks_past_H_L2", ProblemSize{133, 20, 5, 9, 2}, "0,0,0,0,1,0,0,2", 0, 0, 2, 0,
     false, 3},
#endif
#if LSTM_TC_HAS_ONE_CHUNK_FOR_LARGE_DW
    // One chunk after the recurrence (dW_hh 16 MiB, chunks of 4 and 2 columns), the backward over
    // four clusters of 16; two layers.
    {"one_chunk_H1024_B4", ProblemSize{1024, 64, 4, 3, 1}, "", 0, 0, 16, 0, false, 3},
    {"one_chunk_H1024_B2_L2", ProblemSize{1024, 64, 2, 3, 2}, "", 0, 0, 16, 0, false, 3},
#endif
#if LSTM_TC_HAS_CELL_BY_GATE
    // The cell update a thread a gate (the planner's by_gate, shown on the CPU below): three rows
    // padded to four and the last block's units past H = 133; two groups of three and two rows.
    {"by_gate_H133_B3", ProblemSize{133, 20, 3, 9, 1}, ""},
    {"by_gate_H1000_B5_groups2", ProblemSize{1000, 64, 5, 4, 1}, "8,256,2,0"},
#endif
  };
  return list;
}

const char* kPrecisions[] = {"fp16", "bf16"};

std::unique_ptr<Stage> make_stage(const std::string& precision, const std::string& plan,
                                  int layers_per_launch = 0) {
  std::unique_ptr<Stage> stage = precision == "bf16" ? make_bf16() : make();
  if (!plan.empty()) apply_stage_flags(*stage, {"--plan", plan});
  if (layers_per_launch)
    apply_stage_flags(*stage, {"--layers-per-launch", std::to_string(layers_per_launch)});
  return stage;
}

/// The case's plan request: --plan, and --layers-per-launch where the stage has the flag.
PlanRequest request_of(const Case& c) {
#if LSTM_TC_HAS_WAVEFRONT
  return parse_plan_request(c.plan, c.layers_per_launch);
#else
  return parse_plan_request(c.plan);
#endif
}

class TrainingTensorCores : public ::testing::TestWithParam<std::tuple<std::size_t, int>> {};

TEST_P(TrainingTensorCores, GradientsMatchTheFp64ReferenceWithinThePrecisionsBoundsAndRepeat) {
  SKIP_WITHOUT_GPU();
  const Case& c = cases()[std::get<0>(GetParam())];
  const std::string precision = kPrecisions[std::get<1>(GetParam())];
  std::unique_ptr<Stage> stage = make_stage(precision, c.plan, c.layers_per_launch);
  ASSERT_EQ(precision_name(stage->precision()), precision);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const Plan plan = make_plan(c.size, device_limits(prop), request_of(c));
  ASSERT_TRUE(plan.fits) << c.plan << ": " << plan.why;
#if LSTM_TC_HAS_WAVEFRONT
  if (c.layers_per_launch) {  // the wavefront the case pins must be what runs
    EXPECT_EQ(plan.network.layers_per_launch(), c.layers_per_launch) << plan.describe();
  }
#endif
  if (c.forward_chunks) {
    EXPECT_EQ(plan.forward.chunks, c.forward_chunks) << plan.describe();
  }
#if LSTM_TC_HAS_BACKWARD_ROW_TILES
  // A planned cluster's row tiles hold C blocks' units: the case's row tiles are those without a
  // cluster, unless the case pins its cluster.
  bool row_tiles_apply = true;
#if LSTM_TC_HAS_BACKWARD_CLUSTERS
  row_tiles_apply = plan.backward.cluster_blocks == 1 || c.backward_cluster != 0;
#endif
  if (c.backward_row_tiles && row_tiles_apply) {
    EXPECT_EQ(plan.backward.row_tiles, c.backward_row_tiles) << plan.describe();
  }
#endif
#if LSTM_TC_HAS_BACKWARD_CLUSTERS
  if (c.backward_cluster) {
    EXPECT_EQ(plan.backward.cluster_blocks, c.backward_cluster) << plan.describe();
  }
#endif
#if LSTM_TC_HAS_HELD_WEIGHTS
  if (c.held) {  // the path the case is named for
    EXPECT_GT(plan.forward.held_tiles, 0) << plan.describe();
  }
#endif
#if LSTM_TC_HAS_TRAILING_GRADIENTS
  if (c.trailing_steps) {
    EXPECT_EQ(trailing_chunk_steps(c.size, plan.backward, prop.multiProcessorCount),
              c.trailing_steps)
        << plan.describe();
  }
#endif
  LstmParams params = generate_params(c.size, 7);
  UpstreamGradients upstream = generate_upstream(c.size, 8);
  quantize_problem(stage->precision(), params, &upstream);  // as run_stages does
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME " ") + precision + " " + c.label;
  const auto outputs = testing::run_twice(*stage, params, name, &upstream);
  ASSERT_FALSE(outputs.empty());
  const CheckReport report = testing::check_against_reference(*stage, params, outputs, &upstream);
  EXPECT_TRUE(report.passed()) << name << " " << c.size.describe() << " (" << plan.describe()
                               << ")\n"
                               << report.describe();
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
  for (const TensorCheck& tensor : report.tensors) {
    std::cout << "[ MEASURED ] " << name << " " << c.size.describe() << " " << tensor.name
              << " relative_norm " << tensor.relative_norm << " max_absolute "
              << tensor.max_absolute << " (bound " << tensor.bound.max_relative_norm << ", "
              << tensor.bound.max_absolute << ")\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TrainingTensorCores,
                         ::testing::Combine(::testing::Range<std::size_t>(0, cases().size()),
                                            ::testing::Range(0, 2)),
                         [](const ::testing::TestParamInfo<TrainingTensorCores::ParamType>& info) {
                           return std::string(cases()[std::get<0>(info.param)].label) + "_" +
                                  kPrecisions[std::get<1>(info.param)];
                         });

TEST(TrainingTensorCoresLimits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  for (const char* precision : kPrecisions) {
    const std::string why =
        make_stage(precision, "")->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
    EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
    EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
  }
}

TEST(TrainingTensorCoresFlags, PrecisionAndPlanFlags) {  // no GPU needed
  std::unique_ptr<Stage> stage = make();
  EXPECT_EQ(stage->precision(), Precision::kFp16);
  apply_stage_flags(*stage, {"--precision", "bf16"});
  EXPECT_EQ(stage->precision(), Precision::kBf16);
  EXPECT_EQ(make_bf16()->precision(), Precision::kBf16);
  EXPECT_EQ(make_bf16()->tolerance("grad_weight_hh_l0").max_relative_norm,
            reduced_precision_tolerance(Precision::kBf16, "grad_weight_hh_l0").max_relative_norm);
  EXPECT_EQ(make()->tolerance("dx").max_relative_norm,
            reduced_precision_tolerance(Precision::kFp16, "dx").max_relative_norm);
  EXPECT_THROW(apply_stage_flags(*make(), {"--precision", "fp32"}), std::invalid_argument);
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "4,256"}), std::invalid_argument);
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "0,0,0,0,0,0,6"}), std::invalid_argument);
#if LSTM_TC_HAS_BACKWARD_CLUSTERS
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "0,0,0,0,0,0,0,3"}), std::invalid_argument);
  EXPECT_NO_THROW(apply_stage_flags(*make(), {"--plan", "0,0,0,0,0,0,0,2"}));
#endif
}

#if LSTM_TC_HAS_BACKWARD_ROW_TILES
// The planner (on the CPU, the H100's limits): two row tiles where 16-bit W_hhᵀ of 32 units fits
// beside the staged dz (the canonical config: half as many blocks per batch group), one where it
// does not (H = 1024), and a block of more than 32 units refused with the reason.
TEST(TrainingTensorCoresRowTiles, TwoRowTilesWhereTheyFitOneWhereNot) {  // no GPU needed
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>(
      testing::Clusters::kNone);  // no clusters: the plans of the stages before 23
  const Plan canonical = make_plan(ProblemSize{512, 512, 64, 100, 4}, h100);
  ASSERT_TRUE(canonical.fits) << canonical.why;
  EXPECT_EQ(canonical.backward.row_tiles, 2) << canonical.describe();
  EXPECT_EQ(canonical.backward.units_per_block, 32) << canonical.describe();
  EXPECT_LE(canonical.backward.shared_bytes, h100.shared_bytes);
  EXPECT_EQ(
      canonical.backward.shared_bytes,
      backward_shared_bytes(512, 32, canonical.backward.group_rows, canonical.backward.chunk_rows));
  const Plan large = make_plan(ProblemSize{1024, 1024, 64, 100, 1}, h100);
  ASSERT_TRUE(large.fits) << large.why;
  EXPECT_EQ(large.backward.row_tiles, 1) << large.describe();
  const Plan one_unit = make_plan(ProblemSize{1, 1, 8, 10, 1}, h100);
  ASSERT_TRUE(one_unit.fits) << one_unit.why;
  EXPECT_EQ(one_unit.backward.row_tiles, 1) << one_unit.describe();
  const Plan refused =
      make_plan(ProblemSize{600, 600, 64, 10, 1}, h100, parse_plan_request("0,0,0,0,8"));
  EXPECT_FALSE(refused.fits);  // 8 groups of 16 blocks: 38 units a block
  EXPECT_NE(refused.why.find("more than the kernel's 32"), std::string::npos) << refused.why;
}
#endif

#if LSTM_TC_HAS_FORWARD_K_SLICES
// The planner (on the CPU, the H100's limits) of a stage whose forward may run four warps a block
// and charges a warp's chain 150 clocks a k tile: four k slices where one mma tile group covers a
// block's units and the batch is small (H = 512, B = 1 and 8: 128 threads; H = 1024, B = 4: two
// tile groups, 256 threads); 512 threads where a block's rows need them (H = 1024, B = 16: two
// batch groups of 16 units, four row tiles and four k slices).
TEST(TrainingTensorCoresKSlices, TheForwardTakesFourKSlicesAtSmallBatches) {  // no GPU needed
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>(
      testing::Clusters::kNone);  // no clusters: the plans of the stages before 23
  for (int batch : {1, 8}) {
    const ForwardPlan small = make_plan(ProblemSize{512, 512, batch, 100, 1}, h100).forward;
    ASSERT_TRUE(small.fits) << small.why;
    EXPECT_EQ(small.threads, 128) << small.describe();
    EXPECT_EQ(small.k_slices, 4) << small.describe();
#if LSTM_TC_HAS_HELD_WEIGHTS
    EXPECT_EQ(small.held_tiles, 8) << small.describe();  // the same plan, W held (stage 41)
#endif
  }
  const ForwardPlan two_groups = make_plan(ProblemSize{1024, 1024, 4, 100, 1}, h100).forward;
  ASSERT_TRUE(two_groups.fits) << two_groups.why;
  EXPECT_EQ(two_groups.threads, 256) << two_groups.describe();
  EXPECT_EQ(two_groups.k_slices, 4) << two_groups.describe();
  const ForwardPlan wider = make_plan(ProblemSize{1024, 1024, 16, 100, 1}, h100).forward;
  ASSERT_TRUE(wider.fits) << wider.why;
#if LSTM_TC_HAS_HELD_WEIGHTS
  // Stage 38's plan holds W where it can (H = 1024, B = 4 and 8: 256 threads, one batch group);
  // where its 512 threads cannot, the cheapest plan that can: 256 threads, two k slices of 32
  // tiles a warp.
  EXPECT_EQ(two_groups.held_tiles, 16) << two_groups.describe();
  const ForwardPlan eight = make_plan(ProblemSize{1024, 1024, 8, 100, 1}, h100).forward;
  EXPECT_EQ(eight.batch_groups, 1) << eight.describe();
  EXPECT_EQ(eight.held_tiles, 16) << eight.describe();
  EXPECT_EQ(wider.threads, 256) << wider.describe();
  EXPECT_EQ(wider.held_tiles, 32) << wider.describe();
#else
  EXPECT_EQ(wider.threads, 512) << wider.describe();
#endif
}
#endif

#if LSTM_TC_HAS_FEW_BACKWARD_WARPS
// The planner (on the CPU, the H100's limits): 256 backward threads, 8 warps along k, where the
// batch has four rows or fewer (measured 7-12% faster at H = 512 and 1024, B = 1 and 4, README),
// 512 above (measured slower with 256 from B = 16, and at the canonical config).
TEST(TrainingTensorCoresBackwardWarps, HalfTheBackwardWarpsWhereTheBatchHasFourRowsOrFewer) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>(
      testing::Clusters::kPairsOnly);  // no clusters of 16: the plans before stage 31
  for (int hidden : {512, 1024}) {
    for (int batch : {1, 2, 3, 4, 5, 8, 16, 64}) {
      const Plan plan = make_plan(ProblemSize{hidden, hidden, batch, 100, 1}, h100);
      ASSERT_TRUE(plan.fits) << plan.why;
      const BackwardPlan& b = plan.backward;
      EXPECT_EQ(b.threads, batch <= 4 ? 256 : 512) << plan.describe();
      EXPECT_EQ(b.k_slices, b.threads / 32 / b.batch_tiles) << plan.describe();
      const std::string text = plan.describe();  // the forward's plans print threads= too
      EXPECT_NE(text.find("threads=" + std::to_string(b.threads), text.find("backward J=")),
                std::string::npos)
          << text;
    }
  }
}
#endif

#if LSTM_TC_HAS_CELL_BY_GATE
// Where the forward updates the cells a thread a gate (on the CPU, the H100's limits): the
// planner's held plans of a small batch, and the by_gate_* cases above; not where a block has
// more gates than threads (H = 512, B = 64), nor where W is not held (a wavefront launch).
TEST(TrainingTensorCoresByGate, TheCellUpdateAThreadAGateWhereTheGatesFit) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>();
  const auto by_gate = [&](const ProblemSize& s, const std::string& pinned) {
    PlanRequest request;
    if (!pinned.empty()) request = parse_plan_request(pinned);
    const Plan plan = make_plan(s, h100, request);
    EXPECT_TRUE(plan.fits) << plan.why;
    const ForwardPlan& f = plan.network.launches.front().layers.front();
    EXPECT_EQ(f.by_gate, f.held_tiles > 0 && f.tile_batch == 8 &&
                             f.units_per_block * f.group_batch * 4 <= f.threads)
        << s.describe() << ": " << f.describe();
    return f.by_gate;
  };
  EXPECT_TRUE(by_gate({512, 512, 1, 100, 1}, ""));
  EXPECT_TRUE(by_gate({1024, 1024, 4, 100, 1}, ""));
  EXPECT_TRUE(by_gate({133, 20, 3, 9, 1}, ""));
  EXPECT_TRUE(by_gate({1000, 64, 5, 4, 1}, "8,256,2,0"));
  EXPECT_FALSE(by_gate({512, 512, 64, 100, 1}, ""));
  EXPECT_FALSE(by_gate({512, 512, 64, 100, 4}, ""));
}
#endif

#if LSTM_TC_HAS_TRAILING_GRADIENTS
/// The steps of a chunk the gradients trail the recurrence in, for the planner's plan of one layer
/// (I = H) at the H100's limits.
int trailing_steps(int hidden, int batch, int seq_len) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>();
  const ProblemSize s{hidden, hidden, batch, seq_len, 1};
  const Plan plan = make_plan(s, h100);
  EXPECT_TRUE(plan.fits) << plan.why;
  return trailing_chunk_steps(s, plan.backward, h100.sm_count);
}

// The chunks the gradients trail the recurrence in (on the CPU, the H100's limits): four where
// the backward's blocks leave a quarter of the SMs (one cluster of 16 at H = 512, B = 1; four at
// H = 1024, B = 4), fewer where T is shorter; one, after the recurrence, where its pairs of
// blocks take 128 SMs (H = 1024, B = 16).
TEST(TrainingTensorCoresTrailing, ChunksWhereTheRecurrenceLeavesAQuarterOfTheSms) {
  EXPECT_EQ(trailing_steps(512, 1, 100), 25);
  // Stage 52 takes one chunk there (its rule below).
  EXPECT_EQ(trailing_steps(1024, 4, 100), LSTM_TC_HAS_ONE_CHUNK_FOR_LARGE_DW ? 100 : 25);
  EXPECT_EQ(trailing_steps(512, 1, 7), 2);  // chunks of 2, 2, 2 and 1 steps
  EXPECT_EQ(trailing_steps(512, 1, 1), 1);
  EXPECT_EQ(trailing_steps(1024, 16, 100), 100);
}
#endif

#if LSTM_TC_HAS_ONE_CHUNK_FOR_LARGE_DW
// Stage 52's rule (on the CPU, the H100's limits): one chunk after the recurrence where dW_hh is
// 16 MiB or more (H = 1024) and a chunk's GEMMs would have fewer than 1 024 columns; four chunks
// where dW is smaller (H = 768: 9 MiB; H = 512) or the chunks wide enough (T = 1024 at B = 4:
// 256 steps x 4 rows); one, as before, where the recurrence leaves no room (H = 1024, B = 16).
TEST(TrainingTensorCoresTrailing, OneChunkWhereNarrowChunksWouldRewriteALargeDw) {
  for (int batch : {1, 2, 4, 8})
    EXPECT_EQ(trailing_steps(1024, batch, 100), 100) << "B = " << batch;
  EXPECT_EQ(trailing_steps(1024, 4, 1000), 1000);  // chunks of 250 x 4 = 1 000 columns: narrow
  EXPECT_EQ(trailing_steps(1024, 4, 1024), 256);   // 256 x 4 = 1 024: not
  EXPECT_EQ(trailing_steps(768, 4, 100), 25);
  EXPECT_EQ(trailing_steps(768, 16, 100), 25);
  EXPECT_EQ(trailing_steps(512, 16, 100), 25);
  EXPECT_EQ(trailing_steps(1024, 16, 100), 100);
}
#endif

#if LSTM_TC_HAS_ONE_CLUSTER
// The planner (on the CPU, the H100's limits with 7 clusters of 16 taken as resident): the
// backward in one cluster where H fits and the batch takes one launch (8 rows a cluster, so
// B <= 56), stage 30's plan elsewhere and where no cluster of 16 can be resident; a pinned one
// that does not fit is refused with the reason.
TEST(TrainingTensorCoresOneCluster, OneClusterWhereHAndTheBatchFitStage30sPlanElsewhere) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>();
  for (int batch : {1, 4, 8, 9, 56}) {
    const Plan plan = make_plan(ProblemSize{512, 512, batch, 100, 1}, h100);
    ASSERT_TRUE(plan.fits) << plan.why;
    EXPECT_EQ(plan.backward.cluster_blocks, kOneCluster) << plan.describe();
    EXPECT_EQ(plan.backward.slices, 1) << plan.describe();
    EXPECT_EQ(plan.backward.units_per_block, 32) << plan.describe();
    EXPECT_EQ(plan.backward.batch_groups * plan.backward.group_rows >= batch, true);
  }
#if !LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS  // stage 35 takes 16 rows a cluster there
  EXPECT_NE(make_plan(ProblemSize{512, 512, 64, 100, 1}, h100).backward.cluster_blocks,
            kOneCluster);  // 8 clusters needed, 7 resident: two launches
#endif
#if LSTM_TC_HAS_CLUSTER_SPAN
  const Plan pinned =
      make_plan(ProblemSize{1024, 1024, 1, 100, 1}, h100, parse_plan_request("0,0,0,0,0,0,0,16,1"));
#else
  EXPECT_NE(make_plan(ProblemSize{1024, 1024, 1, 100, 1}, h100).backward.cluster_blocks,
            kOneCluster);  // 4H x H does not fit in 16 blocks
  const Plan pinned =
      make_plan(ProblemSize{1024, 1024, 1, 100, 1}, h100, parse_plan_request("0,0,0,0,0,0,0,16"));
#endif
  EXPECT_FALSE(pinned.fits);
  EXPECT_NE(pinned.why.find("one cluster"), std::string::npos) << pinned.why;
  DeviceLimits no_clusters = h100;
  no_clusters.whole_clusters = 0;
  EXPECT_NE(make_plan(ProblemSize{512, 512, 1, 100, 1}, no_clusters).backward.cluster_blocks,
            kOneCluster);
}
#endif

#if LSTM_TC_HAS_CLUSTER_SPAN
// The planner (on the CPU, the H100's limits, 7 clusters of 16): where W_hh does not fit in one
// cluster, the most clusters a group that fit and take the batch in one launch (H = 1024,
// B = 1-8: four; H = 768, B = 16: two groups of three; H = 600, B = 8: four), one cluster where it
// does (H = 512), stage 30's plan where none does (H = 1024, B = 16: two launches); pinned ones
// refused with the reason: a span H does not need, groups that cannot all be resident, a span
// past kMaxSpannedClusters.
TEST(TrainingTensorCoresClusterSpan, MostClustersThatFitStage30sPlanElsewhere) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>();
  for (int batch : {1, 4, 8}) {
    const BackwardPlan b = make_plan(ProblemSize{1024, 1024, batch, 100, 1}, h100).backward;
    EXPECT_EQ(b.cluster_blocks, kOneCluster) << batch;
    EXPECT_EQ(b.span, 4) << batch;
    EXPECT_EQ(b.units_per_block, 16) << batch;
    EXPECT_EQ(b.unit_blocks, 64) << batch;
    EXPECT_EQ(b.shared_bytes, cluster_backward_shared_bytes(1024, 16, b.group_rows, 4));
  }
  const BackwardPlan h768 = make_plan(ProblemSize{768, 768, 16, 1024, 1}, h100).backward;
  EXPECT_EQ(h768.span, 3);
  EXPECT_EQ(h768.batch_groups, 2);
  EXPECT_EQ(h768.slices, 1);
  EXPECT_EQ(make_plan(ProblemSize{600, 600, 8, 100, 1}, h100).backward.span, 4);
  EXPECT_EQ(make_plan(ProblemSize{512, 512, 8, 100, 1}, h100).backward.span, 1);
#if !LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS  // stage 35 takes 16 rows a cluster there
  EXPECT_NE(make_plan(ProblemSize{1024, 1024, 16, 100, 1}, h100).backward.cluster_blocks,
            kOneCluster);
#endif
  const Plan needless =
      make_plan(ProblemSize{64, 64, 1, 10, 1}, h100, parse_plan_request("0,0,0,0,0,0,0,16,2"));
  EXPECT_FALSE(needless.fits);
  EXPECT_NE(needless.why.find("does not need"), std::string::npos) << needless.why;
  const Plan crowded = make_plan(ProblemSize{1024, 1024, 16, 100, 1}, h100,
                                 parse_plan_request("0,0,0,0,2,0,0,16,4"));
  EXPECT_FALSE(crowded.fits);
  EXPECT_NE(crowded.why.find("cannot all be resident"), std::string::npos) << crowded.why;
  EXPECT_THROW(parse_plan_request("0,0,0,0,0,0,0,16,5"), std::invalid_argument);
  EXPECT_THROW(parse_plan_request("0,0,0,0,0,0,0,2,2"), std::invalid_argument);
}
#endif

#if LSTM_TC_HAS_SIXTEEN_CLUSTER_ROWS
// The planner (on the CPU, the H100's limits, 7 clusters of 16): 8 rows a cluster wherever those
// groups take the batch in one launch (H = 512, B = 56; H = 1024, B = 8: stage 34's plans), else
// up to 16 in one cluster a group (H = 512, B = 64 and the canonical config: four groups of 16),
// stage 30's plan elsewhere (H = 512, B = 128: 8 groups; H = 1024, B = 9-16: 16 rows over four
// clusters only pinned, B = 12 at most there); pinned rows past what fits refused.
TEST(TrainingTensorCoresSixteenRows, SixteenRowsWhereGroupsOfEightDoNotFit) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>();
  const auto backward = [&](int hidden, int batch, int layers = 1) {
    return make_plan(ProblemSize{hidden, hidden, batch, 100, layers}, h100).backward;
  };
  EXPECT_EQ(backward(512, 56).group_rows, 8);
  EXPECT_EQ(backward(1024, 8).group_rows, 8);
  EXPECT_EQ(backward(1024, 8).span, 4);
  for (int layers : {1, 4}) {
    const BackwardPlan b = backward(512, 64, layers);
    EXPECT_EQ(b.cluster_blocks, kOneCluster) << layers;
    EXPECT_EQ(b.span, 1) << layers;
    EXPECT_EQ(b.batch_groups, 4) << layers;
    EXPECT_EQ(b.group_rows, 16) << layers;
    EXPECT_EQ(b.slices, 1) << layers;
    EXPECT_EQ(b.shared_bytes, cluster_backward_shared_bytes(512, 32, 16, 1));
  }
  for (int batch : {9, 12, 16})
    EXPECT_NE(backward(1024, batch).cluster_blocks, kOneCluster) << batch;
  EXPECT_NE(backward(512, 128).cluster_blocks, kOneCluster);
  const BackwardPlan span12 = make_plan(ProblemSize{1024, 1024, 12, 100, 1}, h100,
                                        parse_plan_request("0,0,0,0,1,12,0,16,4"))
                                  .backward;
  EXPECT_EQ(span12.span, 4);
  EXPECT_EQ(span12.group_rows, 12);
  EXPECT_FALSE(make_plan(ProblemSize{1024, 1024, 16, 100, 1}, h100,
                         parse_plan_request("0,0,0,0,1,16,0,16,4"))
                   .fits);  // the received sums of 16 rows from four clusters: too much
  const Plan seventeen =
      make_plan(ProblemSize{100, 30, 17, 10, 1}, h100, parse_plan_request("0,0,0,0,1,17,0,16"));
  EXPECT_FALSE(seventeen.fits);
  EXPECT_NE(seventeen.why.find("at most 16 batch rows"), std::string::npos) << seventeen.why;
  const Plan wide = make_plan(ProblemSize{768, 64, 11, 10, 1}, h100,
                              parse_plan_request("0,0,0,0,1,11,0,16,1"));  // J = 48: 10 rows
  EXPECT_FALSE(wide.fits);
  EXPECT_NE(wide.why.find("at most 10 batch rows"), std::string::npos) << wide.why;
}
#endif

#if LSTM_TC_HAS_BACKWARD_CLUSTERS
// The planner (on the CPU, the H100's limits, 66 clusters of two): clusters of two where dz's
// traffic is the larger cost (H = 1024, B = 16: two groups of 64 blocks, each reading half of
// the 4H gate rows), none where they were measured slower (H = 1024, B = 8; the canonical config;
// H = 512, B = 1) or the device offers no clusters; refusals with the reason: 4H too
// few gate rows to split (H = 1), more blocks in clusters than can be resident.
TEST(TrainingTensorCoresClusters, ClustersOfTwoWhereDzDominatesRefusedWhereTheyCannotRun) {
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>(
      testing::Clusters::kPairsOnly);  // no clusters of 16: the plans before stage 31
  const BackwardPlan wide = make_plan(ProblemSize{1024, 1024, 16, 100, 1}, h100).backward;
  EXPECT_EQ(wide.cluster_blocks, 2) << wide.units_per_block;
  EXPECT_EQ(wide.k_rows, 2048);
  EXPECT_EQ(wide.row_tiles, 2);
  EXPECT_EQ(wide.unit_blocks % 2, 0);
  EXPECT_EQ(wide.shared_bytes,
            backward_shared_bytes(1024, wide.units_per_block, wide.group_rows, wide.chunk_rows, 2));
  for (const ProblemSize& size :  // the backward measured slower with clusters of two there
       {ProblemSize{1024, 1024, 8, 100, 1}, ProblemSize{512, 512, 64, 100, 4},
        ProblemSize{512, 512, 1, 100, 1}}) {
    EXPECT_EQ(make_plan(size, h100).backward.cluster_blocks, 1) << size.describe();
  }
  // H = 768, B = 64 and 128: clusters of two with dz in one chunk (measured 17% and 16% faster
  // than C = 1); not the plan of sixteen chunks that the model chose while it charged a chunk
  // 100 clocks (58% slower than C = 1).
  for (const int batch : {64, 128}) {
    const BackwardPlan b = make_plan(ProblemSize{768, 768, batch, 100, 1}, h100).backward;
    EXPECT_EQ(b.cluster_blocks, 2) << batch;
    EXPECT_EQ(b.chunks, 1) << batch;
  }
#if LSTM_TC_HAS_CLUSTER_MBARRIER
  // The exchange on an mbarrier costs less: clusters of two at H = 768, B = 16 as well (measured
  // 4% faster than C = 1), still none at H = 1024, B = 8 (level).
  EXPECT_EQ(make_plan(ProblemSize{768, 768, 16, 100, 1}, h100).backward.cluster_blocks, 2);
#endif
  DeviceLimits no_clusters = h100;
  no_clusters.pair_clusters = 0;
  EXPECT_EQ(make_plan(ProblemSize{1024, 1024, 16, 100, 1}, no_clusters).backward.cluster_blocks, 1);
  const Plan one_unit =
      make_plan(ProblemSize{1, 1, 4, 10, 1}, h100, parse_plan_request("0,0,0,0,0,0,0,2"));
  EXPECT_FALSE(one_unit.fits);
  EXPECT_NE(one_unit.why.find("too few to split"), std::string::npos) << one_unit.why;
  DeviceLimits few = h100;
  few.pair_clusters = 10;
  const Plan crowded =
      make_plan(ProblemSize{1024, 1024, 16, 100, 1}, few, parse_plan_request("0,0,0,0,0,0,0,2"));
  EXPECT_FALSE(crowded.fits);
  EXPECT_NE(crowded.why.find("cannot all be resident"), std::string::npos) << crowded.why;
  EXPECT_EQ(backward_k_rows(37, 2), 80);  // 148 gate rows: 10 k tiles, 5 a block
}
#endif

#if LSTM_TC_HAS_WAVEFRONT
// The forward's split into wavefront launches (on the CPU, the H100's limits): four layers fit
// one launch at the canonical config when asked (the first with its input parts from cuBLAS, the
// upper ones with W_ih on chip, one batch split for all), and the cost model takes two launches
// of two there; one launch of four at H = 256; one launch per layer at H = 1024, B = 64, where
// [W_ih | W_hh] of two layers leaves no room for more than one chunk of h; a pinned split that
// does not fit is refused naming the most that do; the flag's range.
TEST(TrainingTensorCoresWavefront, TheForwardsLayersShareALaunchWhereTheyFit) {  // no GPU needed
  const DeviceLimits h100 = testing::h100_limits<DeviceLimits>(
      testing::Clusters::kPairsOnly);  // no clusters of 16: the plans before stage 31
  const ProblemSize canonical{512, 512, 64, 100, 4};
  const Plan four = make_plan(canonical, h100, parse_plan_request("", 4));
  ASSERT_TRUE(four.fits) << four.why;
  ASSERT_EQ(four.network.launches.size(), 1u) << four.describe();
  const LayerLaunch& launch = four.network.launches.front();
  ASSERT_EQ(launch.layers.size(), 4u);
  EXPECT_LE(launch.blocks(), 132);
  EXPECT_EQ(launch.layers[0].input_rows, 0);
  for (std::size_t i = 1; i < launch.layers.size(); ++i) {
    EXPECT_EQ(launch.layers[i].input_rows, 512) << "upper layer " << i << ": W_ih on chip";
    EXPECT_EQ(launch.layers[i].batch_groups, launch.layers[0].batch_groups);
    EXPECT_EQ(launch.layers[i].group_batch, launch.layers[0].group_batch);
    EXPECT_EQ(launch.layers[i].tile_batch, launch.layers[0].tile_batch);
  }
#if LSTM_TC_HAS_HELD_WEIGHTS
  // A launch of several layers holds no W (the kernel is chosen by its first layer: stage.cu),
  // also where its plans could (H = 256: 256 threads, one chunk).
  for (const auto& [hidden, per_launch] : {std::pair{512, 4}, {256, 2}, {256, 0}}) {
    const Plan network = make_plan(ProblemSize{hidden, hidden, 64, 100, 4}, h100,
                                   parse_plan_request("", per_launch));
    ASSERT_TRUE(network.fits) << network.why;
    for (const LayerLaunch& several : network.network.launches)
      for (const ForwardPlan& p : several.layers)
        if (several.layers.size() > 1) {
          EXPECT_EQ(p.held_tiles, 0) << p.describe();
        }
  }
#endif
  const Plan planned = make_plan(canonical, h100);
  ASSERT_TRUE(planned.fits) << planned.why;
  // Stage 41 too: its split is chosen with W in shared memory, then held in launches of one.
  EXPECT_EQ(planned.network.launches.size(), 2u) << planned.describe();
  EXPECT_EQ(planned.network.layers_per_launch(), 2) << planned.describe();
  EXPECT_EQ(make_plan(ProblemSize{256, 256, 64, 100, 4}, h100).network.layers_per_launch(), 4);
  EXPECT_EQ(make_plan(ProblemSize{1024, 1024, 64, 100, 4}, h100).network.layers_per_launch(), 1);
  EXPECT_EQ(make_plan(ProblemSize{512, 512, 1, 100, 1}, h100).network.layers_per_launch(), 1);
  const Plan refused =
      make_plan(ProblemSize{1024, 1024, 4, 100, 4}, h100, parse_plan_request("", 4));
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("at most 2 do"), std::string::npos) << refused.why;
  // The stage's own refusal names the most layers that fit, and not H, which fits (no GPU: the
  // plan fails before any occupancy query).
  cudaDeviceProp prop{};
  prop.multiProcessorCount = 132;
  prop.sharedMemPerBlockOptin = 227 * 1024;
  std::unique_ptr<Stage> pinned = make();
  apply_stage_flags(*pinned, {"--layers-per-launch", "4"});
  const std::string why = pinned->unsupported_reason(ProblemSize{1024, 1024, 4, 100, 4}, prop);
  EXPECT_NE(why.find("at most 2 do"), std::string::npos) << why;
  EXPECT_EQ(why.find("largest H"), std::string::npos) << why;
  EXPECT_THROW(parse_plan_request("", kMaxLaunchLayers + 1), std::invalid_argument);
  EXPECT_THROW(apply_stage_flags(*make(), {"--layers-per-launch", "9"}), std::invalid_argument);
  EXPECT_NO_THROW(apply_stage_flags(*make(), {"--layers-per-launch", "2"}));
  std::cout << "[ PLAN ] canonical:" << planned.describe() << "\n";
}
#endif

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
