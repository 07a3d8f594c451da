#include "backends/cpu/evaluate.h"

#include <cstring>

#include "backends/cpu/arena.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"

namespace rlx::cpu {

std::vector<Blob> evaluate_node(const Node& node, const std::vector<const Shape*>& in_types,
                                const std::vector<std::span<const uint8_t>>& in_values, const EvalOptions& opts) {
  const KernelRegistry& reg = kernel_registry();
  const KernelEntry* entry = reg.find(node.kind);
  if (!entry || !entry->build || !reg.supports(node, in_types))
    fail(ErrorCategory::Unsupported, "no CPU kernel evaluates node '", node.name, "' (", op_name(node.kind),
         ") with these input types");
  if (in_values.size() != in_types.size())
    fail(ErrorCategory::InvalidArgument, "evaluating node '", node.name, "': ", in_values.size(), " values for ",
         in_types.size(), " inputs");
  KernelCall call;
  try {
    call = entry->build(node, in_types, node.outputs);
  } catch (const Error& e) {
    fail(e.category(), "building the kernel for node '", node.name, "' (", op_name(node.kind), "): ", e.what());
  }
  // Arena gives 64-byte aligned, zero-filled memory rounded up to whole 64-byte lines.
  auto padded = [](size_t n) { return int64_t((n + 63) / 64 * 64 + 64); };
  std::vector<Arena> mem;
  std::vector<void*> ptrs;
  mem.reserve(in_types.size() + node.outputs.size());
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (!in_types[i]) {
      ptrs.push_back(nullptr);
      continue;
    }
    const size_t n = in_types[i]->bytes();
    if (in_values[i].size() != n)
      fail(ErrorCategory::InvalidArgument, "evaluating node '", node.name, "': input ", i, " has ", in_values[i].size(),
           " bytes, its type ", in_types[i]->str(), " needs ", n);
    mem.emplace_back(padded(n), 64);
    if (n) std::memcpy(mem.back().data(), in_values[i].data(), n);
    ptrs.push_back(mem.back().data());
  }
  const size_t first_out = mem.size();
  for (const Shape& s : node.outputs) {
    mem.emplace_back(padded(s.bytes()), 64);
    ptrs.push_back(mem.back().data());
  }
  ThreadPool pool(opts.threads);
  RunCtx ctx;
  ctx.pool = &pool;
  ctx.extent_actual = opts.extent_actual;
  ctx.extent_upper = opts.extent_upper;
  try {
    call.fn(ctx, call.cfg.get(), ptrs.data());
  } catch (const Error& e) {
    if (std::string_view(e.what()).find("'" + node.name + "'") != std::string_view::npos) throw;
    fail(e.category(), "running node '", node.name, "' (", op_name(node.kind), "): ", e.what());
  }
  std::vector<Blob> out;
  out.reserve(node.outputs.size());
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const uint8_t* p = mem[first_out + o].data();
    out.emplace_back(std::vector<uint8_t>(p, p + node.outputs[o].bytes()));
  }
  return out;
}

}  // namespace rlx::cpu
