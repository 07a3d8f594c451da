// Small models of every supported architecture, written here with gguf::Writer (random
// weights, the real tokenizer of a vocab GGUF copied in), so these tests need nothing but the
// vocab files. Per family: text through the tokenizer, the prompt pass agrees with feeding
// the same tokens one at a time (prefill and decode kernels are different code), batched
// decode equals decoding alone, and Q4_0 weights (repacked at load) generate too.
// The prompt here has 7 tokens: up to 8 rows, qmatmul runs the same per-row dot kernels
// for the prompt pass as for single tokens, kv_attention and rotary work per row, so the
// prompt pass must equal token-by-token decode exactly (bit for bit), not just closely.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <ostream>
#include <random>

#include "rlx/llm.h"
#include "tiny_model.h"

namespace rlx::llm {
namespace {

using test::ArchCase;
using test::write_model;

class ArchModels : public ::testing::TestWithParam<ArchCase> {};

bool have_vocab(const ArchCase& c) { return std::filesystem::exists(test::vocab_path(c.vocab)); }
// The family's model (write_model) in a file of the test's own, removed after it.
struct TinyFile {
  std::string path;
  TinyFile(const ArchCase& c, const std::string& tag, gguf::TensorType t)
      : path(testing::TempDir() + "/" + tag + "-" + c.name + ".gguf") {
    write_model(c, path, t);
  }
  ~TinyFile() { std::filesystem::remove(path); }
};

TEST_P(ArchModels, PromptPassAgreesWithDecodeAndBatching) {
  const ArchCase c = GetParam();
  if (!have_vocab(c)) GTEST_SKIP() << "no vocab files";
  const std::string path = testing::TempDir() + "/arch-" + c.name + ".gguf";
  write_model(c, path, gguf::TensorType::F16);
  auto model = Model::load(path);
  ASSERT_TRUE(model->tokenizer) << model->tokenizer_error;
  std::vector<int32_t> ids = model->tokenizer->encode("Hello world, this is a test", true);
  ASSERT_GE(ids.size(), 5u);
  ASSERT_LE(ids.size(), 8u);  // the exact comparison below relies on the per-row path
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
      ASSERT_EQ(one[size_t(i)], all[size_t(t * V + i)]) << c.name << " position " << t << " logit " << i;
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

// generate_greedy gives the tokens of eval + argmax per step, whichever way it runs: the
// graphs' own embeddings and argmax with queued runs (F16 tables), the host's (Q4_0 tables,
// gpt2's learned positions). 300 steps from a 7-token prompt cross the first cache bucket
// (256 rows): the second call starts past the first bucket, whose rows are copied into a
// larger cache on the backend's side (RLX_LLM_DEVICE=cuda: every engine here runs there, its
// cache device memory). And its errors: several sequences, a bad token, a context overflow, each
// leaving the engine as it was.
TEST_P(ArchModels, GreedyGenerationEqualsEvalAndArgmax) {
  const ArchCase c = GetParam();
  if (!have_vocab(c)) GTEST_SKIP() << "no vocab files";
  for (gguf::TensorType wt : {gguf::TensorType::F16, gguf::TensorType::Q4_0}) {
    SCOPED_TRACE(std::string(c.name) + (wt == gguf::TensorType::F16 ? " f16" : " q4_0"));
    const std::string path = testing::TempDir() + "/greedy-" + c.name + ".gguf";
    write_model(c, path, wt);
    auto model = Model::load(path);
    std::vector<int32_t> ids = model->tokenizer->encode("Hello world, this is a test", true);
    EngineOptions eo;
    eo.kv_type = DType::F32;
    eo.n_ctx = 512;
    eo.device = test::llm_device();
    Engine ref(model, eo), gen(model, eo);
    std::vector<float> lg = ref.eval(ids);
    gen.eval(ids);
    const int steps = 300;
    std::vector<int32_t> want;
    int32_t first = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin()), id = first;
    for (int i = 0; i < steps; ++i) {
      lg = ref.eval(std::span<const int32_t>(&id, 1));
      id = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
      want.push_back(id);
    }
    std::vector<int32_t> got = gen.generate_greedy(first, 100);
    std::vector<int32_t> more = gen.generate_greedy(got.back(), steps - 100);
    got.insert(got.end(), more.begin(), more.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(gen.position(), ref.position());
    // The host loop carries on from the rows the greedy steps left in their handles.
    EXPECT_EQ(gen.eval(std::span<const int32_t>(&id, 1)), ref.eval(std::span<const int32_t>(&id, 1)));
    EXPECT_EQ(gen.position(), ref.position());
    EXPECT_TRUE(gen.generate_greedy(id, 0).empty());
    const int64_t at = gen.position();
    EXPECT_THROW(gen.generate_greedy(int32_t(model->hp.n_vocab), 4), Error);
    EXPECT_THROW(gen.generate_greedy(id, eo.n_ctx), Error);
    EXPECT_EQ(gen.position(), at);
    EngineOptions two = eo;
    two.sequences = 2;
    Engine both(model, two);
    EXPECT_THROW(both.generate_greedy(id, 1), Error);
    std::filesystem::remove(path);
  }
}

// Prompts in passes of a few lengths (EngineOptions::pad_prompts: padded up to 8, 16, 32, 64
// or a multiple of 64 rows) and in chunks (prompt_chunk). Every row is computed on
// its own (the products per row, attention over the cache up to the row's own position), so
// a padded prompt must give the bits of one pass of its exact length: its logits (the last
// row, or every row), and the next step's, which reads the rows it cached (the padding's
// rows lie past the sequence's end and are overwritten by that step). Lengths that share a
// padded length share its compiled pass. Chunks may put a row in a pass of another length,
// where the products take another kernel (a per-row dot up to 8 rows, blocked GEMM above)
// and sum in another order; so may padding in a mixture of experts (an expert's product
// takes its kernel by the number of rows routed to it, and the padding rows are routed
// too). F16 weights, F32 cache and F32 sums: the tolerance there is the llama.cpp parity
// tests' figure for summation order alone, 1e-4 absolute per logit. RLX_LLM_DEVICE=cuda runs
// the engines on CUDA, where a product's kernel (cuBLASLt's choice) may depend on the rows
// of the pass: the tolerance then holds for padding too.
TEST_P(ArchModels, PaddedAndChunkedPromptsAgree) {
  const ArchCase c = GetParam();
  if (!have_vocab(c)) GTEST_SKIP() << "no vocab files";
  const TinyFile file(c, "padded", gguf::TensorType::F16);
  auto model = Model::load(file.path);
  std::vector<int32_t> ids = model->tokenizer->encode("Hello world, this is a test of prompts in passes", true);
  while (ids.size() < 71) ids.push_back(ids[ids.size() % 9]);
  EngineOptions eo;
  eo.kv_type = DType::F32;
  eo.threads = 2;
  eo.n_ctx = 512;
  eo.device = test::llm_device();
  const bool exact_bits = !c.experts && eo.device == Device::Cpu;
  EngineOptions exact_o = eo, pad_o = eo, chunk_o = eo;
  exact_o.prompt_chunk = 0;
  exact_o.pad_prompts = 0;
  pad_o.pad_prompts = 1;
  chunk_o.pad_prompts = 1;
  chunk_o.prompt_chunk = 16;
  Engine exact(model, exact_o), padded(model, pad_o), chunked(model, chunk_o);
  int64_t before = 0;
  for (size_t n : {2, 5, 9, 13, 16, 33, 70}) {
    SCOPED_TRACE(c.name + ", " + std::to_string(n) + " tokens");
    for (Engine* e : {&exact, &padded, &chunked}) e->reset();
    std::span<const int32_t> p(ids.data(), n);
    const bool all = n == 16 || n == 70;
    auto near = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << what << ", logit " << i;
    };
    const std::vector<float> want = exact.eval(p, all);
    if (!exact_bits) {
      near(padded.eval(p, all), want, "padded");
    } else {
      EXPECT_EQ(padded.eval(p, all), want);
    }
    near(chunked.eval(p, all), want, "chunked");
    if (n == 13) {
      EXPECT_EQ(padded.compiled_graphs(), before) << "13 tokens run in 9's 16-row pass";
    }
    before = padded.compiled_graphs();
    const int32_t next = ids[n];
    const std::vector<float> step = exact.eval(std::span<const int32_t>(&next, 1));
    if (!exact_bits) {
      near(padded.eval(std::span<const int32_t>(&next, 1)), step, "padded, next step");
    } else {
      EXPECT_EQ(padded.eval(std::span<const int32_t>(&next, 1)), step);
    }
    near(chunked.eval(std::span<const int32_t>(&next, 1)), step, "chunked, next step");
    EXPECT_EQ(padded.position(), int64_t(n) + 1);
    EXPECT_EQ(chunked.position(), int64_t(n) + 1);
  }
  // A prompt whose padding would pass the cache's end runs at its exact length.
  EngineOptions small = pad_o;
  small.n_ctx = 40;
  Engine tight(model, small);
  std::vector<float> a = tight.eval(std::span<const int32_t>(ids.data(), 30));
  EXPECT_EQ(tight.eval(std::span<const int32_t>(ids.data() + 30, 9)).size(), size_t(model->hp.n_vocab));
  EXPECT_EQ(tight.position(), 39);
  EngineOptions bad = eo;
  bad.prompt_chunk = -1;
  EXPECT_THROW(Engine(model, bad), Error);
}

// Batched decode against each sequence decoded alone: up to 8 sequences the CPU's products
// run the per-row dot kernels a single token takes, so step() gives the same bits; with
// more, they run as a GEMM (the prompt's kernels), which sums in another order: F16 weights,
// F32 cache and sums, so 1e-4 absolute per logit, the bound ../shared/gguf/README.md ("How
// close is close enough") gives a float32 implementation with an F32 KV cache that differs
// from another only in summation order (measured here: at most 3.6e-7 at 9 sequences).
TEST_P(ArchModels, BatchedDecodeAgreesWithAlone) {
  const ArchCase c = GetParam();
  if (!have_vocab(c)) GTEST_SKIP() << "no vocab files";
  const TinyFile file(c, "batched", gguf::TensorType::F16);
  auto model = Model::load(file.path);
  const int64_t V = model->hp.n_vocab;
  const std::vector<int32_t> prompt{1, 50, 60, 70};
  EngineOptions eo;
  eo.kv_type = DType::F32;
  eo.threads = 2;
  Engine alone(model, eo);
  alone.eval(prompt);
  for (int64_t B : {8, 10}) {
    SCOPED_TRACE(c.name + ", " + std::to_string(B) + " sequences");
    EngineOptions bo = eo;
    bo.sequences = B;
    Engine all(model, bo);
    std::vector<int32_t> next;
    for (int64_t s = 0; s < B; ++s) {
      all.eval(s, prompt);
      next.push_back(int32_t(100 + 7 * s));
    }
    const std::vector<float> lg = all.step(next);
    for (int64_t s : {int64_t(0), B - 1}) {
      alone.reset();
      alone.eval(prompt);
      const std::vector<float> one = alone.eval(std::span<const int32_t>(&next[size_t(s)], 1));
      for (int64_t i = 0; i < V; ++i) {
        if (B <= 8) {
          ASSERT_EQ(lg[size_t(s * V + i)], one[size_t(i)]) << "sequence " << s << " logit " << i;
        } else {
          ASSERT_NEAR(lg[size_t(s * V + i)], one[size_t(i)], 1e-4) << "sequence " << s << " logit " << i;
        }
      }
    }
  }
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
