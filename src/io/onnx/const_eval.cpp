// Runs a single kernel outside the compile pipeline, on 64-byte aligned copies of the
// constant inputs (kernels may use aligned loads on arena memory).
#include "io/onnx/const_eval.h"

#include <cstdlib>
#include <cstring>
#include <memory>

#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"

namespace rlx::onnx {

namespace {

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuf = std::unique_ptr<uint8_t, AlignedFree>;

AlignedBuf aligned(size_t n) {
  size_t sz = (n + 63) / 64 * 64 + 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, sz));
  if (!p) fail(ErrorCategory::Internal, "out of memory folding a constant of ", n, " bytes");
  std::memset(p, 0, sz);
  return AlignedBuf(p);
}

}  // namespace

std::optional<std::vector<Blob>> eval_const_node(const Node& node, const std::vector<const Shape*>& in_types,
                                                 const std::vector<const Blob*>& in_values) {
  const auto& reg = cpu::kernel_registry();
  const cpu::KernelEntry* entry = reg.find(node.kind);
  if (!entry || !entry->build || !reg.supports(node, in_types)) return std::nullopt;
  cpu::KernelCall call;
  try {
    call = entry->build(node, in_types, node.outputs);
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::Unsupported) return std::nullopt;
    throw;
  }
  std::vector<AlignedBuf> bufs;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (!in_types[i]) {
      ptrs.push_back(nullptr);
      continue;
    }
    size_t need = in_types[i]->bytes();
    bufs.push_back(aligned(need));
    if (need) std::memcpy(bufs.back().get(), in_values[i]->data(), need);
    ptrs.push_back(bufs.back().get());
  }
  size_t first_out = bufs.size();
  for (const Shape& s : node.outputs) {
    bufs.push_back(aligned(s.bytes()));
    ptrs.push_back(bufs.back().get());
  }
  cpu::ThreadPool pool(1);
  cpu::RunCtx ctx;
  ctx.pool = &pool;
  call.fn(ctx, call.cfg.get(), ptrs.data());
  std::vector<Blob> out;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const uint8_t* p = bufs[first_out + o].get();
    out.emplace_back(std::vector<uint8_t>(p, p + node.outputs[o].bytes()));
  }
  return out;
}

}  // namespace rlx::onnx
