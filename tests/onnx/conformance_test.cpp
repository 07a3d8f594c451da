// The ONNX backend node suite (../shared/onnx/node) against the checked-in list of
// expected failures: any failing case that the list does not name is a regression.
// Listed cases that pass are reported so the list can shrink.
#ifdef RLX_HAVE_ONNX  // built without the importer: no tests here
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "io/onnx/conformance.h"

namespace rlx::onnx::test {
namespace {

TEST(OnnxConformance, NodeSuiteHasNoRegressions) {
  std::filesystem::path suite = std::filesystem::path(RLX_SHARED_DIR) / "onnx" / "node";
  if (!std::filesystem::exists(suite)) GTEST_SKIP() << "no ONNX node suite at " << suite;
  auto expected = read_expected_failures(std::string(RLX_SOURCE_DIR) + "/tests/onnx/expected_failures.txt");
  ConformanceOptions opts;
  opts.jobs = 2;
  opts.timeout_s = 60;
  std::ostringstream log;
  ConformanceSummary s = run_conformance({suite.string()}, opts, log);
  ExpectationReport rep = check_expected(s, expected);
  std::cout << s.passed << " passed, " << s.failed << " failed, " << s.skipped << " skipped\n";
  for (const auto& n : rep.unexpected_passes)
    std::cout << "unexpectedly passing - remove from tests/onnx/expected_failures.txt: " << n << "\n";
  std::ostringstream bad;
  for (const auto& r : rep.regressions) bad << "\n  " << r;
  EXPECT_TRUE(rep.regressions.empty()) << rep.regressions.size() << " cases fail that expected_failures.txt does not list:"
                                       << bad.str();
}

}  // namespace
}  // namespace rlx::onnx::test

#endif  // RLX_HAVE_ONNX
