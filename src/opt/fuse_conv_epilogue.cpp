// fuse-conv-epilogue: conv2d [+ residual add] [+ activation] -> one fused_conv2d, when each
// intermediate feeds only the next node of the chain (and is not a graph output), and the
// backend claims the fused node (one that does not would get the three ops back from legalize
// after fuse-elementwise ran, and lose the add + activation program it would have made). The residual
// is the add's other operand, of the conv's output type (a ResNet block's skip path, another
// conv's output included). The fused node takes the name of the chain's last node. The
// backend applies the epilogue to each tile of the output while it is in cache, instead of
// the separate passes over the whole output that an add and a relu node make.
#include <sstream>
#include <vector>

#include "opt/passes.h"
#include "opt/pipeline.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

struct Chain {
  int32_t conv = -1;
  int32_t add = -1;  // the residual add, if any
  Value residual;
  int32_t act = -1;  // the activation node, if any
  Activation activation = Activation::None;
  double alpha = 0;
};

// Nodes already taken by an earlier chain (a residual add of two convs is absorbed once).
bool match(const Graph& g, const UseInfo& uses, const std::vector<char>& taken, int32_t id, Chain& c) {
  const Node& conv = g.node(id);
  if (conv.kind != OpKind::Conv2d) return false;
  c = Chain{};
  c.conv = id;
  int32_t tail = id;
  int32_t next = uses.sole_user(Value{tail, 0});
  if (next >= 0 && !taken[size_t(next)] && g.node(next).kind == OpKind::Add) {
    Value other;
    if (other_operand(g.node(next), Value{tail, 0}, other) && !(other == Value{tail, 0}) &&
        g.type(other) == conv.outputs[0] && g.node(next).outputs[0] == conv.outputs[0]) {
      c.add = next;
      c.residual = other;
      tail = next;
      next = uses.sole_user(Value{tail, 0});
    }
  }
  if (next >= 0 && !taken[size_t(next)] && activation_keeping(g, next, conv.outputs[0], c.activation, c.alpha))
    c.act = next;
  return c.add >= 0 || c.act >= 0;
}

FusedConvAttrs fused_attrs(const Node& conv, const Chain& c) {
  const auto& ca = conv.attr<ConvAttrs>();
  FusedConvAttrs fa;
  fa.strides = ca.strides;
  fa.pads = ca.pads;
  fa.dilations = ca.dilations;
  fa.group = ca.group;
  fa.nhwc = ca.nhwc;  // the residual and activation do not care where the channels are
  fa.activation = c.activation;
  fa.alpha = c.alpha;
  return fa;
}

// The fused node's inputs (in terms of `map`): x, w, bias or absent, residual (when any).
template <class Map>
std::vector<Value> fused_inputs(const Node& conv, const Chain& c, Map map) {
  std::vector<Value> in{map(conv.inputs[0]), map(conv.inputs[1])};
  const bool bias = conv.inputs.size() > 2 && conv.inputs[2].valid();
  in.push_back(bias ? map(conv.inputs[2]) : Value{});
  if (c.residual.valid()) in.push_back(map(c.residual));
  else if (!bias) in.pop_back();
  return in;
}

bool claimed(const Graph& g, const Chain& c, const BackendClaims& claims) {
  const Node& conv = g.node(c.conv);
  const Node n = make_node(g, OpKind::FusedConv2d, fused_inputs(conv, c, [](Value v) { return v; }),
                           fused_attrs(conv, c), conv.name);
  return claims.supports(n, input_types(g, n));
}

// Why a conv followed by an add or an activation kept them apart ("" when nothing follows that
// could have been absorbed).
std::string why_not(const Graph& g, const UseInfo& uses, const std::vector<char>& taken, int32_t id) {
  const Node& conv = g.node(id);
  if (conv.kind != OpKind::Conv2d) return "";
  const Value out{id, 0};
  int32_t cand = -1;
  for (int32_t u : uses.users[size_t(id)][0]) {
    Activation a;
    double alpha;
    if (g.node(u).kind == OpKind::Add || activation_of(g.node(u), a, alpha)) cand = u;
  }
  if (cand < 0) return "";
  const Node& next = g.node(cand);
  const std::string what = std::string(op_name(next.kind)) + " '" + next.name + "' after conv2d '" + conv.name + "': ";
  if (uses.count(out) > 1 || uses.outputs[size_t(id)][0] > 0)
    return what + "the conv's output has " + std::to_string(uses.count(out)) + " readers";
  if (taken[size_t(cand)]) return what + "already the epilogue of another conv";
  if (next.kind == OpKind::Add) {
    Value other;
    if (!other_operand(next, out, other)) return "";
    return what + "the other operand " + g.type(other).str() + " is not of the conv's output type " +
           conv.outputs[0].str();
  }
  return what + "the activation changes the type";
}

}  // namespace

Graph fuse_conv_epilogue(const Graph& g, std::string* report, const BackendClaims* claims) {
  UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  std::vector<int32_t> chain_at(nodes.size(), -1);  // tail node -> index into chains
  std::vector<char> absorbed(nodes.size(), 0), taken(nodes.size(), 0);
  std::vector<Chain> chains;
  std::ostringstream rep;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Chain c;
    if (!match(g, uses, taken, int32_t(i), c)) {
      const std::string why = why_not(g, uses, taken, int32_t(i));
      if (!why.empty()) rep << "fuse-conv-epilogue: not fused: " << why << "\n";
      continue;
    }
    if (claims && claims->supports && !claimed(g, c, *claims)) {
      rep << "fuse-conv-epilogue: not fused: conv2d '" << g.node(c.conv).name << "': the " << claims->name
          << " backend does not run fused_conv2d of " << g.node(c.conv).outputs[0].str() << "\n";
      continue;
    }
    const int32_t tail = c.act >= 0 ? c.act : c.add;
    absorbed[size_t(c.conv)] = 1;
    if (c.add >= 0) absorbed[size_t(c.add)] = taken[size_t(c.add)] = 1;
    if (c.act >= 0) taken[size_t(c.act)] = 1;
    absorbed[size_t(tail)] = 0;
    chain_at[size_t(tail)] = int32_t(chains.size());
    chains.push_back(c);
  }

  Graph out = rewrite_chains(g, absorbed, chain_at, [&](Rewriter& rw, int32_t ci, int32_t i) {
    const Chain& c = chains[size_t(ci)];
    const Node& conv = g.node(c.conv);
    Value f = rw.emit1(OpKind::FusedConv2d, fused_inputs(conv, c, [&](Value v) { return rw.map(v); }),
                       fused_attrs(conv, c), rw.name_of(i));
    RLX_CHECK(rw.dst().type(f) == nodes[size_t(i)].outputs[0], "fused_conv2d '", nodes[size_t(i)].name,
              "' changed type");
    rep << "fuse-conv-epilogue: node '" << rw.dst().node(f.node).name << "' = fused_conv2d of [conv2d '" << conv.name
        << "'";
    if (c.add >= 0) rep << ", add '" << g.node(c.add).name << "' (residual)";
    if (c.act >= 0) rep << ", " << op_name(g.node(c.act).kind) << " '" << g.node(c.act).name << "' (activation)";
    rep << "], activation " << enum_name(c.activation) << "\n";
    return f;
  });
  if (report) *report += rep.str();
  return out;
}

}  // namespace rlx::opt
