// Small models of every supported architecture, written here with gguf::Writer (random
// weights, the real tokenizer of a vocab GGUF copied in), so these tests need nothing but the
// vocab files. Per family: text through the tokenizer, the prompt pass agrees with feeding
// the same tokens one at a time (prefill and decode kernels are different code), batched
// decode equals decoding alone, and Q4_0 weights (repacked at load) generate too.
// Tolerance of the prefill/decode agreement, F16 weights and an F32 cache: both paths
// accumulate in f32 over at most 64 terms per product in different orders (GEMM panels vs
// dot products), so each logit may move by ~64 * 2^-24 relative per product and layer; with
// logits of order 1 after 1-2 layers, 2e-4 absolute leaves a wide margin yet fails on any
// real difference (a wrong position, mask or cache row moves logits by 1e-2 or more).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <ostream>
#include <random>

#include "rlx/llm.h"

namespace rlx::llm {
namespace {

struct ArchCase {
  std::string name, arch, vocab;
  int64_t experts = 0;
};
void PrintTo(const ArchCase& c, std::ostream* os) { *os << c.name; }  // readable ctest names

void write_model(const ArchCase& c, const std::string& path, gguf::TensorType mtype) {
  gguf::File v = gguf::File::open(std::string(RLX_SHARED_DIR) + "/gguf/vocab/" + c.vocab);
  const int64_t V = int64_t(v.get_strings("tokenizer.ggml.tokens").size()), E = 64, F = 128, H = 2, Hkv = 1, D = 32;
  const std::string& a = c.arch;
  gguf::Writer w;
  w.copy_metadata(v, "tokenizer.");
  w.set_string("general.architecture", a);
  w.set_u32(a + ".context_length", 512);
  w.set_u32(a + ".embedding_length", uint32_t(E));
  w.set_u32(a + ".block_count", 2);
  w.set_u32(a + ".feed_forward_length", uint32_t(F));
  w.set_u32(a + ".attention.head_count", uint32_t(H));
  w.set_u32(a + ".attention.head_count_kv", uint32_t(Hkv));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".attention.layer_norm_epsilon", 1e-5f);
  if (c.experts) {
    w.set_u32(a + ".expert_count", uint32_t(c.experts));
    w.set_u32(a + ".expert_used_count", 2);
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 0.2f);
  auto add = [&](const std::string& name, std::vector<int64_t> dims, gguf::TensorType type) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> x(static_cast<size_t>(n), 0.0f);
    for (float& f : x) f = nd(rng);
    const int64_t rb = gguf::row_bytes(type, dims[0]);
    std::vector<uint8_t> b(static_cast<size_t>(rb * (n / dims[0])), 0);
    for (int64_t r = 0; r < n / dims[0]; ++r) gguf::quantize(type, x.data() + r * dims[0], b.data() + r * rb, dims[0]);
    w.add_tensor(name, dims, type, b);
  };
  const auto f32 = gguf::TensorType::F32;
  const bool gpt2 = a == "gpt2", qk_norm = a == "qwen3" || a == "qwen3moe";
  add("token_embd.weight", {E, V}, mtype);
  add("output_norm.weight", {E}, f32);
  if (gpt2) {
    add("output_norm.bias", {E}, f32);
    add("position_embd.weight", {E, 512}, f32);
  }
  if (a == "qwen2") add("output.weight", {E, V}, mtype);  // untied; the others tie to token_embd
  for (int il = 0; il < 2; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    add(b + "attn_norm.weight", {E}, f32);
    add(b + "ffn_norm.weight", {E}, f32);
    if (gpt2) {
      add(b + "attn_norm.bias", {E}, f32);
      add(b + "ffn_norm.bias", {E}, f32);
    }
    add(b + "attn_q.weight", {E, H * D}, mtype);
    add(b + "attn_k.weight", {E, Hkv * D}, mtype);
    add(b + "attn_v.weight", {E, Hkv * D}, mtype);
    add(b + "attn_output.weight", {H * D, E}, mtype);
    if (a == "qwen2" || gpt2) {
      add(b + "attn_q.bias", {H * D}, f32);
      add(b + "attn_k.bias", {Hkv * D}, f32);
      add(b + "attn_v.bias", {Hkv * D}, f32);
    }
    if (qk_norm) {
      add(b + "attn_q_norm.weight", {D}, f32);
      add(b + "attn_k_norm.weight", {D}, f32);
    }
    if (c.experts) {
      add(b + "ffn_gate_inp.weight", {E, c.experts}, f32);
      add(b + "ffn_gate_exps.weight", {E, F, c.experts}, mtype);
      add(b + "ffn_up_exps.weight", {E, F, c.experts}, mtype);
      add(b + "ffn_down_exps.weight", {F, E, c.experts}, mtype);
    } else if (gpt2) {
      add(b + "ffn_up.weight", {E, F}, mtype);
      add(b + "ffn_up.bias", {F}, f32);
      add(b + "ffn_down.weight", {F, E}, mtype);
      add(b + "ffn_down.bias", {E}, f32);
    } else {
      add(b + "ffn_gate.weight", {E, F}, mtype);
      add(b + "ffn_up.weight", {E, F}, mtype);
      add(b + "ffn_down.weight", {F, E}, mtype);
    }
  }
  w.write(path);
}

class ArchModels : public ::testing::TestWithParam<ArchCase> {};

TEST_P(ArchModels, PromptPassAgreesWithDecodeAndBatching) {
  const ArchCase c = GetParam();
  if (!std::filesystem::exists(std::string(RLX_SHARED_DIR) + "/gguf/vocab/" + c.vocab)) GTEST_SKIP() << "no vocab files";
  const std::string path = testing::TempDir() + "/arch-" + c.name + ".gguf";
  write_model(c, path, gguf::TensorType::F16);
  auto model = Model::load(path);
  ASSERT_TRUE(model->tokenizer) << model->tokenizer_error;
  std::vector<int32_t> ids = model->tokenizer->encode("Hello world, this is a test", true);
  ASSERT_GE(ids.size(), 5u);
  const int64_t V = model->hp.n_vocab, T = int64_t(ids.size());
  EngineOptions eo;
  eo.kv_type = DType::F32;
  eo.threads = 2;
  Engine prompt(model, eo), steps(model, eo);
  std::vector<float> all = prompt.eval(ids, true);
  ASSERT_EQ(all.size(), size_t(T * V));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> one = steps.eval(std::span<const int32_t>(&ids[size_t(t)], 1));
    for (int64_t i = 0; i < V; ++i)
      ASSERT_NEAR(one[size_t(i)], all[size_t(t * V + i)], 2e-4) << c.name << " position " << t << " logit " << i;
  }
  // Two sequences decoded together equal each decoded alone, bit for bit.
  EngineOptions two = eo;
  two.sequences = 2;
  Engine both(model, two), other(model, eo);
  both.eval(0, ids);
  both.eval(1, std::span<const int32_t>(ids.data(), 3));
  other.eval(std::span<const int32_t>(ids.data(), 3));
  std::vector<int32_t> next{ids[0], ids[1]};
  std::vector<float> b = both.step(next);
  std::vector<float> s0 = steps.eval(std::span<const int32_t>(&next[0], 1));
  std::vector<float> s1 = other.eval(std::span<const int32_t>(&next[1], 1));
  EXPECT_TRUE(std::equal(s0.begin(), s0.end(), b.begin())) << c.name;
  EXPECT_TRUE(std::equal(s1.begin(), s1.end(), b.begin() + V)) << c.name;
  std::filesystem::remove(path);
  // Q4_0 weights: loads (repacked where the CPU has the kernel) and generates finite logits.
  write_model(c, path, gguf::TensorType::Q4_0);
  auto q = Model::load(path);
  Engine qe(q, EngineOptions{});
  std::vector<float> lg = qe.eval(ids);
  for (int k = 0; k < 4; ++k) {
    int32_t id = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
    lg = qe.eval(std::span<const int32_t>(&id, 1));
  }
  for (float x : lg) ASSERT_TRUE(std::isfinite(x)) << c.name;
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Families, ArchModels,
                         ::testing::Values(ArchCase{"llama", "llama", "ggml-vocab-llama-spm.gguf"},
                                           ArchCase{"llama_experts", "llama", "ggml-vocab-llama-spm.gguf", 4},
                                           ArchCase{"qwen2", "qwen2", "ggml-vocab-qwen2.gguf"},
                                           ArchCase{"qwen3", "qwen3", "ggml-vocab-qwen2.gguf"},
                                           ArchCase{"qwen3moe", "qwen3moe", "ggml-vocab-qwen2.gguf", 4},
                                           ArchCase{"gpt2", "gpt2", "ggml-vocab-gpt-2.gguf"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rlx::llm
