// fuse-gelu: GELU written out in primitives, as exporters emit it: the exact (erf) form
// (PyTorch's nn.GELU below opset 20, BERT-style TensorFlow code)
//   e = erf(x / c | x * c')   c = sqrt(2), c' = 1 / sqrt(2)
//   p = e + 1
//   y = (x * p) * h | x * (p * h) | (x * h) * p     h = 0.5 (any operand order)
// and its tanh approximation (GPT-2-style code, HF's gelu_new):
//   t = tanh(sqrt(2/pi) * (x + 0.044715 * x^3))     x^3 = pow(x, 3) | x * x * x
//   y = as above with p = t + 1
// -> gelu(x) (tanh_approx for the second): one op, which a product's epilogue can take
// (fuse-matmul-epilogue runs after this pass) and the backends compute in one pass. Only when
// every intermediate feeds nothing but the next step (and is not a graph output), every operand
// has x's type or is a scalar constant, and the constants are those of GELU to within f32
// rounding. The fused node takes the name of the chain's last node.
#include <cmath>
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

struct Gelu {
  std::vector<int32_t> absorbed;  // every node of the chain but the tail
  int32_t tail = -1;
  Value x;
  bool tanh = false;  // the tanh approximation
};

// `v` is a scalar constant within f32 rounding of `want` (exporters write the constants as
// f32: sqrt(2) as 1.4142135, 1/sqrt(2) as 0.70710677).
bool constant_near(const Graph& g, Value v, double want) {
  const Shape& s = g.type(v);
  if (!s.is_static() || s.numel() != 1) return false;
  const std::optional<double> c = splat_value(g, v);
  return c && std::fabs(*c - want) <= 1e-6 * std::fabs(want);
}

// When `v` is kind(y, c), or for add / mul also kind(c, y), with c a scalar constant near
// `want`: y. Otherwise no value.
Value beside_constant(const Graph& g, Value v, OpKind kind, double want) {
  const Node& n = g.node(v.node);
  if (n.kind != kind || n.inputs.size() != 2) return Value{};
  if (constant_near(g, n.inputs[1], want)) return n.inputs[0];
  if (kind != OpKind::Div && constant_near(g, n.inputs[0], want)) return n.inputs[1];
  return Value{};
}

// The erf form's inner value: e = erf(x / sqrt(2) | x * (1/sqrt(2))). Sets x and the absorbed
// nodes before e.
bool erf_inner(const Graph& g, const UseInfo& u, int32_t id, Value& x, std::vector<int32_t>& inner) {
  const Value arg = g.node(id).inputs[0];
  const double k = std::sqrt(2.0);
  x = beside_constant(g, arg, OpKind::Div, k);
  if (!x.valid()) x = beside_constant(g, arg, OpKind::Mul, 1.0 / k);
  if (!x.valid() || u.sole_user(arg) != id || !(g.type(arg) == g.type(x))) return false;
  inner = {arg.node};
  return true;
}

// x cubed: pow(x, 3) or (x * x) * x / x * (x * x); the nodes it takes, or false.
bool cube_of(const Graph& g, const UseInfo& u, Value c, Value& x, std::vector<int32_t>& nodes) {
  const Node& n = g.node(c.node);
  if (n.kind == OpKind::Pow && n.inputs.size() == 2 && constant_near(g, n.inputs[1], 3.0)) {
    x = n.inputs[0];
    nodes.push_back(c.node);
    return true;
  }
  if (n.kind != OpKind::Mul || n.inputs.size() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    const Value sq = n.inputs[size_t(i)], other = n.inputs[size_t(1 - i)];
    const Node& s = g.node(sq.node);
    if (s.kind == OpKind::Mul && s.inputs.size() == 2 && s.inputs[0] == s.inputs[1] && s.inputs[0] == other &&
        u.sole_user(sq) == c.node) {
      x = other;
      nodes.push_back(sq.node);
      nodes.push_back(c.node);
      return true;
    }
  }
  return false;
}

// The tanh form's inner value: t = tanh(s * (x + 0.044715 * x^3)) (s = sqrt(2/pi), either
// operand order everywhere).
bool tanh_inner(const Graph& g, const UseInfo& u, int32_t id, Value& x, std::vector<int32_t>& inner) {
  const Value arg = g.node(id).inputs[0];
  const Value sum = beside_constant(g, arg, OpKind::Mul, std::sqrt(2.0 / 3.14159265358979323846));
  if (!sum.valid() || u.sole_user(arg) != id) return false;
  const Node& add = g.node(sum.node);
  if (add.kind != OpKind::Add || add.inputs.size() != 2 || u.sole_user(sum) != arg.node) return false;
  for (int i = 0; i < 2; ++i) {
    const Value lin = add.inputs[size_t(i)], cub = add.inputs[size_t(1 - i)];
    const Value c3 = beside_constant(g, cub, OpKind::Mul, 0.044715);
    if (!c3.valid() || u.sole_user(cub) != sum.node) continue;
    std::vector<int32_t> nodes;
    Value cx;
    if (!cube_of(g, u, c3, cx, nodes) || !(cx == lin) || u.sole_user(c3) != cub.node) continue;
    x = lin;
    inner = nodes;
    inner.push_back(cub.node);
    inner.push_back(sum.node);
    inner.push_back(arg.node);
    return g.type(arg) == g.type(x);
  }
  return false;
}

bool match(const Graph& g, const UseInfo& u, int32_t id, Gelu& m) {
  const Node& act = g.node(id);
  if (act.kind != OpKind::Erf && act.kind != OpKind::Tanh) return false;
  Value x;
  std::vector<int32_t> inner;
  if (!(act.kind == OpKind::Erf ? erf_inner(g, u, id, x, inner) : tanh_inner(g, u, id, x, inner))) return false;
  m.tanh = act.kind == OpKind::Tanh;
  const Shape& xt = g.type(x);
  if (!is_float(xt.dtype()) || !(act.outputs[0] == xt)) return false;
  const Value e{id, 0};
  const int32_t plus = u.sole_user(e);
  const Value p{plus, 0};
  if (plus < 0 || !(beside_constant(g, p, OpKind::Add, 1.0) == e) || !(g.type(p) == xt)) return false;
  const int32_t m1 = u.sole_user(p);
  if (m1 < 0 || g.node(m1).kind != OpKind::Mul || !(g.node(m1).outputs[0] == xt)) return false;
  Value other;
  if (!other_operand(g.node(m1), p, other)) return false;
  const Value v1{m1, 0};
  m.absorbed = inner;
  m.absorbed.push_back(id);
  m.absorbed.push_back(plus);
  if (other == x || beside_constant(g, v1, OpKind::Mul, 0.5) == p) {
    // (x * p) * h or x * (p * h): the other factor comes at the next product.
    const int32_t m2 = u.sole_user(v1);
    if (m2 < 0 || !(g.node(m2).outputs[0] == xt)) return false;
    const bool ok = other == x ? beside_constant(g, Value{m2, 0}, OpKind::Mul, 0.5) == v1
                               : g.node(m2).kind == OpKind::Mul && other_operand(g.node(m2), v1, other) && other == x;
    if (!ok) return false;
    m.absorbed.push_back(m1);
    m.tail = m2;
  } else {
    // (x * h) * p: `other` is x * h, read by this product alone.
    if (!(beside_constant(g, other, OpKind::Mul, 0.5) == x) || u.sole_user(other) != m1)
      return false;
    m.absorbed.push_back(other.node);
    m.tail = m1;
  }
  m.x = x;
  return true;
}

}  // namespace

Graph fuse_gelu(const Graph& g, std::string* report) {
  const UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  ChainClaims claims(nodes.size());
  std::vector<Gelu> gelus;
  std::ostringstream rep;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Gelu m;
    if (!match(g, uses, int32_t(i), m)) {
      if (nodes[i].kind == OpKind::Erf)
        rep << "fuse-gelu: not fused: erf '" << nodes[i].name
            << "': not x * 0.5 * (1 + erf(x / sqrt(2))) with each step read only by the next\n";
      // (a tanh is most often just a tanh: no line for those)
      continue;
    }
    if (claims.claim(m.absorbed, m.tail, int32_t(gelus.size()))) gelus.push_back(std::move(m));
  }
  Graph out = rewrite_chains(g, claims.absorbed, claims.tail_of, [&](Rewriter& rw, int32_t gi, int32_t i) {
    const Gelu& m = gelus[size_t(gi)];
    Value y = rw.emit1(OpKind::Gelu, {rw.map(m.x)}, GeluAttrs{m.tanh}, rw.name_of(i));
    RLX_CHECK(rw.dst().type(y) == nodes[size_t(i)].outputs[0], "gelu '", nodes[size_t(i)].name, "' changed type");
    rep << "fuse-gelu: node '" << rw.dst().node(y.node).name << "' = gelu" << (m.tanh ? " (tanh)" : "") << " of "
        << m.absorbed.size() + 1 << " ops [";
    for (int32_t a : m.absorbed) rep << op_name(nodes[size_t(a)].kind) << " '" << nodes[size_t(a)].name << "', ";
    rep << op_name(nodes[size_t(i)].kind) << " '" << nodes[size_t(i)].name << "']\n";
    return y;
  });
  if (report) *report += rep.str();
  return out;
}

}  // namespace rlx::opt
