// The ONNX backend node suite (../shared/onnx/node) against the checked-in list of
// expected failures, through the CLI that runs it (`rlx test-onnx --expected-failures`):
// any failing case that the list does not name is a regression. Listed cases that pass
// are reported so the list can shrink.
#ifdef RLX_HAVE_ONNX  // built without the importer: no tests here
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace rlx::onnx::test {
namespace {

namespace fs = std::filesystem;

TEST(OnnxConformance, NodeSuiteHasNoRegressions) {
  const fs::path suite = fs::path(RLX_SHARED_DIR) / "onnx" / "node";
  if (!fs::exists(suite)) GTEST_SKIP() << "no ONNX node suite at " << suite;
  const fs::path log = fs::path(testing::TempDir()) / "rlx_conformance.log";
  const std::string cmd = "'" + (fs::path(RLX_BINARY_DIR) / "rlx").string() + "' test-onnx '" + suite.string() +
                          "' --jobs 2 --timeout 60 --expected-failures '" + RLX_SOURCE_DIR +
                          "/tests/onnx/expected_failures.txt' >'" + log.string() + "' 2>&1";
  const int raw = std::system(cmd.c_str());
  std::ifstream f(log);
  std::string line, summary, problems;
  while (std::getline(f, line)) {
    if (line.find(" passed, ") != std::string::npos || line.find(" regressions, ") != std::string::npos)
      summary += line + "\n";
    if (line.rfind("REGRESSION ", 0) == 0 || line.rfind("unexpectedly passing", 0) == 0) problems += line + "\n";
  }
  std::cout << summary << problems;
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << "rlx test-onnx failed:\n" << problems;
  EXPECT_NE(summary.find(" passed, "), std::string::npos) << "no summary line in " << log;
}

}  // namespace
}  // namespace rlx::onnx::test

#endif  // RLX_HAVE_ONNX
