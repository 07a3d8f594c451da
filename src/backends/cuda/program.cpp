#include "backends/cuda/program.h"

#include <algorithm>

#include "ir/op_table.h"
#include "opt/plan_refs.h"

namespace rlx::cuda {

std::shared_ptr<Program> compile_program(opt::Plan plan, const LowerOptions& opts) {
  auto prog = std::make_shared<Program>();
  prog->plan = std::move(plan);
  const Graph& g = prog->plan.graph;
  opt::PlanBinding bound = opt::bind_plan(prog->plan);
  prog->params = std::move(bound.params);
  prog->values = std::move(bound.values);
  const auto& roots = bound.roots;

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
    if (!any_bytes || opt::alias_only(prog->plan, int32_t(i), roots)) continue;
    std::vector<const Shape*> in;
    for (const Value& v : n.inputs) in.push_back(v.valid() ? &g.type(v) : nullptr);
    Step st;
    LowerOptions lo = opts;
    lo.uses_dnn = &prog->uses_dnn;
    st.fn = lower(n, in, n.outputs, lo);
    prog->scratch_bytes = std::max(prog->scratch_bytes, scratch_need(n, in, n.outputs, opts));
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
