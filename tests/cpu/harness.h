// Test harness for CPU kernels: builds one node's KernelCall through kernel_registry()
// and runs it on given input bytes, outside the compile pipeline. Lets kernel tests
// compare against plain reference code without depending on passes or the planner.
#pragma once
#include <cstring>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx::test {

// 64-byte aligned byte buffer (kernels may use aligned loads on arena memory).
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : size(n), data(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64))) {
    std::memset(data, 0, (n + 63) / 64 * 64 + 64);
  }
  ~AlignedBytes() { std::free(data); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  size_t size;
  uint8_t* data;
};

template <class T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
std::vector<T> from_bytes(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

// Runs node `node_id` of `g` (its inputs must be graph leaves or any node: only their
// types are used). `inputs` holds bytes per node input (empty vector for an absent
// optional input). Returns the bytes of every output. Throws if no kernel supports it.
inline std::vector<std::vector<uint8_t>> run_kernel(const Graph& g, int32_t node_id,
                                                    const std::vector<std::vector<uint8_t>>& inputs,
                                                    int threads = 1, int64_t extent_actual = 0,
                                                    int64_t extent_upper = 0) {
  const Node& node = g.node(node_id);
  std::vector<const Shape*> in_types;
  for (const Value& v : node.inputs) in_types.push_back(v.valid() ? &g.type(v) : nullptr);
  const auto& reg = cpu::kernel_registry();
  const cpu::KernelEntry* entry = reg.find(node.kind);
  if (!entry || !entry->build) fail(ErrorCategory::Unsupported, "no CPU kernel for ", op_name(node.kind));
  if (!reg.supports(node, in_types))
    fail(ErrorCategory::Unsupported, "CPU kernel for ", op_name(node.kind), " does not support these types");
  cpu::KernelCall call = entry->build(node, in_types, node.outputs);

  std::vector<std::unique_ptr<AlignedBytes>> bufs;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (!in_types[i]) { ptrs.push_back(nullptr); continue; }
    size_t need = in_types[i]->bytes();
    if (inputs.at(i).size() != need)
      fail(ErrorCategory::InvalidArgument, "harness: input ", i, " has ", inputs[i].size(), " bytes, needs ", need);
    bufs.push_back(std::make_unique<AlignedBytes>(need));
    if (need) std::memcpy(bufs.back()->data, inputs[i].data(), need);
    ptrs.push_back(bufs.back()->data);
  }
  size_t first_out = bufs.size();
  for (const Shape& s : node.outputs) {
    bufs.push_back(std::make_unique<AlignedBytes>(s.bytes()));
    ptrs.push_back(bufs.back()->data);
  }
  cpu::ThreadPool pool(threads);
  cpu::RunCtx ctx;
  ctx.pool = &pool;
  ctx.extent_actual = extent_actual;
  ctx.extent_upper = extent_upper;
  call.fn(ctx, call.cfg.get(), ptrs.data());
  std::vector<std::vector<uint8_t>> outs;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const auto& b = *bufs[first_out + i];
    outs.emplace_back(b.data, b.data + b.size);
  }
  return outs;
}

}  // namespace rlx::test
