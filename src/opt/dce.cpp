// dce: removes nodes whose values reach no graph output. Inputs and params are kept
// even when unused: they are the graph's interface (set_param / run by name).
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

Graph dce(const Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<char> live(nodes.size(), 0);
  for (const auto& o : g.outputs()) live[size_t(o.value.node)] = 1;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == OpKind::Input || nodes[i].kind == OpKind::Param) live[i] = 1;
  for (size_t i = nodes.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (Value v : nodes[i].inputs)
      if (v.valid()) live[size_t(v.node)] = 1;
  }
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (live[i]) rw.copy(int32_t(i));
  return rw.finish();
}

}  // namespace rlx::opt
