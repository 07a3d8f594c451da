// The op table, built once from ops_list.inc.
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = {
#define ONNX_OP(op, since, until, fn) OpEntry{#op, since, until, &fn},
#include "io/onnx/ops_list.inc"
#undef ONNX_OP
  };
  return table;
}

const OpEntry* find_op(std::string_view op_type, int64_t opset, bool* known) {
  if (known) *known = false;
  for (const OpEntry& e : op_table()) {
    if (e.op_type != op_type) continue;
    if (known) *known = true;
    if (opset >= e.since && opset <= e.until) return &e;
  }
  return nullptr;
}

}  // namespace rlx::onnx
