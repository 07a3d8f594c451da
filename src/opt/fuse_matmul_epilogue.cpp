// fuse-matmul-epilogue: matmul [+ bias broadcast over the last dim, or an addend of the
// product's own type] [+ activation] -> one fused_matmul, when each intermediate feeds only
// the next node of the chain (and is not a graph output). The full-shape addend is an
// encoder's residual (x + o_proj(attn), x + down(ffn) where the projections' zero biases were
// folded away): fused_matmul's bias input takes any shape that broadcasts to the product, and
// the backends add it in the product's epilogue (CUDA: cuBLASLt's C with beta = 1), saving the
// add's pass over the output. A fused_matmul without activation also absorbs a following
// activation. The fused node takes the name of the chain's last node.
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

struct Chain {
  int32_t head = -1;      // the matmul (or fused_matmul without activation)
  int32_t bias_add = -1;  // the add node, if any
  Value bias;             // source value of the bias, if any
  bool addend = false;    // the bias is a full-shape addend (a residual), not a row bias
  int32_t act = -1;       // the activation node, if any
  Activation activation = Activation::None;
  double alpha = 0;
};

// True when `bias` broadcasts over all but the last dim of `mm`: shape [N] or [1,..,1,N]
// with the same dtype, and the sum has the matmul's type.
bool is_row_bias(const Shape& mm, const Shape& bias, const Shape& sum) {
  if (!(sum == mm) || bias.dtype() != mm.dtype() || mm.rank() == 0) return false;
  if (bias.rank() < 1 || bias.rank() > mm.rank()) return false;
  if (!(bias.dims().back() == mm.dims().back())) return false;
  for (int i = 0; i + 1 < bias.rank(); ++i)
    if (!(bias.dims()[size_t(i)] == Dim(1))) return false;
  return true;
}

// True when `addend` has exactly the product's type (a residual), as has the sum.
bool is_full_addend(const Shape& mm, const Shape& addend, const Shape& sum) {
  return addend == mm && sum == mm && mm.rank() > 0;
}

bool match(const Graph& g, const UseInfo& uses, int32_t id, Chain& c) {
  const Node& head = g.node(id);
  bool has_bias = false;
  if (head.kind == OpKind::FusedMatMul) {
    const auto& a = head.attr<FusedMatMulAttrs>();
    if (a.activation != Activation::None) return false;
    has_bias = head.inputs.size() > 2 && head.inputs[2].valid();
  } else if (head.kind != OpKind::MatMul) {
    return false;
  }
  c = Chain{};
  c.head = id;
  int32_t tail = id;
  int32_t next = uses.sole_user(Value{tail, 0});
  if (!has_bias && next >= 0 && g.node(next).kind == OpKind::Add) {
    const Node& add = g.node(next);
    int other = add.inputs[0] == Value{tail, 0} ? 1 : 0;
    Value bias = add.inputs[size_t(other)];
    if (!(add.inputs[size_t(1 - other)] == Value{tail, 0})) return false;
    const bool row = is_row_bias(head.outputs[0], g.type(bias), add.outputs[0]);
    if (row || is_full_addend(head.outputs[0], g.type(bias), add.outputs[0])) {
      c.addend = !row;
      c.bias_add = next;
      c.bias = bias;
      tail = next;
      next = uses.sole_user(Value{tail, 0});
    }
  }
  if (activation_keeping(g, next, head.outputs[0], c.activation, c.alpha)) c.act = next;
  // A bare matmul stays a matmul.
  return c.bias_add >= 0 || c.act >= 0;
}

// Why a matmul followed by an add or an activation kept them apart ("" when nothing follows
// that could have been absorbed).
std::string why_not(const Graph& g, const UseInfo& uses, int32_t id) {
  const Node& head = g.node(id);
  if (head.kind != OpKind::MatMul) return "";
  const Value out{id, 0};
  const auto& users = uses.users[size_t(id)][0];
  auto candidate = [&](const Node& n) {
    Activation a;
    double alpha;
    return n.kind == OpKind::Add || activation_of(n, a, alpha);
  };
  int32_t cand = -1;
  for (int32_t u : users)
    if (candidate(g.node(u))) cand = u;
  if (cand < 0) return "";
  const Node& next = g.node(cand);
  std::string what = std::string(op_name(next.kind)) + " '" + next.name + "' after matmul '" + head.name + "': ";
  if (uses.count(out) > 1 || uses.outputs[size_t(id)][0] > 0)
    return what + "the product has " + std::to_string(uses.count(out)) + " readers";
  if (next.kind == OpKind::Add) {
    Value bias;
    if (!other_operand(next, out, bias)) return "";
    return what + "the other operand " + g.type(bias).str() + " is neither a bias over the last dim of " +
           head.outputs[0].str() + " nor of its type";
  }
  return what + "the activation changes the type";
}
}  // namespace

Graph fuse_matmul_epilogue(const Graph& g, std::string* report) {
  UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  ChainClaims claims(nodes.size());
  std::vector<Chain> chains;
  std::ostringstream rep;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Chain c;
    if (!match(g, uses, int32_t(i), c)) {
      const std::string why = why_not(g, uses, int32_t(i));
      if (!why.empty()) rep << "fuse-matmul-epilogue: not fused: " << why << "\n";
      continue;
    }
    // A chain whose add is already another's (two products summed, each the other's addend:
    // the first takes the add, the second stays a matmul feeding it) is left as it is.
    const int32_t tail = c.act >= 0 ? c.act : c.bias_add;
    std::vector<int32_t> inner{c.head};
    if (c.bias_add >= 0 && c.bias_add != tail) inner.push_back(c.bias_add);
    if (claims.claim(inner, tail, int32_t(chains.size()))) chains.push_back(c);
  }

  Graph out = rewrite_chains(g, claims.absorbed, claims.tail_of, [&](Rewriter& rw, int32_t ci, int32_t i) {
    const Chain& c = chains[size_t(ci)];
    const Node& head = g.node(c.head);
    std::vector<Value> in{rw.map(head.inputs[0]), rw.map(head.inputs[1])};
    if (c.bias.valid()) in.push_back(rw.map(c.bias));
    else if (head.inputs.size() > 2 && head.inputs[2].valid()) in.push_back(rw.map(head.inputs[2]));
    Value f = rw.emit1(OpKind::FusedMatMul, in, FusedMatMulAttrs{c.activation, c.alpha}, rw.name_of(i));
    RLX_CHECK(rw.dst().type(f) == nodes[size_t(i)].outputs[0], "fused_matmul '", nodes[size_t(i)].name,
              "' changed type");
    rep << "fuse-matmul-epilogue: node '" << rw.dst().node(f.node).name << "' = fused_matmul of [" << op_name(head.kind)
        << " '" << head.name << "'";
    if (c.bias_add >= 0) rep << ", add '" << g.node(c.bias_add).name << "' (" << (c.addend ? "addend" : "bias") << ")";
    if (c.act >= 0) rep << ", " << op_name(g.node(c.act).kind) << " '" << g.node(c.act).name << "' (activation)";
    rep << "], activation " << enum_name(c.activation) << "\n";
    return f;
  });
  if (report) *report += rep.str();
  return out;
}

}  // namespace rlx::opt
