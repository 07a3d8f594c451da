#include "backends/cuda/program.h"

#include <algorithm>
#include <set>
#include <utility>

#include "ir/op_table.h"
#include "opt/memory_plan.h"

namespace rlx::cuda {

namespace {

std::string label(const Node& n) { return detail::concat("node '", n.name, "' (", op_name(n.kind), ")"); }

Ref ref_of(const Program& p, int32_t node, int32_t out) {
  const Graph& g = p.plan.graph;
  const opt::Loc& loc = p.plan.memory.loc[size_t(node)][size_t(out)];
  const int64_t bytes = int64_t(g.node(node).outputs[size_t(out)].bytes());
  if (loc.offset < 0) {
    if (bytes) fail(ErrorCategory::Internal, "memory plan gives ", label(g.node(node)), " output ", out, " no location");
    return {};
  }
  if (loc.segment == opt::Segment::Arena) {
    if (loc.offset + bytes > p.plan.memory.arena_bytes)
      fail(ErrorCategory::Internal, "memory plan puts ", label(g.node(node)), " past the arena end");
    return {opt::Segment::Arena, -1, loc.offset};
  }
  for (size_t k = 0; k < p.params.size(); ++k) {
    const ParamSlot& ps = p.params[k];
    if (ps.offset >= 0 && loc.offset >= ps.offset && loc.offset + bytes <= ps.offset + int64_t(ps.type.bytes()))
      return {opt::Segment::Weights, int32_t(k), loc.offset - ps.offset};
  }
  fail(ErrorCategory::Internal, "memory plan puts ", label(g.node(node)), " in the weights outside every param");
}

// Every non-empty output placed inside an input by the planner: the node needs no launch.
bool planned_view(const Program& p, int32_t id, const std::set<std::pair<int32_t, int32_t>>& roots) {
  const Graph& g = p.plan.graph;
  const Node& n = g.node(id);
  if (ir::has_trait(n.kind, ir::kInPlace)) return false;  // shares input 0's storage and writes it
  bool any = false;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (n.outputs[o].bytes() == 0 || roots.count({id, int32_t(o)})) continue;
    auto v = opt::view_of(g, id, int32_t(o));
    if (!v) fail(ErrorCategory::Internal, "memory plan aliases ", label(n), " output ", o, ", which is not a view");
    any = true;
  }
  return any;
}

}  // namespace

std::shared_ptr<Program> compile_program(opt::Plan plan) {
  auto prog = std::make_shared<Program>();
  prog->plan = std::move(plan);
  const Graph& g = prog->plan.graph;
  const opt::MemoryPlan& mem = prog->plan.memory;
  if (mem.loc.size() != g.nodes().size()) fail(ErrorCategory::Internal, "memory plan does not cover the graph");
  for (const Node& n : g.nodes())
    for (const Shape& s : n.outputs)
      if (!s.is_static()) fail(ErrorCategory::Shape, label(n), " has unbound dims: ", s.str());
  for (int32_t id : g.param_nodes()) {
    const Node& n = g.node(id);
    ParamSlot ps{n.attr<LeafAttrs>().name, id, n.outputs[0], -1};
    if (n.outputs[0].bytes()) {
      const opt::Loc& loc = mem.loc[size_t(id)][0];
      if (loc.segment != opt::Segment::Weights || loc.offset < 0)
        fail(ErrorCategory::Internal, "memory plan does not place param '", ps.name, "' in the weights segment");
      ps.offset = loc.offset;
    }
    prog->params.push_back(std::move(ps));
  }
  prog->values.resize(g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (size_t o = 0; o < g.nodes()[i].outputs.size(); ++o) prog->values[i].push_back(ref_of(*prog, int32_t(i), int32_t(o)));
  std::set<std::pair<int32_t, int32_t>> roots;
  for (const opt::Buffer& b : mem.buffers) roots.insert({b.node, b.out});

  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.kind == OpKind::Constant) {
      const Ref& where = prog->values[i][0];
      if (!where.absent()) prog->constants.push_back({where, n.attr<ConstantAttrs>().value});
      continue;
    }
    if (ir::has_trait(n.kind, ir::kLeaf)) continue;
    bool any_bytes = false;
    for (const Shape& s : n.outputs) any_bytes = any_bytes || s.bytes() > 0;
    if (!any_bytes || planned_view(*prog, int32_t(i), roots)) continue;
    std::vector<const Shape*> in;
    for (const Value& v : n.inputs) in.push_back(v.valid() ? &g.type(v) : nullptr);
    Step st;
    st.fn = lower(n, in, n.outputs);
    prog->scratch_bytes = std::max(prog->scratch_bytes, scratch_need(n, in, n.outputs));
    st.node = int32_t(i);
    st.first = uint32_t(prog->refs.size());
    for (const Value& v : n.inputs) prog->refs.push_back(v.valid() ? prog->values[size_t(v.node)][size_t(v.out)] : Ref{});
    for (const Ref& r : prog->values[i]) prog->refs.push_back(r);
    st.count = uint32_t(prog->refs.size()) - st.first;
    prog->steps.push_back(std::move(st));
  }
  return prog;
}

}  // namespace rlx::cuda
