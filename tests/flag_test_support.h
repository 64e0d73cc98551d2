// Command-line flags in the tests, parsed as a stage's executable parses them (CLI11), so that a
// test pins a stage's plan with the flags a user would type: {"--plan", "8,256,2"}. Host code
// only: the planner tests (CPU) use it as well as the GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lstm::testing {

/// `args` in one line, for messages: "--plan 8,256,2".
inline std::string joined(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& arg : args)
    line += (line.empty() ? "" : " ") + arg;
  return line;
}

/// A command line's words: "--plan 8,256,2" gives {"--plan", "8,256,2"} (no quoting).
inline std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> args;
  std::size_t begin = line.find_first_not_of(' ');
  while (begin != std::string::npos) {
    const std::size_t end = line.find(' ', begin);
    args.push_back(line.substr(begin, end == std::string::npos ? end : end - begin));
    begin = line.find_first_not_of(' ', end);
  }
  return args;
}

/// Parses `args` with `app` (its options already added) as the executable parses its command
/// line. Returns "" where they are accepted, else CLI11's message (a usage error, exit code 2 in
/// the executable), e.g. "--plan: the tile width must be 4, 8 or 16".
inline std::string parse_flags(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    return error.what();
  }
  return {};
}

/// A stage's own flags (`Flags`: its plan.h StageFlags, added by its add_stage_flags) as `args`
/// set them. Flags the stage refuses fail the calling test with CLI11's message.
template <class Flags>
Flags parse_stage_flags(const std::vector<std::string>& args) {
  Flags flags;
  CLI::App app{"stage flags", "stage"};
  add_stage_flags(app, flags);  // the stage's namespace, found through Flags
  const std::string error = parse_flags(app, args);
  EXPECT_EQ(error, "") << "the stage refuses the flags " << joined(args);
  return flags;
}

}  // namespace lstm::testing
