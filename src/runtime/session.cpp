// Session::compile: options (+ RLX_* overrides) -> the pipeline against the chosen
// backend's claims and constant evaluator -> the memory cap -> the backend's compile ->
// a CompiledGraph instance. Backends come from the registry (backend_registry.h).
#include <algorithm>
#include <iostream>

#include "opt/passes.h"
#include "opt/pipeline.h"
#include "rlx/compiled_graph.h"
#include "runtime/backend_registry.h"
#include "runtime/instance.h"

namespace rlx {

namespace {
// Refuses a plan whose segments exceed the memory cap, before anything is allocated.
void check_memory_cap(const opt::Plan& plan, const CompileOptions& opts, const std::string& graph) {
  const int64_t cap = effective_memory_cap(opts);
  const char* source = opts.max_arena_bytes > 0 ? "CompileOptions::max_arena_bytes / RLX_MAX_ARENA_BYTES"
                                                : "the machine's physical memory";
  auto check = [&](int64_t bytes, const char* what) {
    if (bytes > cap)
      fail(ErrorCategory::ResourceExhausted, "graph '", graph, "': the planned ", what, " is ", bytes,
           " bytes, above the cap of ", cap, " bytes (", source, ")");
  };
  check(plan.memory.arena_bytes, "activation arena");
  check(plan.memory.weights_bytes, "weights segment");
}
}  // namespace

Session::Session(Device device, CompileOptions options) : device_(device), options_(std::move(options)) {}

std::vector<Device> Session::available_devices() {
  std::vector<Device> out;
  for (const backend::Backend* b : runtime::backends())
    if (b->device() != Device::Null && b->available(nullptr)) out.push_back(b->device());
  return out;
}

CompiledGraph Session::compile(const Graph& g) const {
  return detail::guard("compiling graph", [&] { return compile_unguarded(g, nullptr); });
}

CompiledGraph Session::compile(Graph&& g) const {
  Graph owned = std::move(g);
  return detail::guard("compiling graph", [&] { return compile_unguarded(owned, &owned); });
}

CompiledGraph Session::compile_unguarded(const Graph& g, Graph* owned) const {
  const backend::Backend& be = runtime::backend_for(device_);
  CompileOptions opts = apply_env(options_);
  (void)effective_memory_cap(opts);  // validates max_arena_bytes before any work
  if (opts.threads < 0 || opts.threads > kMaxThreads)
    fail(ErrorCategory::InvalidArgument, "CompileOptions::threads is ", opts.threads, ": expected 0 (all cores) to ",
         kMaxThreads);
  if (opts.arena_alignment < 1 || (opts.arena_alignment & (opts.arena_alignment - 1)) != 0)
    fail(ErrorCategory::InvalidArgument, "CompileOptions::arena_alignment ", opts.arena_alignment,
         " is not a power of two");

  opt::PipelineContext ctx{be.claims(opts), be.const_evaluator(), opts};
  opt::Plan plan = opt::compile_pipeline(g, ctx);
  if (owned)  // the plan holds what it needs; the caller's copy of the constants goes
    for (size_t i = 0; i < owned->nodes().size(); ++i)
      if (owned->nodes()[i].kind == OpKind::Constant) owned->mutable_node(int32_t(i)).attr<ConstantAttrs>().value = Blob();
  check_memory_cap(plan, opts, g.name());
  if (opts.verify_each_pass) opt::verify_memory_plan(plan.graph, plan.memory);
  if (opts.dispatch_report) std::cerr << "[rlx] dispatch report for graph '" << g.name() << "':\n" << plan.dispatch_report;
  if (opts.fusion_report) std::cerr << "[rlx] fusion report for graph '" << g.name() << "':\n" << plan.fusion_report;
  if (opts.arena_report) std::cerr << "[rlx] memory plan for graph '" << g.name() << "':\n" << plan.memory.report(plan.graph);

  std::unique_ptr<backend::Executable> exe = be.compile(std::move(plan), opts);
  std::shared_ptr<runtime::Interface> iface = runtime::make_interface(g, *exe, opts);
  return CompiledGraph(std::make_unique<runtime::Instance>(std::move(exe), std::move(iface)));
}

}  // namespace rlx
