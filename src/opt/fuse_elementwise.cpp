// fuse-elementwise: groups trees of kFusable ops into one fused_elementwise node.
// A producer joins its consumer's group when all its uses are by that group (and it is
// not a graph output) and its dims equal the group output's dims, so every member runs
// once per output element; only external inputs broadcast. Groups of one op are left
// alone. External inputs are deduplicated (at most 64, the op's arity).
#include <algorithm>
#include <map>
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {
constexpr size_t kMaxInputs = 64;

bool fusable(const Node& n) {
  if (!ir::has_trait(n.kind, ir::kFusable) || n.outputs.size() != 1 || !n.subgraphs.empty()) return false;
  // FusedOp carries only scalar attributes and a result dtype.
  return ir::has_scalar_params(n.attrs) || std::holds_alternative<CastAttrs>(n.attrs);
}

struct Group {
  int32_t root = -1;
  std::vector<int32_t> members;  // ascending node ids (topological), root last
};

// External inputs of a set of members, in order of first use.
std::vector<Value> external_inputs(const Graph& g, const std::vector<int32_t>& members,
                                   const std::vector<int32_t>& group_of, int32_t gid) {
  std::vector<Value> ext;
  for (int32_t m : members)
    for (Value v : g.node(m).inputs) {
      if (v.valid() && group_of[size_t(v.node)] == gid) continue;
      if (std::find(ext.begin(), ext.end(), v) == ext.end()) ext.push_back(v);
    }
  return ext;
}
}  // namespace

Graph fuse_elementwise(const Graph& g, std::string* report) {
  const auto& nodes = g.nodes();
  UseInfo uses = compute_uses(g);
  std::vector<int32_t> group_of(nodes.size(), -1);
  std::vector<Group> groups;

  // Why a fusable producer stayed out of its consumer's chain (the report's "not fused"
  // lines): a chain is cut where a value has another reader or another shape.
  std::vector<std::string> cut(nodes.size());
  auto note_cut = [&](int32_t producer, int32_t consumer, const std::string& why) {
    if (cut[size_t(producer)].empty())
      cut[size_t(producer)] = std::string(op_name(nodes[size_t(producer)].kind)) + " '" + nodes[size_t(producer)].name +
                              "' into " + std::string(op_name(nodes[size_t(consumer)].kind)) + " '" +
                              nodes[size_t(consumer)].name +
                              "': " + why;
  };
  // Reverse order: a consumer's group is known before its producers are considered.
  for (size_t ri = nodes.size(); ri-- > 0;) {
    const Node& n = nodes[ri];
    if (group_of[ri] >= 0 || !fusable(n)) continue;
    auto gid = int32_t(groups.size());
    groups.push_back(Group{int32_t(ri), {int32_t(ri)}});
    group_of[ri] = gid;
    const auto& out_dims = n.outputs[0].dims();
    // Grow the group producer by producer (a worklist over the members' inputs).
    std::vector<int32_t> work{int32_t(ri)};
    while (!work.empty()) {
      int32_t m = work.back();
      work.pop_back();
      for (Value v : nodes[size_t(m)].inputs) {
        if (!v.valid() || group_of[size_t(v.node)] >= 0) continue;
        const Node& p = nodes[size_t(v.node)];
        if (!fusable(p)) continue;
        if (!(p.outputs[0].dims() == out_dims)) {
          note_cut(v.node, m, "shape " + p.outputs[0].str() + " differs from the chain's (broadcast)");
          continue;
        }
        bool all_in_group = uses.outputs[size_t(v.node)][0] == 0;
        int32_t other = -1;
        for (int32_t u : uses.users[size_t(v.node)][0])
          if (group_of[size_t(u)] != gid) {
            all_in_group = false;
            other = u;
          }
        if (!all_in_group) {
          note_cut(v.node, m,
                   other >= 0 ? "second user " + std::string(op_name(nodes[size_t(other)].kind)) + " '" +
                                    nodes[size_t(other)].name + "'"
                              : std::string("it is a graph output"));
          continue;
        }
        group_of[size_t(v.node)] = gid;
        groups[size_t(gid)].members.push_back(v.node);
        if (external_inputs(g, groups[size_t(gid)].members, group_of, gid).size() > kMaxInputs) {
          group_of[size_t(v.node)] = -1;
          groups[size_t(gid)].members.pop_back();
          note_cut(v.node, m, "the chain would read more than " + std::to_string(kMaxInputs) + " inputs");
          continue;
        }
        work.push_back(v.node);
      }
    }
    auto& mem = groups[size_t(gid)].members;
    std::sort(mem.begin(), mem.end());
    if (mem.size() < 2) {  // nothing to fuse: release the node
      group_of[ri] = -1;
      groups.pop_back();
    }
  }

  std::ostringstream rep;
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    int32_t gid = group_of[i];
    if (gid < 0) {
      rw.copy(int32_t(i));
      continue;
    }
    const Group& grp = groups[size_t(gid)];
    if (grp.root != int32_t(i)) continue;  // emitted with the root
    std::vector<Value> ext = external_inputs(g, grp.members, group_of, gid);
    std::map<int32_t, int32_t> slot;  // member node -> instruction index
    FusedElementwiseAttrs attrs;
    auto operand = [&](Value v) -> int32_t {
      if (v.valid() && group_of[size_t(v.node)] == gid) return int32_t(ext.size()) + slot.at(v.node);
      return int32_t(std::find(ext.begin(), ext.end(), v) - ext.begin());
    };
    for (int32_t m : grp.members) {
      const Node& mn = nodes[size_t(m)];
      FusedOp op;
      op.kind = mn.kind;
      for (Value v : mn.inputs) op.args.push_back(operand(v));
      ir::scalar_params(mn.attrs, op.alpha, op.beta);
      op.type = mn.outputs[0].dtype();
      slot[m] = int32_t(attrs.program.size());
      attrs.program.push_back(op);
    }
    std::vector<Value> in;
    for (Value v : ext) in.push_back(rw.map(v));
    Value f = rw.emit1(OpKind::FusedElementwise, in, attrs, rw.name_of(int32_t(i)));
    if (!(rw.dst().type(f) == nodes[i].outputs[0]))
      fail(ErrorCategory::Internal, "fuse-elementwise: fused node '", nodes[i].name, "' has type ",
           rw.dst().type(f).str(), ", the original ", nodes[i].outputs[0].str());
    rw.set(Value{int32_t(i), 0}, f);
    rep << "fuse-elementwise: node '" << rw.dst().node(f.node).name << "' = fused_elementwise of "
        << grp.members.size() << " ops [";
    for (size_t k = 0; k < grp.members.size(); ++k)
      rep << (k ? ", " : "") << op_name(nodes[size_t(grp.members[k])].kind) << " '" << nodes[size_t(grp.members[k])].name << "'";
    rep << "], inputs " << ext.size() << "\n";
  }
  for (size_t i = 0; i < nodes.size(); ++i)  // a producer that found a chain later is not a miss
    if (!cut[i].empty() && group_of[i] < 0) rep << "fuse-elementwise: not fused: " << cut[i] << "\n";
  if (report) *report += rep.str();
  return rw.finish();
}

}  // namespace rlx::opt
