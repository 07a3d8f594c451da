// Shared helpers for the IR tests.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "rlx/rlx.h"

namespace rlx {
// Readable gtest output for types.
inline void PrintTo(const Shape& s, std::ostream* os) { *os << s.str(); }
}  // namespace rlx

namespace rlx::test {

// A verified graph holding every op kind of the table at least once, with symbols,
// explicit names, absent optional inputs, multi-output nodes and a nested body
// (defined in text_roundtrip_test.cpp).
Graph every_op_graph();

// Runs f, expects an rlx::Error of category `cat` whose message contains every part.
template <class F>
void expect_rlx_error(F&& f, ErrorCategory cat, std::initializer_list<std::string_view> parts, const char* file,
                      int line) {
  SCOPED_TRACE(testing::Message() << "called from " << file << ":" << line);
  try {
    f();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.category(), cat) << "message: " << msg;
    for (auto p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-rlx exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected an rlx::Error, nothing was thrown";
}

}  // namespace rlx::test

#define EXPECT_RLX_ERROR(stmt, cat, ...) \
  ::rlx::test::expect_rlx_error([&] { stmt; }, ::rlx::ErrorCategory::cat, {__VA_ARGS__}, __FILE__, __LINE__)
