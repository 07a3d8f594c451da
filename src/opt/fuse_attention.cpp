// fuse-attention: the attention that exporters write out op by op,
//   s = matmul(q, kt) [/ c | * c] [+ mask];  p = softmax(s, last axis);  o = matmul(p, v)
// with q [B,H,Sq,D], kt [B,H,D,Sk] (keys transposed) and v [B,H,Sk,Dv], becomes one
// attention(q, k, v, mask?) node, when every intermediate feeds only the next node of the
// chain (and is not a graph output) and the backend claims the node. The scale is the
// constant's splat value (1/c for a division, c for a product; 1 when there is none: the
// attention op's default is 1/sqrt(D)); the mask is the add's other operand and must
// broadcast to the scores without changing their type. k is kt with its last two axes
// swapped: when kt is itself a transpose (the exporter's `k.transpose(-1, -2)` of the heads
// split), the two permutations are composed into one transpose of its input (no transpose
// at all when they cancel), and the old transpose is dropped when the chain was its only
// reader.
//
// Heads read in place: when q and v are transposes [B,S,H,D] -> [B,H,S,D] (perm 0,2,1,3),
// k's composed permutation is that same swap and the output's one reader swaps it back, the
// node is attention{bshd} over the transposes' inputs, written where the output transpose
// wrote (the backend is asked about that form first, then about the heads-first one). The
// four transposes go with the chain: an encoder layer's heads are split and merged for free.
//
// Why: the backend's attention streams over key blocks and keeps the [Sq,Sk] scores of a
// head in cache instead of writing them out and reading them three more times (scale +
// mask, softmax, the second product); and the transposes of k disappear into its packing.
//
// One difference in results, by design: a query row whose every score is -inf (a mask that
// hides every key) gives zeros from attention where softmax gives NaN.
#include <cmath>
#include <optional>
#include <sstream>
#include <vector>

#include "opt/passes.h"
#include "opt/pipeline.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

struct Chain {
  int32_t qk = -1;     // matmul(q, kt)
  int32_t scale = -1;  // div / mul by a constant, if any
  double scale_value = 1.0;
  int32_t add = -1;  // mask add, if any
  Value mask;
  int32_t softmax = -1;
  int32_t pv = -1;  // matmul(p, v): the chain's tail
  Value q, kt, v;
  int32_t kt_transpose = -1;  // kt's producing transpose, dropped with the chain when only it read kt
  // Heads read in place (bshd): the [B,S,H,D] sources of q, k and v, their transposes (q_t
  // and v_t dropped when only the chain read them) and the output's transpose, the new tail.
  bool bshd = false;
  Value q_src, k_src, v_src;
  int32_t q_t = -1, v_t = -1, out_t = -1;
};

bool is_head_swap(const std::vector<int64_t>& perm) {
  return normalized_perm(perm, 4) == std::vector<int64_t>{0, 2, 1, 3};
}

// Fills c's bshd sources when q, k and v are head swaps of [B,S,H,D] tensors and the output's
// one reader swaps the heads back; false (c unchanged) otherwise.
bool heads_inner_sources(const Graph& g, const UseInfo& uses, Chain& c) {
  const Node* qt = producer_of_kind(g, c.q, OpKind::Transpose);
  const Node* vt = producer_of_kind(g, c.v, OpKind::Transpose);
  const Node* kt = producer_of_kind(g, c.kt, OpKind::Transpose);
  if (!qt || !vt || !kt || !is_head_swap(qt->attr<TransposeAttrs>().perm) ||
      !is_head_swap(vt->attr<TransposeAttrs>().perm))
    return false;
  const std::vector<int64_t> p = normalized_perm(kt->attr<TransposeAttrs>().perm, 4);
  if (!is_head_swap({p[0], p[1], p[3], p[2]})) return false;  // k = kt's source, axes composed as in key_of
  const int32_t tail = uses.sole_user(Value{c.pv, 0});
  if (tail < 0 || g.node(tail).kind != OpKind::Transpose || !is_head_swap(g.node(tail).attr<TransposeAttrs>().perm))
    return false;
  c.q_src = qt->inputs[0];
  c.k_src = kt->inputs[0];
  c.v_src = vt->inputs[0];
  c.q_t = uses.sole_user(c.q) == c.qk ? c.q.node : -1;
  c.v_t = uses.sole_user(c.v) == c.pv ? c.v.node : -1;
  c.out_t = tail;
  return true;
}

bool rank4(const Shape& s) { return s.rank() == 4; }

// The scale a div / mul node applies to `x` (its one non-constant operand), or false.
bool scale_of(const Graph& g, const Node& n, Value x, double& scale) {
  if (n.kind != OpKind::Div && n.kind != OpKind::Mul) return false;
  Value other;
  if (!other_operand(n, x, other) || other == x) return false;
  if (n.kind == OpKind::Div && !(n.inputs[0] == x)) return false;  // c / x is not a scale
  const std::optional<double> c = splat_value(g, other);
  if (!c || *c == 0 || !std::isfinite(*c)) return false;
  scale = n.kind == OpKind::Div ? 1.0 / *c : *c;
  return std::isfinite(scale);
}

// When x is a matmul's output scaled by a constant (keeping its type): that output and the scale.
bool unscaled(const Graph& g, Value x, Value& product, double& scale) {
  if (x.node < 0) return false;
  const Node& n = g.node(x.node);
  for (const Value& in : n.inputs)
    if (in.node >= 0 && g.node(in.node).kind == OpKind::MatMul && scale_of(g, n, in, scale) &&
        n.outputs[0] == g.type(in)) {
      product = in;
      return true;
    }
  return false;
}

// x is a matmul's output, or a matmul's output scaled by a constant.
bool scores_like(const Graph& g, Value x) {
  Value product;
  double scale;
  return x.node >= 0 && (g.node(x.node).kind == OpKind::MatMul || unscaled(g, x, product, scale));
}

bool last_axis_softmax(const Node& n) {
  if (n.kind != OpKind::Softmax) return false;
  const int64_t axis = n.attr<AxisAttrs>().axis;
  const int64_t rank = n.outputs[0].rank();
  return axis == -1 || axis == rank - 1;
}

// Walks back from softmax node `id`; on failure `why` says what broke the pattern ("" when
// the softmax is not over the last axis of a rank-4 tensor: not an attention candidate).
bool match(const Graph& g, const UseInfo& uses, int32_t id, Chain& c, std::string& why) {
  const Node& sm = g.node(id);
  why.clear();
  if (!last_axis_softmax(sm) || !rank4(sm.outputs[0])) return false;
  c = Chain{};
  c.softmax = id;
  const Shape& scores = sm.outputs[0];
  const int32_t pv = uses.sole_user(Value{id, 0});
  if (pv < 0 || g.node(pv).kind != OpKind::MatMul || !(g.node(pv).inputs[0] == Value{id, 0})) {
    why = "the probabilities are not read by one matmul as its left operand";
    return false;
  }
  c.pv = pv;
  c.v = g.node(pv).inputs[1];
  // Back through the mask add and the scale.
  Value s = sm.inputs[0];
  auto sole = [&](Value x, int32_t reader) { return x.node >= 0 && uses.sole_user(x) == reader; };
  int32_t reader = id;
  if (s.node >= 0 && g.node(s.node).kind == OpKind::Add) {
    const Node& add = g.node(s.node);
    if (!sole(s, reader)) {
      why = "the masked scores have another reader";
      return false;
    }
    // The operand that leads back to the matmul (directly or through a scale) is the
    // scores; the other is the mask (itself often a product with a constant).
    for (int side = 0; side < 2 && c.add < 0; ++side) {
      const Value x = add.inputs[size_t(side)];
      if (!scores_like(g, x)) continue;
      c.add = s.node;
      c.mask = add.inputs[size_t(1 - side)];
      s = x;
    }
    if (c.add < 0) {
      why = "the add before it has no scores operand";
      return false;
    }
    if (!(add.outputs[0] == g.type(s)) || g.type(c.mask).dtype() != scores.dtype()) {
      why = "the mask " + g.type(c.mask).str() + " changes the scores' type " + g.type(s).str();
      return false;
    }
    reader = c.add;
  }
  if (s.node >= 0 && (g.node(s.node).kind == OpKind::Div || g.node(s.node).kind == OpKind::Mul)) {
    const Node& sn = g.node(s.node);
    Value product;
    if (!unscaled(g, s, product, c.scale_value)) {
      why = std::string(op_name(sn.kind)) + " '" + sn.name + "' is not a scale by one constant";
      return false;
    }
    if (!sole(s, reader)) {
      why = "the scaled scores have another reader";
      return false;
    }
    c.scale = s.node;
    reader = s.node;
    s = product;
  }
  if (s.node < 0 || g.node(s.node).kind != OpKind::MatMul) {
    why = "the scores are not a matmul";
    return false;
  }
  if (!sole(s, reader)) {
    why = "the scores have another reader";
    return false;
  }
  const Node& qk = g.node(s.node);
  c.qk = s.node;
  c.q = qk.inputs[0];
  c.kt = qk.inputs[1];
  const Shape &q = g.type(c.q), &kt = g.type(c.kt), &v = g.type(c.v);
  if (!rank4(q) || !rank4(kt) || !rank4(v)) {
    why = "q, k and v are not all rank 4 (" + types_str(g, {c.q, c.kt, c.v}) + ")";
    return false;
  }
  for (int i = 0; i < 2; ++i)
    if (!(q.dim(i) == kt.dim(i)) || !(q.dim(i) == v.dim(i))) {
      why = "q, k and v differ in batch or heads (" + types_str(g, {c.q, c.kt, c.v}) + ")";
      return false;
    }
  if (!(qk.outputs[0] == scores)) {
    why = "the scores change type before the softmax";
    return false;
  }
  if (const Node* t = producer_of_kind(g, c.kt, OpKind::Transpose); t && uses.sole_user(c.kt) == c.qk)
    c.kt_transpose = c.kt.node;
  return true;
}

// k in the destination: kt's last two axes swapped, composed with kt's producing transpose
// when it has one (no transpose at all when the two cancel).
Value key_of(const Graph& g, const Chain& c, Rewriter& rw, const std::string& name) {
  std::vector<int64_t> perm{0, 1, 3, 2};
  Value src = c.kt;
  if (const Node* t = producer_of_kind(g, c.kt, OpKind::Transpose)) {
    const std::vector<int64_t> p = normalized_perm(t->attr<TransposeAttrs>().perm, 4);
    perm = {p[0], p[1], p[3], p[2]};  // k[j] = kt[s[j]] = x[p[s[j]]]
    src = t->inputs[0];
  }
  bool identity = true;
  for (int i = 0; i < 4; ++i) identity = identity && perm[size_t(i)] == i;
  if (identity) return rw.map(src);
  return rw.emit1(OpKind::Transpose, {rw.map(src)}, TransposeAttrs{perm}, name);
}

AttentionAttrs attrs_of(const Chain& c) {
  AttentionAttrs a;
  a.scale = c.scale_value;
  a.bshd = c.bshd;
  return a;
}

// The attention node the chain becomes, with its output inferred (throws Error(Shape) when
// the mask does not broadcast or the head dims differ). Its inputs are the source's values,
// with kt standing in for k: `types` holds the input types as the node would see them.
// With c.bshd, the inputs are the [B,S,H,D] sources.
Node attention_node(const Graph& g, const Chain& c, std::vector<Shape>& types) {
  const Shape& kt = g.type(c.kt);
  if (c.bshd) types = {g.type(c.q_src), g.type(c.k_src), g.type(c.v_src)};
  else types = {g.type(c.q), kt.with_dims({kt.dim(0), kt.dim(1), kt.dim(3), kt.dim(2)}), g.type(c.v)};
  if (c.mask.valid()) types.push_back(g.type(c.mask));
  Node n;
  n.kind = OpKind::Attention;
  n.name = g.node(c.bshd ? c.out_t : c.pv).name;
  n.inputs = c.bshd ? std::vector<Value>{c.q_src, c.k_src, c.v_src} : std::vector<Value>{c.q, c.kt, c.v};
  if (c.mask.valid()) n.inputs.push_back(c.mask);
  n.attrs = attrs_of(c);
  std::vector<const Shape*> in;
  for (const Shape& t : types) in.push_back(&t);
  n.outputs = ir::infer_outputs(n, in);
  return n;
}

}  // namespace

Graph fuse_attention(const Graph& g, std::string* report, const BackendClaims* claims, DType low) {
  UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  std::vector<int32_t> chain_at(nodes.size(), -1);
  std::vector<char> absorbed(nodes.size(), 0);
  std::vector<Chain> chains;
  std::ostringstream rep;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Chain c;
    std::string why;
    const bool ok = match(g, uses, int32_t(i), c, why);
    if (!ok) {
      if (!why.empty()) rep << "fuse-attention: not fused: softmax '" << nodes[i].name << "': " << why << "\n";
      continue;
    }
    // The attention node must infer (the mask's broadcast, q/k head dims) to the tail's type,
    // and the backend must claim it. Returns "" when it does, else why not.
    auto take = [&](Chain& ch) -> std::string {
      std::vector<Shape> types;
      Node node;
      try {
        node = attention_node(g, ch, types);
      } catch (const Error& e) {
        return e.what();
      }
      const Shape& tail = nodes[size_t(ch.bshd ? ch.out_t : ch.pv)].outputs[0];
      if (!(node.outputs[0] == tail))
        return "attention would give " + node.outputs[0].str() + " where the chain gives " + tail.str();
      // The precision pass (after this one) runs an f32 attention in `low`: ask about that.
      if (low != DType::F32 && types[0].dtype() == DType::F32)
        for (Shape& t : types) t = t.with_dtype(low);
      std::vector<const Shape*> in;
      for (const Shape& t : types) in.push_back(&t);
      if (claims && claims->supports && !claims->supports(node, in))
        return std::string("the ") + claims->name + " backend does not run attention of " + types[0].str() +
               (ch.bshd ? " with the heads in place (bshd)" : "");
      return "";
    };
    std::string in_place_why;
    if (heads_inner_sources(g, uses, c)) {
      c.bshd = true;
      in_place_why = take(c);
      c.bshd = in_place_why.empty();
    }
    if (!c.bshd) {
      const std::string why_not = take(c);
      if (!why_not.empty()) {
        rep << "fuse-attention: not fused: softmax '" << nodes[i].name << "': " << why_not << "\n";
        continue;
      }
      if (!in_place_why.empty())
        rep << "fuse-attention: heads not read in place at softmax '" << nodes[i].name << "': " << in_place_why
            << "\n";
    }
    for (int32_t n : {c.qk, c.scale, c.add, c.softmax, c.kt_transpose})
      if (n >= 0) absorbed[size_t(n)] = 1;
    if (c.bshd) {
      for (int32_t n : {c.pv, c.q_t, c.v_t})
        if (n >= 0) absorbed[size_t(n)] = 1;
      chain_at[size_t(c.out_t)] = int32_t(chains.size());
    } else {
      chain_at[size_t(c.pv)] = int32_t(chains.size());
    }
    chains.push_back(c);
  }

  Graph out = rewrite_chains(g, absorbed, chain_at, [&](Rewriter& rw, int32_t ci, int32_t i) {
    const Chain& c = chains[size_t(ci)];
    const std::string name = rw.name_of(i);
    std::vector<Value> in;
    if (c.bshd) in = {rw.map(c.q_src), rw.map(c.k_src), rw.map(c.v_src)};
    else in = {rw.map(c.q), key_of(g, c, rw, sub_name(name, "k")), rw.map(c.v)};
    if (c.mask.valid()) in.push_back(rw.map(c.mask));
    const Value f = rw.emit1(OpKind::Attention, in, attrs_of(c), name);
    RLX_CHECK(rw.dst().type(f) == nodes[size_t(i)].outputs[0], "attention '", nodes[size_t(i)].name,
              "' changed type");
    rep << "fuse-attention: node '" << rw.dst().node(f.node).name << "' = attention of [";
    if (c.kt_transpose >= 0) rep << "transpose '" << g.node(c.kt_transpose).name << "', ";
    rep << "matmul '" << g.node(c.qk).name << "'";
    if (c.scale >= 0) rep << ", " << op_name(g.node(c.scale).kind) << " '" << g.node(c.scale).name << "' (scale)";
    if (c.add >= 0) rep << ", add '" << g.node(c.add).name << "' (mask)";
    rep << ", softmax '" << g.node(c.softmax).name << "', matmul '" << g.node(c.pv).name << "'";
    if (c.bshd) {
      rep << ", transpose '" << g.node(c.out_t).name << "'";
      for (int32_t t : {c.q_t, c.v_t})
        if (t >= 0) rep << ", transpose '" << g.node(t).name << "'";
    }
    rep << "], scale " << c.scale_value << (c.bshd ? ", heads in place (bshd)" : "") << "\n";
    return f;
  });
  if (report) *report += rep.str();
  return out;
}

}  // namespace rlx::opt
