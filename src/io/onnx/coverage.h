// docs/onnx-coverage.md, generated from the importer's op table (ops_list.inc): every
// ONNX op of the default domain that the op table lowers or that the official backend
// node suite uses, with the opset range lowered and, given a `rlx test-onnx` log, the
// pass/fail/skip counts of the suite cases named after the op.
#pragma once
#include <string>

namespace rlx::onnx {

// suite_dir: folder of ONNX backend node cases ("" to list only the op table).
// results_log: output of `rlx test-onnx` ("" for none). Throws Error(Io) on unreadable paths.
std::string coverage_markdown(const std::string& suite_dir, const std::string& results_log);

}  // namespace rlx::onnx
