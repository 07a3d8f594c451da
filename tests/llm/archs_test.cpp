// Parity with llama.cpp on the architecture fixtures in ../shared/gguf/archs: the prompt's
// logits (one batch, every row) and 16 greedy decode steps, each fed back as one token,
// through llm::Engine (the code path of `rlx generate`). Greedy ids must be identical.
// Tolerance: 1e-4 absolute per logit, the README's figure for an F32 implementation with an
// F32 KV cache: weights and cache are F32 on both sides, so only summation order differs
// (llama.cpp's own thread/flash-attention variants move these logits by up to 1.9e-4 with an
// F16 cache, and the smallest top-2 gap is 3.7e-4).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "rlx/llm.h"

namespace rlx::llm {
namespace {

std::string archs(const std::string& f) { return std::string(RLX_SHARED_DIR) + "/gguf/archs/" + f; }

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

void check_fixture(const std::string& name) {
  const std::string gguf = archs(name + ".gguf");
  if (!std::filesystem::exists(gguf)) GTEST_SKIP() << "no " << gguf;
  const std::string js = slurp(archs(name + ".ref.json"));
  const std::string ref_bytes = slurp(archs(name + ".ref.f32"));
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
  std::cout << name << ": 24 rows, max |logit - llama.cpp| = " << worst << "\n";
}

TEST(LlmArchs, LlamaDense) { check_fixture("llama-dense"); }
TEST(LlmArchs, Qwen2Dense) { check_fixture("qwen2-dense"); }
TEST(LlmArchs, Qwen3Dense) { check_fixture("qwen3-dense"); }
TEST(LlmArchs, Gpt2Dense) { check_fixture("gpt2-dense"); }
TEST(LlmArchs, LlamaMoe) { check_fixture("llama-moe"); }
TEST(LlmArchs, Qwen3Moe) { check_fixture("qwen3moe-moe"); }

}  // namespace
}  // namespace rlx::llm
