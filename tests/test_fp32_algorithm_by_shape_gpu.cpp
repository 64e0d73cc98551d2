// Training stage 46 (training/46_fp32_algorithm_by_shape: training stage 25, 13, 05 or 04, by the
// shape, all in FP32).
// Without a GPU: the rule puts every standard configuration where the measurement put it and
// switches at its thresholds; the flags. On the GPU: with --algorithm pinned to each stage and
// left to the rule, every output and gradient against the FP64 reference and repeated bit for
// bit; the outputs are those of the stage the rule names, bit for bit, at a shape of each; one
// stage object runs a shape of each in turn; pinned persistent stages that do not fit are refused
// with their reason, where the rule runs per-step GEMMs; a caller's gradients-ready hook hears
// every layer.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "algorithm.h"
#include "gpu_test_support.h"
#include "harness/checked_run.h"
#include "harness/stage_main.h"
#include "stages_it_runs.h"

namespace lstm::LSTM_STAGE_NAMESPACE {
std::unique_ptr<Stage> make();

namespace {

// ---- The rule (no GPU needed)

struct Expected {
  ProblemSize size;  // {H, I, B, T, L}
  Algorithm algorithm;
};

// The standard configurations, and the other shapes of the harness's sweep, and the stage that
// was faster there (README.md, "The idea": the four stages in one run).
TEST(Fp32AlgorithmByShapeRule, EveryMeasuredShapeGoesToTheFasterStage) {
  const Algorithm p = Algorithm::kPersistent, s = Algorithm::kPartialSums,
                  w = Algorithm::kLayerWavefront, g = Algorithm::kLayerByLayer;
  std::vector<Expected> expected;
  const Algorithm h512[] = {p, p, p, p, s, s, s, g, g}, h1024[] = {p, p, s, s, s, g, g, g, g};
  for (int i = 0, b = 1; b <= 256; ++i, b *= 2) {
    expected.push_back({{512, 512, b, 100, 1}, h512[i]});
    expected.push_back({{1024, 1024, b, 100, 1}, h1024[i]});
  }
  for (const Expected& e : std::vector<Expected>{{{256, 256, 64, 100, 4}, w},
                                                 {{512, 512, 64, 100, 4}, w},
                                                 {{1024, 1024, 64, 100, 4}, g},
                                                 {{2048, 2048, 64, 100, 4}, g},
                                                 {{512, 512, 4, 100, 4}, p},
                                                 {{512, 512, 16, 100, 4}, s},
                                                 {{512, 512, 32, 100, 4}, s},
                                                 {{1024, 1024, 4, 100, 4}, s},
                                                 {{1024, 1024, 16, 100, 4}, s},
                                                 {{512, 512, 32, 100, 2}, s}})
    expected.push_back(e);
  for (const Expected& e : expected)
    EXPECT_EQ(algorithm_for(e.size), e.algorithm)
        << e.size.describe() << ": " << algorithm_name(algorithm_for(e.size));
}

TEST(Fp32AlgorithmByShapeRule, SwitchesAtTheThresholds) {
  // A layer's step, 4 H^2 B: H = 500, B = 100 gives exactly 1e8, whatever the layers.
  EXPECT_EQ(layer_step_macs(ProblemSize{500, 500, 100, 10, 1}), kGemmsFromMacs);
  EXPECT_EQ(algorithm_for(ProblemSize{500, 500, 100, 10, 1}), Algorithm::kLayerByLayer);
  EXPECT_EQ(algorithm_for(ProblemSize{500, 500, 100, 10, 3}), Algorithm::kLayerByLayer);
  EXPECT_EQ(algorithm_for(ProblemSize{500, 500, 99, 10, 1}), Algorithm::kPartialSums);
  // The wavefront: 64 rows over two layers or more.
  EXPECT_EQ(algorithm_for(ProblemSize{256, 256, 64, 10, 2}), Algorithm::kLayerWavefront);
  EXPECT_EQ(algorithm_for(ProblemSize{256, 256, 63, 10, 2}), Algorithm::kPartialSums);
  EXPECT_EQ(algorithm_for(ProblemSize{256, 256, 64, 10, 1}), Algorithm::kPartialSums);
  EXPECT_EQ(algorithm_for(ProblemSize{64, 64, 99, 10, 4}), Algorithm::kLayerWavefront);
  // Stage 13: H = 500, B = 12 gives exactly 1.2e7.
  EXPECT_EQ(layer_step_macs(ProblemSize{500, 500, 12, 10, 1}), kPartialSumsFromMacs);
  EXPECT_EQ(algorithm_for(ProblemSize{500, 500, 12, 10, 1}), Algorithm::kPartialSums);
  EXPECT_EQ(algorithm_for(ProblemSize{500, 500, 11, 10, 1}), Algorithm::kPersistent);
  EXPECT_EQ(algorithm_for(ProblemSize{500, 500, 11, 10, 4}), Algorithm::kPersistent);
  // T and I do not count.
  EXPECT_EQ(algorithm_for(ProblemSize{500, 10, 99, 5000, 1}), Algorithm::kPartialSums);
}

TEST(Fp32AlgorithmByShapeFlags, Algorithm) {  // no GPU needed
  std::unique_ptr<Stage> stage = make();
  EXPECT_EQ(stage->precision(), Precision::kFp32);
  EXPECT_EQ(stage->kind(), StageKind::kTraining);
  for (const char* good :
       {"auto", "persistent", "partial_sums", "layer_wavefront", "layer_by_layer"})
    apply_stage_flags(*make(), {"--algorithm", good});
  for (const char* bad : {"fastest", "", "gemms", "PERSISTENT", "--precision"})
    EXPECT_THROW(apply_stage_flags(*make(), {"--algorithm", bad}), std::invalid_argument) << bad;
  EXPECT_THROW(apply_stage_flags(*make(), {"--precision", "fp16"}), std::invalid_argument);
}

// ---- On the GPU

std::unique_ptr<Stage> make_stage(const std::vector<std::string>& flags) {
  std::unique_ptr<Stage> stage = make();
  if (!flags.empty()) apply_stage_flags(*stage, flags);
  return stage;
}

struct Problem {
  LstmParams params;
  UpstreamGradients upstream;
};

Problem problem_for(const ProblemSize& size) {
  return Problem{generate_params(size, 21), generate_upstream(size, 22)};
}

// A shape the rule gives to each stage: persistent (4 x 48^2 x 5 = 4.6e4 multiply-adds a layer's
// step), partial sums (4 x 300^2 x 40 = 1.4e7), the wavefront (64 rows, 2 layers) and layer by
// layer (4 x 256^2 x 400 = 1.05e8).
const std::vector<ProblemSize>& shape_of_each() {
  static const std::vector<ProblemSize> shapes = {
      {48, 20, 5, 6, 2}, {300, 40, 40, 4, 1}, {64, 24, 64, 5, 2}, {256, 64, 400, 3, 1}};
  return shapes;
}

struct Case {
  const char* label;
  ProblemSize size;
  const char* algorithm;  // --algorithm
};

// Odd shapes through every stage; "auto" at a shape of each.
const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
      {"persistent_odd_H_I_L3", ProblemSize{37, 19, 3, 7, 3}, "persistent"},
      {"persistent_B1_T1", ProblemSize{64, 64, 1, 1, 2}, "persistent"},
      {"partial_sums_odd_H_I_L3", ProblemSize{37, 19, 3, 7, 3}, "partial_sums"},
      {"layer_wavefront_odd_H_I_L3", ProblemSize{37, 19, 3, 7, 3}, "layer_wavefront"},
      {"layer_by_layer_I_gt_H_B1", ProblemSize{45, 100, 1, 5, 2}, "layer_by_layer"},
      {"auto_persistent", shape_of_each()[0], "auto"},
      {"auto_partial_sums", shape_of_each()[1], "auto"},
      {"auto_layer_wavefront", shape_of_each()[2], "auto"},
      {"auto_layer_by_layer", shape_of_each()[3], "auto"},
  };
  return list;
}

class Fp32AlgorithmByShape : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Fp32AlgorithmByShape, MatchesTheReferenceAndRepeats) {
  SKIP_WITHOUT_GPU();
  const Case& c = cases()[GetParam()];
  std::unique_ptr<Stage> stage = make_stage({"--algorithm", c.algorithm});
  const Problem p = problem_for(c.size);
  const std::string name = std::string(LSTM_STAGE_DISPLAY_NAME) + " " + c.label;
  const auto outputs = testing::run_twice(*stage, p.params, name, &p.upstream);
  ASSERT_FALSE(outputs.empty());
  const CheckReport report =
      testing::check_against_reference(*stage, p.params, outputs, &p.upstream);
  EXPECT_TRUE(report.passed()) << name << " " << c.size.describe() << "\n" << report.describe();
  EXPECT_TRUE(report.not_checked.empty()) << report.describe();
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fp32AlgorithmByShape,
                         ::testing::Range<std::size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(cases()[info.param].label);
                         });

/// The outputs of one checked pass of `stage` on `p`.
std::vector<OutputTensor> one_pass(Stage& stage, const Problem& p) {
  return testing::one_checked_pass(stage, p.params, &p.upstream);
}

std::unique_ptr<Stage> make_the_stage_of(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kPersistent:
      return persistent::make();
    case Algorithm::kPartialSums:
      return partial_sums::make();
    case Algorithm::kLayerWavefront:
      return layer_wavefront::make();
    case Algorithm::kLayerByLayer:
      break;
  }
  return layer_by_layer::make();
}

// With the rule choosing, the outputs are those of the stage it names, bit for bit; the four
// shapes name the four stages.
TEST(Fp32AlgorithmByShapeDelegation, TheRulesStageComputesEveryOutput) {
  SKIP_WITHOUT_GPU();
  std::vector<Algorithm> named;
  for (const ProblemSize& size : shape_of_each()) {
    const Algorithm algorithm = algorithm_for(size);
    named.push_back(algorithm);
    std::unique_ptr<Stage> chosen = make_stage({}), expected = make_the_stage_of(algorithm);
    const Problem p = problem_for(size);
    testing::expect_same_bits(one_pass(*chosen, p), one_pass(*expected, p),
                              size.describe() + ", the stage of " + algorithm_name(algorithm));
  }
  EXPECT_EQ(named, std::vector<Algorithm>({Algorithm::kPersistent, Algorithm::kPartialSums,
                                           Algorithm::kLayerWavefront, Algorithm::kLayerByLayer}));
}

// One stage object prepared for a shape of each stage in turn (the earlier stage's memory freed
// when the next is prepared): each pass against the reference.
TEST(Fp32AlgorithmByShapeDelegation, OneStageRunsAShapeOfEachInTurn) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Stage> stage = make_stage({});
  std::vector<ProblemSize> shapes = shape_of_each();
  shapes.push_back(ProblemSize{40, 24, 3, 5, 1});  // persistent again, after the GEMMs
  for (const ProblemSize& size : shapes) {
    const Problem p = problem_for(size);
    const std::vector<OutputTensor> outputs = one_pass(*stage, p);
    ASSERT_FALSE(outputs.empty()) << size.describe();
    const CheckReport report =
        testing::check_against_reference(*stage, p.params, outputs, &p.upstream);
    EXPECT_TRUE(report.passed()) << size.describe() << "\n" << report.describe();
  }
}

// H = 1700 and 3000 do not fit the persistent stages' plans on chip (W_hh alone is 46 and
// 144 MB in FP32), though their steps are small: pinned, each is refused with its reason; left to
// the rule, which names stage 25 (H = 1700: 1.16e7 multiply-adds a layer's step) or stage 13
// (H = 3000: 3.6e7), per-step GEMMs run them (stage 04 for one layer, 05 for two).
TEST(Fp32AlgorithmByShapeLimits, PerStepGemmsWhereThePersistentStagesDoNotFit) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  for (const ProblemSize& size :
       {ProblemSize{1700, 1700, 1, 10, 1}, ProblemSize{1700, 1700, 1, 10, 2},
        ProblemSize{3000, 3000, 1, 10, 1}}) {
    const Algorithm by_shape = algorithm_for(size);
    ASSERT_EQ(by_shape, size.hidden == 1700 ? Algorithm::kPersistent : Algorithm::kPartialSums)
        << size.describe();
    for (const char* pinned : {"persistent", "partial_sums"}) {
      const std::string why = make_stage({"--algorithm", pinned})->unsupported_reason(size, prop);
      EXPECT_NE(why.find("do not fit on chip"), std::string::npos) << pinned << ": " << why;
    }
    EXPECT_EQ(make_stage({})->unsupported_reason(size, prop), "") << size.describe();
  }
}

// Data-parallel training waits on a layer's gradients through the hook (stage.h): the persistent
// stages call it once a layer, and a caller of this stage must hear it.
TEST(Fp32AlgorithmByShapeHook, TheCallersHookHearsEveryLayer) {
  SKIP_WITHOUT_GPU();
  const ProblemSize size{40, 24, 3, 5, 3};
  for (const char* pinned : {"persistent", "partial_sums"}) {
    std::unique_ptr<Stage> stage = make_stage({"--algorithm", pinned});
    const Problem p = problem_for(size);
    std::vector<int> every(size.layers);
    for (int l = 0; l < size.layers; ++l)
      every[l] = l;
    EXPECT_EQ(testing::layers_reported_ready(*stage, p.params, &p.upstream), every) << pinned;
  }
}

}  // namespace
}  // namespace lstm::LSTM_STAGE_NAMESPACE
