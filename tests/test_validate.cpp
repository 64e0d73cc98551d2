// The check (common/core/check.h) must catch what a broken implementation produces: NaN,
// elements never written (poisoned), a single perturbed element, all-zero output, a missing
// tensor; each tensor against its own bound, the worst element of the worst tensor reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/named_tensor.h"

namespace lstm {
namespace {

constexpr int kT = 3, kB = 2, kH = 5, kL = 2;

struct Outputs {
  std::vector<float> y, hy, cy;
  std::vector<double> y_ref, hy_ref, cy_ref;
};

/// Reference values in (-1, 1) and float outputs equal to them up to float rounding.
Outputs matching_outputs() {
  Outputs o;
  for (int i = 0; i < kT * kB * kH; ++i)
    o.y_ref.push_back(std::sin(0.7 * i + 0.1));
  for (int i = 0; i < kL * kB * kH; ++i)
    o.hy_ref.push_back(std::cos(0.3 * i));
  for (int i = 0; i < kL * kB * kH; ++i)
    o.cy_ref.push_back(1.5 * std::sin(1.1 * i + 0.4));
  for (double v : o.y_ref)
    o.y.push_back(static_cast<float>(v));
  for (double v : o.hy_ref)
    o.hy.push_back(static_cast<float>(v));
  for (double v : o.cy_ref)
    o.cy.push_back(static_cast<float>(v));
  return o;
}

const ProblemSize kSize{kH, kH, kB, kT, kL};

/// The outputs as named tensors (output_layouts' names and shapes).
std::vector<OutputTensor> named(const Outputs& o) {
  std::vector<OutputTensor> tensors = output_layouts(kSize, StageKind::kForward);
  tensors[0].values = o.y;
  tensors[1].values = o.hy;
  tensors[2].values = o.cy;
  return tensors;
}

/// The references; with `steps_checked` < T only y's first steps, as compute_reference does.
std::vector<ReferenceTensor> references(const Outputs& o, int steps_checked = kT) {
  const std::vector<OutputTensor> layouts = output_layouts(kSize, StageKind::kForward);
  std::vector<double> y_ref(o.y_ref.begin(), o.y_ref.begin() + steps_checked * kB * kH);
  std::vector<ReferenceTensor> refs = {
      {"y", {std::size_t(steps_checked), kB, kH}, layouts[0].axes, y_ref}};
  if (steps_checked == kT) {
    refs.push_back({"hy", layouts[1].shape, layouts[1].axes, o.hy_ref});
    refs.push_back({"cy", layouts[2].shape, layouts[2].axes, o.cy_ref});
  }
  return refs;
}

Tolerance fp32_bound(const std::string&) {
  return default_tolerance(Precision::kFp32);
}

CheckReport check(const Outputs& o, int steps_checked = kT) {
  std::vector<std::string> notes;
  if (steps_checked < kT) notes.push_back("y compared for a prefix; hy and cy NOT checked");
  return check_tensors(named(o), references(o, steps_checked), fp32_bound, notes);
}

TEST(Validate, MatchingOutputsPass) {
  const CheckReport report = check(matching_outputs());
  EXPECT_TRUE(report.passed()) << report.describe();
  ASSERT_EQ(report.tensors.size(), 3u);
  EXPECT_LT(report.tensors[0].relative_norm, 1e-7);
}

TEST(Validate, NanFailsAndIsReportedAsWorst) {
  Outputs o = matching_outputs();
  o.hy[7] = std::numeric_limits<float>::quiet_NaN();
  const CheckReport report = check(o);
  EXPECT_FALSE(report.passed());
  const TensorCheck& hy = report.tensors[1];
  EXPECT_FALSE(hy.passed);
  EXPECT_EQ(hy.nonfinite, 1u);
  EXPECT_EQ(hy.worst_index, 7u);
  EXPECT_NE(report.describe().find("hy[layer=0, b=1, j=2]"), std::string::npos)
      << report.describe();
}

TEST(Validate, InfinityFails) {
  Outputs o = matching_outputs();
  o.cy[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(check(o).passed());
}

TEST(Validate, UnwrittenPoisonedElementFails) {
  Outputs o = matching_outputs();
  const unsigned int all_ones = 0xFFFFFFFFu;  // what DeviceProblem::poison_outputs writes
  std::memcpy(&o.y[kB * kH + 3], &all_ones, sizeof(float));
  const CheckReport report = check(o);
  EXPECT_FALSE(report.passed());
  EXPECT_EQ(report.tensors[0].worst_index, static_cast<std::size_t>(kB * kH + 3));
  EXPECT_NE(report.describe().find("y[t=1, b=0, j=3]"), std::string::npos) << report.describe();
}

TEST(Validate, OnePerturbedElementFailsAndIsNamed) {
  Outputs o = matching_outputs();
  o.y[2 * kB * kH + 9] += 1e-3f;  // t=2, b=1, j=4: above the 1e-4 max-abs bound
  const CheckReport report = check(o);
  EXPECT_FALSE(report.passed());
  EXPECT_NEAR(report.tensors[0].max_absolute, 1e-3, 1e-6);
  EXPECT_EQ(report.tensors[0].worst_index, static_cast<std::size_t>(2 * kB * kH + 9));
  EXPECT_NE(report.describe().find("y[t=2, b=1, j=4]"), std::string::npos) << report.describe();
}

TEST(Validate, SmallUniformErrorFailsTheRelativeNormBound) {
  Outputs o = matching_outputs();
  for (float& v : o.cy)
    v *= 1.0f + 5e-5f;  // max-abs stays under 1e-4, rel-norm 5e-5 > 1e-5
  const CheckReport report = check(o);
  EXPECT_FALSE(report.tensors[2].passed);
  EXPECT_LE(report.tensors[2].max_absolute, 1e-4);
}

TEST(Validate, AllZeroOutputFails) {
  Outputs o = matching_outputs();
  std::fill(o.y.begin(), o.y.end(), 0.0f);
  EXPECT_FALSE(check(o).passed());
}

TEST(Validate, PrefixCheckSaysWhatWasNotChecked) {
  Outputs o = matching_outputs();
  o.hy[0] = std::numeric_limits<float>::quiet_NaN();  // not compared in a prefix check
  o.y[2 * kB * kH] = 5.0f;                            // step 2: outside the 2-step prefix
  const CheckReport report = check(o, 2);
  EXPECT_TRUE(report.passed()) << report.describe();
  ASSERT_EQ(report.tensors.size(), 1u);
  EXPECT_NE(report.describe().find("hy and cy NOT checked"), std::string::npos);
  o.y[kB * kH] = 5.0f;  // step 1: inside the prefix
  EXPECT_FALSE(check(o, 2).passed());
}

TEST(Validate, EmptyReportDoesNotPass) {
  EXPECT_FALSE(CheckReport{}.passed());
}

TEST(Validate, EachTensorHasItsOwnBound) {
  Outputs o = matching_outputs();
  o.cy[3] += 5e-4f;  // fails the FP32 bound of 1e-4, passes a looser one
  const auto loose_cy = [](const std::string& name) {
    return name == "cy" ? Tolerance{1e-3, 1e-3} : default_tolerance(Precision::kFp32);
  };
  const CheckReport strict = check_tensors(named(o), references(o), fp32_bound);
  const CheckReport loose = check_tensors(named(o), references(o), loose_cy);
  EXPECT_FALSE(strict.passed());
  EXPECT_TRUE(loose.passed()) << loose.describe();
  EXPECT_EQ(loose.tensors[2].bound.max_absolute, 1e-3);
  EXPECT_NE(loose.describe().find("(bound 1.000e-03, 1.000e-03)"), std::string::npos)
      << loose.describe();
}

TEST(Validate, WorstElementOfTheWorstTensorIsReported) {
  Outputs o = matching_outputs();
  o.y[4] += 2e-4f;   // twice y's bound
  o.hy[6] += 9e-4f;  // nine times hy's bound: the worst tensor
  const CheckReport report = check(o);
  ASSERT_NE(report.worst(), nullptr);
  EXPECT_EQ(report.worst()->name, "hy");
  EXPECT_NE(report.describe().find("worst element hy[layer=0, b=1, j=1]"), std::string::npos)
      << report.describe();
}

TEST(Validate, MissingTensorFailsAndIsNamed) {
  const Outputs o = matching_outputs();
  std::vector<OutputTensor> outputs = named(o);
  outputs.pop_back();  // no cy
  const CheckReport report = check_tensors(outputs, references(o), fp32_bound);
  EXPECT_FALSE(report.passed());
  EXPECT_TRUE(report.tensors[2].missing);
  EXPECT_NE(report.describe().find("check cy: FAIL  not produced"), std::string::npos)
      << report.describe();
}

TEST(Validate, GradientTensorsAreNamedLikePyTorch) {
  const std::vector<OutputTensor> layouts =
      output_layouts(ProblemSize{3, 2, 1, 4, 2}, StageKind::kTraining);
  std::vector<std::string> names;
  for (const OutputTensor& t : layouts)
    names.push_back(t.name);
  const std::vector<std::string> expected = {"y",
                                             "hy",
                                             "cy",
                                             "dx",
                                             "dh0",
                                             "dc0",
                                             "grad_weight_ih_l0",
                                             "grad_weight_hh_l0",
                                             "grad_bias_ih_l0",
                                             "grad_bias_hh_l0",
                                             "grad_weight_ih_l1",
                                             "grad_weight_hh_l1",
                                             "grad_bias_ih_l1",
                                             "grad_bias_hh_l1"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(layouts[3].shape, (std::vector<std::size_t>{4, 1, 2}));  // dx: (T, B, I)
  EXPECT_EQ(layouts[6].shape, (std::vector<std::size_t>{12, 2}));    // (4H, I) for layer 0
  EXPECT_EQ(layouts[10].shape, (std::vector<std::size_t>{12, 3}));   // (4H, H) after
}

TEST(Validate, ReducedPrecisionHasNoDefaultBound) {
  EXPECT_THROW(default_tolerance(Precision::kBf16), std::invalid_argument);
  EXPECT_EQ(default_tolerance(Precision::kFp32).max_relative_norm, 1e-5);
  EXPECT_STREQ(precision_name(Precision::kFp16), "fp16");
  EXPECT_STREQ(kind_name(StageKind::kTraining), "training");
  for (Precision precision : {Precision::kFp32, Precision::kFp16, Precision::kBf16})
    EXPECT_EQ(precision_from_name(precision_name(precision)), precision);
  EXPECT_THROW(precision_from_name("tf32"), std::invalid_argument);
}

}  // namespace
}  // namespace lstm
