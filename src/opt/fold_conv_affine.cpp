// fold-conv-affine: conv2d(x, W, b) followed by a per-output-channel affine map, y * s [+ t]
// (what an inference BatchNormalization becomes), with W, b, s and t constants
// -> conv2d(x, W * s[co], b * s + t). The new weights and bias are emitted as expressions
// over the constants; constant-fold, which runs next, evaluates them, so the model reads one
// set of folded weights and the per-channel pass over the activation disappears. Only when
// the convolution's output and the product feed nothing else (and are not graph outputs).
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

bool is_constant(const Graph& g, Value v) { return v.valid() && g.node(v.node).kind == OpKind::Constant; }


// A constant that broadcasts over [N, C, H, W] along the channel only: dims right-aligned to
// the output are 1 except the channel axis, which is C or 1; of the conv's dtype.
bool per_channel(const Graph& g, Value v, const Shape& out) {
  if (!is_constant(g, v)) return false;
  const Shape& s = g.type(v);
  if (s.dtype() != out.dtype() || !s.is_static() || s.rank() > 4 || out.rank() != 4) return false;
  const auto d = s.static_dims();
  const int64_t c = out.static_dims()[1];
  for (int i = 0; i < int(d.size()); ++i) {
    const int axis = 4 - int(d.size()) + i;
    if (axis == 1 ? (d[size_t(i)] != c && d[size_t(i)] != 1) : d[size_t(i)] != 1) return false;
  }
  return true;
}


struct Fold {
  int32_t conv = -1, mul = -1, add = -1;
  Value s, t;
};

bool match(const Graph& g, const UseInfo& u, int32_t id, Fold& f) {
  const Node& conv = g.node(id);
  // (per_channel reads the channel axis of an NCHW output)
  if (conv.kind != OpKind::Conv2d || conv.attr<ConvAttrs>().nhwc || !is_constant(g, conv.inputs[1])) return false;
  if (conv.inputs.size() > 2 && conv.inputs[2].valid() && !is_constant(g, conv.inputs[2])) return false;
  const Shape& out = conv.outputs[0];
  if (!out.is_static() || !is_float(out.dtype())) return false;
  const int32_t m = u.sole_user(Value{id, 0});
  if (m < 0 || g.node(m).kind != OpKind::Mul || !(g.node(m).outputs[0] == out)) return false;
  if (!other_operand(g.node(m), Value{id, 0}, f.s) || !per_channel(g, f.s, out)) return false;
  f.conv = id;
  f.mul = m;
  const int32_t a = u.sole_user(Value{m, 0});
  if (a >= 0 && g.node(a).kind == OpKind::Add && g.node(a).outputs[0] == out &&
      other_operand(g.node(a), Value{m, 0}, f.t) && per_channel(g, f.t, out))
    f.add = a;
  else
    f.t = Value{};
  return true;
}

}  // namespace

Graph fold_conv_affine(const Graph& g, std::string* report) {
  const UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  std::vector<int32_t> fold_at(nodes.size(), -1);  // tail -> index into folds
  std::vector<char> absorbed(nodes.size(), 0);
  std::vector<Fold> folds;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Fold f;
    if (!match(g, uses, int32_t(i), f)) continue;
    const int32_t tail = f.add >= 0 ? f.add : f.mul;
    absorbed[size_t(f.conv)] = 1;
    if (f.add >= 0) absorbed[size_t(f.mul)] = 1;
    fold_at[size_t(tail)] = int32_t(folds.size());
    folds.push_back(f);
  }
  std::ostringstream rep;
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (absorbed[i]) continue;
    if (fold_at[i] < 0) {
      rw.copy(int32_t(i));
      continue;
    }
    const Fold& f = folds[size_t(fold_at[i])];
    const Node& conv = nodes[size_t(f.conv)];
    const int64_t c = conv.outputs[0].static_dims()[1];
    const std::vector<int64_t> wd = g.type(conv.inputs[1]).static_dims();
    Value s = rw.emit1(OpKind::Reshape, {rw.map(f.s)}, ShapeAttrs{{g.type(f.s).numel() == 1 ? 1 : c}});
    Value w = rw.emit1(OpKind::Mul, {rw.map(conv.inputs[1]), rw.emit1(OpKind::Reshape, {s}, ShapeAttrs{{-1, 1, 1, 1}})}, NoAttrs{});
    if (!(rw.dst().type(w) == g.type(conv.inputs[1]))) {  // a scalar s of a 1-channel conv: keep W's shape
      w = rw.emit1(OpKind::Reshape, {w}, ShapeAttrs{wd});
    }
    Value b;
    const bool has_b = conv.inputs.size() > 2 && conv.inputs[2].valid();
    if (has_b) b = rw.emit1(OpKind::Mul, {rw.map(conv.inputs[2]), s}, NoAttrs{});
    if (f.t.valid()) {
      Value t = rw.emit1(OpKind::Reshape, {rw.map(f.t)}, ShapeAttrs{{g.type(f.t).numel() == 1 ? 1 : c}});
      b = has_b ? rw.emit1(OpKind::Add, {b, t}, NoAttrs{}) : t;
    }
    if (b.valid() && rw.dst().type(b).numel() != c)  // scalar parts: one value per channel
      b = rw.emit1(OpKind::Expand, {b}, ShapeAttrs{{c}});
    std::vector<Value> in{rw.map(conv.inputs[0]), w};
    if (b.valid()) in.push_back(b);
    Value y = rw.emit1(OpKind::Conv2d, std::move(in), conv.attrs, rw.name_of(int32_t(i)));
    RLX_CHECK(rw.dst().type(y) == nodes[i].outputs[0], "fold-conv-affine changed the type of '", nodes[i].name, "'");
    rw.set(Value{int32_t(i), 0}, y);
    rep << "fold-conv-affine: node '" << rw.dst().node(y.node).name << "' = conv2d '" << conv.name << "' with mul '"
        << nodes[size_t(f.mul)].name << "'" << (f.add >= 0 ? " and add '" + nodes[size_t(f.add)].name + "'" : "")
        << " folded into its weights\n";
  }
  if (report) *report += rep.str();
  return rw.finish();
}

}  // namespace rlx::opt
