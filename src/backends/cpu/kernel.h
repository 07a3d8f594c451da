// CPU kernel interface. A kernel family file registers, per OpKind, a builder that
// turns a node with known static types into a KernelCall: a plain function pointer
// plus a precomputed config. At run time the executable only calls fn(ctx, cfg, bufs).
#pragma once
#include <memory>
#include <vector>

#include "rlx/graph.h"

namespace rlx::cpu {

class ThreadPool;

struct RunCtx {
  ThreadPool* pool = nullptr;
  // Active extent: kernels whose call was built with extent_ok treat a leading dim of
  // size extent_upper as extent_actual (rows past it are left untouched).
  int64_t extent_actual = 0, extent_upper = 0;
  int64_t rows(int64_t full) const {
    return (extent_upper > 0 && full == extent_upper) ? extent_actual : full;
  }
};

// bufs: one pointer per node input (nullptr for an absent optional input), then one
// per node output. Inputs must not be written.
using KernelFn = void (*)(const RunCtx& ctx, const void* cfg, void* const* bufs);

struct KernelCall {
  KernelFn fn = nullptr;
  std::shared_ptr<const void> cfg;  // kernel-specific, immutable after build
  bool extent_ok = false;           // honours RunCtx::rows on its leading dim
  // Constant inputs the call never reads at run time: it keeps what it derived from their
  // bytes (BuildInfo::const_values) in its config. A constant that every reader absorbed is
  // released by the executable (its bytes are not held twice); its buffer pointer is
  // still passed, and must not be dereferenced.
  std::vector<int> absorbed;
};

// in[i] is nullptr for an absent optional input; out are the output types.
using BuildFn = KernelCall (*)(const Node& node, const std::vector<const Shape*>& in,
                               const std::vector<Shape>& out);
using SupportsFn = bool (*)(const Node& node, const std::vector<const Shape*>& in);

// What the executable knows of a node's inputs beyond their types, for builders that use
// it: const_inputs[i] is true when input i is a constant of the program (its bytes never
// change while the program lives, at the same address: a kernel may cache what it derives
// from them, e.g. a packed weight matrix, across runs and clones).
// const_values[i] holds that constant's bytes during the build (nullptr otherwise): a builder
// may derive its own copy from them and list the input in KernelCall::absorbed.
struct BuildInfo {
  std::vector<bool> const_inputs;
  std::vector<const Blob*> const_values;
};
using BuildInfoFn = KernelCall (*)(const Node& node, const std::vector<const Shape*>& in,
                                   const std::vector<Shape>& out, const BuildInfo& info);

struct KernelEntry {
  BuildFn build = nullptr;
  SupportsFn supports = nullptr;  // nullptr: supports every dtype the op accepts
  BuildInfoFn build_info = nullptr;  // preferred by the executable when set (build stays for the constant folder)
  SupportsFn prefers_f32 = nullptr;  // half nodes better run in f32 (opt::BackendClaims::prefers_f32)
};

// A prefers_f32 predicate: any operand f16 / bf16. For the families whose f32 kernels beat
// their half ones by more than the casts around them cost: matmuls (constant weights
// packed once in f32 instead of widened while packing on every call), attention and the
// norms (MiniLM-L6 at --precision f16, one thread: 38 -> 13 ms a run, the f32 run 12.5-13).
bool any_half_input(const Node& node, const std::vector<const Shape*>& in);

class KernelRegistry {
 public:
  void add(OpKind k, BuildFn build, SupportsFn supports = nullptr);
  void add_build_info(OpKind k, BuildInfoFn build_info);  // after add()
  void add_prefers_f32(OpKind k, SupportsFn prefers);      // after add()
  const KernelEntry* find(OpKind k) const;
  bool supports(const Node& node, const std::vector<const Shape*>& in) const;
  bool prefers_f32(const Node& node, const std::vector<const Shape*>& in) const;

 private:
  std::vector<KernelEntry> entries_ = std::vector<KernelEntry>(size_t(kNumOpKinds));
};

// The registry with every family registered (built once, thread-safe).
const KernelRegistry& kernel_registry();

// Family registration functions (one per src/backends/cpu/kernels/<family>.cpp).
void register_elementwise_kernels(KernelRegistry& r);
void register_fused_elementwise_kernels(KernelRegistry& r);
void register_reduce_kernels(KernelRegistry& r);     // reduce_*, argmax/min, topk
void register_norm_kernels(KernelRegistry& r);       // softmax, log_softmax, layer/rms norm
void register_matmul_kernels(KernelRegistry& r);     // matmul, fused_matmul
void register_movement_kernels(KernelRegistry& r);   // transpose, slice, concat, split, gather, expand, pad, tile
void register_conv_kernels(KernelRegistry& r);       // conv2d, fused_conv2d
void register_pool_kernels(KernelRegistry& r);       // max_pool2d, avg_pool2d
void register_conv_integer_kernels(KernelRegistry& r);  // conv_integer
void register_dft_kernels(KernelRegistry& r);           // dft, idft
void register_attention_kernels(KernelRegistry& r);  // attention, rotary
void register_qmatmul_kernels(KernelRegistry& r);    // qmatmul, qmatmul_id (block-quantized weights)
void register_kv_attention_kernels(KernelRegistry& r);  // kv_attention, cache_write (KV cache ops)

// Helper for builders: wraps a config object.
template <class Cfg>
KernelCall make_call(KernelFn fn, Cfg cfg, bool extent_ok = false) {
  return KernelCall{fn, std::make_shared<const Cfg>(std::move(cfg)), extent_ok};
}

}  // namespace rlx::cpu
