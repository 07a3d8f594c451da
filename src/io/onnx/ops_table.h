// Internal: the one table of ONNX ops the importer lowers. Each entry names the ONNX
// op type and its domain ("" for the default one), the range of that domain's opset it
// covers and its lowering function (defined in ops_<family>.cpp). The list itself lives
// in ops_list.inc.
#pragma once
#include <string_view>
#include <vector>

#include "io/onnx/importer.h"

namespace rlx::onnx {

using LowerFn = std::vector<Value> (*)(NodeCtx&);

struct OpEntry {
  std::string_view op_type;
  int since, until;  // opset range of the op's domain (inclusive)
  LowerFn lower;
  std::string_view domain;  // "" for the default domain
};

#define ONNX_OP(op, since, until, fn) std::vector<Value> fn(NodeCtx&);
#define ONNX_DOMAIN_OP(domain, op, since, until, fn) std::vector<Value> fn(NodeCtx&);
#include "io/onnx/ops_list.inc"
#undef ONNX_DOMAIN_OP
#undef ONNX_OP

const std::vector<OpEntry>& op_table();
// The entry for op_type of `domain` ("" or "ai.onnx": the default one) at that domain's
// opset, or nullptr. `known` (if given) is set when the op exists in the table at some
// other opset.
const OpEntry* find_op(std::string_view domain, std::string_view op_type, int64_t opset, bool* known = nullptr);
// True when the table has ops of `domain` (the default domain always).
bool has_domain(std::string_view domain);

inline constexpr int kMinOpset = 7;
inline constexpr int kMaxOpset = 28;

}  // namespace rlx::onnx
