/*! \file test_reference_backward.cpp
 *  \brief Tests of the CPU reference's training pass (reference_training): central finite
 *         differences of every input and parameter element, one unit worked by hand, the forward
 *         outputs against reference_forward, agreement with PyTorch autograd on a committed
 *         fixture, and the refusal of wrongly sized upstream gradients.
 */
#include "lstm_reference_backward.h"
#include "reference_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/lstm_data.h"
#include "core/npy.h"
#include "lstm_reference.h"

#ifndef LSTM_TEST_DATA_DIR
#error "LSTM_TEST_DATA_DIR must be defined as a string literal: the path of tests/data"
#endif

namespace lstm {
namespace {

using testing::fill_uniform;

/// LstmParams with x, h0, c0 uniform in [-1, 1] and parameters uniform in [-2/sqrt(H), 2/sqrt(H)]
/// (twice PyTorch's default range, so that the pre-activations reach into the curved parts of σ
/// and tanh and every term of the derivatives matters).
LstmParams random_params(const ProblemSize& size, unsigned seed) {
  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  LstmParams params;
  params.size = size;
  params.x.resize(T * B * size.input_size);
  params.h0.resize(L * B * H);
  params.c0.resize(L * B * H);
  std::mt19937 rng(seed);
  fill_uniform(params.x, rng, 1.0f);
  fill_uniform(params.h0, rng, 1.0f);
  fill_uniform(params.c0, rng, 1.0f);
  const float bound = 2.0f / std::sqrt(static_cast<float>(size.hidden));
  for (std::size_t l = 0; l < L; ++l) {
    LayerWeights layer;
    layer.w_ih.resize(4 * H * size.layer_input_size(static_cast<int>(l)));
    layer.w_hh.resize(4 * H * H);
    layer.b_ih.resize(4 * H);
    layer.b_hh.resize(4 * H);
    fill_uniform(layer.w_ih, rng, bound);
    fill_uniform(layer.w_hh, rng, bound);
    fill_uniform(layer.b_ih, rng, bound);
    fill_uniform(layer.b_hh, rng, bound);
    params.layers.push_back(layer);
  }
  return params;
}

/// dy, dhy and dcy uniform in [-1, 1]: the test's own generator (not the core's).
UpstreamGradients random_upstream(const ProblemSize& size, unsigned seed) {
  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  UpstreamGradients upstream;
  upstream.dy.resize(T * B * H);
  upstream.dhy.resize(L * B * H);
  upstream.dcy.resize(L * B * H);
  std::mt19937 rng(seed);
  fill_uniform(upstream.dy, rng, 1.0f);
  fill_uniform(upstream.dhy, rng, 1.0f);
  fill_uniform(upstream.dcy, rng, 1.0f);
  return upstream;
}

std::vector<double> to_double(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

// ---- an independent, naive double-precision forward pass for finite differences -------------

/// Every input and parameter in double: what the finite differences perturb. Written
/// independently of reference/ (plain loops, no shared code), so it also cross-checks the math.
struct DoubleLstm {
  ProblemSize size;
  std::vector<double> x, h0, c0;
  std::vector<std::vector<double>> w_ih, w_hh, b_ih, b_hh;  // one entry per layer

  explicit DoubleLstm(const LstmParams& params)
      : size(params.size),
        x(to_double(params.x)),
        h0(to_double(params.h0)),
        c0(to_double(params.c0)) {
    for (const LayerWeights& layer : params.layers) {
      w_ih.push_back(to_double(layer.w_ih));
      w_hh.push_back(to_double(layer.w_hh));
      b_ih.push_back(to_double(layer.b_ih));
      b_hh.push_back(to_double(layer.b_hh));
    }
  }

  /// y (T, B, H), hy and cy (L, B, H), by the textbook equations.
  void forward(std::vector<double>& y, std::vector<double>& hy, std::vector<double>& cy) const {
    const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
    auto sigmoid = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
    std::vector<double> input = x;
    hy.assign(L * B * H, 0.0);
    cy.assign(L * B * H, 0.0);
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t width = size.layer_input_size(static_cast<int>(l));
      std::vector<double> h(&h0[l * B * H], &h0[(l + 1) * B * H]);
      std::vector<double> c(&c0[l * B * H], &c0[(l + 1) * B * H]);
      std::vector<double> output(T * B * H);
      for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> h_next(B * H);
        for (std::size_t b = 0; b < B; ++b) {
          for (std::size_t j = 0; j < H; ++j) {
            double z[4];
            for (std::size_t gate = 0; gate < 4; ++gate) {
              const std::size_t r = gate * H + j;
              double sum = b_ih[l][r] + b_hh[l][r];
              for (std::size_t k = 0; k < width; ++k) {
                sum += w_ih[l][r * width + k] * input[(t * B + b) * width + k];
              }
              for (std::size_t k = 0; k < H; ++k) {
                sum += w_hh[l][r * H + k] * h[b * H + k];
              }
              z[gate] = sum;
            }
            const double i = sigmoid(z[0]), f = sigmoid(z[1]), g = std::tanh(z[2]),
                         o = sigmoid(z[3]);
            c[b * H + j] = f * c[b * H + j] + i * g;
            h_next[b * H + j] = o * std::tanh(c[b * H + j]);
          }
        }
        h = h_next;
        std::copy(h.begin(), h.end(), output.begin() + t * B * H);
      }
      std::copy(h.begin(), h.end(), hy.begin() + l * B * H);
      std::copy(c.begin(), c.end(), cy.begin() + l * B * H);
      input = output;
    }
    y = input;
  }

  /// sum(dy ⊙ y) + sum(dhy ⊙ hy) + sum(dcy ⊙ cy): the loss whose gradient reference_training
  /// computes.
  double loss(const UpstreamGradients& upstream) const {
    std::vector<double> y, hy, cy;
    forward(y, hy, cy);
    double sum = 0.0;
    for (std::size_t k = 0; k < y.size(); ++k)
      sum += upstream.dy[k] * y[k];
    for (std::size_t k = 0; k < hy.size(); ++k)
      sum += upstream.dhy[k] * hy[k];
    for (std::size_t k = 0; k < cy.size(); ++k)
      sum += upstream.dcy[k] * cy[k];
    return sum;
  }
};

/// One differentiable tensor: where DoubleLstm keeps it and its analytic gradient.
struct Differentiable {
  std::string name;
  std::vector<double>* values;
  const std::vector<double>* gradient;
};

std::vector<Differentiable> differentiables(DoubleLstm& model, const ReferenceGradients& grads) {
  std::vector<Differentiable> list = {
      {"x", &model.x, &grads.dx}, {"h0", &model.h0, &grads.dh0}, {"c0", &model.c0, &grads.dc0}};
  for (std::size_t l = 0; l < model.w_ih.size(); ++l) {
    const std::string suffix = "_l" + std::to_string(l);
    list.push_back({"weight_ih" + suffix, &model.w_ih[l], &grads.layers[l].w_ih});
    list.push_back({"weight_hh" + suffix, &model.w_hh[l], &grads.layers[l].w_hh});
    list.push_back({"bias_ih" + suffix, &model.b_ih[l], &grads.layers[l].b_ih});
    list.push_back({"bias_hh" + suffix, &model.b_hh[l], &grads.layers[l].b_hh});
  }
  return list;
}

// Central differences, (loss(θ + ε) − loss(θ − ε)) / 2ε, all in double (the float32 parameters
// are promoted once; perturbing them in float32 would lose ~7 digits). With ε = 1e-5 the
// truncation error is ε²/6 · |∂³loss| ≈ 1e-11 (the third derivatives are O(1) here) and the
// rounding error is about 1e-16 · |loss| · (a few) / ε ≈ 1e-10 (|loss| is O(1) to O(10)), so the
// difference quotient agrees with the true derivative to ~1e-10 (seen: at most 2e-10 element by
// element, 2e-9 along the directions of the larger shape below, whose loss sums 5000 terms). The
// tolerance, |analytic − fd| ≤ 1e-7 · max(1, |analytic|), is far above that noise and far below
// any real mistake (a dropped or swapped term of the derivative gives errors of 1e-2 and more).
constexpr double kStep = 1e-5;
constexpr double kFdTolerance = 1e-7;

void check_every_element_by_finite_differences(const ProblemSize& size, unsigned seed) {
  const LstmParams params = random_params(size, seed);
  const UpstreamGradients upstream = random_upstream(size, seed + 1);
  const ReferenceTraining training = reference_training(params, upstream);

  DoubleLstm model(params);
  // The naive forward is the same function as the reference's (else the differences below
  // would differentiate something else).
  {
    std::vector<double> y, hy, cy;
    model.forward(y, hy, cy);
    ASSERT_EQ(y.size(), training.forward.y.size());
    for (std::size_t k = 0; k < y.size(); ++k)
      ASSERT_NEAR(y[k], training.forward.y[k], 1e-14);
    for (std::size_t k = 0; k < hy.size(); ++k)
      ASSERT_NEAR(hy[k], training.forward.hy[k], 1e-14);
    for (std::size_t k = 0; k < cy.size(); ++k)
      ASSERT_NEAR(cy[k], training.forward.cy[k], 1e-14);
  }

  std::size_t checked = 0;
  double worst = 0.0;
  for (const Differentiable& tensor : differentiables(model, training.gradients)) {
    ASSERT_EQ(tensor.values->size(), tensor.gradient->size()) << tensor.name;
    for (std::size_t k = 0; k < tensor.values->size(); ++k) {
      double& value = (*tensor.values)[k];
      const double saved = value;
      value = saved + kStep;
      const double plus = model.loss(upstream);
      value = saved - kStep;
      const double minus = model.loss(upstream);
      value = saved;
      const double fd = (plus - minus) / (2.0 * kStep);
      const double analytic = (*tensor.gradient)[k];
      const double error = std::fabs(analytic - fd) / std::max(1.0, std::fabs(analytic));
      worst = std::max(worst, error);
      EXPECT_LE(error, kFdTolerance)
          << tensor.name << "[" << k << "]: analytic " << analytic << ", central difference " << fd;
      ++checked;
    }
  }
  std::cout << "[          ] " << size.describe() << ": " << checked
            << " elements, worst |analytic - fd| / max(1, |analytic|) = " << worst << "\n";
}

TEST(ReferenceBackward, FiniteDifferencesTwoLayers) {
  check_every_element_by_finite_differences(ProblemSize{3, 2, 2, 3, 2}, 101);
}

TEST(ReferenceBackward, FiniteDifferencesThreeLayersOneStepInputWiderThanHidden) {
  check_every_element_by_finite_differences(ProblemSize{4, 6, 1, 1, 3}, 202);
}

// Enough rows for the 4 × 2 register tiles of the backward's products and their edges
// (4H = 20, B = 5, T·B = 20, I = 7).
TEST(ReferenceBackward, FiniteDifferencesTileEdges) {
  check_every_element_by_finite_differences(ProblemSize{5, 7, 5, 4, 2}, 303);
}

// Shapes larger than the products' cache blocks (32 rows of each operand, 512 of K) are too big
// for element-by-element differences; there, the derivative along a random direction v of each
// tensor, (loss(θ + εv) − loss(θ − εv)) / 2ε, must equal Σ gradient ⊙ v.
TEST(ReferenceBackward, DirectionalDerivativesBeyondTheBlockSizes) {
  const ProblemSize size = ProblemSize{36, 33, 37, 4, 2};  // 4H = 144, T·B = 148
  const LstmParams params = random_params(size, 404);
  const UpstreamGradients upstream = random_upstream(size, 405);
  const ReferenceTraining training = reference_training(params, upstream);
  DoubleLstm model(params);
  std::mt19937 rng(406);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  double worst = 0.0;
  for (const Differentiable& tensor : differentiables(model, training.gradients)) {
    const std::vector<double> saved = *tensor.values;
    std::vector<double> direction(saved.size());
    double analytic = 0.0;
    for (std::size_t k = 0; k < saved.size(); ++k) {
      direction[k] = uniform(rng);
      analytic += (*tensor.gradient)[k] * direction[k];
    }
    for (std::size_t k = 0; k < saved.size(); ++k)
      (*tensor.values)[k] = saved[k] + kStep * direction[k];
    const double plus = model.loss(upstream);
    for (std::size_t k = 0; k < saved.size(); ++k)
      (*tensor.values)[k] = saved[k] - kStep * direction[k];
    const double minus = model.loss(upstream);
    *tensor.values = saved;
    const double fd = (plus - minus) / (2.0 * kStep);
    const double error = std::fabs(analytic - fd) / std::max(1.0, std::fabs(analytic));
    worst = std::max(worst, error);
    EXPECT_LE(error, kFdTolerance)
        << tensor.name << ": analytic " << analytic << ", central difference " << fd;
  }
  std::cout << "[          ] " << size.describe()
            << ": worst directional |analytic - fd| / max(1, |analytic|) = " << worst << "\n";
}

// ---- one unit by hand --------------------------------------------------------------------------

/// |actual − expected| ≤ relative_tolerance · |expected|, element by element.
void expect_all_near(const std::vector<double>& actual, const std::vector<double>& expected,
                     double relative_tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t k = 0; k < actual.size(); ++k) {
    EXPECT_NEAR(actual[k], expected[k], relative_tolerance * std::fabs(expected[k]))
        << what << "[" << k << "]";
  }
}

// One unit (H = I = B = L = 1), two steps: the forward of test_reference.cpp's
// Reference.OneUnitWorkedByHand, differentiated by hand. Gate order i, f, g, o:
//   w_ih = [0.5, -0.25, 0.75, 1.0]     w_hh = [0.125, 0.375, -0.5, 0.25]
//   b_ih = [0.0625, -0.125, 0.25, 0.5] b_hh = [-0.25, 0.5, 0.125, -0.375]
//   x = [1.0, -0.5], h0 = 0.25, c0 = -0.75
//   upstream: dy = [0.5, -1.0], dhy = 0.25, dcy = -0.5 (all exact in float32)
// Forward (from that test):
//   step 1: i1 = 0.585101154203231, f1 = 0.554470464960427, g1 = 0.761594155955765,
//           o1 = 0.766293643085960, c1 = 0.0297567709638332, tanh(c1) = 0.0297479912096057,
//           h1 = 0.0227956965584979
//   step 2: i2 = 0.393016374561484, f2 = 0.624466120707152, g2 = -0.0113973547364804,
//           o2 = 0.408709917069521, c2 = 0.0141027482904335, tanh(c2) = 0.0141018134113136,
//           h2 = 0.00576355098986783
// Backward, step 2 (h2 is both y[1] and hy; c2 is cy):
//   dh2 = dy[1] + dhy = -1.0 + 0.25 = -0.75
//   dc2 = dcy + dh2·o2·(1 − tanh²(c2)) = -0.5 − 0.306471480... = -0.806471480411657
//   dz_i = dc2·g2·i2(1−i2)   =  0.00219270748918653
//   dz_f = dc2·c1·f2(1−f2)   = -0.00562772440096224
//   dz_g = dc2·i2·(1−g2²)    = -0.316915324866283
//   dz_o = dh2·tanh(c2)·o2(1−o2) = -0.00255594790707974
//   carried to step 1: dc = dc2·f2 = -0.503614116833621, dh = w_hh · dz = 0.155982367242159
// Backward, step 1:
//   dh1 = dy[0] + 0.155982367242159 = 0.655982367242159
//   dc1 = -0.503614116833621 + dh1·o1·(1 − tanh²(c1)) = -0.00138383765687084
//   dz_i = dc1·g1·i1(1−i1)   = -0.000255847942494667
//   dz_f = dc1·c0·f1(1−f1)   =  0.000256390143169152
//   dz_g = dc1·i1·(1−g1²)    = -0.000340046929100798
//   dz_o = dh1·tanh(c1)·o1(1−o1) = 0.00349474553407571
// Results:
//   dh0 = w_hh · dz(step 1) = 0.00110787515894592     dc0 = dc1·f1 = -0.000767297109034920
//   dx[t] = w_ih · dz(step t):  dx = [0.00304768883021049, -0.237739156711958]
//   dW_ih[r] = dz1[r]·x[0] + dz2[r]·x[1]   dW_hh[r] = dz1[r]·h0 + dz2[r]·h1
//   db_ih[r] = db_hh[r] = dz1[r] + dz2[r]
// The literals below were computed once with mpmath at 50 digits from these formulas.
TEST(ReferenceBackward, OneUnitWorkedByHand) {
  LstmParams params;
  params.size = ProblemSize{1, 1, 1, 2, 1};
  LayerWeights layer;
  layer.w_ih = {0.5f, -0.25f, 0.75f, 1.0f};
  layer.w_hh = {0.125f, 0.375f, -0.5f, 0.25f};
  layer.b_ih = {0.0625f, -0.125f, 0.25f, 0.5f};
  layer.b_hh = {-0.25f, 0.5f, 0.125f, -0.375f};
  params.layers.push_back(layer);
  params.x = {1.0f, -0.5f};
  params.h0 = {0.25f};
  params.c0 = {-0.75f};
  UpstreamGradients upstream;
  upstream.dy = {0.5f, -1.0f};
  upstream.dhy = {0.25f};
  upstream.dcy = {-0.5f};

  const ReferenceTraining training = reference_training(params, upstream);
  expect_all_near(training.forward.y, {0.022795696558497886166, 0.0057635509898678281798}, 1e-12,
                  "y");
  expect_all_near(training.forward.cy, {0.014102748290433450185}, 1e-12, "cy");

  const ReferenceGradients& grads = training.gradients;
  expect_all_near(grads.dh0, {0.001107875158945924885}, 1e-12, "dh0");
  expect_all_near(grads.dc0, {-0.00076729710903492019857}, 1e-12, "dc0");
  expect_all_near(grads.dx, {0.0030476888302104886953, -0.23773915671195813681}, 1e-12, "dx");
  ASSERT_EQ(grads.layers.size(), 1u);
  expect_all_near(grads.layers[0].w_ih,
                  {-0.0013522016870879323963, 0.0030702523436502740227, 0.15811761550404068142,
                   0.004772719487615580743},
                  1e-12, "weight_ih");
  expect_all_near(grads.layers[0].w_hh,
                  {-0.000013977691058624897026, -0.000064190361966901533963,
                   -0.0073093173126647655029, 0.00081542177060980963213},
                  1e-12, "weight_hh");
  const std::vector<double> bias = {0.0019368595466918629, -0.0053713342577930913285,
                                    -0.31725537179538375675, 0.00093879762699596516532};
  expect_all_near(grads.layers[0].b_ih, bias, 1e-12, "bias_ih");
  expect_all_near(grads.layers[0].b_hh, bias, 1e-12, "bias_hh");
}

// ---- the forward outputs ---------------------------------------------------------------------

// The training pass's forward performs reference_forward's double operations in the same order,
// so its outputs are the same bits.
TEST(ReferenceTraining, ForwardOutputsEqualReferenceForwardBitForBit) {
  for (const ProblemSize& size : {ProblemSize{13, 7, 3, 6, 3}, ProblemSize{64, 96, 5, 4, 2}}) {
    const LstmParams params = random_params(size, 505);
    const ReferenceTraining training = reference_training(params, random_upstream(size, 506));
    const ReferenceOutputs forward = reference_forward(params);
    EXPECT_EQ(training.forward.steps, forward.steps);
    for (const auto& [what, actual, expected] :
         {std::make_tuple("y", &training.forward.y, &forward.y),
          std::make_tuple("hy", &training.forward.hy, &forward.hy),
          std::make_tuple("cy", &training.forward.cy, &forward.cy)}) {
      ASSERT_EQ(actual->size(), expected->size()) << what;
      EXPECT_EQ(std::memcmp(actual->data(), expected->data(), actual->size() * sizeof(double)), 0)
          << what << " differs from reference_forward's, " << size.describe();
    }
  }
}

// ---- PyTorch autograd
// ----------------------------------------------------------------------------

using testing::relative_norm_error;

// tests/data/make_training_fixture.py ran torch.autograd.grad in float64 on the fixture's float32
// inputs and stored the results rounded to float32. Our double results agree with torch's float64
// ones to ~1e-15, so what separates them from the files is the float32 rounding alone: at most half
// an ulp, 2^-24 ≈ 6e-8 relative, per element (about 3e-8 relative in norm). Two bounds follow:
//   * every tensor within 1e-6 in relative norm (the bound the forward fixture test uses; 15 times
//     the rounding, so it fails on any real error, not on rounding);
//   * every element within one float32 ulp, 2^-23 · |stored|, plus 1e-12 of the tensor's largest
//     magnitude for elements that float64 itself got from cancelling sums.
TEST(ReferenceTrainingFixture, MatchesPyTorchAutograd) {
  const std::string dir = std::string(LSTM_TEST_DATA_DIR) + "/pytorch_training_fixture";
  if (!std::filesystem::is_directory(dir)) {
    FAIL()
        << "PyTorch training fixture missing: " << dir
        << "\nGenerate it on a machine with PyTorch: python3 tests/data/make_training_fixture.py";
  }
  const LstmParams params = load_params(dir, {});
  const ProblemSize& size = params.size;
  const std::size_t H = size.hidden, B = size.batch, T = size.seq_len, L = size.layers;
  const std::size_t I = size.input_size;
  ASSERT_GE(L, 2u);
  ASSERT_NE(I, H);
  UpstreamGradients upstream;
  upstream.dy = read_npy_shaped(dir + "/dy.npy", {T, B, H}).data;
  upstream.dhy = read_npy_shaped(dir + "/dhy.npy", {L, B, H}).data;
  upstream.dcy = read_npy_shaped(dir + "/dcy.npy", {L, B, H}).data;

  const ReferenceTraining training = reference_training(params, upstream);
  const ReferenceGradients& grads = training.gradients;

  struct Compared {
    std::string name;
    const std::vector<double>* ours;
    std::vector<std::size_t> shape;
  };
  std::vector<Compared> compared = {
      {"y", &training.forward.y, {T, B, H}},   {"hy", &training.forward.hy, {L, B, H}},
      {"cy", &training.forward.cy, {L, B, H}}, {"dx", &grads.dx, {T, B, I}},
      {"dh0", &grads.dh0, {L, B, H}},          {"dc0", &grads.dc0, {L, B, H}}};
  for (std::size_t l = 0; l < L; ++l) {
    const std::string suffix = "_l" + std::to_string(l);
    const std::size_t width = size.layer_input_size(static_cast<int>(l));
    compared.push_back({"grad_weight_ih" + suffix, &grads.layers[l].w_ih, {4 * H, width}});
    compared.push_back({"grad_weight_hh" + suffix, &grads.layers[l].w_hh, {4 * H, H}});
    compared.push_back({"grad_bias_ih" + suffix, &grads.layers[l].b_ih, {4 * H}});
    compared.push_back({"grad_bias_hh" + suffix, &grads.layers[l].b_hh, {4 * H}});
  }

  double worst_norm = 0.0, worst_ulps = 0.0;
  for (const Compared& item : compared) {
    const std::vector<float> torch =
        read_npy_shaped(dir + "/" + item.name + ".npy", item.shape).data;
    ASSERT_EQ(item.ours->size(), torch.size()) << item.name;
    const double norm_error = relative_norm_error(*item.ours, torch);
    worst_norm = std::max(worst_norm, norm_error);
    EXPECT_LE(norm_error, 1e-6) << item.name;
    double largest = 0.0;
    for (float value : torch)
      largest = std::max(largest, static_cast<double>(std::fabs(value)));
    for (std::size_t k = 0; k < torch.size(); ++k) {
      const double expected = torch[k];
      const double ulp = std::ldexp(std::fabs(expected), -23);
      const double difference = std::fabs((*item.ours)[k] - expected);
      if (ulp > 0.0) worst_ulps = std::max(worst_ulps, difference / ulp);
      EXPECT_LE(difference, ulp + 1e-12 * largest)
          << item.name << "[" << k << "]: ours " << (*item.ours)[k] << ", torch " << expected;
    }
  }
  std::cout << "[          ] worst relative-norm error " << worst_norm << ", worst element error "
            << worst_ulps << " float32 ulp\n";
}

// ---- argument checks
// -----------------------------------------------------------------------------

/// Runs reference_training and requires std::invalid_argument whose message contains `phrase`.
void expect_invalid(const LstmParams& params, const UpstreamGradients& upstream,
                    const std::string& phrase) {
  try {
    reference_training(params, upstream);
    ADD_FAILURE() << "no exception; expected one naming " << phrase;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(phrase), std::string::npos) << error.what();
  }
}

TEST(ReferenceTraining, WrongSizesThrow) {
  const ProblemSize size = ProblemSize{3, 2, 2, 3, 2};
  const LstmParams params = random_params(size, 606);
  const UpstreamGradients upstream = random_upstream(size, 607);
  ASSERT_NO_THROW(reference_training(params, upstream));

  UpstreamGradients bad = upstream;
  bad.dy.pop_back();
  expect_invalid(params, bad, "dy has 17 elements, expected 18");
  bad = upstream;
  bad.dhy.push_back(0.0f);
  expect_invalid(params, bad, "dhy has 13 elements, expected 12");
  bad = upstream;
  bad.dcy.clear();
  expect_invalid(params, bad, "dcy has 0 elements, expected 12");
  bad = upstream;
  bad.dy.resize(4 * 2 * 3);  // one step too many
  expect_invalid(params, bad, "dy has 24 elements");

  LstmParams bad_params = params;
  bad_params.x.pop_back();
  expect_invalid(bad_params, upstream, "x has 11 elements, expected 12");
  bad_params = params;
  bad_params.layers[1].w_hh.pop_back();
  expect_invalid(bad_params, upstream, "weight_hh_l1");
  bad_params = params;
  bad_params.layers.pop_back();
  expect_invalid(bad_params, upstream, "layers of weights");
  bad_params = params;
  bad_params.size.batch = 0;
  expect_invalid(bad_params, upstream, "positive");
}

// training_tensors names the reference's results as output_layouts does (names, shapes, axes and
// order: what a check compares and lstm_reference --training --dump writes), each with its values.
TEST(ReferenceTraining, TensorsByNameFollowOutputLayouts) {
  const ProblemSize size{5, 3, 2, 4, 2};
  const LstmParams params = random_params(size, 707);
  const ReferenceTraining training = reference_training(params, random_upstream(size, 708));
  const std::vector<ReferenceTensor> tensors = training_tensors(size, training);
  const std::vector<OutputTensor> layouts = output_layouts(size, StageKind::kTraining);
  ASSERT_EQ(tensors.size(), layouts.size());
  std::vector<const std::vector<double>*> expected = {
      &training.forward.y,    &training.forward.hy,    &training.forward.cy,
      &training.gradients.dx, &training.gradients.dh0, &training.gradients.dc0};
  for (const ReferenceLayerGradients& layer : training.gradients.layers) {
    for (const std::vector<double>* v : {&layer.w_ih, &layer.w_hh, &layer.b_ih, &layer.b_hh})
      expected.push_back(v);
  }
  ASSERT_EQ(expected.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].name, layouts[i].name);
    EXPECT_EQ(tensors[i].shape, layouts[i].shape) << tensors[i].name;
    EXPECT_EQ(tensors[i].axes, layouts[i].axes) << tensors[i].name;
    EXPECT_EQ(tensors[i].values, *expected[i]) << tensors[i].name;
  }
  EXPECT_EQ(tensors[3].name, "dx");
  EXPECT_EQ(tensors.back().name, "grad_bias_hh_l1");

  ReferenceTraining missing_layer = training;
  missing_layer.gradients.layers.pop_back();
  EXPECT_THROW(training_tensors(size, missing_layer), std::invalid_argument);
  ReferenceTraining short_dx = training;
  short_dx.gradients.dx.pop_back();
  try {
    training_tensors(size, short_dx);
    ADD_FAILURE() << "a dx of the wrong size was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("dx has 23 values"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace lstm
