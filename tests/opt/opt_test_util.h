// Helpers for the golden before/after tests of the opt passes: graphs are written in
// the text IR; an expected graph is compared through print_graph, so formatting
// (spacing, default attributes) does not matter, only structure, names and types.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "rlx/text.h"

namespace rlx::opt::test {

inline Graph parse(const std::string& text) { return parse_graph(text, "<test>"); }

// Checks `actual` passes the verifier and prints exactly like `expected_text`.
inline void expect_graph(const Graph& actual, const std::string& expected_text) {
  EXPECT_NO_THROW(verify_graph(actual)) << print_graph(actual);
  std::string want = print_graph(parse(expected_text));
  std::string got = print_graph(actual);
  EXPECT_EQ(got, want) << "---- got:\n" << got << "---- want:\n" << want;
}

// Little-endian hex of f32 values as the text format prints constant blobs.
inline std::string hex_f32(const std::vector<float>& v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (float f : v) {
    unsigned char b[4];
    std::memcpy(b, &f, 4);
    for (unsigned char c : b) {
      s += digits[c >> 4];
      s += digits[c & 15];
    }
  }
  return s;
}

}  // namespace rlx::opt::test
