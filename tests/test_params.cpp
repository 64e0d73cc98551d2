// Parameters (common/core/lstm_data.h): deterministic generation, --load with its error cases,
// dumps.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "core/lstm_data.h"
#include "core/npy.h"

namespace lstm {
namespace {

namespace fs = std::filesystem;

ProblemSize small_size() {
  ProblemSize s;
  s.hidden = 6;
  s.input_size = 4;
  s.batch = 3;
  s.seq_len = 5;
  s.layers = 2;
  return s;
}

/// A fresh directory under the system's temporary folder, removed at the end of the test.
class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("lstm_params_") + info->name() + "_" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Writes `params` in the --load layout (PyTorch's names and shapes).
  void write_params(const LstmParams& p) const {
    const std::size_t T = p.size.seq_len, B = p.size.batch, I = p.size.input_size,
                      H = p.size.hidden, L = p.size.layers;
    write_npy(path("x.npy"), {T, B, I}, p.x.data());
    write_npy(path("h0.npy"), {L, B, H}, p.h0.data());
    write_npy(path("c0.npy"), {L, B, H}, p.c0.data());
    for (std::size_t k = 0; k < L; ++k) {
      const std::size_t in = k == 0 ? I : H;
      const std::string l = std::to_string(k);
      write_npy(path("weight_ih_l" + l + ".npy"), {4 * H, in}, p.layers[k].w_ih.data());
      write_npy(path("weight_hh_l" + l + ".npy"), {4 * H, H}, p.layers[k].w_hh.data());
      write_npy(path("bias_ih_l" + l + ".npy"), {4 * H}, p.layers[k].b_ih.data());
      write_npy(path("bias_hh_l" + l + ".npy"), {4 * H}, p.layers[k].b_hh.data());
    }
  }

  /// load_params must fail with a message containing every phrase.
  void expect_load_error(const SizeFlags& flags, std::initializer_list<std::string> phrases) {
    try {
      load_params(dir_.string(), flags);
      ADD_FAILURE() << "load_params accepted the directory";
    } catch (const std::exception& error) {
      for (const std::string& phrase : phrases) {
        EXPECT_NE(std::string(error.what()).find(phrase), std::string::npos)
            << "'" << error.what() << "' lacks '" << phrase << "'";
      }
    }
  }

  fs::path dir_;
};

TEST(ProblemSize, EqualOnlyWhenEveryFieldIs) {
  const ProblemSize base{200, 77, 3, 17, 3};
  EXPECT_TRUE(base == (ProblemSize{200, 77, 3, 17, 3}));
  EXPECT_FALSE(base != (ProblemSize{200, 77, 3, 17, 3}));
  for (const ProblemSize& other : {ProblemSize{201, 77, 3, 17, 3}, ProblemSize{200, 78, 3, 17, 3},
                                   ProblemSize{200, 77, 4, 17, 3}, ProblemSize{200, 77, 3, 18, 3},
                                   ProblemSize{200, 77, 3, 17, 4}}) {
    EXPECT_TRUE(base != other) << other.describe();
    EXPECT_FALSE(base == other) << other.describe();
  }
}

TEST(GenerateParams, SameSeedSameValuesOtherSeedOtherValues) {
  const LstmParams a = generate_params(small_size(), 7);
  const LstmParams b = generate_params(small_size(), 7);
  const LstmParams c = generate_params(small_size(), 8);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.layers[1].w_hh, b.layers[1].w_hh);
  EXPECT_NE(a.x, c.x);
  EXPECT_NE(a.layers[0].w_ih, c.layers[0].w_ih);
  EXPECT_NE(a.h0, a.c0);  // every tensor has its own stream
}

TEST(GenerateParams, ShapesAndRangesFollowPyTorch) {
  const ProblemSize s = small_size();
  const LstmParams p = generate_params(s, 1);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.x.size(), 5u * 3 * 4);
  EXPECT_EQ(p.h0.size(), 2u * 3 * 6);
  EXPECT_EQ(p.layers[0].w_ih.size(), 24u * 4);
  EXPECT_EQ(p.layers[1].w_ih.size(), 24u * 6);
  EXPECT_EQ(p.layers[1].b_hh.size(), 24u);
  const float bound = 1.0f / std::sqrt(6.0f);
  for (float w : p.layers[1].w_hh)
    EXPECT_LE(std::abs(w), bound);
  float largest = 0.0f;
  for (float v : p.x)
    largest = std::max(largest, std::abs(v));
  EXPECT_LE(largest, 1.0f);
  EXPECT_GT(largest, 0.5f);  // really spread over [-1, 1], not all zero
}

TEST(GenerateParams, LayerZeroDoesNotDependOnLayerCount) {
  ProblemSize one = small_size(), three = small_size();
  one.layers = 1;
  three.layers = 3;
  EXPECT_EQ(generate_params(one, 3).layers[0].w_hh, generate_params(three, 3).layers[0].w_hh);
}

TEST_F(TempDir, LoadReadsWhatWasWrittenAndTakesSizesFromFiles) {
  const LstmParams p = generate_params(small_size(), 5);
  write_params(p);
  const LstmParams loaded = load_params(dir_.string(), {});
  EXPECT_EQ(loaded.size.describe(), p.size.describe());
  EXPECT_EQ(loaded.x, p.x);
  EXPECT_EQ(loaded.c0, p.c0);
  EXPECT_EQ(loaded.layers[1].w_ih, p.layers[1].w_ih);
  EXPECT_EQ(loaded.layers[0].b_hh, p.layers[0].b_hh);
  SizeFlags agreeing;
  agreeing.hidden = 6;
  agreeing.layers = 2;
  EXPECT_NO_THROW(load_params(dir_.string(), agreeing));
}

TEST_F(TempDir, LoadRefusesFlagsThatDisagree) {
  write_params(generate_params(small_size(), 5));
  SizeFlags flags;
  flags.hidden = 8;
  expect_load_error(flags, {"--hidden 8 disagrees with", "h0.npy", "H = 6"});
  flags = {};
  flags.seq_len = 9;
  expect_load_error(flags, {"--seq 9 disagrees with", "x.npy", "T = 5"});
  flags = {};
  flags.input_size = 6;
  expect_load_error(flags, {"--input-size 6", "x.npy", "I = 4"});
}

TEST_F(TempDir, LoadRefusesMissingFile) {
  write_params(generate_params(small_size(), 5));
  fs::remove(path("bias_hh_l1.npy"));
  expect_load_error({}, {"bias_hh_l1.npy", "missing, but h0.npy has L = 2 layers"});
}

TEST_F(TempDir, LoadRefusesWrongWeightShape) {
  write_params(generate_params(small_size(), 5));
  std::vector<float> wrong(24 * 5, 0.5f);
  write_npy(path("weight_ih_l1.npy"), {24, 5}, wrong.data());
  expect_load_error({}, {"weight_ih_l1.npy", "(24, 5)", "(24, 6)"});
}

TEST_F(TempDir, LoadRefusesWrongRankAndBatchMismatch) {
  const LstmParams p = generate_params(small_size(), 5);
  write_params(p);
  write_npy(path("x.npy"), {5 * 3, 4}, p.x.data());
  expect_load_error({}, {"x.npy", "expected 3 dimensions"});
  write_params(p);
  write_npy(path("h0.npy"), {2, 1, 6}, p.h0.data());
  expect_load_error({}, {"h0.npy", "B = 1", "x.npy has B = 3"});
}

TEST_F(TempDir, LoadRefusesAnExtraLayer) {
  const LstmParams p = generate_params(small_size(), 5);
  write_params(p);
  write_npy(path("weight_ih_l2.npy"), {24, 6}, p.layers[1].w_ih.data());
  expect_load_error({}, {"weight_ih_l2.npy", "L = 2"});
}

TEST_F(TempDir, LoadRefusesZeroSizedDimension) {
  write_params(generate_params(small_size(), 5));
  write_npy(path("x.npy"), {0, 3, 4}, nullptr);
  expect_load_error({}, {"x.npy", "T = 0"});
}

TEST_F(TempDir, DumpedOutputsLoadBack) {
  const ProblemSize s = small_size();
  LstmOutputs out;
  for (int i = 0; i < 5 * 3 * 6; ++i)
    out.y.push_back(0.25f * i);
  for (int i = 0; i < 2 * 3 * 6; ++i)
    out.hy.push_back(-0.5f * i);
  for (int i = 0; i < 2 * 3 * 6; ++i)
    out.cy.push_back(0.125f * i);
  dump_outputs(path("dump"), s, out);
  const LstmOutputs back = load_outputs(path("dump"), s);
  EXPECT_EQ(back.y, out.y);
  EXPECT_EQ(back.hy, out.hy);
  EXPECT_EQ(back.cy, out.cy);
}

}  // namespace
}  // namespace lstm
