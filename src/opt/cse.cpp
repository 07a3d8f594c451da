// cse: merges nodes with the same kind, attributes, inputs and output types. Inputs of
// commutative binary ops are put in a canonical order first, so add(a,b) == add(b,a).
// Constants with equal type and bytes merge too; inputs, params, nondeterministic ops
// and nodes with subgraphs never merge.
#include <algorithm>
#include <unordered_map>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {
std::vector<Value> canonical_inputs(OpKind kind, std::vector<Value> in) {
  if (in.size() == 2 && ir::has_trait(kind, ir::kCommutative)) {
    if (in[1] < in[0]) std::swap(in[0], in[1]);
  }
  return in;
}

size_t key_hash(OpKind kind, const Attrs& attrs, const std::vector<Value>& in) {
  size_t h = std::hash<int>()(int(kind)) * 31 + attrs_hash(attrs);
  for (Value v : in) h = h * 1000003u + size_t(uint32_t(v.node)) * 17u + size_t(uint32_t(v.out));
  return h;
}

// Does destination node `d` compute what `n` (with canonical destination inputs `in`) does?
bool same(const Node& d, const Node& n, const std::vector<Value>& in) {
  return d.kind == n.kind && canonical_inputs(d.kind, d.inputs) == in && d.outputs == n.outputs &&
         attrs_equal(d.attrs, n.attrs);
}
}  // namespace

Graph cse(const Graph& g) {
  Rewriter rw(g);
  const auto& nodes = g.nodes();
  std::unordered_multimap<size_t, int32_t> seen;  // key hash -> destination node
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    // Every op of the table is deterministic; a random op, once one exists, gets a trait
    // for it and joins this test.
    if (n.kind == OpKind::Input || n.kind == OpKind::Param || !n.subgraphs.empty()) {
      rw.copy(int32_t(i));
      continue;
    }
    std::vector<Value> in = canonical_inputs(n.kind, rw.map_inputs(n));
    size_t h = key_hash(n.kind, n.attrs, in);
    int32_t found = -1;
    auto range = seen.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
      if (same(rw.dst().node(it->second), n, in)) { found = it->second; break; }
    if (found >= 0) {
      std::vector<Value> now;
      for (size_t o = 0; o < n.outputs.size(); ++o) now.push_back(Value{found, int32_t(o)});
      rw.replace(int32_t(i), now);
      continue;
    }
    seen.emplace(h, rw.copy(int32_t(i)));
  }
  return dce(rw.finish());
}

}  // namespace rlx::opt
