// qwen3: neox rotary after an RMSNorm over each head of Q and K (QK-norm), SwiGLU with
// per-matrix scales, no FFN biases.
#include "llm/blocks.h"

namespace rlx::llm {

ArchSpec arch_qwen3() {
  ArchSpec a;
  a.name = "qwen3";
  a.hparams = [](const gguf::File& f, HParams& hp) {
    hp.rope = RopeKind::Neox;
    hp.norm_eps = f.get_float("qwen3.attention.layer_norm_rms_epsilon", 1e-6);
  };
  a.build = [](BuildCtx& c) {
    Value x = embed(c);
    AttnOpts o;
    o.qk_norm = true;
    for (int64_t il = 0; il < c.hp.n_layer; ++il) {
      Value h = c.g.add(x, self_attention(c, il, rms_norm(c, x, blk(il, "attn_norm.weight")), o));
      x = c.g.add(h, swiglu_ffn(c, il, rms_norm(c, h, blk(il, "ffn_norm.weight")), false, true));
    }
    lm_head(c, x, false, false);
  };
  return a;
}

}  // namespace rlx::llm
