// Session::compile: options (+ RLX_* overrides) -> pipeline against the CPU kernels'
// claims -> CPU program -> a CompiledGraph instance.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>

#include "backends/cpu/arena.h"
#include "backends/cpu/executable.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "opt/passes.h"
#include "opt/pipeline.h"
#include "rlx/compiled_graph.h"
#include "runtime/instance.h"

namespace rlx {

namespace {

opt::BackendClaims cpu_claims() {
  return opt::BackendClaims{"cpu", [](const Node& n, const std::vector<const Shape*>& in) {
                              return cpu::kernel_registry().supports(n, in);
                            }};
}

// Runs one node through the CPU kernels on constant inputs (for constant-fold).
// Answers Error(Unsupported) for nodes no kernel runs; the pass then leaves them.
opt::ConstEvaluator cpu_const_evaluator() {
  auto pool = std::make_shared<cpu::ThreadPool>(1);
  return [pool](const Node& node, const std::vector<Shape>& in_types,
                const std::vector<Blob>& in_values) -> std::vector<Blob> {
    const cpu::KernelRegistry& reg = cpu::kernel_registry();
    std::vector<const Shape*> in;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      in.push_back(node.inputs[i].valid() ? &in_types.at(i) : nullptr);
    const cpu::KernelEntry* entry = reg.find(node.kind);
    if (!entry || !entry->build || !reg.supports(node, in))
      fail(ErrorCategory::Unsupported, "no CPU kernel evaluates node '", node.name, "' (", op_name(node.kind), ")");
    cpu::KernelCall call = entry->build(node, in, node.outputs);
    std::vector<cpu::Arena> mem;
    std::vector<void*> ptrs;
    mem.reserve(in.size() + node.outputs.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i]) {
        ptrs.push_back(nullptr);
        continue;
      }
      const size_t n = in[i]->bytes();
      if (in_values.at(i).size() != n)
        fail(ErrorCategory::Internal, "constant input ", i, " of node '", node.name, "' has ", in_values[i].size(),
             " bytes, type needs ", n);
      mem.emplace_back(int64_t(n), 64);
      if (n) std::memcpy(mem.back().data(), in_values[i].data(), n);
      ptrs.push_back(mem.back().data());
    }
    const size_t first_out = mem.size();
    for (const Shape& s : node.outputs) {
      mem.emplace_back(int64_t(s.bytes()), 64);
      ptrs.push_back(mem.back().data());
    }
    cpu::RunCtx ctx;
    ctx.pool = pool.get();
    call.fn(ctx, call.cfg.get(), ptrs.data());
    std::vector<Blob> out;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const cpu::Arena& a = mem[first_out + o];
      out.emplace_back(std::vector<uint8_t>(a.data(), a.data() + a.size()));
    }
    return out;
  };
}

}  // namespace

Session::Session(Device device, CompileOptions options) : device_(device), options_(std::move(options)) {}

std::vector<Device> Session::available_devices() { return {Device::Cpu}; }

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

CompiledGraph Session::compile(const Graph& g) const {
  return detail::guard("compiling graph", [&] { return compile_unguarded(g); });
}

CompiledGraph Session::compile_unguarded(const Graph& g) const {
  if (device_ == Device::Cuda)
    fail(ErrorCategory::Unsupported, "CUDA backend not built (available devices: cpu)");
  CompileOptions opts = apply_env(options_);
  (void)effective_memory_cap(opts);  // validates max_arena_bytes before any work
  if (opts.threads < 0) fail(ErrorCategory::InvalidArgument, "CompileOptions::threads is ", opts.threads);
  if (opts.arena_alignment < 1 || (opts.arena_alignment & (opts.arena_alignment - 1)) != 0)
    fail(ErrorCategory::InvalidArgument, "CompileOptions::arena_alignment ", opts.arena_alignment,
         " is not a power of two");

  opt::PipelineContext ctx{cpu_claims(), cpu_const_evaluator(), opts};
  opt::Plan plan = opt::compile_pipeline(g, ctx);
  check_memory_cap(plan, opts, g.name());
  if (opts.verify_each_pass) opt::verify_memory_plan(plan.graph, plan.memory);
  if (opts.dispatch_report) std::cerr << "[rlx] dispatch report for graph '" << g.name() << "':\n" << plan.dispatch_report;
  if (opts.arena_report) std::cerr << "[rlx] memory plan for graph '" << g.name() << "':\n" << plan.memory.report(plan.graph);

  std::shared_ptr<cpu::Program> program = cpu::compile(std::move(plan));
  std::shared_ptr<runtime::Interface> iface = runtime::make_interface(g, *program, opts);
  iface->threads = opts.threads > 0 ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  auto instance = std::make_unique<runtime::Instance>(program, std::move(iface));
  cpu::drop_param_init(*program);  // the weights segment now holds it
  return CompiledGraph(std::move(instance));
}

}  // namespace rlx
