// Runs one node's CPU kernel the way the executable does (built once through the
// registry, then called with fixed buffers), so benchmarks time only the kernel call.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "rlx/graph.h"

namespace rlx::bench {

class KernelRunner {
 public:
  // Builds node `node_id` of `g`; inputs are filled with values in [-1, 1). The inputs listed
  // in `constant` are passed to the builder as constants of the program (with their values),
  // as the executable passes initializers: weights packed or transformed at build time.
  KernelRunner(const Graph& g, int32_t node_id, int threads, std::vector<int> constant = {}) : pool_(threads) {
    const Node& node = g.node(node_id);
    std::vector<const Shape*> in;
    for (const Value& v : node.inputs) in.push_back(v.valid() ? &g.type(v) : nullptr);
    const cpu::KernelEntry* e = cpu::kernel_registry().find(node.kind);
    if (!e || !cpu::kernel_registry().supports(node, in))
      fail(ErrorCategory::Unsupported, "bench: no CPU kernel for ", op_name(node.kind));
    uint32_t seed = 1;
    for (const Shape* s : in) add_buffer(s ? s->bytes() : 0, s ? s->dtype() : DType::F32, seed++, s != nullptr);
    if (constant.empty() || !e->build_info) {
      call_ = e->build(node, in, node.outputs);
    } else {
      cpu::BuildInfo info;
      std::vector<Blob> blobs(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        const bool c = in[i] && std::find(constant.begin(), constant.end(), int(i)) != constant.end();
        if (c) {
          const uint8_t* p = static_cast<const uint8_t*>(ptrs_[i]);
          blobs[i] = Blob(std::vector<uint8_t>(p, p + in[i]->bytes()));
        }
        info.const_inputs.push_back(c);
        info.const_values.push_back(c ? &blobs[i] : nullptr);
      }
      call_ = e->build_info(node, in, node.outputs, info);
    }
    for (const Shape& s : node.outputs) add_buffer(s.bytes(), s.dtype(), 0, true);
    ctx_.pool = &pool_;
  }

  void run() { call_.fn(ctx_, call_.cfg.get(), ptrs_.data()); }
  // Input i's buffer (F32 inputs hold values in [-1, 1), the others zeros), for a benchmark
  // that needs particular values (kv_attention's cache lengths).
  void* input(size_t i) { return ptrs_[i]; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  void add_buffer(size_t bytes, DType t, uint32_t seed, bool present) {
    if (!present) {
      ptrs_.push_back(nullptr);
      return;
    }
    uint8_t* p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
    std::memset(p, 0, bytes);
    if (seed && t == DType::F32) {
      float* f = reinterpret_cast<float*>(p);
      uint32_t s = seed * 2654435761u;
      for (size_t i = 0; i < bytes / 4; ++i) {
        s = s * 1664525u + 1013904223u;
        f[i] = float(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
      }
    }
    buffers_.emplace_back(p);
    ptrs_.push_back(p);
  }

  cpu::ThreadPool pool_;
  cpu::RunCtx ctx_;
  cpu::KernelCall call_;
  std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
  std::vector<void*> ptrs_;
};

}  // namespace rlx::bench
