// llama: Llama 1/2/3, Mistral, TinyLlama, SmolLM2. RMSNorm, rotary on adjacent pairs with
// optional per-dimension frequency factors (rope_freqs.weight), SwiGLU, optional biases
// and per-matrix scales; with experts (Mixtral-style), a mixture-of-experts feed-forward.
#include "llm/blocks.h"

namespace rlx::llm {

ArchSpec arch_llama() {
  ArchSpec a;
  a.name = "llama";
  a.hparams = [](const gguf::File& f, HParams& hp) {
    hp.rope = RopeKind::Norm;
    hp.norm_eps = f.get_float("llama.attention.layer_norm_rms_epsilon", 1e-5);
    hp.attn_scale = f.get_float("llama.attention.scale", 0.0);
  };
  a.build = [](BuildCtx& c) {
    Value x = embed(c);
    for (int64_t il = 0; il < c.hp.n_layer; ++il) {
      Value h = c.g.add(x, self_attention(c, il, rms_norm(c, x, blk(il, "attn_norm.weight")), {}));
      Value n = rms_norm(c, h, blk(il, "ffn_norm.weight"));
      x = c.g.add(h, c.hp.n_expert > 0 ? moe_ffn(c, il, n) : swiglu_ffn(c, il, n, true, true));
    }
    lm_head(c, x, false, false);
  };
  return a;
}

}  // namespace rlx::llm
