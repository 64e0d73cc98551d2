// A persistent forward stage with batch groups on the GPU (forward/11_batch_groups,
// forward/12_small_batch_registers: this source is compiled once per stage, in the stage's
// namespace beside its headers, with LSTM_STAGE_DISPLAY_NAME naming it and
// LSTM_PLAN_HAS_REGISTER_KERNEL where it also has stage 12's register kernel; tests/CMakeLists.txt)
// with its plan pinned through its own flags (--plan, and --weights, --input where it has the
// register kernel, as its executable takes them), so that every path of its persistent kernels
// runs. Shared-memory kernel: all register-tile widths, 64 to 512 threads, several chunks of h per
// step, several batch groups, batch slices with a partly empty last group, H not a multiple of 4.
// Register kernel: 8 and 32 weights per lane, batch tiles 1, 2, 4 and 8 with padding columns,
// float4 and scalar staging, units that do not fill a power of two of lanes, a partly empty last
// block and last k slice, input parts computed in the kernel (I != H) or by cuBLAS. Several layers
// in one launch (LSTM_PLAN_HAS_WAVEFRONT, forward/18_layers_in_one_launch): L = 2, 3, 4 and 8 in
// one launch, 4 in two, 3 in a launch of two and one of the register kernel, odd H, B and I,
// chunks that straddle the two layers' rows, batch slices. Each case is checked against the CPU
// reference and must repeat bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "plan.h"

#ifndef LSTM_PLAN_HAS_REGISTER_KERNEL
#define LSTM_PLAN_HAS_REGISTER_KERNEL 0
#endif
#ifndef LSTM_PLAN_HAS_WAVEFRONT
#define LSTM_PLAN_HAS_WAVEFRONT 0
#endif

namespace lstm::LSTM_STAGE_NAMESPACE {  // the stage's, as its build names it
std::unique_ptr<Stage> make();

namespace {

struct PinnedCase {
  const char* label;
  ProblemSize size;
  const char* flags;   ///< the stage's flags: --plan tile,threads,groups,rows; --weights, --input
  int k_per_lane = 0;  ///< register-kernel cases: the weights per lane the case must reach
  int tile_batch = 0;  ///< and the batch tile (checked against the planner: cases cannot drift)
  int layers_per_launch = 0;  ///< wavefront cases: the most layers of a launch the case reaches
};

const std::vector<PinnedCase>& cases() {
  static const std::vector<PinnedCase> list = {
    // The shared-memory kernel.
    {"tile4_chunks", ProblemSize{300, 50, 64, 6, 2}, "--plan 4,64,1"},
    {"tile8_chunks", ProblemSize{300, 50, 64, 6, 2}, "--plan 8,64,1"},
    {"groups2_slices", ProblemSize{130, 20, 10, 5, 2}, "--plan 4,128,2,3"},
    {"groups2_slices_tile8", ProblemSize{130, 20, 10, 5, 2}, "--plan 8,128,2,3"},
    {"groups3_tile8_odd_h", ProblemSize{257, 31, 7, 4, 1}, "--plan 8,256,3"},
    {"one_row_per_block", ProblemSize{66, 66, 5, 3, 2}, "--plan 4,96,1,1"},
    {"threads512_B1", ProblemSize{64, 64, 1, 3, 3}, "--plan 4,512,1"},
    {"tile16_groups2", ProblemSize{200, 40, 70, 5, 2}, "--plan 16,128,2"},
    {"tile16_chunks_slices", ProblemSize{520, 30, 40, 4, 1}, "--plan 16,64,1,20"},
    {"auto_large_batch", ProblemSize{96, 40, 300, 3, 1}, ""},
#if LSTM_PLAN_HAS_REGISTER_KERNEL
    // The register kernel.
    {"registers_k8_b1", ProblemSize{200, 50, 1, 6, 2}, "--weights registers --input kernel", 8, 1},
    {"registers_k8_b2_scalar_staging", ProblemSize{37, 50, 2, 5, 2},
     "--weights registers --input kernel", 8, 2},
    {"registers_k8_b1_scalar_two_warps", ProblemSize{201, 20, 1, 5, 2},
     "--weights registers --input kernel", 8, 1},
    {"registers_k8_b3_padded_units", ProblemSize{300, 40, 3, 5, 1},
     "--weights registers --input kernel", 8, 4},
    {"registers_k8_b5_three_layers", ProblemSize{130, 20, 5, 5, 3},
     "--weights registers --input kernel", 8, 8},
    {"registers_k32_b1", ProblemSize{1024, 1024, 1, 3, 1}, "--weights registers --input kernel", 32,
     1},
    {"registers_k8_b3_input_gemm", ProblemSize{300, 40, 3, 5, 2},
     "--weights registers --input gemm", 8, 4},
    {"registers_k8_b3_input_gemm_pinned_k", ProblemSize{300, 40, 3, 5, 2},
     "--weights registers,8 --input gemm", 8, 4},
    {"registers_k32_b2_input_gemm", ProblemSize{700, 33, 2, 4, 2},
     "--weights registers --input gemm", 32, 2},
    {"registers_k32_b4", ProblemSize{700, 33, 4, 4, 2}, "--weights registers --input kernel", 32,
     4},
    {"registers_k32_b7_partial_block", ProblemSize{900, 64, 7, 3, 1},
     "--weights registers --input kernel", 32, 8},
#endif
#if LSTM_PLAN_HAS_WAVEFRONT
    // Several layers in one launch: the shared-memory kernel, an upper layer's k range its
    // input rows and then its own h's.
    {"wave_l2_odd_scalar", ProblemSize{37, 11, 5, 6, 2}, "--layers-per-launch 2", 0, 0, 2},
    {"wave_l3_float4", ProblemSize{64, 64, 9, 5, 3}, "--layers-per-launch 3", 0, 0, 3},
    {"wave_l4_odd_b3", ProblemSize{130, 7, 3, 5, 4}, "--layers-per-launch 4", 0, 0, 4},
    {"wave_l4_in_two_launches", ProblemSize{96, 40, 64, 5, 4}, "--layers-per-launch 2", 0, 0, 2},
    {"wave_l3_two_then_registers", ProblemSize{48, 20, 3, 4, 3}, "--layers-per-launch 2", 0, 0, 2},
    {"wave_l2_chunks_slices", ProblemSize{200, 30, 70, 4, 2},
     "--plan 8,64,0,20 --layers-per-launch 2", 0, 0, 2},
    {"wave_l2_tile16", ProblemSize{300, 50, 64, 6, 2}, "--plan 16,256 --layers-per-launch 2", 0, 0,
     2},
    {"wave_l2_h512_b64", ProblemSize{512, 512, 64, 4, 2}, "--layers-per-launch 2", 0, 0, 2},
    {"wave_l8", ProblemSize{32, 32, 16, 5, 8}, "", 0, 0, 8},
    {"wave_l3_b1", ProblemSize{64, 64, 1, 4, 3}, "--layers-per-launch 3", 0, 0, 3},
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
  // The plan the flags give fits (a case that stopped fitting would test the refusal instead);
  // where the stage has the register kernel, a case reaches the kernel it names, and a register
  // case its weights per lane, batch tile and input parts.
  const PlanRequest request = testing::parse_stage_flags<StageFlags>(flags).request;
  const Plan plan = make_plan(c.size, device_limits(prop), request);
  ASSERT_TRUE(plan.fits) << c.flags << ": " << plan.why;
#if LSTM_PLAN_HAS_WAVEFRONT
  const NetworkPlan network = make_network_plan(c.size, device_limits(prop), request);
  ASSERT_TRUE(network.fits) << c.flags << ": " << network.why;
  EXPECT_EQ(network.layers_per_launch(), c.layers_per_launch ? c.layers_per_launch : 1)
      << network.describe();
#endif
#if LSTM_PLAN_HAS_REGISTER_KERNEL
  if (!c.layers_per_launch) {
    EXPECT_EQ(plan.weights_in_registers, c.k_per_lane != 0) << plan.describe();
  }
  if (c.k_per_lane) {
    EXPECT_EQ(plan.k_per_lane, c.k_per_lane) << plan.describe();
    EXPECT_EQ(plan.tile_batch, c.tile_batch) << plan.describe();
    EXPECT_EQ(plan.input_k_per_lane == 0, request.input == InputParts::kGemm) << plan.describe();
  }
#endif
  const LstmParams params = generate_params(c.size, 7);
  std::unique_ptr<Stage> stage = testing::make_with_flags(make, flags);
  ASSERT_TRUE(stage);
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME " ") + c.label;
  const auto first = testing::run_twice(*stage, params, name);
  const CheckReport report = testing::check_against_reference(*stage, params, first);
  EXPECT_TRUE(report.passed()) << name << " " << c.size.describe() << " " << c.flags << " ("
                               << plan.describe() << ")\n"
                               << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Plans, Pinned, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

TEST(Limits, TooLargeHiddenIsRefusedBeforeLaunchSayingWhatFits) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string why = make()->unsupported_reason(ProblemSize{4000, 4000, 64, 10, 1}, prop);
  EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << why;
  EXPECT_NE(why.find("largest H that fits"), std::string::npos) << why;
}

TEST(Flags, TheStageRefusesABadPlan) {  // no GPU needed: refused before anything runs
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "5"}), std::invalid_argument);
}

#if LSTM_PLAN_HAS_WAVEFRONT
TEST(Limits, TooManyLayersForOneLaunchAreRefusedSayingHowManyFit) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::unique_ptr<Stage> stage = testing::make_with_flags(make, {"--layers-per-launch", "4"});
  ASSERT_TRUE(stage);
  const std::string why = stage->unsupported_reason(ProblemSize{512, 512, 64, 100, 4}, prop);
  EXPECT_NE(why.find("4 layers do not fit in one launch"), std::string::npos) << why;
  EXPECT_NE(why.find("at most"), std::string::npos) << why;
  // Unpinned, the same network runs (in launches that fit).
  EXPECT_EQ(make()->unsupported_reason(ProblemSize{512, 512, 64, 100, 4}, prop), "");
}
#endif

#if LSTM_PLAN_HAS_REGISTER_KERNEL
TEST(Flags, TheStageRefusesBadOrContradictoryPins) {  // no GPU needed
  EXPECT_THROW(apply_stage_flags(*make(), {"--weights", "smem"}), std::invalid_argument);
  EXPECT_THROW(apply_stage_flags(*make(), {"--plan", "4,256", "--weights", "registers"}),
               std::invalid_argument);
}
#endif

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
