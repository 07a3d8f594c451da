// Parity with llama.cpp on the architecture fixtures in ../shared/gguf/archs: the prompt's
// logits (one batch, every row) and 16 greedy decode steps, each fed back as one token,
// through llm::Engine (the code path of `rlx generate`). Greedy ids must be identical.
// Tolerance: 1e-4 absolute per logit, the README's figure for an F32 implementation with an
// F32 KV cache: weights and cache are F32 on both sides, so only summation order differs
// (llama.cpp's own thread/flash-attention variants move these logits by up to 1.9e-4 with an
// F16 cache, and the smallest top-2 gap is 3.7e-4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "rlx/llm.h"
#include "tiny_model.h"

namespace rlx::llm {
namespace {

// RLX_SHARED_DIR (environment) overrides the ../shared of the build, for runs on another
// machine; RLX_LLM_DEVICE=cuda runs the engine on the CUDA backend (same references, same
// tolerance: F32 weights and cache there too).
std::string archs(const std::string& f) { return test::shared_dir() + "/gguf/archs/" + f; }
using test::llm_device;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The integer array under "key": [...] in the reference JSON.
std::vector<int32_t> json_ints(const std::string& js, const std::string& key) {
  size_t at = js.find("\"" + key + "\"");
  if (at == std::string::npos) return {};
  at = js.find('[', at);
  size_t end = js.find(']', at);
  std::vector<int32_t> out;
  std::string num;
  for (size_t i = at + 1; i <= end; ++i) {
    char ch = js[i];
    if ((ch >= '0' && ch <= '9') || ch == '-') num += ch;
    else if (!num.empty()) {
      out.push_back(std::stoi(num));
      num.clear();
    }
  }
  return out;
}

int32_t argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

// The model `gguf` against the references `ref` + ".ref.json" / ".ref.f32".
void check_against(const std::string& gguf, const std::string& refs, const std::string& name) {
  const std::string js = slurp(refs + ".ref.json");
  const std::string ref_bytes = slurp(refs + ".ref.f32");
  std::vector<int32_t> prompt = json_ints(js, "prompt_ids");
  std::vector<int32_t> greedy = json_ints(js, "greedy_ids");
  ASSERT_EQ(prompt.size(), 8u);
  ASSERT_EQ(greedy.size(), 16u);
  auto model = Model::load(gguf);
  const int64_t V = model->hp.n_vocab;
  ASSERT_EQ(ref_bytes.size(), size_t(24 * V * 4));
  const float* ref = reinterpret_cast<const float*>(ref_bytes.data());
  EngineOptions eo;
  eo.kv_type = DType::F32;
  eo.threads = 1;
  eo.device = llm_device();
  Engine e(model, eo);
  double worst = 0;
  auto compare = [&](const float* got, int64_t row) {
    const float* want = ref + row * V;
    for (int64_t i = 0; i < V; ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
    for (int64_t i = 0; i < V; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4) << name << " row " << row << " logit " << i;
  };
  std::vector<float> lg = e.eval(prompt, true);
  ASSERT_EQ(lg.size(), size_t(8 * V));
  for (int64_t r = 0; r < 8; ++r) compare(lg.data() + r * V, r);
  int32_t next = argmax(lg.data() + 7 * V, V);
  for (int j = 0; j < 16; ++j) {
    ASSERT_EQ(next, greedy[size_t(j)]) << name << " greedy step " << j;
    std::vector<float> step = e.eval(std::span<const int32_t>(&next, 1));
    compare(step.data(), 8 + j);
    next = argmax(step.data(), V);
  }
  EXPECT_EQ(e.position(), 24);
  // The same steps by generate_greedy (the argmax and the next token's embedding on the
  // backend, the runs queued back to back where the graphs take token ids): the same ids,
  // and a cache that gives the reference's last row after them.
  Engine g(model, eo);
  std::vector<float> last = g.eval(prompt);
  ASSERT_EQ(argmax(last.data(), V), greedy[0]) << name;
  std::vector<int32_t> ids = g.generate_greedy(greedy[0], 15);
  EXPECT_EQ(ids, std::vector<int32_t>(greedy.begin() + 1, greedy.end())) << name << ": generate_greedy";
  EXPECT_EQ(g.position(), 23);
  std::vector<float> row = g.eval(std::span<const int32_t>(&greedy[15], 1));
  compare(row.data(), 23);
  std::cout << name << ": 24 rows, max |logit - llama.cpp| = " << worst << "\n";
}

void check_fixture(const std::string& name) {
  const std::string gguf = archs(name + ".gguf");
  if (!std::filesystem::exists(gguf)) GTEST_SKIP() << "no " << gguf;
  check_against(gguf, archs(name), name);
}

// RoPE context scaling (<arch>.rope.scaling.*) against llama.cpp, on the fixtures of
// tests/data/llm/rope (tools/gguf-fixtures/make_rope_scaling_fixtures.cpp): one small llama
// model with F32 weights (logits up to 12) and, per setting, llama.cpp's logits for a copy of
// it with that setting's keys. Same procedure and tolerance as the architecture fixtures
// (F32 weights and cache on both sides, summation order alone); the settings move these
// logits by 11.6 to 16.8 from the unscaled ones, so a setting read wrongly or not at all
// cannot pass.
std::string rope_dir() { return std::string(RLX_SOURCE_DIR) + "/tests/data/llm/rope/"; }
void check_rope(const std::string& variant, const std::vector<std::pair<std::string, gguf::MetaValue>>& keys) {
  const std::string path = testing::TempDir() + "/rope-" + variant + ".gguf";
  test::rewrite_gguf(rope_dir() + "rope-llama.gguf", path, keys);
  check_against(path, rope_dir() + "rope-" + variant, "rope-" + variant);
  std::filesystem::remove(path);
}
gguf::MetaValue f32(double v) { return gguf::meta_float(gguf::ValueType::F32, v); }
gguf::MetaValue u32(int64_t v) { return gguf::meta_int(gguf::ValueType::U32, v); }
const std::string kScaling = "llama.rope.scaling.";

TEST(LlmRopeScaling, None) { check_rope("none", {}); }
TEST(LlmRopeScaling, Linear) { check_rope("linear", {{kScaling + "type", gguf::meta_string("linear")}, {kScaling + "factor", f32(4)}}); }
TEST(LlmRopeScaling, OlderLinearKeyWithoutAType) { check_rope("scale-linear", {{"llama.rope.scale_linear", f32(2)}}); }
TEST(LlmRopeScaling, LinearWithAttnFactor) {
  check_rope("linear-attn", {{kScaling + "type", gguf::meta_string("linear")}, {kScaling + "factor", f32(2)},
                             {kScaling + "attn_factor", f32(1.25)}});
}
TEST(LlmRopeScaling, Yarn) {
  check_rope("yarn", {{kScaling + "type", gguf::meta_string("yarn")}, {kScaling + "factor", f32(4)},
                      {kScaling + "original_context_length", u32(4096)}});
}
TEST(LlmRopeScaling, YarnWithAttnFactor) {
  check_rope("yarn-attn", {{kScaling + "type", gguf::meta_string("yarn")}, {kScaling + "factor", f32(8)},
                           {kScaling + "attn_factor", f32(0.8)}, {kScaling + "original_context_length", u32(2048)}});
}
// Type none ignores the factor (the unscaled references); longrope, unknown types and
// factors no model can have are refused at load, naming the key.
TEST(LlmRopeScaling, NoneIgnoresTheFactorAndBadKeysAreNamed) {
  check_rope("none", {{kScaling + "type", gguf::meta_string("none")}, {kScaling + "factor", f32(4)}});
  struct Case {
    std::string key;
    gguf::MetaValue value;
    ErrorCategory category;
    std::string needle;
  };
  const std::vector<Case> cases{
      {kScaling + "type", gguf::meta_string("longrope"), ErrorCategory::Unsupported, "type 'longrope' is not supported"},
      {kScaling + "type", gguf::meta_string("dynamic"), ErrorCategory::Parse, "type 'dynamic' is not a RoPE scaling type"},
      {kScaling + "factor", f32(-2), ErrorCategory::Parse, "llama.rope.scaling.factor = -2 is not a finite number >= 0"},
      {kScaling + "factor", f32(INFINITY), ErrorCategory::Parse, "llama.rope.scaling.factor = inf"},
      {kScaling + "attn_factor", f32(0), ErrorCategory::Parse, "attn_factor = 0 is not a positive finite number"},
      {kScaling + "attn_factor", f32(std::nan("")), ErrorCategory::Parse, "attn_factor = nan"},
  };
  const std::string path = testing::TempDir() + "/rope-bad.gguf";
  for (const Case& c : cases) {
    std::vector<std::pair<std::string, gguf::MetaValue>> keys{{c.key, c.value}};
    if (c.key != kScaling + "type") keys.emplace_back(kScaling + "type", gguf::meta_string("yarn"));
    test::rewrite_gguf(rope_dir() + "rope-llama.gguf", path, keys);
    try {
      Model::load(path);
      ADD_FAILURE() << c.key << ": loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), c.category) << e.what();
      EXPECT_NE(std::string(e.what()).find("GGUF file '" + path + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(path);
}

TEST(LlmArchs, LlamaDense) { check_fixture("llama-dense"); }
TEST(LlmArchs, Qwen2Dense) { check_fixture("qwen2-dense"); }
TEST(LlmArchs, Qwen3Dense) { check_fixture("qwen3-dense"); }
TEST(LlmArchs, Gpt2Dense) { check_fixture("gpt2-dense"); }
TEST(LlmArchs, LlamaMoe) { check_fixture("llama-moe"); }
TEST(LlmArchs, Qwen3Moe) { check_fixture("qwen3moe-moe"); }

}  // namespace
}  // namespace rlx::llm

namespace rlx::llm {
namespace {

// Batched decode: three sequences of different lengths decoded together by step() give
// the same logits as each decoded alone (the kernels compute every row the same way, so
// they must be identical), and sequence 0 still matches llama.cpp's reference rows.
void check_batched(const std::string& name) {
  const std::string gguf = archs(name + ".gguf");
  if (!std::filesystem::exists(gguf)) GTEST_SKIP() << "no " << gguf;
  const std::string js = slurp(archs(name + ".ref.json"));
  const std::string ref_bytes = slurp(archs(name + ".ref.f32"));
  std::vector<int32_t> prompt = json_ints(js, "prompt_ids");
  auto model = Model::load(gguf);
  const int64_t V = model->hp.n_vocab;
  const float* ref = reinterpret_cast<const float*>(ref_bytes.data());
  EngineOptions eo;
  eo.kv_type = DType::F32;
  eo.threads = 2;
  EngineOptions batched = eo;
  batched.sequences = 3;
  Engine together(model, batched);
  EngineOptions fused = batched;  // one product over the q/k/v (gate/up) rows, as device backends run them
  fused.fuse_projections = 1;
  Engine together_h(model, fused);
  std::vector<Engine> alone;
  const size_t lens[3] = {8, 5, 3};
  std::vector<int32_t> next(3);
  for (int s = 0; s < 3; ++s) {
    alone.emplace_back(model, eo);
    std::span<const int32_t> p(prompt.data(), lens[s]);
    std::vector<float> a = alone.back().eval(p);
    std::vector<float> b = together.eval(s, p);
    ASSERT_EQ(a, b) << "prompt of sequence " << s;
    ASSERT_EQ(together_h.eval(s, p), b) << "prompt of sequence " << s << " (fused products)";
    next[size_t(s)] = argmax(a.data(), V);
  }
  for (int step = 0; step < 5; ++step) {
    std::vector<float> all = together.step(next);
    ASSERT_EQ(all.size(), size_t(3 * V));
    ASSERT_EQ(together_h.step(next), all) << "step " << step << " (fused products)";
    for (int s = 0; s < 3; ++s) {
      std::vector<float> one = alone[size_t(s)].eval(std::span<const int32_t>(&next[size_t(s)], 1));
      for (int64_t i = 0; i < V; ++i)
        ASSERT_EQ(all[size_t(s * V + i)], one[size_t(i)]) << name << " step " << step << " sequence " << s << " logit " << i;
      if (s == 0) {
        for (int64_t i = 0; i < V; ++i) ASSERT_NEAR(one[size_t(i)], ref[(8 + step) * V + i], 1e-4);
      }
      next[size_t(s)] = argmax(one.data(), V);
    }
  }
  // Back to a one-sequence pass after batched steps: it reads the rows the batch pass wrote
  // into the one cache and agrees exactly.
  std::vector<int32_t> one{next[1]};
  ASSERT_EQ(together_h.eval(1, one), together.eval(1, one)) << "one sequence after the batch (fused products)";
  ASSERT_EQ(together_h.step(next), together.step(next)) << "the batch again (fused products)";
  EXPECT_NE(together_h.load_report().find("concatenated"), std::string::npos) << together_h.load_report();
  EXPECT_EQ(together.position(0), 14);
  EXPECT_EQ(together.position(2), 9);
  // A wrong number of tokens or a bad slot is an error that leaves the engine usable.
  EXPECT_THROW(together.step(std::vector<int32_t>{1, 2}), Error);
  EXPECT_THROW(together.eval(3, std::vector<int32_t>{1}), Error);
  EXPECT_NO_THROW(together.step(next));
}

// The llama-dense fixture and its prompt ids for the engine tests below (model null where the
// file is missing), and their engine options: F32 cache, two threads, prompts at their exact lengths.
struct Dense {
  std::shared_ptr<const Model> model;
  std::vector<int32_t> prompt;
  EngineOptions opts;
};
Dense dense_fixture() {
  Dense d;
  const std::string gguf = archs("llama-dense.gguf");
  if (!std::filesystem::exists(gguf)) return d;
  d.prompt = json_ints(slurp(archs("llama-dense.ref.json")), "prompt_ids");
  d.model = Model::load(gguf);
  d.opts.kv_type = DType::F32;
  d.opts.threads = 2;
  d.opts.pad_prompts = 0;
  return d;
}

// Prompts of many lengths (a chat's turns) at their exact lengths (pad_prompts 0, as the CPU
// runs them by default): each length is a pass of its own, and at most four prompt passes
// stay besides the first one compiled. Sequence 0's rows are written by a pass that is
// dropped later; every result equals a one-sequence engine's fed the same tokens from the
// start (each a pass of the same kernels), also the batched step after it.
TEST(LlmPasses, PromptPassesAreBoundedAndAgree) {
  Dense d = dense_fixture();
  if (!d.model) GTEST_SKIP() << "no llama-dense fixture";
  const std::vector<int32_t>& prompt = d.prompt;
  ASSERT_GE(prompt.size(), 8u);
  const auto& model = d.model;
  EngineOptions eo = d.opts;
  eo.sequences = 2;
  Engine e(model, eo);
  auto first = [&](size_t n) { return std::span<const int32_t>(prompt.data(), n); };
  auto check = [&](int64_t slot, size_t n, const char* what) {
    Engine ref(model, d.opts);
    ASSERT_EQ(e.eval(slot, first(n)), ref.eval(first(n))) << what << ", " << n << " tokens";
  };
  check(1, 8, "the first pass");    // the weights' owner: kept
  check(0, 3, "sequence 0");        // a pass dropped below wrote its rows
  for (size_t n : {2, 4, 5, 6, 7}) {  // five more lengths: the 3-token pass goes first
    e.reset(1);
    check(1, n, "sequence 1");
  }
  EXPECT_LE(e.compiled_graphs(), 5);
  // Sequence 0 goes on from its 3 rows, then both step: against each sequence alone.
  const int32_t t0 = prompt[3], t1 = prompt[7];
  Engine r0(model, d.opts), r1(model, d.opts);
  r0.eval(first(3));
  r1.eval(first(7));
  ASSERT_EQ(e.eval(0, std::span<const int32_t>(&t0, 1)), r0.eval(std::span<const int32_t>(&t0, 1)));
  const std::vector<int32_t> two{t0, t1};
  std::vector<float> both = e.step(two), want = r0.eval(std::span<const int32_t>(&t0, 1)),
                     want1 = r1.eval(std::span<const int32_t>(&t1, 1));
  want.insert(want.end(), want1.begin(), want1.end());
  ASSERT_EQ(both, want) << "the batched step";
  ASSERT_EQ(e.eval(0, first(3)), r0.eval(first(3))) << "sequence 0 again, after 5 rows";
  EXPECT_EQ(e.position(0), 8);
}

// A prompt is appended all or nothing: when a chunk fails after others ran (here the second
// chunk's pass cannot be compiled under a 1 KB cap on the arena and weights, RLX_MAX_ARENA_BYTES),
// the sequence is back where it was, and the engine goes on as if the call had not been made:
// the same prompt then gives the bits of an engine that never failed.
TEST(LlmPasses, AFailedChunkAppendsNothing) {
  Dense d = dense_fixture();
  if (!d.model) GTEST_SKIP() << "no llama-dense fixture";
  const std::vector<int32_t>& prompt = d.prompt;
  ASSERT_GE(prompt.size(), 7u);
  EngineOptions eo = d.opts;
  eo.prompt_chunk = 4;
  Engine e(d.model, eo), fresh(d.model, eo);
  const std::span<const int32_t> four(prompt.data(), 4), six(prompt.data(), 6);
  e.eval(four);  // the first chunk's 4-row pass, compiled before the cap
  e.reset();
  {
    struct Cap {  // set for the failing call only, whatever it throws
      Cap() { setenv("RLX_MAX_ARENA_BYTES", "1K", 1); }
      ~Cap() { unsetenv("RLX_MAX_ARENA_BYTES"); }
    } cap;
    try {
      e.eval(six);  // 4 rows run, then the 2-row pass fails to compile
      ADD_FAILURE() << "the capped compile succeeded";
    } catch (const Error& err) {
      EXPECT_EQ(err.category(), ErrorCategory::ResourceExhausted) << err.what();
    }
  }
  EXPECT_EQ(e.position(0), 0) << "the chunk that ran is not kept";
  EXPECT_EQ(e.eval(six), fresh.eval(six));
  const int32_t next = prompt[6];
  EXPECT_EQ(e.eval(std::span<const int32_t>(&next, 1)), fresh.eval(std::span<const int32_t>(&next, 1)));
  EXPECT_EQ(e.position(0), 7);
}

TEST(LlmBatched, LlamaDenseThreeSequences) { check_batched("llama-dense"); }
TEST(LlmBatched, Qwen3MoeThreeSequences) { check_batched("qwen3moe-moe"); }

}  // namespace
}  // namespace rlx::llm
