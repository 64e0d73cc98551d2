// The output check (common/validate.h) must catch what a broken stage produces: NaN, elements
// never written (poisoned), a single perturbed element, and all-zero output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"

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

CheckReport check(const Outputs& o, int steps_checked = kT) {
  std::vector<double> y_ref(o.y_ref.begin(), o.y_ref.begin() + steps_checked * kB * kH);
  return check_outputs(kB, kH, kL, kT, steps_checked, o.y, o.hy, o.cy, y_ref, o.hy_ref, o.cy_ref);
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

}  // namespace
}  // namespace lstm
