// A tensor-core stage on the GPU (forward/13_tensor_cores, forward/14_input_gemm_16bit: this
// source is compiled once per stage, in the stage's namespace beside its headers, with
// LSTM_STAGE_DISPLAY_NAME naming it; tests/CMakeLists.txt), in FP16 and in BF16, with its plan
// left to the planner or pinned, so that every path of the tensor-core kernel runs: H not a
// multiple of 16 or 8 (k and the unit rows padded with zeros), I != H, L = 3 and 4 (the layers
// above the first read h of the layer below, which stage 14 rounds to 16 bits), B = 1 (one mma
// column of eight used), B = 3, B = 20, B = 130 (batch groups), several chunks of h with a short
// last chunk, batch slices, the 8-, 16- and 32-column warp tiles, k slices that get no k tile.
// The data are rounded to the precision first, as the harness does (core/quantize.h); each case
// is checked against the CPU reference with the precision's bounds, must repeat bit for bit, and
// prints its measured errors ([ MEASURED ]). A too-large H is refused before anything runs,
// saying what fits. Skipped without a GPU.
// A stage whose planner runs several layers in one launch (LSTM_TC_HAS_WAVEFRONT,
// forward/19_tensor_core_layers_in_one_launch) adds wave_* cases with --layers-per-launch pinned:
// L = 2, 3, 4 and 5 (two launches) in one launch, odd H, B and I, batch groups, several chunks
// of K = 2H, batch slices; a refused --layers-per-launch names the most that fit; and its
// planner's choices at the H100's limits (run on the CPU too). One that holds W in registers
// (LSTM_TC_HAS_HELD_WEIGHTS, forward/23_weights_in_registers) adds held_* cases at H ~ 1000 and
// checks which plans hold it (on the CPU too); the pinned one-layer cases above of at most 256
// threads hold it too where a step is one chunk (wavefronts and several chunks never do). One
// whose wavefront layers hold W_hh (LSTM_TC_HAS_HELD_WAVEFRONT,
// forward/24_wavefront_with_weights_in_registers) adds wave_held_* cases, each of whose upper
// layers must hold it (odd H: h_{t-1}'s first rows in the layer below's chunk; B = 1; two k
// slices), and checks which launches hold it (on the CPU too); its wave_* cases of at most 256
// threads and one slice hold it too.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/quantize.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "plan.h"

#ifndef LSTM_TC_HAS_WAVEFRONT
#define LSTM_TC_HAS_WAVEFRONT 0
#endif
#ifndef LSTM_TC_HAS_ONE_CLUSTER
#define LSTM_TC_HAS_ONE_CLUSTER 0
#endif
#ifndef LSTM_TC_HAS_HELD_WEIGHTS
#define LSTM_TC_HAS_HELD_WEIGHTS 0
#endif
#ifndef LSTM_TC_HAS_HELD_WAVEFRONT
#define LSTM_TC_HAS_HELD_WAVEFRONT 0
#endif

namespace lstm::LSTM_STAGE_NAMESPACE {  // the stage's, as its build names it

std::unique_ptr<Stage> make();       // FP16 (stage.cu)
std::unique_ptr<Stage> make_bf16();  // BF16 (stage.cu)

namespace {

struct Case {
  const char* label;
  ProblemSize size;  // H, I, B, T, L
  const char* plan;  // --plan tile,threads,groups,rows ("" = the planner's)
  const char* layers_per_launch = "";  // --layers-per-launch (a wavefront stage; "" = planner's)
  bool held = false;                   // the plan must hold W in registers (the held_* cases)
  bool one_cluster = false;  // the plan must run the recurrence in clusters (the cluster_* cases)
  bool held_upper = false;   // every upper layer of a launch must hold W_hh (wave_held_* cases)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
    {"B1", ProblemSize{64, 64, 1, 9, 2}, ""},
    {"B3_odd_H_I_ne_H_L3", ProblemSize{37, 19, 3, 7, 3}, ""},
    {"L4_H_gt_I_B20", ProblemSize{96, 40, 20, 6, 4}, ""},
    {"B130_groups", ProblemSize{130, 50, 130, 5, 2}, ""},
    {"H1", ProblemSize{1, 3, 2, 4, 2}, ""},
    {"T1", ProblemSize{50, 30, 5, 1, 1}, ""},
    {"I_gt_H", ProblemSize{45, 100, 6, 5, 2}, ""},
    {"H520_B1", ProblemSize{520, 520, 1, 6, 1}, ""},
    {"H1000_B4", ProblemSize{1000, 200, 4, 5, 1}, ""},
    {"chunks_short_last", ProblemSize{300, 50, 64, 6, 2}, "16,128,1,0"},
    {"tile8_chunks", ProblemSize{300, 50, 64, 6, 1}, "8,256,1,0"},
    {"tile32_groups3", ProblemSize{257, 31, 70, 4, 1}, "32,256,3,0"},
    {"tile16_slices", ProblemSize{520, 30, 40, 4, 1}, "16,64,1,20"},
    {"threads512_B1_empty_k_slices", ProblemSize{64, 64, 1, 3, 3}, "8,512,1,0"},
    {"one_row_per_block", ProblemSize{66, 66, 5, 3, 2}, "8,128,1,1"},
#if LSTM_TC_HAS_WAVEFRONT
    {"wave_L2", ProblemSize{64, 40, 5, 7, 2}, "", "2"},
    {"wave_L3_odd_H_B_I", ProblemSize{37, 19, 3, 7, 3}, "", "3"},
    {"wave_L4_B1", ProblemSize{64, 64, 1, 9, 4}, "", "4"},
    {"wave_L4_groups2", ProblemSize{130, 50, 70, 5, 4}, "16,256,2,0", "4"},
    {"wave_L4_chunks_short_last", ProblemSize{300, 50, 64, 6, 4}, "32,512,1,0", "4"},
    {"wave_L3_slices", ProblemSize{70, 30, 40, 4, 3}, "16,256,1,16", "3"},
    {"wave_L5_two_launches", ProblemSize{96, 40, 20, 6, 5}, "", "3"},
    {"wave_L2_one_launch_per_layer", ProblemSize{96, 40, 20, 6, 2}, "", "1"},
#endif
#if LSTM_TC_HAS_HELD_WEIGHTS  // W in registers at H ~ 1000: 32 k tiles a warp; 15-16 of 16
    {"held_H1024_B16_32_tiles", ProblemSize{1024, 64, 16, 3, 1}, "8,256,2,0", "", true},
    {"held_H1000_B8_zero_tiles", ProblemSize{1000, 64, 8, 3, 1}, "8,256,1,0", "", true},
#endif
#if LSTM_TC_HAS_HELD_WAVEFRONT  // upper layers holding W_hh, W_ih's chunk from shared memory
    {"wave_held_L2_B64_groups4", ProblemSize{512, 512, 64, 5, 2}, "16,256,4,0", "2", false, false,
     true},
    {"wave_held_L3_odd_H_I", ProblemSize{100, 37, 10, 6, 3}, "8,256,0,0", "3", false, false, true},
    {"wave_held_L4_B1", ProblemSize{64, 64, 1, 9, 4}, "8,256,0,0", "4", false, false, true},
    {"wave_held_H1024_B4_two_k_slices", ProblemSize{1024, 1024, 4, 3, 2}, "8,256,1,0", "2", false,
     false, true},
#endif
#if LSTM_TC_HAS_ONE_CLUSTER  // the planner's choice (the cases above without --plan run it too)
    {"cluster_H512_B8_sixteen_owners", ProblemSize{512, 512, 8, 6, 1}, "", "", false, true},
    {"cluster_H600_B9_two_clusters_L2", ProblemSize{600, 100, 9, 5, 2}, "", "", false, true},
    {"cluster_H1_one_owner", ProblemSize{1, 3, 1, 4, 1}, "", "", false, true},
    {"cluster_H200_B40_T1", ProblemSize{200, 64, 40, 1, 1}, "", "", false, true},
#endif
  };
  return list;
}

const char* kPrecisions[] = {"fp16", "bf16"};

std::unique_ptr<Stage> make_stage(const std::string& precision, const std::string& plan,
                                  const std::string& layers_per_launch = "") {
  std::unique_ptr<Stage> stage = precision == "bf16" ? make_bf16() : make();
  if (!plan.empty()) apply_stage_flags(*stage, {"--plan", plan});
  if (!layers_per_launch.empty())
    apply_stage_flags(*stage, {"--layers-per-launch", layers_per_launch});
  return stage;
}

class TensorCores : public ::testing::TestWithParam<std::tuple<std::size_t, int>> {};

TEST_P(TensorCores, MatchesTheCpuReferenceWithinThePrecisionsBoundsAndRepeats) {
  SKIP_WITHOUT_GPU();
  const Case& c = cases()[std::get<0>(GetParam())];
  const std::string precision = kPrecisions[std::get<1>(GetParam())];
  std::unique_ptr<Stage> stage = make_stage(precision, c.plan, c.layers_per_launch);
  ASSERT_EQ(precision_name(stage->precision()), precision);
  if (c.held || c.one_cluster) {  // the path the case is named for is the one its plan takes
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const Plan plan = make_plan(c.size, device_limits(prop), parse_plan_request(c.plan));
    ASSERT_TRUE(plan.fits) << plan.why;
#if LSTM_TC_HAS_HELD_WEIGHTS
    EXPECT_TRUE(!c.held || plan.held_tiles > 0) << c.label << ": W not held";
#endif
#if LSTM_TC_HAS_ONE_CLUSTER
    EXPECT_TRUE(!c.one_cluster || plan.one_cluster) << c.label << ": not in clusters";
#endif
  }
#if LSTM_TC_HAS_HELD_WAVEFRONT
  if (c.held_upper) {  // every upper layer of every launch holds W_hh
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const NetworkPlan network = make_network_plan(
        c.size, device_limits(prop), parse_plan_request(c.plan, std::stoi(c.layers_per_launch)));
    ASSERT_TRUE(network.fits) << network.why;
    for (const LayerLaunch& launch : network.launches)
      for (std::size_t i = 1; i < launch.layers.size(); ++i)
        EXPECT_GT(launch.layers[i].held_tiles, 0)
            << c.label << ": W_hh not held" << network.describe();
  }
#endif
  LstmParams params = generate_params(c.size, 7);
  quantize_problem(stage->precision(), params);  // as run_stages does
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME " ") + precision + " " + c.label;
  const auto outputs = testing::run_twice(*stage, params, name);
  ASSERT_FALSE(outputs.empty());
  const CheckReport report = testing::check_against_reference(*stage, params, outputs);
  EXPECT_TRUE(report.passed()) << name << " " << c.size.describe() << "\n" << report.describe();
  EXPECT_EQ(report.tensors.size(), 3u);
  for (const TensorCheck& tensor : report.tensors) {
    std::cout << "[ MEASURED ] " << name << " " << c.size.describe() << " " << tensor.name
              << " relative_norm " << tensor.relative_norm << " max_absolute "
              << tensor.max_absolute << " (bound " << tensor.bound.max_relative_norm << ", "
              << tensor.bound.max_absolute << ")\n";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TensorCores,
    ::testing::Combine(::testing::Range<std::size_t>(0, cases().size()), ::testing::Range(0, 2)),
    [](const ::testing::TestParamInfo<TensorCores::ParamType>& info) {
      return std::string(cases()[std::get<0>(info.param)].label) + "_" +
             kPrecisions[std::get<1>(info.param)];
    });

TEST(TensorCoresLimits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  for (const char* precision : kPrecisions) {
    const std::string why =
        make_stage(precision, "")->unsupported_reason(ProblemSize{2048, 2048, 1, 10, 1}, prop);
    EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
    EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
    std::cout << "[ REFUSED ] " << precision << " H=2048: " << why << "\n";
  }
  // What the README states as the limit fits (the planner's answer on this GPU).
  const int largest = largest_hidden_that_fits(ProblemSize{2048, 2048, 1, 10, 1},
                                               device_limits(prop));
  EXPECT_GT(largest, 1320) << "no larger than stage 11's FP32 limit";
  std::cout << "[ LIMIT ] largest H that fits at B = 1: " << largest << "\n";
}

TEST(TensorCoresFlags, PrecisionFlagChoosesTheType) {
  std::unique_ptr<Stage> stage = make();
  EXPECT_EQ(stage->precision(), Precision::kFp16);
  apply_stage_flags(*stage, {"--precision", "bf16"});
  EXPECT_EQ(stage->precision(), Precision::kBf16);
  EXPECT_EQ(make_bf16()->precision(), Precision::kBf16);
  EXPECT_EQ(make_bf16()->tolerance("y").max_relative_norm,
            reduced_precision_tolerance(Precision::kBf16, "y").max_relative_norm);
  EXPECT_THROW(apply_stage_flags(*make(), {"--precision", "fp32"}), std::invalid_argument);
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "4,256"}), std::invalid_argument);
}

#if LSTM_TC_HAS_WAVEFRONT
// The planner at the H100's limits (132 SMs, 227 KiB a block): host code, runs without a GPU.
DeviceLimits h100_limits() {
  cudaDeviceProp prop{};
  prop.multiProcessorCount = 132;
  prop.sharedMemPerBlockOptin = 227 * 1024;
  return device_limits(prop);  // the stage's own reading of the properties
}

TEST(TensorCoresWavefront, TheCanonicalConfigFitsItsFourLayersInOneLaunch) {
  PlanRequest request;
  request.layers_per_launch = 4;  // the cost model's choice is two launches of two (below)
  const NetworkPlan network =
      make_network_plan(ProblemSize{512, 512, 64, 100, 4}, h100_limits(), request);
  ASSERT_TRUE(network.fits) << network.why;
  ASSERT_EQ(network.launches.size(), 1u) << network.describe();
  const LayerLaunch& launch = network.launches.front();
  ASSERT_EQ(launch.layers.size(), 4u);
  EXPECT_LE(launch.blocks(), 132);
  EXPECT_EQ(launch.layers[0].input_rows, 0);  // its input parts from cuBLAS
  for (std::size_t i = 1; i < launch.layers.size(); ++i) {
    EXPECT_EQ(launch.layers[i].input_rows, 512) << "upper layer " << i << ": W_ih on chip";
    EXPECT_EQ(launch.layers[i].batch_groups, launch.layers[0].batch_groups);
    EXPECT_EQ(launch.layers[i].group_batch, launch.layers[0].group_batch);
    EXPECT_EQ(launch.layers[i].tile_batch, launch.layers[0].tile_batch);
  }
  std::cout << "[ PLAN ] canonical:" << network.describe() << "\n";
}

TEST(TensorCoresWavefront, TheSplitIsChosenByItsEstimatedCost) {
  // git show 74e41ca:results/h100-sxm/new_stages_first_runs.txt (H100, FP16, call 6): at the
  // canonical config two launches of two layers were the fastest (1.454 ms; one launch of
  // four 2.486, one launch per layer 1.627); at H = 256, B = 64 one launch of four (0.759; two per
  // launch 0.826, one 1.131).
  const auto layers_per_launch = [](int hidden, int batch) {
    const NetworkPlan network =
        make_network_plan(ProblemSize{hidden, hidden, batch, 100, 4}, h100_limits());
    EXPECT_TRUE(network.fits) << network.why;
    std::cout << "[ PLAN ] H=" << hidden << " B=" << batch << ":" << network.describe() << "\n";
    return std::make_pair(static_cast<int>(network.launches.size()), network.layers_per_launch());
  };
#if LSTM_TC_HAS_HELD_WAVEFRONT
  // W_hh held in the wavefront's layers (forward 24; H100, session 70, call 1, in
  // `git show bdbcccd:results/h100-sxm/forward24_runs.txt`): at the canonical config two launches
  // of two, 1.208-1.219 ms, against
  // 1.290-1.291 for one launch a layer and 1.829-1.859 for one launch of four.
  EXPECT_EQ(layers_per_launch(512, 64), std::make_pair(2, 2));
#elif LSTM_TC_HAS_HELD_WEIGHTS
  // W in registers (forward 23; H200, results/h200/harness_runs.jsonl, session 56, call 2): at the
  // canonical config one launch a layer, 1.250 ms, against 1.339 for two launches of two.
  EXPECT_EQ(layers_per_launch(512, 64), std::make_pair(4, 1));
#else
  EXPECT_EQ(layers_per_launch(512, 64), std::make_pair(2, 2));
#endif
  EXPECT_EQ(layers_per_launch(256, 64), std::make_pair(1, 4));
  EXPECT_EQ(layers_per_launch(1024, 64), std::make_pair(4, 1));
}

TEST(TensorCoresWavefront, OneLayerRunsStage17sPlan) {
  const ProblemSize size{512, 512, 64, 100, 1};
  const NetworkPlan network = make_network_plan(size, h100_limits());
  const Plan single = make_plan(size, h100_limits());
  ASSERT_TRUE(network.fits);
  ASSERT_EQ(network.launches.size(), 1u);
  ASSERT_EQ(network.launches.front().layers.size(), 1u);
  EXPECT_EQ(network.launches.front().layers.front().describe(), single.describe());
}

TEST(TensorCoresWavefront, LayersThatDoNotFitTogetherRunStage17sLaunches) {
  // H = 1024, B = 64: two layers fit only with batch slices; the cost model keeps stage 17's.
  const NetworkPlan network = make_network_plan(ProblemSize{1024, 1024, 64, 100, 4}, h100_limits());
  ASSERT_TRUE(network.fits);
  EXPECT_EQ(network.layers_per_launch(), 1) << network.describe();
  EXPECT_EQ(network.launches.size(), 4u);
}

TEST(TensorCoresWavefront, APinnedCountThatDoesNotFitIsRefusedNamingTheMostThatFit) {
  PlanRequest request;
  request.layers_per_launch = 4;
  const NetworkPlan network =
      make_network_plan(ProblemSize{1024, 1024, 4, 100, 4}, h100_limits(), request);
  EXPECT_FALSE(network.fits);
  EXPECT_NE(network.why.find("4 layers do not fit in one launch"), std::string::npos)
      << network.why;
  EXPECT_NE(network.why.find("at most 2 do"), std::string::npos) << network.why;
  EXPECT_THROW(apply_stage_flags(*make(), {"--layers-per-launch", "9"}), std::invalid_argument);
}

TEST(TensorCoresWavefront, TooManyLayersPerLaunchAreRefusedBeforeLaunch) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  for (const char* precision : kPrecisions) {
    const std::string why =
        make_stage(precision, "", "4")->unsupported_reason(ProblemSize{1024, 1024, 4, 10, 4}, prop);
    EXPECT_NE(why.find("do not fit in one launch"), std::string::npos) << why;
    std::cout << "[ REFUSED ] " << precision << " H=1024 L=4 in one launch: " << why << "\n";
  }
}
#if LSTM_TC_HAS_HELD_WEIGHTS
// Which plans hold W's fragments in registers, at the H100's limits (host code).
TEST(TensorCoresHeldWeights, AWarpHoldsItsShareOfOneChunkUpTo32KTilesInBlocksOfAtMost256) {
  const auto plan = [](const ProblemSize& size, const std::string& pinned) {
    const Plan p = make_plan(size, h100_limits(), parse_plan_request(pinned));
    EXPECT_TRUE(p.fits) << p.why;
    std::cout << "[ PLAN ] " << size.describe() << " --plan " << pinned << ": " << p.describe()
              << "\n";
    return p;
  };
  const Plan held = plan(ProblemSize{1024, 64, 16, 3, 1}, "8,256,2,0");
  EXPECT_EQ(held.held_tiles, 32);  // 64 k tiles in two slices
  EXPECT_EQ(held.chunks, 1);
  Plan in_shared = held;
  in_shared.held_tiles = 0;  // the same plan with W in shared memory: its 64 rows x 1024
  EXPECT_EQ(shared_bytes_for(in_shared, 1024) - held.shared_bytes, 64u * 1024 * 2)
      << held.describe() << ": " << held.shared_bytes << " bytes";
  EXPECT_EQ(plan(ProblemSize{1000, 64, 8, 3, 1}, "8,256,1,0").held_tiles, 16) << "63 in 4 slices";
  EXPECT_EQ(plan(ProblemSize{1032, 64, 4, 3, 1}, "8,256,2,0").held_tiles, 0) << "33 a warp";
  EXPECT_EQ(plan(ProblemSize{1000, 64, 32, 3, 1}, "16,256,2,0").held_tiles, 0) << "two chunks";
  EXPECT_EQ(plan(ProblemSize{1024, 64, 16, 3, 1}, "8,512,2,0").held_tiles, 0)
      << "512 threads: 128 registers a thread";
#if !LSTM_TC_HAS_HELD_WAVEFRONT  // forward 24's wavefronts hold W_hh: its test below
  // A launch of several layers holds no W (the kernel is chosen by its first layer: stage.cu),
  // also where its plans could (H = 256: 256 threads, one chunk).
  for (const auto& [hidden, per_launch] : {std::pair{512, 4}, {256, 2}, {256, 0}}) {
    PlanRequest request;
    request.layers_per_launch = per_launch;
    const NetworkPlan network =
        make_network_plan(ProblemSize{hidden, hidden, 64, 100, 4}, h100_limits(), request);
    ASSERT_TRUE(network.fits) << network.why;
    for (const LayerLaunch& launch : network.launches)
      for (const Plan& p : launch.layers)
        if (launch.layers.size() > 1) {
          EXPECT_EQ(p.held_tiles, 0) << p.describe();
        }
  }
#endif
}
#endif  // LSTM_TC_HAS_HELD_WEIGHTS
#if LSTM_TC_HAS_HELD_WAVEFRONT
// Which layers of a wavefront launch hold W_hh, and what an upper one keeps in shared memory, at
// the H100's limits (host code).
TEST(TensorCoresHeldWavefront, AnUpperLayerHoldsWhhAndKeepsOnlyWihInSharedMemory) {
  const auto launch = [](const ProblemSize& size, const std::string& pinned, int layers) {
    const NetworkPlan network =
        make_network_plan(size, h100_limits(), parse_plan_request(pinned, layers));
    EXPECT_TRUE(network.fits) << network.why;
    std::cout << "[ PLAN ] " << size.describe() << " --plan " << pinned << ":" << network.describe()
              << "\n";
    return network.launches.front();
  };
  // The canonical config, two layers a launch: 16 blocks of 32 units a layer and batch group.
  const LayerLaunch two = launch(ProblemSize{512, 512, 64, 100, 4}, "", 2);
  ASSERT_EQ(two.layers.size(), 2u);
  const Plan& bottom = two.layers[0];
  const Plan& upper = two.layers[1];
  EXPECT_EQ(bottom.blocks(), upper.blocks()) << "equal shares";
  EXPECT_EQ(bottom.held_tiles, 32);
  EXPECT_EQ(bottom.chunks, 1);
  EXPECT_EQ(upper.held_tiles, 32);  // h_{t-1}'s 512 rows: 32 k tiles a warp
  EXPECT_EQ(upper.chunks, 2);
  EXPECT_EQ(upper.chunk_rows, 512);  // the layer below's h_t, then h_{t-1}
  Plan without_w_ih = upper;
  without_w_ih.chunks = 1;  // the same plan without the chunk multiplied from shared memory
  EXPECT_EQ(upper.shared_bytes - shared_bytes_for(without_w_ih, 512), 128u * 512 * 2)
      << "W_ih's 128 rows x 512 in shared memory, W_hh's none";
  // H = 100: chunks of 112 rows, so the first holds h_{t-1}'s first 12 beside x; 88 rows held.
  const LayerLaunch odd = launch(ProblemSize{100, 37, 10, 6, 3}, "8,256,0,0", 3);
  EXPECT_EQ(odd.layers[2].chunk_rows, 112);
  EXPECT_EQ(odd.layers[2].chunks, 2);
  EXPECT_GT(odd.layers[2].held_tiles, 0);
  // Batch slices and 512 threads keep W in shared memory (stage 23's rule), in proportional shares.
  const LayerLaunch sliced = launch(ProblemSize{130, 50, 70, 5, 4}, "16,256,2,0", 4);
  EXPECT_EQ(sliced.layers[1].held_tiles, 0);
  EXPECT_GT(sliced.layers[1].blocks(), sliced.layers[0].blocks());
  const LayerLaunch wide = launch(ProblemSize{512, 512, 64, 100, 4}, "0,512,0,0", 2);
  EXPECT_EQ(wide.layers[1].held_tiles, 0);
}
#endif  // LSTM_TC_HAS_HELD_WAVEFRONT
#endif  // LSTM_TC_HAS_WAVEFRONT

#if LSTM_TC_HAS_ONE_CLUSTER
// The cluster's planner at the H100's limits (227 KiB a block; 7 clusters of 16 resident, an
// assumption: more groups run in waves): host code, runs without a GPU.
TEST(TensorCoresOneCluster, TheRecurrenceRunsInClustersWhereWhhFitsInSixteenBlocks) {
  cudaDeviceProp prop{};
  prop.multiProcessorCount = 132;
  prop.sharedMemPerBlockOptin = 227 * 1024;
  DeviceLimits limits = device_limits(prop);
  limits.whole_clusters = 7;
  const auto plan = [&](int hidden, int batch, const PlanRequest& request = {}) {
    const Plan p = make_plan(ProblemSize{hidden, hidden, batch, 100, 1}, limits, request);
    EXPECT_TRUE(p.fits) << p.why;
    std::cout << "[ PLAN ] H=" << hidden << " B=" << batch << ": " << p.describe() << "\n";
    return p;
  };
  const Plan h512 = plan(512, 1);
  EXPECT_TRUE(h512.one_cluster);
  EXPECT_EQ(h512.units_per_block, 32);
  EXPECT_EQ(h512.blocks(), kOneCluster);
  EXPECT_EQ(h512.k_slices, 2);  // 16 tiles of 16 k tiles each, one per warp
  const Plan seven = plan(512, 56);
  EXPECT_TRUE(seven.one_cluster);
  EXPECT_EQ(seven.batch_groups, 7);
  EXPECT_EQ(plan(512, 9).group_batch, 5);  // two clusters of 5 and 4 rows
  EXPECT_TRUE(plan(600, 8).one_cluster);
  EXPECT_EQ(plan(512, 256).batch_groups, 32) << "more clusters than resident: waves";
  const Plan h700 = plan(700, 1);
  EXPECT_FALSE(h700.one_cluster) << "W_hh does not fit in 16 blocks";
  const Plan refused = plan_one_cluster(ProblemSize{700, 700, 1, 100, 1}, limits);
  EXPECT_FALSE(refused.fits);
  EXPECT_NE(refused.why.find("W_hh in 16 blocks of one cluster: 192 rows x 704"), std::string::npos)
      << refused.why;
  PlanRequest pinned;
  pinned.threads = 256;
  EXPECT_FALSE(plan(512, 1, pinned).one_cluster) << "--plan pins stage 17's kernel";
  limits.whole_clusters = 0;  // a GPU without clusters
  EXPECT_FALSE(plan(512, 1).one_cluster);
}
#endif  // LSTM_TC_HAS_ONE_CLUSTER

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
