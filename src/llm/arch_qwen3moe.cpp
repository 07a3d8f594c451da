// qwen3moe: qwen3's attention (QK-norm, neox rotary) with a mixture-of-experts feed-forward
// in every layer.
#include "llm/blocks.h"

namespace rlx::llm {

ArchSpec arch_qwen3moe() {
  ArchSpec a;
  a.name = "qwen3moe";
  a.hparams = [](const gguf::File& f, HParams& hp) {
    hp.rope = RopeKind::Neox;
    hp.norm_eps = f.get_float("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6);
    if (hp.n_expert < 1)
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': qwen3moe.expert_count is ", hp.n_expert);
  };
  a.build = [](BuildCtx& c) {
    Value x = embed(c);
    AttnOpts o;
    o.qk_norm = true;
    for (int64_t il = 0; il < c.hp.n_layer; ++il) {
      Value h = c.g.add(x, self_attention(c, il, rms_norm(c, x, blk(il, "attn_norm.weight")), o));
      x = c.g.add(h, moe_ffn(c, il, rms_norm(c, h, blk(il, "ffn_norm.weight"))));
    }
    lm_head(c, x, false, false);
  };
  return a;
}

}  // namespace rlx::llm
