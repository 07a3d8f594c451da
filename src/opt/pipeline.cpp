// The compile pipeline (order in pipeline.h, except that precision runs before
// legalize: see below). Each step logs "name: N -> M nodes";
// with options.verify_each_pass the verifier runs after every pass and its error names
// the pass that broke the graph.
#include "opt/pipeline.h"

#include <functional>
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"
#include "rlx/text.h"

namespace rlx::opt {

namespace {

class Runner {
 public:
  Runner(Graph g, bool verify_each) : g_(std::move(g)), verify_each_(verify_each) {}

  void step(const std::string& name, const std::function<Graph(const Graph&)>& pass) {
    size_t before = g_.nodes().size();
    g_ = pass(g_);
    log_ << name << ": " << before << " -> " << g_.nodes().size() << " nodes\n";
    if (verify_each_) verify(name);
  }

  void verify(const std::string& after) {
    try {
      verify_graph(g_);
    } catch (const Error& e) {
      if (after.empty()) fail(ErrorCategory::Verify, "input graph: ", e.what());
      fail(ErrorCategory::Verify, "after pass ", after, ": ", e.what());
    }
  }

  Graph& graph() { return g_; }
  std::string log() const { return log_.str(); }

 private:
  Graph g_;
  bool verify_each_;
  std::ostringstream log_;
};

// Compiling specializes: every symbolic dim of an input or param must be bound by now.
// The message names the symbol as the user wrote it and how to bind it.
void require_bound(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::Input && n.kind != OpKind::Param) continue;
    for (Dim d : n.outputs[0].dims()) {
      if (!d.is_symbolic()) continue;
      const auto& syms = g.symbols();
      std::string sym = "s";
      if (size_t(d.symbol_id()) < syms.size()) sym = syms[size_t(d.symbol_id())];
      else sym += std::to_string(d.symbol_id());
      fail(ErrorCategory::Shape, n.kind == OpKind::Input ? "input '" : "param '", n.attr<LeafAttrs>().name,
           "' has the unbound symbolic dim '", sym, "' (type ", shape_str(g, n.outputs[0]),
           "): bind it with CompileOptions::dim_bindings[\"", sym, "\"] or, on the command line, --bind ", sym, "=SIZE");
    }
  }
}

}  // namespace

Plan compile_pipeline(const Graph& g, const PipelineContext& ctx) {
  const CompileOptions& o = ctx.options;
  Runner r(g, o.verify_each_pass);
  if (!o.dim_bindings.empty())
    r.step("bind-dims", [&](const Graph& x) { return bind_dims(x, o.dim_bindings); });
  r.verify("");
  require_bound(r.graph());
  r.step("dce", dce);
  Plan plan;
  if (o.constant_fold && ctx.evaluate) {
    // Folding a per-channel affine map into a conv's weights leaves expressions over
    // constants: constant-fold, right after, evaluates them.
    r.step("fold-conv-affine", [&](const Graph& x) { return fold_conv_affine(x, &plan.fusion_report); });
    r.step("constant-fold", [&](const Graph& x) { return constant_fold(x, ctx.evaluate); });
  }
  if (o.cse) r.step("cse", cse);
  if (o.simplify) r.step("simplify", simplify);
  if (o.fuse_norms) r.step("fuse-norms", [&](const Graph& x) { return fuse_norms(x, &plan.fusion_report); });
  // Before the matmul epilogues, which take the gelu as their activation.
  if (o.fuse_gelu) r.step("fuse-gelu", [&](const Graph& x) { return fuse_gelu(x, &plan.fusion_report); });
  // Before the matmul epilogues: the scale and mask add after the scores' matmul belong to
  // the attention node, not to a fused_matmul.
  const DType low = o.precision == Precision::F16    ? DType::F16
                    : o.precision == Precision::BF16 ? DType::BF16
                                                     : DType::F32;
  if (o.fuse_attention)
    r.step("fuse-attention", [&](const Graph& x) { return fuse_attention(x, &plan.fusion_report, &ctx.claims, low); });
  if (o.fuse_matmul_epilogue) {
    r.step("fuse-matmul-epilogue", [&](const Graph& x) { return fuse_matmul_epilogue(x, &plan.fusion_report); });
    r.step("fuse-conv-epilogue",
           [&](const Graph& x) { return fuse_conv_epilogue(x, &plan.fusion_report, &ctx.claims); });
  }
  // After the conv epilogues (a fused conv turns channels last whole), before fuse-elementwise
  // (which then fuses what it carries through).
  if (o.channels_last)
    r.step("channels-last", [&](const Graph& x) { return channels_last(x, &plan.fusion_report, &ctx.claims, low); });
  if (o.fuse_elementwise)
    r.step("fuse-elementwise", [&](const Graph& x) { return fuse_elementwise(x, &plan.fusion_report); });
  // precision runs before legalize (pipeline.h lists them the other way round): a norm
  // or softmax that legalize decomposes must already be marked f32, or its primitives
  // would be lowered like any elementwise op; and half nodes the backend lacks are then
  // wrapped in f32 casts by legalize.
  if (o.precision == Precision::F16 || o.precision == Precision::BF16)
    r.step("precision", [&](const Graph& x) { return apply_precision(x, o.precision, &ctx.claims); });
  r.step("legalize", [&](const Graph& x) { return legalize(x, ctx.claims, &plan.dispatch_report); });
  // The casts legalize puts around a half node the backend runs in f32 take constants too (a
  // conv's weights): widened once here rather than on every run, and seen as constants by
  // the backend's build (which packs or transforms constant weights once).
  if (o.constant_fold && ctx.evaluate)
    r.step("constant-fold", [&](const Graph& x) { return constant_fold(x, ctx.evaluate); });
  r.step("dce", dce);
  plan.memory = plan_memory(r.graph(), o.arena_alignment,
                            ctx.claims.joint_steps ? ctx.claims.joint_steps(r.graph())
                                                   : std::vector<std::pair<int32_t, int32_t>>{});
  plan.pass_log = r.log() + "plan-memory: arena " + std::to_string(plan.memory.arena_bytes) + " bytes\n";
  plan.graph = std::move(r.graph());
  return plan;
}

}  // namespace rlx::opt
