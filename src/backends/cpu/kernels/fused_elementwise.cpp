// fused_elementwise: runs a FusedElementwiseAttrs program block by block (one pass over
// memory, block-sized temporaries), through the same engine and spans as the single
// ops, so a fused chain gives exactly the bytes the unfused ops would.
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/elementwise_engine.h"
#include "rlx/error.h"

namespace rlx::cpu {
namespace {

std::string who(const Node& node) { return "node '" + node.name + "' (fused_elementwise)"; }

std::vector<ew::InstrSpec> specs_of(const Node& node) {
  const auto* attrs = std::get_if<FusedElementwiseAttrs>(&node.attrs);
  if (!attrs) fail(ErrorCategory::InvalidArgument, who(node), ": missing fused program attributes");
  std::vector<ew::InstrSpec> specs;
  for (const FusedOp& op : attrs->program)
    specs.push_back(ew::InstrSpec{op.kind, op.args, op.alpha, op.beta, op.type});
  return specs;
}

KernelCall build_fused(const Node& node, const std::vector<const Shape*>& in,
                       const std::vector<Shape>& out) {
  if (out.size() != 1) fail(ErrorCategory::Internal, who(node), ": expected one output");
  const auto specs = specs_of(node);
  if (specs.empty()) fail(ErrorCategory::InvalidArgument, who(node), ": empty program");
  ew::ProgramCfg cfg = ew::build_program(specs, in, out[0], who(node), detect_isa());
  const bool extent = cfg.lead > 0;
  return make_call(&ew::run_program, std::move(cfg), extent);
}

bool supports_fused(const Node& node, const std::vector<const Shape*>& in) {
  if (!std::holds_alternative<FusedElementwiseAttrs>(node.attrs)) return false;
  std::vector<DType> dtypes;
  for (const Shape* s : in) {
    if (!s) return false;
    dtypes.push_back(s->dtype());
  }
  const auto specs = specs_of(node);
  if (specs.empty() || (!node.outputs.empty() && specs.back().type != node.outputs[0].dtype()))
    return false;
  std::string why;
  return ew::program_supported(specs, dtypes, why);
}

}  // namespace

void register_fused_elementwise_kernels(KernelRegistry& r) {
  r.add(OpKind::FusedElementwise, &build_fused, &supports_fused);
}

}  // namespace rlx::cpu
