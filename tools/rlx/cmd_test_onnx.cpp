// `rlx test-onnx PATH...`: runs ONNX backend test cases (see src/io/onnx/conformance.h).
// With --expected-failures FILE the exit status is 1 only for cases that fail but are
// not listed; listed cases that pass are reported so the list can shrink.
#include <algorithm>
#include <iostream>

#include "cli.h"

#ifdef RLX_HAVE_ONNX
#include "onnx_conformance.h"
#endif

namespace rlx::cli {

std::vector<OptionSpec> test_onnx_option_specs() {
  return {
      {"--device", "DEV", "backend to run on: cpu (default) or cuda", false},
      {"--jobs", "N", "cases to run at once, each in its own process (default 1)", false},
      {"--timeout", "S", "seconds before a case is failed as timed out (default 120)", false},
      {"--threads", "N", "compute threads per case (default 1)", false},
      {"--no-isolate", "", "run cases in this process (a crash ends the run)", false},
      {"--expected-failures", "FILE", "exit 0 unless a case fails that FILE does not list", false},
  };
}

int cmd_test_onnx(const Args& args) {
#ifndef RLX_HAVE_ONNX
  (void)args;
  fail(ErrorCategory::Unsupported, "this rlx was built without the ONNX importer (protobuf/libonnx not found)");
#else
  onnx::ConformanceOptions opts;
  const std::string dev = args.get("--device", "cpu");
  opts.device = device_named(dev, "--device");
  // Fail once, up front, rather than once per case.
  const std::vector<Device> avail = Session::available_devices();
  if (std::find(avail.begin(), avail.end(), opts.device) == avail.end())
    fail(ErrorCategory::Unsupported, "--device ", dev, ": this rlx has no usable ", dev,
         " backend (not built, or no device/driver found); available: cpu");
  opts.jobs = int(integer(args, "--jobs", 1, 1, kMaxThreads));
  opts.timeout_s = int(integer(args, "--timeout", 120, 1, 86400));
  opts.threads = int(integer(args, "--threads", 1, 1, kMaxThreads));
  opts.isolate = !args.has("--no-isolate");
  if (onnx::find_cases(args.positional).empty()) {
    std::string paths;
    for (const std::string& p : args.positional) paths += (paths.empty() ? "" : ", ") + p;
    fail(ErrorCategory::InvalidArgument, "no ONNX test cases under ", paths,
         " (a case is a directory holding model.onnx and test_data_set_*/)");
  }
  std::map<std::string, std::string> expected;
  if (args.has("--expected-failures")) expected = onnx::read_expected_failures(args.get("--expected-failures"));
  onnx::ConformanceSummary s = onnx::run_conformance(args.positional, opts, std::cout);
  if (!args.has("--expected-failures")) return s.failed ? 1 : 0;
  onnx::ExpectationReport rep = onnx::check_expected(s, expected);
  for (const auto& n : rep.unexpected_passes)
    std::cout << "unexpectedly passing - remove from the expected-failures list: " << n << "\n";
  for (const auto& r : rep.regressions) std::cout << "REGRESSION " << r << "\n";
  std::cout << rep.regressions.size() << " regressions, " << rep.unexpected_passes.size()
            << " unexpectedly passing\n";
  return rep.regressions.empty() ? 0 : 1;
#endif
}

}  // namespace rlx::cli
