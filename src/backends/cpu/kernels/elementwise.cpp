// Registration of the elementwise family: every unary, binary, compare, logical op,
// where and cast. Each node becomes a one-instruction program for the
// engine (elementwise_engine.h); identity and same-dtype casts are plain copies.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/elementwise_engine.h"
#include "ir/op_table.h"
#include "backends/cpu/thread_pool.h"
#include "rlx/error.h"

namespace rlx::cpu {
namespace {

std::string who(const Node& node) {
  return "node '" + node.name + "' (" + std::string(op_name(node.kind)) + ")";
}

ew::InstrSpec spec_of(const Node& node, size_t num_inputs, DType out) {
  ew::InstrSpec s{node.kind, {}, 0, 0, out};
  for (size_t i = 0; i < num_inputs; ++i) s.args.push_back(int32_t(i));
  ir::scalar_params(node.attrs, s.alpha, s.beta);
  return s;
}

struct CopyCfg {
  int64_t bytes = 0;
  int64_t lead = 0, lead_bytes = 0;
};

void run_copy(const RunCtx& ctx, const void* cfgp, void* const* bufs) {
  const CopyCfg& c = *static_cast<const CopyCfg*>(cfgp);
  if (bufs[0] == bufs[1]) return;  // aliased by the memory plan
  const int64_t bytes = c.lead > 0 ? ctx.rows(c.lead) * c.lead_bytes : c.bytes;
  const auto* src = static_cast<const unsigned char*>(bufs[0]);
  auto* dst = static_cast<unsigned char*>(bufs[1]);
  auto body = [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, size_t(e - b)); };
  constexpr int64_t kGrain = int64_t(1) << 20;
  if (ctx.pool && bytes > kGrain) ctx.pool->parallel_for(bytes, kGrain, body);
  else if (bytes > 0) body(0, bytes);
}

KernelCall build_elementwise(const Node& node, const std::vector<const Shape*>& in,
                             const std::vector<Shape>& out) {
  if (out.size() != 1) fail(ErrorCategory::Internal, who(node), ": expected one output");
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i]) fail(ErrorCategory::InvalidArgument, who(node), ": input ", i, " is absent");
  const bool copy = (node.kind == OpKind::Identity || node.kind == OpKind::Cast) && in.size() == 1 &&
                    in[0]->dtype() == out[0].dtype();
  if (copy) {
    if (in[0]->static_dims() != out[0].static_dims())
      fail(ErrorCategory::Shape, who(node), ": input ", in[0]->str(), " vs output ", out[0].str());
    CopyCfg c;
    c.bytes = int64_t(out[0].bytes());
    const auto dims = out[0].static_dims();
    if (!dims.empty() && dims[0] > 0) {
      c.lead = dims[0];
      c.lead_bytes = c.bytes / dims[0];
    }
    const bool extent = c.lead > 0;
    return make_call(&run_copy, c, extent);
  }
  ew::ProgramCfg cfg = ew::build_program({spec_of(node, in.size(), out[0].dtype())}, in, out[0], who(node),
                                         detect_isa());
  const bool extent = cfg.lead > 0;
  return make_call(&ew::run_program, std::move(cfg), extent);
}

bool supports_elementwise(const Node& node, const std::vector<const Shape*>& in) {
  if (node.outputs.size() != 1) return false;
  std::vector<DType> dtypes;
  for (const Shape* s : in) {
    if (!s) return false;
    dtypes.push_back(s->dtype());
  }
  std::string why;
  return ew::program_supported({spec_of(node, in.size(), node.outputs[0].dtype())}, dtypes, why);
}

}  // namespace

// Every elementwise op of the table with a fixed arity. Identity is registered by the
// movement family (a copy / view; programs of fused_elementwise still accept it through
// the engine) and fused_elementwise by its own file.
void register_elementwise_kernels(KernelRegistry& r) {
  for (const ir::OpInfo& op : ir::all_ops())
    if (ir::elementwise_arity(op.kind) > 0 && op.kind != OpKind::Identity)
      r.add(op.kind, &build_elementwise, &supports_elementwise);
}

}  // namespace rlx::cpu
