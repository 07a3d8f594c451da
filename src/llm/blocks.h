// Internal: the blocks LLM families are made of, in llama.cpp's order of operations so
// the logits match its reference outputs (e.g. a projection's per-matrix scale is applied
// before its bias for attention, after it for the feed-forward matrices).
#pragma once
#include <string>

#include "llm/arch.h"

namespace rlx::llm {

// "blk.N.NAME"
std::string blk(int64_t il, const std::string& name);

// x @ W (+ bias if the file has NAME.bias), times NAME.scale if present and `use_scale`.
// scale_first: multiply by the scale before adding the bias (attention projections).
Value linear(BuildCtx& c, Value x, const std::string& name, bool use_bias, bool use_scale, bool scale_first);
// linear() of one input by several weights (q/k/v, up/gate): one product over their rows
// where BuildCtx::fuse_rows allows (project_rows), each with its own bias / scale.
std::vector<Value> linear_rows(BuildCtx& c, Value x, const std::vector<std::string>& names, bool use_bias, bool use_scale,
                               bool scale_first);

Value rms_norm(BuildCtx& c, Value x, const std::string& weight);
Value layer_norm(BuildCtx& c, Value x, const std::string& weight, const std::string& bias);

struct AttnOpts {
  bool qk_norm = false;        // RMSNorm over each head of q and k (qwen3)
  bool rope = true;
  bool out_bias = true;        // attn_output.bias when present
};
// Self-attention of layer il over the cache and the new tokens; returns [T, n_embd].
Value self_attention(BuildCtx& c, int64_t il, Value x, const AttnOpts& o);

// SwiGLU feed-forward (gate, up, down), optional biases and scales as the family uses them.
Value swiglu_ffn(BuildCtx& c, int64_t il, Value x, bool biases, bool scales);
// Mixture-of-experts SwiGLU feed-forward: softmax router, top n_expert_used experts with
// weights renormalized to sum 1, per-expert scales when present; only the selected experts
// run (qmatmul_id), and the slots are summed in order.
Value moe_ffn(BuildCtx& c, int64_t il, Value x);
// GELU feed-forward (up, down) with biases (gpt2).
Value gelu_ffn(BuildCtx& c, int64_t il, Value x);

// The token embeddings (looked up on the host, see BuildCtx::embeddings): [T, n_embd].
Value embed(BuildCtx& c);
// Final rows (the last one only unless all_rows) -> norm -> logits; sets the graph outputs.
void lm_head(BuildCtx& c, Value x, bool layer_norm, bool output_bias);

}  // namespace rlx::llm
