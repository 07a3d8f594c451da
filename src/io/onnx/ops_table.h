// Internal: the one table of ONNX ops the importer lowers. Each entry names the ONNX
// op type of the default domain, the opset range it covers and its lowering function
// (defined in ops_<family>.cpp). The list itself lives in ops_list.inc.
#pragma once
#include <string_view>
#include <vector>

#include "io/onnx/importer.h"

namespace rlx::onnx {

using LowerFn = std::vector<Value> (*)(NodeCtx&);

struct OpEntry {
  std::string_view op_type;
  int since, until;  // opset range (inclusive)
  LowerFn lower;
};

#define ONNX_OP(op, since, until, fn) std::vector<Value> fn(NodeCtx&);
#include "io/onnx/ops_list.inc"
#undef ONNX_OP

const std::vector<OpEntry>& op_table();
// The entry for op_type at opset, or nullptr. `known` (if given) is set when the op
// exists in the table at some other opset.
const OpEntry* find_op(std::string_view op_type, int64_t opset, bool* known = nullptr);

inline constexpr int kMinOpset = 7;
inline constexpr int kMaxOpset = 28;

}  // namespace rlx::onnx
