#include "opt/plan_refs.h"

#include "ir/op_table.h"
#include "opt/memory_plan.h"

namespace rlx::opt {

namespace {
std::string label(const Node& n) { return detail::concat("node '", n.name, "' (", op_name(n.kind), ")"); }

void check_plan(const Plan& p) {
  const Graph& g = p.graph;
  const MemoryPlan& mem = p.memory;
  if (mem.loc.size() != g.nodes().size())
    fail(ErrorCategory::Internal, "memory plan covers ", mem.loc.size(), " nodes, graph has ", g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (mem.loc[i].size() != n.outputs.size())
      fail(ErrorCategory::Internal, "memory plan gives ", label(n), " ", mem.loc[i].size(), " locations for ",
           n.outputs.size(), " outputs");
    for (const Shape& s : n.outputs)
      if (!s.is_static()) fail(ErrorCategory::Shape, label(n), " has unbound dims: ", s.str());
  }
}

std::vector<ParamSlot> param_slots(const Plan& p) {
  const Graph& g = p.graph;
  std::vector<ParamSlot> out;
  for (int32_t id : g.param_nodes()) {
    const Node& n = g.node(id);
    const Loc& loc = p.memory.loc[size_t(id)][0];
    ParamSlot ps{n.attr<LeafAttrs>().name, id, n.outputs[0], -1};
    if (n.outputs[0].bytes() > 0) {
      if (loc.segment != Segment::Weights || loc.offset < 0 ||
          loc.offset + int64_t(n.outputs[0].bytes()) > p.memory.weights_bytes)
        fail(ErrorCategory::Internal, "memory plan does not place param '", ps.name, "' in the weights segment");
      ps.offset = loc.offset;
    }
    out.push_back(std::move(ps));
  }
  return out;
}

ValueRef value_ref(const Plan& p, const std::vector<ParamSlot>& params, int32_t node, int32_t out) {
  const Graph& g = p.graph;
  const Loc& loc = p.memory.loc[size_t(node)][size_t(out)];
  const int64_t bytes = int64_t(g.node(node).outputs[size_t(out)].bytes());
  if (loc.offset < 0) {
    if (bytes != 0)
      fail(ErrorCategory::Internal, "memory plan gives ", label(g.node(node)), " output ", out, " (", bytes,
           " bytes) no location");
    return ValueRef{};
  }
  if (loc.segment == Segment::Arena) {
    if (loc.offset + bytes > p.memory.arena_bytes)
      fail(ErrorCategory::Internal, "memory plan puts ", label(g.node(node)), " output ", out, " past the arena end");
    return ValueRef{Segment::Arena, -1, loc.offset};
  }
  // Weights: the param whose bytes contain this value (params and views of them).
  for (size_t k = 0; k < params.size(); ++k) {
    const ParamSlot& ps = params[k];
    if (ps.offset >= 0 && loc.offset >= ps.offset && loc.offset + bytes <= ps.offset + int64_t(ps.type.bytes()))
      return ValueRef{Segment::Weights, int32_t(k), loc.offset - ps.offset};
  }
  fail(ErrorCategory::Internal, "memory plan puts ", label(g.node(node)), " output ", out,
       " in the weights segment outside every param");
}

std::set<std::pair<int32_t, int32_t>> root_values(const Plan& p) {
  std::set<std::pair<int32_t, int32_t>> roots;
  for (const Buffer& b : p.memory.buffers) roots.insert({b.node, b.out});
  return roots;
}

}  // namespace

PlanBinding bind_plan(const Plan& p) {
  check_plan(p);
  PlanBinding b;
  b.params = param_slots(p);
  b.values.resize(p.graph.nodes().size());
  for (size_t i = 0; i < p.graph.nodes().size(); ++i)
    for (size_t o = 0; o < p.graph.nodes()[i].outputs.size(); ++o)
      b.values[i].push_back(value_ref(p, b.params, int32_t(i), int32_t(o)));
  b.roots = root_values(p);
  return b;
}

bool alias_only(const Plan& p, int32_t id, const std::set<std::pair<int32_t, int32_t>>& roots) {
  const Graph& g = p.graph;
  const Node& n = g.node(id);
  int nonempty = 0, aliased = 0;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (n.outputs[o].bytes() == 0) continue;
    ++nonempty;
    if (!roots.count({id, int32_t(o)})) ++aliased;
  }
  if (aliased == 0 || ir::has_trait(n.kind, ir::kInPlace)) return false;
  if (aliased != nonempty) fail(ErrorCategory::Internal, "memory plan aliases only some outputs of ", label(n));
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (n.outputs[o].bytes() == 0) continue;
    auto v = view_of(g, id, int32_t(o));
    if (!v) fail(ErrorCategory::Internal, "memory plan aliases ", label(n), " output ", o, ", which is not a view");
    const Value src = n.inputs[size_t(v->input)];
    const Loc& in = p.memory.loc[size_t(src.node)][size_t(src.out)];
    const Loc& me = p.memory.loc[size_t(id)][o];
    if (in.segment != me.segment || in.offset + v->byte_offset != me.offset)
      fail(ErrorCategory::Internal, "memory plan places view ", label(n), " output ", o, " away from its input");
  }
  return true;
}

}  // namespace rlx::opt
