// The CPU kernel registry: one entry per OpKind, filled by each kernel family.
#include <cstdlib>
#include <string>

#include "backends/cpu/kernel.h"

namespace rlx::cpu {

void KernelRegistry::add(OpKind k, BuildFn build, SupportsFn supports) {
  const size_t i = size_t(k);
  RLX_CHECK(i < entries_.size(), "op kind out of range");
  RLX_CHECK(entries_[i].build == nullptr, "kernel registered twice for ", op_name(k));
  RLX_CHECK(build != nullptr, "null kernel builder for ", op_name(k));
  entries_[i] = KernelEntry{build, supports};
}

void KernelRegistry::add_build_info(OpKind k, BuildInfoFn build_info) {
  const size_t i = size_t(k);
  RLX_CHECK(i < entries_.size() && entries_[i].build != nullptr, "add_build_info before add for ", op_name(k));
  entries_[i].build_info = build_info;
}

void KernelRegistry::add_prefers_f32(OpKind k, SupportsFn prefers) {
  const size_t i = size_t(k);
  RLX_CHECK(i < entries_.size() && entries_[i].build != nullptr, "add_prefers_f32 before add for ", op_name(k));
  entries_[i].prefers_f32 = prefers;
}

const KernelEntry* KernelRegistry::find(OpKind k) const {
  const size_t i = size_t(k);
  if (i >= entries_.size() || entries_[i].build == nullptr) return nullptr;
  return &entries_[i];
}

bool KernelRegistry::supports(const Node& node, const std::vector<const Shape*>& in) const {
  const KernelEntry* e = find(node.kind);
  if (!e) return false;
  return e->supports == nullptr || e->supports(node, in);
}

bool any_half_input(const Node&, const std::vector<const Shape*>& in) {
  for (const Shape* s : in)
    if (s && (s->dtype() == DType::F16 || s->dtype() == DType::BF16)) return true;
  return false;
}

bool KernelRegistry::prefers_f32(const Node& node, const std::vector<const Shape*>& in) const {
  // RLX_CPU_HALF=native: the half kernels after all (the weights stay in the half type).
  if (const char* env = std::getenv("RLX_CPU_HALF"); env && std::string(env) == "native") return false;
  const KernelEntry* e = find(node.kind);
  return e && e->prefers_f32 && e->prefers_f32(node, in);
}

const KernelRegistry& kernel_registry() {
  // Function-local static: built once, thread-safe initialization.
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_elementwise_kernels(r);
    register_fused_elementwise_kernels(r);
    register_reduce_kernels(r);
    register_norm_kernels(r);
    register_matmul_kernels(r);
    register_movement_kernels(r);
    register_conv_kernels(r);
    register_pool_kernels(r);
    register_conv_integer_kernels(r);
    register_dft_kernels(r);
    register_attention_kernels(r);
    register_qmatmul_kernels(r);
    register_kv_attention_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace rlx::cpu
