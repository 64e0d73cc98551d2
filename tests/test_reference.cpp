/*! \file test_reference.cpp
 *  \brief Tests of the CPU reference LSTM: a closed form (all parameters zero), one unit worked
 *         by hand, the prefix (`steps`) mode, and agreement with PyTorch on a committed fixture.
 */
#include "lstm_reference.h"
#include "reference_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/lstm_data.h"

#ifndef LSTM_TEST_DATA_DIR
#error "LSTM_TEST_DATA_DIR must be defined as a string literal: the path of tests/data"
#endif

namespace lstm {
namespace {

/// LstmParams of the given sizes with every tensor allocated and filled with zeros.
LstmParams zero_params(const ProblemSize& size) {
  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  LstmParams params;
  params.size = size;
  params.x.assign(T * B * size.input_size, 0.0f);
  params.h0.assign(L * B * H, 0.0f);
  params.c0.assign(L * B * H, 0.0f);
  for (std::size_t l = 0; l < L; ++l) {
    LayerWeights layer;
    layer.w_ih.assign(4 * H * size.layer_input_size(static_cast<int>(l)), 0.0f);
    layer.w_hh.assign(4 * H * H, 0.0f);
    layer.b_ih.assign(4 * H, 0.0f);
    layer.b_hh.assign(4 * H, 0.0f);
    params.layers.push_back(layer);
  }
  return params;
}

using testing::fill_uniform;

/// LstmParams with x, h0, c0 uniform in [-1, 1] and parameters uniform in [-1/sqrt(H), 1/sqrt(H)].
LstmParams random_params(const ProblemSize& size, unsigned seed) {
  LstmParams params = zero_params(size);
  std::mt19937 rng(seed);
  fill_uniform(params.x, rng, 1.0f);
  fill_uniform(params.h0, rng, 1.0f);
  fill_uniform(params.c0, rng, 1.0f);
  const float bound = 1.0f / std::sqrt(static_cast<float>(size.hidden));
  for (LayerWeights& layer : params.layers) {
    fill_uniform(layer.w_ih, rng, bound);
    fill_uniform(layer.w_hh, rng, bound);
    fill_uniform(layer.b_ih, rng, bound);
    fill_uniform(layer.b_hh, rng, bound);
  }
  return params;
}

/// Element-wise |actual - expected| <= relative_tolerance * |expected|.
void expect_all_near(const std::vector<double>& actual, const std::vector<double>& expected,
                     double relative_tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t k = 0; k < actual.size(); ++k) {
    EXPECT_NEAR(actual[k], expected[k], relative_tolerance * std::fabs(expected[k]))
        << what << "[" << k << "]";
  }
}

using testing::relative_norm_error;

// With every weight and bias zero, every gate pre-activation is 0, so i = f = o = σ(0) = 1/2 and
// g = tanh(0) = 0. Then c_t = c_{t-1} / 2, so c_t = c0 / 2^(t+1), and h_t = tanh(c_t) / 2.
// h never feeds anything (its weights are zero), so every layer's c decays from its own c0.
TEST(Reference, AllZeroParametersGiveTheClosedForm) {
  ProblemSize size;
  size.hidden = 5;
  size.input_size = 3;
  size.batch = 2;
  size.seq_len = 4;
  size.layers = 2;
  LstmParams params = zero_params(size);
  std::mt19937 rng(7);
  fill_uniform(params.x, rng, 1.0f);
  fill_uniform(params.h0, rng, 1.0f);
  fill_uniform(params.c0, rng, 1.0f);

  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  const std::size_t state_size = B * H;
  std::vector<double> expected_y(T * state_size), expected_hy(L * state_size),
      expected_cy(L * state_size);
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t bj = 0; bj < state_size; ++bj) {
      double c = params.c0[l * state_size + bj];
      for (std::size_t t = 0; t < T; ++t) {
        c = std::ldexp(c, -1);  // c_t = c_{t-1} / 2, exact
        if (l == L - 1) {
          expected_y[t * state_size + bj] = 0.5 * std::tanh(c);
        }
      }
      expected_hy[l * state_size + bj] = 0.5 * std::tanh(c);
      expected_cy[l * state_size + bj] = c;
    }
  }

  const ReferenceOutputs out = reference_forward(params);
  EXPECT_EQ(out.steps, size.seq_len);
  expect_all_near(out.y, expected_y, 1e-15, "y");
  expect_all_near(out.hy, expected_hy, 1e-15, "hy");
  expect_all_near(out.cy, expected_cy, 1e-15, "cy");
}

// One unit (H = I = B = L = 1), two steps, worked by hand. Every input is exact in float32.
// Gate order i, f, g, o:
//   w_ih = [0.5, -0.25, 0.75, 1.0]     w_hh = [0.125, 0.375, -0.5, 0.25]
//   b_ih = [0.0625, -0.125, 0.25, 0.5] b_hh = [-0.25, 0.5, 0.125, -0.375]
//   x = [1.0, -0.5], h0 = 0.25, c0 = -0.75
//
// Step 1 (x = 1, h = 0.25, c = -0.75); pre-activation z = w_ih·x + b_ih + w_hh·h + b_hh:
//   z_i =  0.5    + 0.0625 + 0.03125  - 0.25  =  0.34375  → i = σ(z_i)    = 0.585101154203231
//   z_f = -0.25   - 0.125  + 0.09375  + 0.5   =  0.21875  → f = σ(z_f)    = 0.554470464960427
//   z_g =  0.75   + 0.25   - 0.125    + 0.125 =  1.0      → g = tanh(z_g) = 0.761594155955765
//   z_o =  1.0    + 0.5    + 0.0625   - 0.375 =  1.1875   → o = σ(z_o)    = 0.766293643085960
//   c1 = f·c0 + i·g = -0.415852848720320 + 0.445609619684154 = 0.0297567709638332
//   h1 = o·tanh(c1) = 0.766293643085960 · 0.0297479912096057 = 0.0227956965584979
//
// Step 2 (x = -0.5, h = h1, c = c1):
//   z_i = -0.25   + 0.0625 + 0.125·h1  - 0.25  = -0.434650537930188 → i = 0.393016374561484
//   z_f =  0.125  - 0.125  + 0.375·h1  + 0.5   =  0.508548386209437 → f = 0.624466120707152
//   z_g = -0.375  + 0.25   - 0.5·h1    + 0.125 = -0.0113978482792489 → g = -0.0113973547364804
//   z_o = -0.5    + 0.5    + 0.25·h1   - 0.375 = -0.369301075860376 → o = 0.408709917069521
//   c2 = f·c1 + i·g = 0.0185820953285561 - 0.00447934703812270 = 0.0141027482904335
//   h2 = o·tanh(c2) = 0.408709917069521 · 0.0141018134113136 = 0.00576355098986783
//
// The literals below were computed once with Python's decimal module at 50 digits.
TEST(Reference, OneUnitWorkedByHand) {
  ProblemSize size;
  size.hidden = 1;
  size.input_size = 1;
  size.batch = 1;
  size.seq_len = 2;
  size.layers = 1;
  LstmParams params = zero_params(size);
  params.layers[0].w_ih = {0.5f, -0.25f, 0.75f, 1.0f};
  params.layers[0].w_hh = {0.125f, 0.375f, -0.5f, 0.25f};
  params.layers[0].b_ih = {0.0625f, -0.125f, 0.25f, 0.5f};
  params.layers[0].b_hh = {-0.25f, 0.5f, 0.125f, -0.375f};
  params.x = {1.0f, -0.5f};
  params.h0 = {0.25f};
  params.c0 = {-0.75f};

  const double h1 = 0.022795696558497886166;
  const double c2 = 0.014102748290433450185;
  const double h2 = 0.0057635509898678281798;

  const ReferenceOutputs out = reference_forward(params);
  expect_all_near(out.y, {h1, h2}, 1e-12, "y");
  expect_all_near(out.hy, {h2}, 1e-12, "hy");
  expect_all_near(out.cy, {c2}, 1e-12, "cy");

  // The first step alone: c1 and h1.
  const double c1 = 0.029756770963833214024;
  const ReferenceOutputs first = reference_forward(params, 1);
  expect_all_near(first.y, {h1}, 1e-12, "y after one step");
  expect_all_near(first.hy, {h1}, 1e-12, "hy after one step");
  expect_all_near(first.cy, {c1}, 1e-12, "cy after one step");
}

// reference_forward(params, k) computes the first k steps: y is the full run's first k steps, and
// hy, cy are the states after step k-1, i.e. the final states of the same problem cut to T = k.
TEST(Reference, PrefixStepsMatchTheFullRun) {
  ProblemSize size;
  size.hidden = 6;
  size.input_size = 4;
  size.batch = 3;
  size.seq_len = 7;
  for (int layers : {1, 3}) {
    size.layers = layers;
    const LstmParams params = random_params(size, 11);
    const ReferenceOutputs full = reference_forward(params);
    ASSERT_EQ(full.steps, size.seq_len);
    const std::size_t state_size = static_cast<std::size_t>(size.batch) * size.hidden;

    // steps <= 0 and steps >= T both mean the whole sequence.
    for (int all : {0, -1, size.seq_len, size.seq_len + 5}) {
      const ReferenceOutputs same = reference_forward(params, all);
      EXPECT_EQ(same.steps, size.seq_len);
      expect_all_near(same.y, full.y, 1e-15, "y, steps=" + std::to_string(all));
      expect_all_near(same.hy, full.hy, 1e-15, "hy, steps=" + std::to_string(all));
      expect_all_near(same.cy, full.cy, 1e-15, "cy, steps=" + std::to_string(all));
    }

    for (int k : {1, 3, size.seq_len - 1}) {
      const std::string label = "L=" + std::to_string(layers) + " k=" + std::to_string(k);
      const ReferenceOutputs prefix = reference_forward(params, k);
      EXPECT_EQ(prefix.steps, k);
      const std::vector<double> full_y_prefix(full.y.begin(), full.y.begin() + k * state_size);
      expect_all_near(prefix.y, full_y_prefix, 1e-15, "y, " + label);

      if (layers == 1) {  // the only layer's final h is its output at step k-1
        const std::vector<double> y_last(prefix.y.end() - state_size, prefix.y.end());
        expect_all_near(prefix.hy, y_last, 1e-15, "hy, " + label);
      }

      // The same problem with x cut to its first k steps, run to its end.
      LstmParams cut = params;
      cut.size.seq_len = k;
      cut.x.resize(static_cast<std::size_t>(k) * size.batch * size.input_size);
      const ReferenceOutputs cut_out = reference_forward(cut);
      expect_all_near(prefix.y, cut_out.y, 1e-15, "y vs cut, " + label);
      expect_all_near(prefix.hy, cut_out.hy, 1e-15, "hy vs cut, " + label);
      expect_all_near(prefix.cy, cut_out.cy, 1e-15, "cy vs cut, " + label);
    }
  }
}

// Agreement with torch.nn.LSTM, computed in float64 from the same float32 parameters and stored
// as float32 by tests/data/make_fixture.py.
TEST(ReferenceFixture, MatchesPyTorch) {
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) + "/pytorch_fixture";
  if (!std::filesystem::is_directory(dir)) {
    FAIL() << "PyTorch fixture missing: " << dir
           << "\nGenerate it on a machine with PyTorch: python3 tests/data/make_fixture.py";
  }
  const LstmParams params = load_params(dir, {});
  const LstmOutputs torch = load_outputs(dir, params.size);
  const ReferenceOutputs ref = reference_forward(params);
  ASSERT_EQ(ref.y.size(), torch.y.size());
  ASSERT_EQ(ref.hy.size(), torch.hy.size());
  ASSERT_EQ(ref.cy.size(), torch.cy.size());

  EXPECT_LE(relative_norm_error(ref.y, torch.y), 1e-6) << "y";
  EXPECT_LE(relative_norm_error(ref.hy, torch.hy), 1e-6) << "hy";
  EXPECT_LE(relative_norm_error(ref.cy, torch.cy), 1e-6) << "cy";
}

}  // namespace
}  // namespace lstm
