// qwen2: like llama with rotary on half-split pairs (neox), Q/K/V biases, no FFN biases or
// scales, and an optional output bias.
#include "llm/blocks.h"

namespace rlx::llm {

ArchSpec arch_qwen2() {
  ArchSpec a;
  a.name = "qwen2";
  a.hparams = [](const gguf::File& f, HParams& hp) {
    hp.rope = RopeKind::Neox;
    hp.norm_eps = f.get_float("qwen2.attention.layer_norm_rms_epsilon", 1e-6);
  };
  a.build = [](BuildCtx& c) {
    Value x = embed(c);
    for (int64_t il = 0; il < c.hp.n_layer; ++il) {
      Value h = c.g.add(x, self_attention(c, il, rms_norm(c, x, blk(il, "attn_norm.weight")), {}));
      x = c.g.add(h, swiglu_ffn(c, il, rms_norm(c, h, blk(il, "ffn_norm.weight")), false, false));
    }
    lm_head(c, x, false, true);
  };
  return a;
}

}  // namespace rlx::llm
