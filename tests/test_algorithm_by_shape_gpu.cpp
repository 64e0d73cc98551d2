// Training stages 40 (training/40_algorithm_by_shape: training stage 38 or 15, by the shape) and
// 44 (LSTM_ALGORITHM_HAS_FP32_RECURRENCES: stage 20 for one layer of one batch row from H = 384,
// else 43 or 15).
// Without a GPU: the rule puts every standard configuration where the measurement put it and
// switches at its thresholds; the flags. On the GPU, in FP16 and BF16: with --algorithm pinned to
// each stage and left to the rule, every output and gradient against the FP64 reference and
// repeated bit for bit; the outputs are those of the stage the rule names, bit for bit (the
// persistent stage at a small step, stage 15 at a large one, stage 20 at one row in 44); one stage
// object runs a shape of each in turn; a pinned persistent stage that does not fit is refused
// with its reason, where the rule runs stage 15; a caller's gradients-ready hook hears every layer.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithm.h"
#include "core/quantize.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "stages_it_runs.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
std::unique_ptr<Stage> make();
std::unique_ptr<Stage> make_bf16();

namespace {

// ---- The rule (no GPU needed)

struct Expected {
  ProblemSize size;  // {H, I, B, T, L}
  Algorithm algorithm;
};

// The standard configurations and the stage that was faster there (README.md, "Measured":
// stage 15 and 38 in one run), except H = 512, B = 128 (stage 15 by 8%; the rule keeps 38).
// Stage 44: stage 20 at B = 1 (its README: stages 20 and 43 in one run).
TEST(AlgorithmByShapeRule, EveryStandardConfigurationGoesToTheFasterStage) {
  const Algorithm p = Algorithm::kPersistent, g = Algorithm::kGemms;
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
  const Algorithm one_row = Algorithm::kFp32Recurrences;
#else
  const Algorithm one_row = p;
#endif
  const std::vector<Expected> expected = {
      {{512, 512, 1, 100, 1}, one_row},   {{512, 512, 64, 100, 1}, p},
      {{512, 512, 128, 100, 1}, p},       {{512, 512, 256, 100, 1}, g},
      {{1024, 1024, 1, 100, 1}, one_row}, {{1024, 1024, 16, 100, 1}, p},
      {{1024, 1024, 32, 100, 1}, p},      {{1024, 1024, 64, 100, 1}, g},
      {{1024, 1024, 256, 100, 1}, g},     {{256, 256, 64, 100, 4}, p},
      {{512, 512, 64, 100, 4}, g},        {{1024, 1024, 64, 100, 4}, g},
      {{2048, 2048, 64, 100, 4}, g},      {{768, 768, 16, 1024, 1}, p},
  };
  for (const Expected& e : expected)
    EXPECT_EQ(algorithm_for(e.size), e.algorithm)
        << e.size.describe() << ": " << wavefront_step_macs(e.size) << " multiply-adds a step";
}

TEST(AlgorithmByShapeRule, SwitchesAtTheThreshold) {
  // 4 H^2 B L: H = 1000, L = 1, B = 50 gives exactly 2e8.
  EXPECT_EQ(wavefront_step_macs(ProblemSize{1000, 1000, 50, 10, 1}), kGemmsFromMacs);
  EXPECT_EQ(algorithm_for(ProblemSize{1000, 1000, 50, 10, 1}), Algorithm::kGemms);
  EXPECT_EQ(algorithm_for(ProblemSize{1000, 1000, 49, 10, 1}), Algorithm::kPersistent);
  // The layers count: the same step at L = 2 is twice the work (stage 15 runs them at once).
  EXPECT_EQ(algorithm_for(ProblemSize{1000, 1000, 25, 10, 1}), Algorithm::kPersistent);
  EXPECT_EQ(algorithm_for(ProblemSize{1000, 1000, 25, 10, 2}), Algorithm::kGemms);
  // T and I do not.
  EXPECT_EQ(algorithm_for(ProblemSize{1000, 10, 49, 5000, 1}), Algorithm::kPersistent);
}

#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
TEST(AlgorithmByShapeRule, FP32RecurrencesForOneLayerOfOneBatchRow) {
  const Algorithm f = Algorithm::kFp32Recurrences, p = Algorithm::kPersistent;
  const std::vector<Expected> expected = {
      // One layer of one row from H = 384 on: stage 20 (H = 512-1024 measured, T = 100 and 1024).
      {{384, 384, 1, 100, 1}, f},
      {{512, 512, 1, 100, 1}, f},
      {{768, 768, 1, 1024, 1}, f},
      {{1024, 64, 1, 100, 1}, f},
      {{5000, 64, 1, 10, 1}, f},
      // Smaller H, more rows, more layers: stage 43 (H = 256, B = 2, L = 4 measured).
      {{383, 383, 1, 100, 1}, p},
      {{256, 256, 1, 100, 1}, p},
      {{37, 19, 1, 7, 1}, p},
      {{512, 512, 2, 100, 1}, p},
      {{1024, 1024, 2, 100, 1}, p},
      {{512, 512, 1, 100, 2}, p},
      {{512, 512, 1, 100, 4}, p},
  };
  for (const Expected& e : expected)
    EXPECT_EQ(algorithm_for(e.size), e.algorithm) << e.size.describe();
  // One row of a step as large as the threshold is still a matrix product for the GEMMs:
  // 4 x 7072^2 x 1 x 1 > 2e8.
  EXPECT_EQ(algorithm_for(ProblemSize{7072, 64, 1, 10, 1}), Algorithm::kGemms);
}
#endif

TEST(AlgorithmByShapeFlags, AlgorithmAndPrecision) {  // no GPU needed
  std::unique_ptr<Stage> stage = make();
  EXPECT_EQ(stage->precision(), Precision::kFp16);
  EXPECT_EQ(stage->kind(), StageKind::kTraining);
  apply_stage_flags(*stage, {"--precision", "bf16", "--algorithm", "gemms"});
  EXPECT_EQ(stage->precision(), Precision::kBf16);
  EXPECT_EQ(make_bf16()->precision(), Precision::kBf16);
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
  apply_stage_flags(*stage, {"--algorithm", "fp32_recurrences"});
#endif
  for (const char* bad : {"fastest", "", "GEMMS"})
    EXPECT_THROW(apply_stage_flags(*make(), {"--algorithm", bad}), std::invalid_argument) << bad;
}

// ---- On the GPU

const char* kPrecisions[] = {"fp16", "bf16"};

std::unique_ptr<Stage> make_stage(const std::string& precision,
                                  const std::vector<std::string>& flags) {
  std::unique_ptr<Stage> stage = precision == "bf16" ? make_bf16() : make();
  if (!flags.empty()) apply_stage_flags(*stage, flags);
  return stage;
}

struct Problem {
  LstmParams params;
  UpstreamGradients upstream;
};

Problem problem_for(const ProblemSize& size, Precision precision) {
  Problem p{generate_params(size, 21), generate_upstream(size, 22)};
  quantize_problem(precision, p.params, &p.upstream);  // as run_stages does
  return p;
}

struct Case {
  const char* label;
  ProblemSize size;
  const char* algorithm;  // --algorithm
};

// Odd shapes through every stage; "auto" at a small step (the persistent stage) and at a large one
// (stage 15: 4 x 256^2 x 256 x 4 = 2.7e8 multiply-adds), and in 44 at one row (stage 20).
const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
      {"fp32_recurrences_odd_H_I_L3", ProblemSize{37, 19, 3, 7, 3}, "fp32_recurrences"},
      {"auto_one_row", ProblemSize{400, 50, 1, 5, 1}, "auto"},
#endif
      {"persistent_odd_H_I_L3", ProblemSize{37, 19, 3, 7, 3}, "persistent"},
      {"persistent_B1_T1", ProblemSize{64, 64, 1, 1, 2}, "persistent"},
      {"gemms_odd_H_I_L3", ProblemSize{37, 19, 3, 7, 3}, "gemms"},
      {"gemms_I_gt_H_B1", ProblemSize{45, 100, 1, 5, 2}, "gemms"},
      {"auto_small_step", ProblemSize{48, 20, 5, 6, 2}, "auto"},
      {"auto_large_step", ProblemSize{256, 64, 256, 3, 4}, "auto"},
  };
  return list;
}

class AlgorithmByShape : public ::testing::TestWithParam<std::tuple<std::size_t, int>> {};

TEST_P(AlgorithmByShape, MatchesTheReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const Case& c = cases()[std::get<0>(GetParam())];
  const std::string precision = kPrecisions[std::get<1>(GetParam())];
  std::unique_ptr<Stage> stage = make_stage(precision, {"--algorithm", c.algorithm});
  const Problem p = problem_for(c.size, stage->precision());
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME) + " " + precision + " " + c.label;
  const auto outputs = testing::run_twice(*stage, p.params, name, &p.upstream);
  ASSERT_FALSE(outputs.empty());
  const CheckReport report =
      testing::check_against_reference(*stage, p.params, outputs, &p.upstream);
  EXPECT_TRUE(report.passed()) << name << " " << c.size.describe() << "\n" << report.describe();
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Shapes, AlgorithmByShape,
                         ::testing::Combine(::testing::Range<std::size_t>(0, cases().size()),
                                            ::testing::Range(0, 2)),
                         [](const ::testing::TestParamInfo<AlgorithmByShape::ParamType>& info) {
                           return std::string(cases()[std::get<0>(info.param)].label) + "_" +
                                  kPrecisions[std::get<1>(info.param)];
                         });

/// The outputs of one checked pass of `stage` on `p`.
std::vector<OutputTensor> one_pass(Stage& stage, const Problem& p) {
  return testing::one_checked_pass(stage, p.params, &p.upstream);
}

// With the rule choosing, the outputs are those of the stage it names, bit for bit.
TEST(AlgorithmByShapeDelegation, TheRulesStageComputesEveryOutput) {
  SKIP_WITHOUT_GPU();
  for (const char* precision : kPrecisions) {
    const bool bf16 = std::string(precision) == "bf16";
    for (const ProblemSize& size : {ProblemSize{48, 20, 5, 6, 2}, ProblemSize{256, 64, 256, 3, 4},
                                    ProblemSize{400, 50, 1, 5, 1}}) {
      const Algorithm algorithm = algorithm_for(size);
      std::unique_ptr<Stage> chosen = make_stage(precision, {});
      std::unique_ptr<Stage> expected =
          algorithm == Algorithm::kGemms ? (bf16 ? gemms::make_bf16() : gemms::make())
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
          : algorithm == Algorithm::kFp32Recurrences
              ? (bf16 ? fp32_recurrences::make_bf16() : fp32_recurrences::make())
#endif
              : (bf16 ? persistent::make_bf16() : persistent::make());
      const Problem p = problem_for(size, chosen->precision());
      testing::expect_same_bits(one_pass(*chosen, p), one_pass(*expected, p),
                                std::string(precision) + " " + size.describe() + ", the stage of " +
                                    algorithm_name(algorithm));
    }
  }
}

// One stage object prepared for a shape of each stage in turn (the first stage's memory freed
// when the second is prepared): each pass against the reference.
TEST(AlgorithmByShapeDelegation, OneStageRunsAShapeOfEachInTurn) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Stage> stage = make_stage("fp16", {});
  std::vector<ProblemSize> sizes = {ProblemSize{48, 20, 5, 6, 2}, ProblemSize{256, 64, 256, 3, 4},
                                    ProblemSize{40, 24, 3, 5, 1}};
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
  sizes.insert(sizes.begin() + 2, ProblemSize{400, 50, 1, 5, 1});  // stage 20's, then back
  ASSERT_EQ(algorithm_for(sizes[2]), Algorithm::kFp32Recurrences);
#endif
  for (const ProblemSize& size : sizes) {
    const Problem p = problem_for(size, stage->precision());
    const std::vector<OutputTensor> outputs = one_pass(*stage, p);
    ASSERT_FALSE(outputs.empty()) << size.describe();
    const CheckReport report =
        testing::check_against_reference(*stage, p.params, outputs, &p.upstream);
    EXPECT_TRUE(report.passed()) << size.describe() << "\n" << report.describe();
  }
}

// H = 3000 does not fit the persistent stage's plan on chip (its W_hh alone is 72 MB in 16 bits),
// though its step is small: pinned, it is refused with its reason; left to the rule, stage 15 runs
// it. In 44 at one row too, past stage 20 (144 MB in FP32), which is refused alike.
TEST(AlgorithmByShapeLimits, StageFifteenWhereThePersistentStageDoesNotFit) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const ProblemSize size{3000, 3000, 2, 10, 1};
  ASSERT_EQ(algorithm_for(size), Algorithm::kPersistent);  // by the shape alone
  const std::string pinned =
      make_stage("fp16", {"--algorithm", "persistent"})->unsupported_reason(size, prop);
  EXPECT_NE(pinned.find("do not fit on chip"), std::string::npos) << pinned;
  EXPECT_EQ(make_stage("fp16", {})->unsupported_reason(size, prop), "");
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
  const ProblemSize one_row{3000, 3000, 1, 10, 1};
  ASSERT_EQ(algorithm_for(one_row), Algorithm::kFp32Recurrences);
  for (const char* pinned_one : {"fp32_recurrences", "persistent"}) {
    const std::string why =
        make_stage("fp16", {"--algorithm", pinned_one})->unsupported_reason(one_row, prop);
    EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << pinned_one << ": " << why;
  }
  EXPECT_EQ(make_stage("fp16", {})->unsupported_reason(one_row, prop), "");
#endif
}

// Data-parallel training waits on a layer's gradients through the hook (stage.h): the persistent
// stages call it once a layer, and a caller of this stage must hear it.
TEST(AlgorithmByShapeHook, TheCallersHookHearsEveryLayer) {
  SKIP_WITHOUT_GPU();
  const ProblemSize size{40, 24, 3, 5, 3};
  for (const char* pinned : {
           "persistent",
#ifdef LSTM_ALGORITHM_HAS_FP32_RECURRENCES
           "fp32_recurrences",
#endif
       }) {
    std::unique_ptr<Stage> stage = make_stage("fp16", {"--algorithm", pinned});
    const Problem p = problem_for(size, stage->precision());
    std::vector<int> every(size.layers);
    for (int l = 0; l < size.layers; ++l)
      every[l] = l;
    EXPECT_EQ(testing::layers_reported_ready(*stage, p.params, &p.upstream), every) << pinned;
  }
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
