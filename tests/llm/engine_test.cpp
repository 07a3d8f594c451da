// The engine and sampler on models made here with gguf::Writer: a llama-family model with
// the real llama-spm tokenizer copied from its vocab GGUF (so the text path of generation
// runs end to end), an unknown architecture, and the sampler's contract.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "rlx/llm.h"

namespace rlx::llm {
namespace {

std::string vocab(const std::string& f) { return std::string(RLX_SHARED_DIR) + "/gguf/vocab/" + f; }

// A 1-layer llama (n_embd 32, 2 heads of 16, 1 KV head, FFN 64) with random F16/Q8_0
// matrices and the tokenizer keys of `vocab_file`; written to `path`.
void write_tiny_llama(const std::string& vocab_file, const std::string& path, const std::string& arch = "llama") {
  gguf::File v = gguf::File::open(vocab_file);
  const int64_t V = int64_t(v.get_strings("tokenizer.ggml.tokens").size()), E = 32, F = 64;
  gguf::Writer w;
  w.copy_metadata(v, "tokenizer.");
  w.set_string("general.architecture", arch);
  w.set_u32(arch + ".context_length", 512);
  w.set_u32(arch + ".embedding_length", uint32_t(E));
  w.set_u32(arch + ".block_count", 1);
  w.set_u32(arch + ".feed_forward_length", uint32_t(F));
  w.set_u32(arch + ".attention.head_count", 2);
  w.set_u32(arch + ".attention.head_count_kv", 1);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 0.3f);
  auto add = [&](const std::string& name, std::vector<int64_t> dims, gguf::TensorType type) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> x(static_cast<size_t>(n), 0.0f);
    for (float& f : x) f = nd(rng);
    std::vector<uint8_t> b(size_t(gguf::row_bytes(type, dims[0]) * (n / dims[0])));
    for (int64_t r = 0; r < n / dims[0]; ++r)
      gguf::quantize(type, x.data() + r * dims[0], b.data() + r * gguf::row_bytes(type, dims[0]), dims[0]);
    w.add_tensor(name, dims, type, b);
  };
  add("token_embd.weight", {E, V}, gguf::TensorType::Q8_0);
  add("output_norm.weight", {E}, gguf::TensorType::F32);
  add("blk.0.attn_norm.weight", {E}, gguf::TensorType::F32);
  add("blk.0.ffn_norm.weight", {E}, gguf::TensorType::F32);
  add("blk.0.attn_q.weight", {E, 32}, gguf::TensorType::F16);
  add("blk.0.attn_k.weight", {E, 16}, gguf::TensorType::Q8_0);
  add("blk.0.attn_v.weight", {E, 16}, gguf::TensorType::Q4_0);
  add("blk.0.attn_output.weight", {32, E}, gguf::TensorType::Q8_0);
  add("blk.0.ffn_gate.weight", {E, F}, gguf::TensorType::Q4_0);
  add("blk.0.ffn_up.weight", {E, F}, gguf::TensorType::F16);
  add("blk.0.ffn_down.weight", {F, E}, gguf::TensorType::Q8_0);
  w.write(path);
}

TEST(LlmEngine, TextInTextOutWithARealTokenizer) {
  const std::string vf = vocab("ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(vf)) GTEST_SKIP() << "no " << vf;
  const std::string path = testing::TempDir() + "/tiny-llama.gguf";
  write_tiny_llama(vf, path);
  auto model = Model::load(path);
  ASSERT_TRUE(model->tokenizer) << model->tokenizer_error;
  EXPECT_EQ(model->hp.n_vocab, 32000);
  std::vector<int32_t> ids = model->tokenizer->encode("Hello world", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 15043, 3186}));
  EngineOptions eo;
  eo.threads = 1;
  Engine e(model, eo);
  std::vector<float> lg = e.eval(ids);
  ASSERT_EQ(lg.size(), 32000u);
  Sampler s(SamplerOptions{0.8f, 40, 0.95f, 0.05f, 1.1f, 64, 42});
  DecodeStream out(*model->tokenizer);
  std::string text;
  std::vector<int32_t> hist = ids;
  for (int i = 0; i < 12; ++i) {
    int32_t id = s.sample(lg, hist);
    hist.push_back(id);
    text += out.push(id);
    lg = e.eval(std::span<const int32_t>(&id, 1));
  }
  text += out.flush();
  EXPECT_EQ(e.position(), 15);
  EXPECT_FALSE(text.empty());
  // The same seed gives the same text; the engine is reusable after reset().
  e.reset();
  Sampler s2(SamplerOptions{0.8f, 40, 0.95f, 0.05f, 1.1f, 64, 42});
  lg = e.eval(ids);
  std::vector<int32_t> hist2 = ids;
  for (int i = 0; i < 12; ++i) {
    int32_t id = s2.sample(lg, hist2);
    hist2.push_back(id);
    lg = e.eval(std::span<const int32_t>(&id, 1));
  }
  EXPECT_EQ(hist2, hist);
  std::filesystem::remove(path);
}

TEST(LlmEngine, UnknownArchitectureIsNamed) {
  const std::string vf = vocab("ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(vf)) GTEST_SKIP() << "no " << vf;
  const std::string path = testing::TempDir() + "/tiny-mamba.gguf";
  write_tiny_llama(vf, path, "mamba");
  try {
    Model::load(path);
    FAIL() << "loaded";
  } catch (const Error& err) {
    EXPECT_EQ(err.category(), ErrorCategory::Unsupported);
    EXPECT_NE(std::string(err.what()).find("architecture 'mamba' is not supported"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("qwen3moe"), std::string::npos) << err.what();
  }
  std::filesystem::remove(path);
}

TEST(LlmSampler, GreedyTopKSeedsAndBadOptions) {
  std::vector<float> lg{0.5f, 2.0f, 2.0f, -1.0f, 1.9f};
  Sampler greedy(SamplerOptions{0.0f});
  EXPECT_EQ(greedy.sample(lg, {}), 1);  // ties: the lowest id
  Sampler k1(SamplerOptions{1.0f, 1, 1.0f, 0.0f, 1.0f, 64, 9});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(k1.sample(lg, {}), 1);  // top-k 1 keeps only the first of the best
  // Repetition penalty pushes a repeated best token below the next one.
  Sampler pen(SamplerOptions{0.0f, 40, 1.0f, 0.0f, 2.0f, 64, 0});
  std::vector<int32_t> hist{1, 2};
  EXPECT_EQ(pen.sample(lg, hist), 4);
  // min-p 0.5 at temperature 1 leaves ids 1, 2 and 4 (p(4)/p(1) = e^-0.1); never 0 or 3.
  Sampler mp(SamplerOptions{1.0f, 0, 1.0f, 0.5f, 1.0f, 64, 3});
  std::vector<int> seen(5);
  for (int i = 0; i < 400; ++i) seen[size_t(mp.sample(lg, {}))]++;
  EXPECT_EQ(seen[0] + seen[3], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[4], 0);
  // Same seed, same draws.
  Sampler a(SamplerOptions{1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 77}), b(SamplerOptions{1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 77});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(lg, {}), b.sample(lg, {}));
  EXPECT_THROW(Sampler(SamplerOptions{-1.0f}), Error);
  EXPECT_THROW(Sampler(SamplerOptions{1.0f, 40, 0.0f}), Error);
  EXPECT_THROW(greedy.sample({}, {}), Error);
}

}  // namespace
}  // namespace rlx::llm
