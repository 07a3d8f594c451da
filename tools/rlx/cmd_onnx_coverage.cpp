// `rlx onnx-coverage [--suite DIR] [--results LOG]`: prints docs/onnx-coverage.md.
#include "cli.h"
#ifdef RLX_HAVE_ONNX
#include <iostream>

#include "io/onnx/coverage.h"

namespace rlx::cli {

namespace {
int run_onnx_coverage(const Args& args) {
  std::cout << onnx::coverage_markdown(args.get("--suite"), args.get("--results"));
  return 0;
}
}  // namespace

Command onnx_coverage_command() {
  Command c;
  c.name = "onnx-coverage";
  c.summary = "print the ONNX op coverage table (docs/onnx-coverage.md)";
  c.usage = "[--suite DIR] [--results TEST_ONNX_LOG]";
  c.options = {{"--suite", "DIR", "ONNX backend node test folder to scan for ops"},
               {"--results", "LOG", "output of `rlx test-onnx` to count pass/fail per op"}};
  c.run = &run_onnx_coverage;
  return c;
}

}  // namespace rlx::cli
#endif  // RLX_HAVE_ONNX
