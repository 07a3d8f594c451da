// The engine and sampler on models made with gguf::Writer (tiny_model.h): a llama model with
// the real llama-spm tokenizer copied from its vocab GGUF (so the text path of generation
// runs end to end), an unknown architecture, and the sampler's contract.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "rlx/llm.h"
#include "tiny_model.h"

namespace rlx::llm {
namespace {

std::string vocab(const std::string& f) { return test::vocab_path(f); }

// A 2-layer model of family `arch` (tiny_model.h, q8_0) with the llama-spm vocab's tokenizer,
// written to TempDir()/`file`; "" when the shared vocab is missing (the caller skips).
std::string tiny_model(const std::string& arch, const std::string& file) {
  if (!std::filesystem::exists(vocab("ggml-vocab-llama-spm.gguf"))) return "";
  const std::string path = testing::TempDir() + "/" + file;
  test::write_model({arch, arch, "ggml-vocab-llama-spm.gguf"}, path, gguf::TensorType::Q8_0);
  return path;
}

TEST(LlmEngine, TextInTextOutWithARealTokenizer) {
  const std::string path = tiny_model("llama", "tiny-llama.gguf");
  if (path.empty()) GTEST_SKIP() << "no " << vocab("ggml-vocab-llama-spm.gguf");
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
  const std::string path = tiny_model("mamba", "tiny-mamba.gguf");
  if (path.empty()) GTEST_SKIP() << "no " << vocab("ggml-vocab-llama-spm.gguf");
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

// Engine options out of range are refused at construction with the option named: threads
// (a mistyped count must not start tens of thousands of threads), sequences, the KV type and
// the prompt chunk; the model stays usable for an engine with good options.
TEST(LlmEngine, BadOptionsAreRefused) {
  const std::string path = tiny_model("llama", "tiny-llama-opts.gguf");
  if (path.empty()) GTEST_SKIP() << "no " << vocab("ggml-vocab-llama-spm.gguf");
  auto model = Model::load(path);
  auto refused = [&](EngineOptions eo, const std::string& needle) {
    try {
      Engine e(model, eo);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& err) {
      EXPECT_EQ(err.category(), ErrorCategory::InvalidArgument) << err.what();
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  for (int t : {-1, kMaxThreads + 1}) {
    EngineOptions eo;
    eo.threads = t;
    refused(eo, "threads must be 0 (all cores) to " + std::to_string(kMaxThreads) + ", got " + std::to_string(t));
  }
  EngineOptions eo;
  eo.sequences = 0;
  refused(eo, "sequences must be in [1, 1024], got 0");
  eo = {};
  eo.kv_type = DType::I8;
  refused(eo, "KV cache type must be f16 or f32");
  eo = {};
  eo.prompt_chunk = -3;
  refused(eo, "prompt_chunk must be >= 0, got -3");
  eo = {};
  eo.threads = 1;
  Engine e(model, eo);
  const int32_t id = 1;
  EXPECT_EQ(e.eval(std::span<const int32_t>(&id, 1)).size(), size_t(model->hp.n_vocab));
  std::filesystem::remove(path);
}

// A copy of the GGUF at `from` with metadata `key` set to `v`, written to `to`.
void rewrite_with(const std::string& from, const std::string& to, const std::string& key, gguf::MetaValue v) {
  test::rewrite_gguf(from, to, {{key, std::move(v)}});
}

// The model at `path` loads, but its first pass is refused: Error(Parse) naming the file and
// holding `needle`, and the engine stays usable (nothing appended).
void expect_first_pass_refused(const std::string& path, const std::string& needle) {
  EngineOptions eo;
  eo.threads = 1;
  Engine e(Model::load(path), eo);
  const std::vector<int32_t> ids{1, 2, 3};
  try {
    e.eval(ids);
    ADD_FAILURE() << needle << ": ran";
  } catch (const Error& err) {
    EXPECT_EQ(err.category(), ErrorCategory::Parse) << err.what();
    EXPECT_NE(std::string(err.what()).find("GGUF file '" + path + "'"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
  }
  EXPECT_EQ(e.position(), 0);
}

// Metadata that each key alone allows but the tensors contradict, refused at load where it
// used to run without an error: blocks past block_count (only the first layers ran), an
// output.weight whose rows are not the vocabulary (logits 100 or 40,000 wide for a
// 32,000-token vocabulary, and ids the tokenizer does not have), a feed_forward_length other
// than the FFN's width. An absent feed_forward_length is read from the tensor.
TEST(LlmEngine, MetadataThatContradictsTheTensorsIsNamedAtLoad) {
  const std::string good = tiny_model("qwen2", "tiny-qwen2-fit.gguf"), bad = testing::TempDir() + "/tiny-qwen2-fit-bad.gguf";
  if (good.empty()) GTEST_SKIP() << "no " << vocab("ggml-vocab-llama-spm.gguf");
  auto expect_refused = [&](const std::string& needle) {
    try {
      Model::load(bad);
      ADD_FAILURE() << needle << ": loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::Parse) << e.what();
      EXPECT_NE(std::string(e.what()).find("GGUF file '" + bad + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  rewrite_with(good, bad, "qwen2.block_count", gguf::meta_int(gguf::ValueType::U32, 1));
  expect_refused("tensor 'blk.1.attn_norm.weight' belongs to block 1 but qwen2.block_count is 1");
  rewrite_with(good, bad, "qwen2.feed_forward_length", gguf::meta_int(gguf::ValueType::U32, 96));
  expect_refused("qwen2.feed_forward_length is 96 but blk.0.ffn_up.weight has 128 outputs");
  for (int64_t rows : {100, 40000}) {
    test::rewrite_gguf(good, bad, {}, {},
                       {{"output.weight", {64, rows}, gguf::TensorType::F32,
                         std::vector<uint8_t>(static_cast<size_t>(gguf::row_bytes(gguf::TensorType::F32, 64) * rows), 0)}});
    expect_refused("output.weight is [64, " + std::to_string(rows) + "], not [n_embd 64, n_vocab 32000]");
  }
  // Without the key the width comes from the tensor, and the model runs.
  test::rewrite_gguf(good, bad, {}, {"qwen2.feed_forward_length"});
  auto model = Model::load(bad);
  EXPECT_EQ(model->hp.n_ff, 128);
  EngineOptions eo;
  eo.threads = 1;
  Engine e(model, eo);
  const std::vector<int32_t> ids{1, 2, 3};
  EXPECT_EQ(e.eval(ids).size(), 32000u);
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

// A norm weight or bias of another length than the features it applies to is named, where
// it used to broadcast (a single element to every feature) and run, or was reported as a
// graph node's shape error; the engine stays usable.
TEST(LlmEngine, VectorsOfTheWrongLengthAreNamed) {
  const std::string good = tiny_model("gpt2", "tiny-gpt2-vec.gguf"), bad = testing::TempDir() + "/tiny-gpt2-vec-bad.gguf";
  if (good.empty()) GTEST_SKIP() << "no " << vocab("ggml-vocab-llama-spm.gguf");
  struct Case {
    std::string tensor;
    std::vector<int64_t> dims;
    std::string needle;
  };
  const std::vector<Case> cases{
      {"blk.0.attn_norm.weight", {1}, "tensor 'blk.0.attn_norm.weight' is [1], not [64]"},
      {"blk.1.ffn_norm.bias", {32}, "tensor 'blk.1.ffn_norm.bias' is [32], not [64]"},
      {"output_norm.weight", {64, 2}, "tensor 'output_norm.weight' is [64, 2], not [64]"},
      {"blk.0.attn_q.bias", {1}, "tensor 'blk.0.attn_q.bias' is [1], not [64]"},
      {"blk.1.ffn_up.bias", {64}, "tensor 'blk.1.ffn_up.bias' is [64], not [128]"},
  };
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d;
    test::rewrite_gguf(good, bad, {}, {},
                       {{c.tensor, c.dims, gguf::TensorType::F32, std::vector<uint8_t>(static_cast<size_t>(4 * n), 0)}});
    expect_first_pass_refused(bad, c.needle);
  }
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

// Hyperparameters no model can have are refused at load, naming the file and the key: a zero,
// negative or NaN RoPE base (it made NaN logits with no error), a negative or NaN norm
// epsilon, a negative attention scale; head counts and the RoPE dims out of range.
TEST(LlmEngine, HostileHyperparametersAreNamedAtLoad) {
  const std::string good = tiny_model("llama", "tiny-llama-hp.gguf"), bad = testing::TempDir() + "/tiny-llama-hp-bad.gguf";
  if (good.empty()) GTEST_SKIP() << "no " << vocab("ggml-vocab-llama-spm.gguf");
  const double nan = std::nan(""), inf = INFINITY;
  struct Case {
    std::string key;
    gguf::MetaValue value;
    std::string needle;
  };
  std::vector<Case> cases;
  for (double v : {0.0, -1.0, nan, inf})
    cases.push_back({"llama.rope.freq_base", gguf::meta_float(gguf::ValueType::F32, v), "llama.rope.freq_base = "});
  for (double v : {-1.0, nan, inf})
    cases.push_back({"llama.attention.layer_norm_rms_epsilon", gguf::meta_float(gguf::ValueType::F32, v), "the norm epsilon"});
  cases.push_back({"llama.attention.scale", gguf::meta_float(gguf::ValueType::F32, -0.5), "llama.attention.scale = -0.5"});
  cases.push_back({"llama.attention.head_count", gguf::meta_int(gguf::ValueType::U32, 0), "llama.attention.head_count = 0"});
  cases.push_back({"llama.attention.head_count_kv", gguf::meta_int(gguf::ValueType::U32, 3), "heads are not a multiple of 3"});
  cases.push_back({"llama.rope.dimension_count", gguf::meta_int(gguf::ValueType::U32, 7), "rope dimension 7"});
  for (const Case& c : cases) {
    rewrite_with(good, bad, c.key, c.value);
    try {
      Model::load(bad);
      ADD_FAILURE() << c.key << ": loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::Parse) << e.what();
      EXPECT_NE(std::string(e.what()).find("GGUF file '" + bad + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
  // Keys that pass alone but disagree with the tensors (4 heads of 32 where attn_q holds 64
  // outputs): the first pass's build names the file and the sizes, and the engine stays usable.
  rewrite_with(good, bad, "llama.attention.head_count", gguf::meta_int(gguf::ValueType::U32, 4));
  expect_first_pass_refused(bad, "its tensors do not fit its metadata (n_embd 64, 4 heads");
  // The same file with a plausible base loads and runs to finite logits.
  rewrite_with(good, bad, "llama.rope.freq_base", gguf::meta_float(gguf::ValueType::F32, 500000.0));
  EngineOptions eo;
  eo.threads = 1;
  Engine e(Model::load(bad), eo);
  const std::vector<int32_t> ids{1, 2, 3};
  for (float x : e.eval(ids)) ASSERT_TRUE(std::isfinite(x));
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

// greedy_token against its definition, element by element: rows of every length up to 70
// (the 16-lane body and its tail) and a vocabulary's, values from a small set (many ties),
// with and without NaN, -inf and an empty row.
TEST(LlmSampler, GreedyTokenIsTheFirstIndexOfTheMaximum) {
  auto reference = [](const std::vector<float>& l) {
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i] != l[i]) return int32_t(i);  // NaN ranks above every number: the first one
    size_t best = 0;
    for (size_t i = 1; i < l.size(); ++i)
      if (l[i] > l[best]) best = i;
    return int32_t(best);
  };
  std::mt19937 rng(5);
  for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(70), size_t(32000)})
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> l(n);
      for (float& v : l) v = float(int(rng() % 9)) - 4.0f;
      if (n && trial % 4 == 1) l[rng() % n] = std::nanf("");
      if (n && trial % 4 == 2) std::fill(l.begin(), l.end(), -INFINITY);
      if (n && trial % 4 == 3) l[n - 1] = 100.0f;
      EXPECT_EQ(greedy_token(l), reference(l)) << "n " << n << " trial " << trial;
    }
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
