// gpt2: learned position embeddings, LayerNorm with biases, no rotary, GELU MLP with biases.
#include "llm/blocks.h"

namespace rlx::llm {

ArchSpec arch_gpt2() {
  ArchSpec a;
  a.name = "gpt2";
  a.hparams = [](const gguf::File& f, HParams& hp) {
    hp.rope = RopeKind::None;
    hp.layer_norm = true;
    hp.norm_eps = f.get_float("gpt2.attention.layer_norm_epsilon", 1e-5);
  };
  a.build = [](BuildCtx& c) {
    Graph& g = c.g;
    Value x = embed(c);  // token + position embedding rows, added on the host
    AttnOpts o;
    o.rope = false;
    for (int64_t il = 0; il < c.hp.n_layer; ++il) {
      Value n = layer_norm(c, x, blk(il, "attn_norm.weight"), blk(il, "attn_norm.bias"));
      Value h = g.add(x, self_attention(c, il, n, o));
      x = g.add(h, gelu_ffn(c, il, layer_norm(c, h, blk(il, "ffn_norm.weight"), blk(il, "ffn_norm.bias"))));
    }
    lm_head(c, x, true, false);
  };
  return a;
}

}  // namespace rlx::llm
