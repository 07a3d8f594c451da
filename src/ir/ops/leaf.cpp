// Leaves (input, param, constant): the type is declared on the node itself, so
// inference validates it against the attributes and returns it unchanged.
#include "ir/ops/infer_util.h"

namespace rlx::ir {

namespace {
// Byte size of a static type, refusing sizes that overflow (types come from files).
int64_t checked_bytes(const InferCtx& ctx, const Shape& t) {
  int64_t n = int64_t(dtype_size(t.dtype()));
  for (Dim d : t.dims())
    if (__builtin_mul_overflow(n, d.raw(), &n)) ctx.error("type ", t.str(), " is too large");
  return n;
}
}  // namespace

std::vector<Shape> infer_leaf(const InferCtx& ctx) {
  const Node& n = ctx.node;
  if (n.outputs.size() != 1) ctx.error("a leaf declares exactly one output type, found ", n.outputs.size());
  const Shape& t = n.outputs[0];
  for (Dim d : t.dims())
    if (d.is_static() && d.raw() < 0) ctx.error("negative dim in ", t.str());
  if (n.kind == OpKind::Constant) {
    const auto& a = n.attr<ConstantAttrs>();
    if (!t.is_static()) ctx.error("a constant needs a static shape, got ", t.str());
    int64_t need = checked_bytes(ctx, t);
    if (int64_t(a.value.size()) != need)
      ctx.error("constant value has ", a.value.size(), " bytes, type ", t.str(), " needs ", need);
  } else {
    const auto& a = n.attr<LeafAttrs>();
    if (a.name.empty()) ctx.error("an ", op_name(n.kind), " needs a public name");
    if (n.kind == OpKind::Input && !a.init.empty()) ctx.error("an input cannot carry initial data");
    if (!a.init.empty()) {
      if (!t.is_static()) ctx.error("initial data needs a static type, got ", t.str());
      int64_t need = checked_bytes(ctx, t);
      if (int64_t(a.init.size()) != need)
        ctx.error("initial data has ", a.init.size(), " bytes, type ", t.str(), " needs ", need);
    }
  }
  return {t};
}

}  // namespace rlx::ir
