// ONNX backend conformance runner (`rlx test-onnx`). Test tooling, so it lives with the
// CLI rather than in the library (process management: fork/wait per case).
//
// A case is a folder with model.onnx and test_data_set_N/{input,output}_K.pb; a path
// may also be a folder of case folders. Each case prints one line:
//   PASS name | FAIL name: reason | SKIP name: reason
// and the run ends with "N passed, M failed, K skipped". Floating outputs compare with
// |got - want| <= atol + rtol * |want| (rtol 1e-3, atol 1e-7 for f32/f64; f16 4x and
// bf16 32x looser in rtol with atol 1e-5 / 1e-4), NaN matching NaN; integers, bools and
// strings compare exactly; sequences and optionals element by element. Skipped: map and
// sparse values, domains the importer lowers no op of (it lowers the default one,
// ai.onnx.ml, ai.onnx.preview and ai.onnx.preview.training).
// With `isolate`, every case runs in a forked child (a crash or a timeout fails that
// case only); `jobs` children run at once. Output order is the sorted case order.
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "rlx/options.h"

namespace rlx::onnx {

struct ConformanceOptions {
  Device device = Device::Cpu;
  bool isolate = true;
  int jobs = 1;
  int timeout_s = 120;
  int threads = 1;  // compile threads per case
};

enum class CaseStatus { Pass, Fail, Skip };

struct CaseResult {
  std::string name;
  CaseStatus status = CaseStatus::Fail;
  std::string reason;
};

struct ConformanceSummary {
  int passed = 0, failed = 0, skipped = 0;
  std::vector<CaseResult> results;  // in case order
};

// Expands PATHs into case folders (sorted); throws Error(Io) for a path that is neither.
std::vector<std::string> find_cases(const std::vector<std::string>& paths);
// Runs one case in this process (never throws: errors become FAIL).
CaseResult run_case(const std::string& dir, const ConformanceOptions& opts);
ConformanceSummary run_conformance(const std::vector<std::string>& paths, const ConformanceOptions& opts,
                                   std::ostream& out);

// Expected failures: one "case_name: reason" per line; '#' comments and blank lines
// are ignored. Throws Error(Parse) naming the file and line for a line without a reason.
std::map<std::string, std::string> read_expected_failures(const std::string& path);

struct ExpectationReport {
  std::vector<std::string> regressions;        // failed but not listed ("name: reason")
  std::vector<std::string> unexpected_passes;  // listed but passed: remove from the list
};
ExpectationReport check_expected(const ConformanceSummary& s, const std::map<std::string, std::string>& expected);

}  // namespace rlx::onnx
