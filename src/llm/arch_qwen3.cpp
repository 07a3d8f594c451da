// qwen3 and qwen3moe: neox rotary after an RMSNorm over each head of Q and K (QK-norm);
// a SwiGLU feed-forward with per-matrix scales and no biases (qwen3), or a mixture of
// experts in every layer (qwen3moe). One forward pass serves both.
#include "llm/blocks.h"

namespace rlx::llm {

namespace {

void build_qwen3(BuildCtx& c) {
  Value x = embed(c);
  AttnOpts o;
  o.qk_norm = true;
  for (int64_t il = 0; il < c.hp.n_layer; ++il) {
    Value h = c.g.add(x, self_attention(c, il, rms_norm(c, x, blk(il, "attn_norm.weight")), o));
    Value n = rms_norm(c, h, blk(il, "ffn_norm.weight"));
    x = c.g.add(h, c.hp.n_expert > 0 ? moe_ffn(c, il, n) : swiglu_ffn(c, il, n, false, true));
  }
  lm_head(c, x, false, false);
}

ArchSpec qwen3_family(const std::string& name, bool experts) {
  ArchSpec a;
  a.name = name;
  a.hparams = [name, experts](const gguf::File& f, HParams& hp) {
    hp.rope = RopeKind::Neox;
    hp.norm_eps = f.get_float(name + ".attention.layer_norm_rms_epsilon", 1e-6);
    if (experts && hp.n_expert < 1)
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", name, ".expert_count is ", hp.n_expert);
  };
  a.build = build_qwen3;
  return a;
}

}  // namespace

ArchSpec arch_qwen3() { return qwen3_family("qwen3", false); }
ArchSpec arch_qwen3moe() { return qwen3_family("qwen3moe", true); }

}  // namespace rlx::llm
