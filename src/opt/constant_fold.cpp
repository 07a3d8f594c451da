// constant-fold: evaluates nodes whose inputs are all constants (through the runtime's
// ConstEvaluator, so opt needs no backend) and replaces them by constants. Skips leaves,
// nondeterministic ops, nodes with subgraphs, symbolic shapes, and results over 16 MiB
// that are more than twice the size of the constants they are made from (an Expand or Tile
// that would grow a small constant into a big one). Up to twice its inputs a result is
// folded at any size: a weight's Transpose, or its Cast from f16 to f32 (legalize's casts
// around a half node run in f32), left in the graph would hold another copy in the arena
// and redo the work on every run.
// An evaluator that answers Error(Unsupported) leaves the node as it is.
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {
constexpr size_t kMaxFoldBytes = size_t(16) << 20;

bool foldable(const Graph& dst, const Node& n, const std::vector<Value>& in) {
  if (ir::has_trait(n.kind, ir::kLeaf)) return false;
  if (!n.subgraphs.empty()) return false;
  bool any = false;
  size_t in_bytes = 0;
  for (Value v : in) {
    if (!v.valid()) continue;
    if (dst.node(v.node).kind != OpKind::Constant) return false;
    in_bytes += dst.type(v).bytes();
    any = true;
  }
  if (!any) return false;
  size_t total = 0;
  for (const Shape& s : n.outputs) {
    if (!s.is_static()) return false;
    total += s.bytes();
  }
  return total <= kMaxFoldBytes || total <= 2 * in_bytes;
}
}  // namespace

Graph constant_fold(const Graph& g, const ConstEvaluator& eval) {
  if (!eval) return g;
  Rewriter rw(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::vector<Value> in = rw.map_inputs(n);
    if (!foldable(rw.dst(), n, in)) {
      rw.copy(int32_t(i));
      continue;
    }
    Node probe = n;
    probe.inputs = in;
    std::vector<Shape> in_types;
    std::vector<Blob> in_values;
    for (Value v : in) {
      if (!v.valid()) {
        in_types.emplace_back();
        in_values.emplace_back();
        continue;
      }
      in_types.push_back(rw.dst().type(v));
      in_values.push_back(rw.dst().node(v.node).attr<ConstantAttrs>().value);
    }
    std::vector<Blob> out;
    try {
      out = eval(probe, in_types, in_values);
    } catch (const Error& e) {
      if (e.category() != ErrorCategory::Unsupported) throw;
      rw.copy(int32_t(i));
      continue;
    }
    if (out.size() != n.outputs.size())
      fail(ErrorCategory::Internal, "constant-fold: evaluating node '", n.name, "' (", op_name(n.kind), ") gave ",
           out.size(), " outputs, expected ", n.outputs.size());
    std::vector<Value> now;
    for (size_t o = 0; o < out.size(); ++o) {
      if (out[o].size() != n.outputs[o].bytes())
        fail(ErrorCategory::Internal, "constant-fold: evaluating node '", n.name, "' output ", o, " gave ",
             out[o].size(), " bytes, type ", n.outputs[o].str(), " needs ", n.outputs[o].bytes());
      std::string base = rw.name_of(int32_t(i));
      std::string name = o == 0 || base.empty() ? base : base + "_out" + std::to_string(o);
      now.push_back(rw.dst().constant(n.outputs[o], out[o], name));
    }
    rw.replace(int32_t(i), now);
  }
  // Constants that only fed folded nodes are now dead.
  return dce(rw.finish());
}

}  // namespace rlx::opt
