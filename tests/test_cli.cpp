// The shared command line (common/core/command_line.h): defaults, explicit sizes, and every
// rejection.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/command_line.h"

namespace lstm {
namespace {

RunOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "lstm_test");
  std::vector<const char*> argv;
  for (const std::string& arg : args)
    argv.push_back(arg.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data(), "lstm_test", "a test");
}

/// Parsing `args` must stop with `code` and a message containing `phrase`.
void expect_exit(const std::vector<std::string>& args, int code, const std::string& phrase) {
  try {
    parse(args);
    ADD_FAILURE() << "accepted: " << ::testing::PrintToString(args);
  } catch (const CliExit& exit) {
    EXPECT_EQ(exit.code(), code) << exit.message();
    EXPECT_NE(exit.message().find(phrase), std::string::npos)
        << "message '" << exit.message() << "' lacks '" << phrase << "'";
  }
}

TEST(CommandLine, DefaultsAreTheCanonicalConfig) {
  const RunOptions options = parse({});
  EXPECT_EQ(options.size.hidden, 512);
  EXPECT_EQ(options.size.input_size, 512);
  EXPECT_EQ(options.size.batch, 64);
  EXPECT_EQ(options.size.seq_len, 100);
  EXPECT_EQ(options.size.layers, 4);
  EXPECT_TRUE(options.check);
  EXPECT_FALSE(options.given.hidden.has_value());
}

TEST(CommandLine, ReadsEveryFlag) {
  const RunOptions options =
      parse({"--hidden",   "37",     "--input-size", "19",     "--batch",  "3", "--seq",  "7",
             "--layers",   "3",      "--iters",      "4",      "--warmup", "0", "--seed", "99",
             "--no-check", "--dump", "out",          "--json", "r.jsonl"});
  EXPECT_EQ(options.size.hidden, 37);
  EXPECT_EQ(options.size.input_size, 19);
  EXPECT_EQ(options.size.batch, 3);
  EXPECT_EQ(options.size.seq_len, 7);
  EXPECT_EQ(options.size.layers, 3);
  EXPECT_EQ(options.iters, 4);
  EXPECT_EQ(options.warmup, 0);
  EXPECT_EQ(options.seed, 99u);
  EXPECT_FALSE(options.check);
  EXPECT_EQ(options.dump_dir, "out");
  EXPECT_EQ(options.json_path, "r.jsonl");
  EXPECT_EQ(options.given.hidden, 37);
}

TEST(CommandLine, InputSizeDefaultsToHidden) {
  EXPECT_EQ(parse({"--hidden", "40"}).size.input_size, 40);
}

TEST(CommandLine, HelpListsEveryFlagAndExitsZero) {
  try {
    parse({"--help"});
    FAIL() << "--help did not stop parsing";
  } catch (const CliExit& exit) {
    EXPECT_EQ(exit.code(), 0);
    for (const char* flag : {"--hidden", "--input-size", "--batch", "--seq", "--layers", "--iters",
                             "--warmup", "--seed", "--no-check", "--load", "--dump", "--json"}) {
      EXPECT_NE(exit.message().find(flag), std::string::npos) << flag;
    }
  }
}

TEST(CommandLine, RejectsZeroAndNegativeSizes) {
  expect_exit({"--hidden", "0"}, 2, "--hidden");
  expect_exit({"--batch", "-1"}, 2, "--batch");
  expect_exit({"--seq", "0"}, 2, "--seq");
  expect_exit({"--layers", "-3"}, 2, "--layers");
  expect_exit({"--input-size", "0"}, 2, "--input-size");
  expect_exit({"--iters", "0"}, 2, "--iters");
  expect_exit({"--warmup", "-1"}, 2, "--warmup");
}

TEST(CommandLine, RejectsNonNumericValues) {
  expect_exit({"--hidden", "abc"}, 2, "--hidden");
  expect_exit({"--batch", "1.5"}, 2, "--batch");
  expect_exit({"--seq", ""}, 2, "--seq");
  expect_exit({"--seed", "x1"}, 2, "--seed");
}

TEST(CommandLine, RejectsValuesBeyondInt) {
  expect_exit({"--hidden", "99999999999"}, 2, "--hidden");
}

TEST(CommandLine, RejectsSizesWhoseProductsOverflow) {
  expect_exit({"--hidden", "600000000"}, 2, "4*H");
  expect_exit({"--hidden", "40000", "--batch", "40000"}, 2, "4*H*B");
  expect_exit({"--seq", "100000", "--batch", "100000", "--hidden", "8"}, 2, "T*B");
}

TEST(CommandLine, RejectsUnknownFlagsAndMissingValues) {
  expect_exit({"--bogus"}, 2, "--bogus");
  expect_exit({"--hidden"}, 2, "--hidden");
  expect_exit({"extra_positional"}, 2, "extra_positional");
}

TEST(CommandLine, RejectsMissingLoadDirectory) {
  expect_exit({"--load", "/no/such/directory/anywhere"}, 2, "--load");
}

TEST(ProblemSize, CountsFlopsAsDesignSays) {
  ProblemSize size;  // canonical: 2 * L * T * B * 4H * (I + H) with I = H = 512
  EXPECT_DOUBLE_EQ(size.flop_count(), 2.0 * 4 * 100 * 64 * 4 * 512 * 1024);
  size.input_size = 100;
  size.layers = 2;  // layer 0 reads I = 100, layer 1 reads H
  EXPECT_DOUBLE_EQ(size.flop_count(), 2.0 * 100 * 64 * 2048 * (612 + 1024));
}

TEST(ProblemSize, ValidateNamesTheLimit) {
  ProblemSize size;
  size.hidden = 0;
  EXPECT_THROW(validate_problem_size(size), std::invalid_argument);
  size.hidden = 1 << 29;  // 4H = 2^31 does not fit an int
  try {
    validate_problem_size(size);
    FAIL() << "accepted H = 2^29";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("4*H"), std::string::npos) << error.what();
  }
  // Every dimension fits an int, but the parameters of 2^31 - 1 layers overflow 64 bits.
  const ProblemSize many_layers{16384, 16384, 1, 1, 2147483647};
  try {
    validate_problem_size(many_layers);
    FAIL() << "accepted " << many_layers.describe();
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what())
                  .find("overflows 64-bit sizes (H=16384 I=16384 B=1 T=1 "
                        "L=2147483647; at most 18446744073709551615)"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace lstm
