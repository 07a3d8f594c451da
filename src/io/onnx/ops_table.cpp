// The op table, built once from ops_list.inc.
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = {
#define ONNX_OP(op, since, until, fn) OpEntry{#op, since, until, &fn, ""},
#define ONNX_DOMAIN_OP(domain, op, since, until, fn) OpEntry{#op, since, until, &fn, domain},
#include "io/onnx/ops_list.inc"
#undef ONNX_DOMAIN_OP
#undef ONNX_OP
  };
  return table;
}

namespace {
std::string_view canonical(std::string_view domain) { return is_default_domain(domain) ? std::string_view() : domain; }
}  // namespace

bool has_domain(std::string_view domain) {
  domain = canonical(domain);
  if (domain.empty()) return true;
  for (const OpEntry& e : op_table())
    if (e.domain == domain) return true;
  return false;
}

const OpEntry* find_op(std::string_view domain, std::string_view op_type, int64_t opset, bool* known) {
  if (known) *known = false;
  domain = canonical(domain);
  for (const OpEntry& e : op_table()) {
    if (e.op_type != op_type || e.domain != domain) continue;
    if (known) *known = true;
    if (opset >= e.since && opset <= e.until) return &e;
  }
  return nullptr;
}

}  // namespace rlx::onnx
