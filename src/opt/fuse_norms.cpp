// fuse-norms: layer normalization written out in primitives, as exporters emit it (ONNX
// opsets below 17 have no LayerNormalization; PyTorch writes it so):
//   m = reduce_mean(x, [-1]); d = x - m; v = reduce_mean(d ^ 2 | d * d, [-1]);
//   y = d / sqrt(v + eps) [* gamma] [+ beta]
// -> layer_norm(x, gamma, beta, -1, eps): one pass over the rows instead of eight over
// the tensor. Only when every intermediate feeds nothing but the next step (and is not a
// graph output), eps is a scalar constant, the means are over the last axis keeping it, and
// gamma / beta are 1-D over that axis. The fused node takes the name of the chain's last node.
#include <cstring>
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

struct Norm {
  std::vector<int32_t> absorbed;  // every node of the chain but the tail
  int32_t tail = -1;
  Value x, gamma, beta;
  double eps = 0;
};

bool scalar_constant(const Graph& g, Value v, double& out) {
  const Node& n = g.node(v.node);
  if (n.kind != OpKind::Constant || !n.outputs[0].is_static() || n.outputs[0].numel() != 1) return false;
  const Blob& b = n.attr<ConstantAttrs>().value;
  if (n.outputs[0].dtype() == DType::F32 && b.size() == 4) {
    float f;
    std::memcpy(&f, b.data(), 4);
    out = f;
    return true;
  }
  if (n.outputs[0].dtype() == DType::F64 && b.size() == 8) {
    std::memcpy(&out, b.data(), 8);
    return true;
  }
  return false;
}

// reduce_mean over the last axis of `of`, keeping it.
bool last_axis_mean(const Graph& g, Value v, Value of) {
  const Node& n = g.node(v.node);
  if (n.kind != OpKind::ReduceMean || !(n.inputs[0] == of)) return false;
  const auto& a = n.attr<ReduceAttrs>();
  const int rank = g.type(of).rank();
  return a.keepdims && a.axes.size() == 1 && rank >= 1 && (a.axes[0] == -1 || a.axes[0] == rank - 1);
}



// A 1-D vector over the normalized axis, of x's dtype.
bool row_vector(const Graph& g, Value p, const Shape& x) {
  const Shape& s = g.type(p);
  return s.rank() == 1 && s.dtype() == x.dtype() && s.dims()[0] == x.dims().back();
}

bool match(const Graph& g, const UseInfo& u, int32_t id, Norm& m) {
  const Node& div = g.node(id);
  if (div.kind != OpKind::Div) return false;
  const Value d = div.inputs[0], s = div.inputs[1];
  const Node& sub = g.node(d.node);
  if (sub.kind != OpKind::Sub) return false;
  const Value x = sub.inputs[0], mean = sub.inputs[1];
  const Shape& xt = g.type(x);
  if (!is_float(xt.dtype()) || xt.rank() < 1 || !(g.type(d) == xt) || !(div.outputs[0] == xt)) return false;
  if (!last_axis_mean(g, mean, x) || u.sole_user(mean) != d.node) return false;
  const Node& sq = g.node(s.node);
  if (sq.kind != OpKind::Sqrt || u.sole_user(s) != id) return false;
  const Value a = sq.inputs[0];
  const Node& add = g.node(a.node);
  Value var;
  if (add.kind != OpKind::Add || u.sole_user(a) != s.node) return false;
  if (scalar_constant(g, add.inputs[1], m.eps)) var = add.inputs[0];
  else if (scalar_constant(g, add.inputs[0], m.eps)) var = add.inputs[1];
  else return false;
  if (!(m.eps >= 0) || u.sole_user(var) != a.node) return false;
  const Value sq_d = g.node(var.node).inputs.empty() ? Value{} : g.node(var.node).inputs[0];
  if (!sq_d.valid() || !last_axis_mean(g, var, sq_d) || u.sole_user(sq_d) != var.node) return false;
  const Node& p = g.node(sq_d.node);
  double two = 0;
  int d_uses = 0;
  if (p.kind == OpKind::Pow && p.inputs[0] == d && scalar_constant(g, p.inputs[1], two) && two == 2.0) d_uses = 2;
  else if (p.kind == OpKind::Mul && p.inputs[0] == d && p.inputs[1] == d) d_uses = 3;
  else return false;
  if (u.count(d) != d_uses || u.outputs[size_t(d.node)][0] != 0) return false;
  m = Norm{{mean.node, d.node, sq_d.node, var.node, a.node, s.node}, id, x, {}, {}, m.eps};
  // The affine part, when it scales / shifts by vectors over the normalized axis.
  int32_t next = u.sole_user(Value{id, 0});
  Value other;
  if (next >= 0 && g.node(next).kind == OpKind::Mul && other_operand(g.node(next), Value{id, 0}, other) &&
      row_vector(g, other, xt) && g.node(next).outputs[0] == xt) {
    m.absorbed.push_back(id);
    m.tail = next;
    m.gamma = other;
    next = u.sole_user(Value{next, 0});
  }
  if (next >= 0 && g.node(next).kind == OpKind::Add && other_operand(g.node(next), Value{m.tail, 0}, other) &&
      row_vector(g, other, xt) && g.node(next).outputs[0] == xt) {
    m.absorbed.push_back(m.tail);
    m.tail = next;
    m.beta = other;
  }
  return true;
}

}  // namespace

Graph fuse_norms(const Graph& g, std::string* report) {
  const UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  ChainClaims claims(nodes.size());
  std::vector<Norm> norms;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Norm m;
    if (match(g, uses, int32_t(i), m) && claims.claim(m.absorbed, m.tail, int32_t(norms.size())))
      norms.push_back(std::move(m));
  }
  const std::vector<char>& absorbed = claims.absorbed;
  const std::vector<int32_t>& norm_at = claims.tail_of;
  std::ostringstream rep;
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (absorbed[i]) continue;  // only the chain reads it; replaced by the tail's norm
    if (norm_at[i] < 0) {
      rw.copy(int32_t(i));
      continue;
    }
    const Norm& m = norms[size_t(norm_at[i])];
    std::vector<Value> in{rw.map(m.x)};
    if (m.gamma.valid() || m.beta.valid()) in.push_back(rw.map(m.gamma));
    if (m.beta.valid()) in.push_back(rw.map(m.beta));
    Value y = rw.emit1(OpKind::LayerNorm, std::move(in), NormAttrs{-1, m.eps}, rw.name_of(int32_t(i)));
    RLX_CHECK(rw.dst().type(y) == nodes[i].outputs[0], "layer_norm '", nodes[i].name, "' changed type");
    rw.set(Value{int32_t(i), 0}, y);
    rep << "fuse-norms: node '" << rw.dst().node(y.node).name << "' = layer_norm of " << m.absorbed.size() + 1
        << " ops [";
    for (int32_t a : m.absorbed) rep << op_name(nodes[size_t(a)].kind) << " '" << nodes[size_t(a)].name << "', ";
    rep << op_name(nodes[i].kind) << " '" << nodes[i].name << "'], eps " << m.eps
        << (m.gamma.valid() ? ", scale" : "") << (m.beta.valid() ? ", bias" : "") << "\n";
  }
  if (report) *report += rep.str();
  return rw.finish();
}

}  // namespace rlx::opt
