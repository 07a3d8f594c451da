// simplify: local algebraic rewrites. Every rule proposes a replacement value; it is
// taken only when its type (dims and dtype) equals the original output type, so a rule
// never changes broadcasting or promotion. x*0 -> 0 is applied to integers only
// (for floats it would drop NaN/Inf propagation). Nodes left dead are removed.
#include <optional>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

bool splat_is(const Graph& g, Value v, double x) {
  auto s = splat_value(g, v);
  return s && *s == x;
}

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// x * 0 for integer results: zeros of the result type (a broadcast of one scalar).
std::optional<Value> int_zeros(Rewriter& rw, const Node& n, const std::string& name) {
  const Shape& t = n.outputs[0];
  if (!(is_integer(t.dtype()) || t.dtype() == DType::Bool) || !t.is_static()) return std::nullopt;
  Value zero = rw.dst().scalar(0, t.dtype());
  if (t.rank() == 0) return zero;
  return rw.emit1(OpKind::Expand, {zero}, ShapeAttrs{t.static_dims()}, name);
}

// The value `n` (inputs already rewritten to `in`) simplifies to, or nullopt.
std::optional<Value> simplify_node(Rewriter& rw, int32_t id, const std::vector<Value>& in) {
  const Node& n = rw.src().node(id);
  const std::string name = rw.name_of(id);
  Graph& d = rw.dst();
  const Shape& out = n.outputs[0];
  auto same_type = [&](Value v) { return d.type(v) == out; };
  switch (n.kind) {
    case OpKind::Identity:
      return in[0];
    case OpKind::Add:
      if (splat_is(d, in[1], 0)) return in[0];
      if (splat_is(d, in[0], 0)) return in[1];
      return std::nullopt;
    case OpKind::Sub:
      if (splat_is(d, in[1], 0)) return in[0];
      return std::nullopt;
    case OpKind::Mul:
      if (splat_is(d, in[1], 1)) return in[0];
      if (splat_is(d, in[0], 1)) return in[1];
      if (splat_is(d, in[1], 0) || splat_is(d, in[0], 0)) return int_zeros(rw, n, name);
      return std::nullopt;
    case OpKind::Div:
    case OpKind::Pow:
      if (splat_is(d, in[1], 1)) return in[0];
      return std::nullopt;
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::And:
    case OpKind::Or:
    case OpKind::BitwiseAnd:
    case OpKind::BitwiseOr:
      if (in[0] == in[1]) return in[0];
      return std::nullopt;
    case OpKind::Neg:
    case OpKind::Not:
    case OpKind::BitwiseNot:
      if (const Node* p = producer_of_kind(d, in[0], n.kind)) return p->inputs[0];
      return std::nullopt;
    case OpKind::Where:
      if (splat_is(d, in[0], 1)) return in[1];
      if (splat_is(d, in[0], 0)) return in[2];
      return std::nullopt;
    case OpKind::Cast: {
      DType to = n.attr<CastAttrs>().to;
      if (d.type(in[0]).dtype() == to) return in[0];
      // cast(cast(x: a -> b) -> c) == cast(x: a -> c) when a -> b is exact.
      if (const Node* p = producer_of_kind(d, in[0], OpKind::Cast)) {
        Value x = p->inputs[0];
        DType a = d.type(x).dtype(), b = p->attr<CastAttrs>().to;
        if (is_lossless_cast(a, b)) return a == to ? x : rw.emit1(OpKind::Cast, {x}, CastAttrs{to}, name);
      }
      return std::nullopt;
    }
    case OpKind::Reshape: {
      if (same_type(in[0])) return in[0];
      if (const Node* p = producer_of_kind(d, in[0], OpKind::Reshape)) {
        Value x = p->inputs[0];
        if (d.type(x) == out) return x;
        ShapeAttrs a = n.attr<ShapeAttrs>();
        if (out.is_static()) a.shape = out.static_dims();
        return rw.emit1(OpKind::Reshape, {x}, a, name);
      }
      return std::nullopt;
    }
    case OpKind::Transpose: {
      int rank = d.type(in[0]).rank();
      auto perm = normalized_perm(n.attr<TransposeAttrs>().perm, rank);
      auto is_identity = [](const std::vector<int64_t>& p) {
        for (size_t i = 0; i < p.size(); ++i)
          if (p[i] != int64_t(i)) return false;
        return true;
      };
      if (is_identity(perm)) return in[0];
      if (const Node* p = producer_of_kind(d, in[0], OpKind::Transpose)) {
        // y = x^p1, z = y^p2  =>  z.dim[j] = x.dim[p1[p2[j]]].
        Value x = p->inputs[0];
        auto p1 = normalized_perm(p->attr<TransposeAttrs>().perm, rank);
        std::vector<int64_t> q(static_cast<size_t>(rank), 0);
        for (int j = 0; j < rank; ++j) q[size_t(j)] = p1[size_t(perm[size_t(j)])];
        if (is_identity(q)) return x;
        return rw.emit1(OpKind::Transpose, {x}, TransposeAttrs{q}, name);
      }
      return std::nullopt;
    }
    case OpKind::Slice: {
      const auto& a = n.attr<SliceAttrs>();
      if (all_equal(a.steps, 1) && same_type(in[0])) return in[0];
      return std::nullopt;
    }
    case OpKind::Expand:
      if (same_type(in[0])) return in[0];
      return std::nullopt;
    case OpKind::Concat:
      if (in.size() == 1) return in[0];
      return std::nullopt;
    case OpKind::Tile:
      if (all_equal(n.attr<TileAttrs>().repeats, 1)) return in[0];
      return std::nullopt;
    case OpKind::Pad:
      if (all_equal(n.attr<PadAttrs>().pads, 0)) return in[0];
      return std::nullopt;
    case OpKind::Split:
      if (n.outputs.size() == 1) return in[0];
      return std::nullopt;
    default:
      return std::nullopt;
  }
}
}  // namespace

Graph simplify(const Graph& g) {
  Rewriter rw(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (ir::has_trait(n.kind, ir::kLeaf) || n.outputs.size() != 1 || !n.subgraphs.empty()) {
      rw.copy(int32_t(i));
      continue;
    }
    std::vector<Value> in = rw.map_inputs(n);
    std::optional<Value> r;
    try {
      r = simplify_node(rw, int32_t(i), in);
    } catch (const Error& e) {
      // A rule's replacement did not type-check (e.g. symbolic dims in a merged
      // reshape); the graph is unchanged on throw, so keep the node.
      if (e.category() != ErrorCategory::Shape) throw;
    }
    // A replacement of another type (broadcast, promotion) is refused; anything it
    // emitted is dead and goes with the final dce.
    if (r && r->valid() && rw.dst().type(*r) == n.outputs[0]) rw.replace(int32_t(i), {*r});
    else rw.copy(int32_t(i));
  }
  return dce(rw.finish());
}

}  // namespace rlx::opt
