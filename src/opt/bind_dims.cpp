// bind-dims: specialization. Every symbolic dim named in `bindings` becomes that size
// in the leaves' types; all other types are re-inferred from them, so a binding that
// makes shapes disagree fails with the Shape error of the first node at fault.
#include "opt/pipeline.h"
#include "opt/rewrite.h"

namespace rlx::opt {

Graph bind_dims(const Graph& g, const std::map<std::string, int64_t>& bindings) {
  const auto& syms = g.symbols();
  std::vector<int64_t> size(syms.size(), -1);
  for (const auto& [name, value] : bindings) {
    size_t id = 0;
    while (id < syms.size() && syms[id] != name) ++id;
    if (id == syms.size()) {
      std::string known;
      for (const auto& s : syms) known += (known.empty() ? "" : ", ") + s;
      fail(ErrorCategory::InvalidArgument, "bind_dims: graph '", g.name(), "' has no symbolic dim '", name,
           "' (symbols: ", known.empty() ? "none" : known, ")");
    }
    if (value < 0)
      fail(ErrorCategory::InvalidArgument, "bind_dims: dim '", name, "' bound to negative size ", value);
    size[id] = value;
  }
  auto bind = [&](const Shape& s) {
    std::vector<Dim> dims = s.dims();
    for (Dim& d : dims)
      if (d.is_symbolic() && size_t(d.symbol_id()) < size.size() && size[size_t(d.symbol_id())] >= 0)
        d = Dim(size[size_t(d.symbol_id())]);
    return s.with_dims(std::move(dims));
  };

  Rewriter rw(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (!ir::has_trait(n.kind, ir::kLeaf)) {
      rw.copy(int32_t(i));  // re-infers when an input type changed
      continue;
    }
    Node c = n;
    for (Shape& s : c.outputs) s = bind(s);
    if (n.kind == OpKind::Param) {
      const Blob& init = c.attr<LeafAttrs>().init;
      if (!init.empty() && c.outputs[0].is_static() && init.size() != c.outputs[0].bytes())
        fail(ErrorCategory::Shape, "bind_dims: param '", n.name, "' has ", init.size(), " bytes of initial data, its bound type ",
             shape_str(g, c.outputs[0]), " needs ", c.outputs[0].bytes());
    }
    rw.append(int32_t(i), std::move(c));
  }
  return rw.finish();
}

}  // namespace rlx::opt
