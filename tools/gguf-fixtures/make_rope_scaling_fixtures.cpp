/*
 * make_rope_scaling_fixtures: writes the RoPE-scaling parity fixtures under
 * tests/data/llm/rope/ (see the README.md there): one small llama-family model with F32
 * weights and no tokenizer, and llama.cpp's logits for it under each RoPE scaling setting
 * (its rope.scaling.* keys, written into a copy of the model for the run).
 *
 * This program is NOT part of the rlx build. It links against llama.cpp release v0.5.0
 * (commit de3ff81, as bundled in node-llama-cpp@3.22.1), using only its public API
 * (llama.h, gguf.h). To rebuild the fixtures, from the rlx repository root:
 *
 *   git clone <node-llama-cpp-3.22.1>/package/llama/gitRelease.bundle /tmp/llama.cpp-src
 *   cmake -S /tmp/llama.cpp-src -B /tmp/llama-lib -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
 *         -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
 *         -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=ON -DGGML_OPENMP=OFF
 *   cmake --build /tmp/llama-lib -j2 --target llama
 *   g++ -std=c++20 -O2 -Wall -Wextra -I /tmp/llama.cpp-src/include -I /tmp/llama.cpp-src/ggml/include \
 *       tools/gguf-fixtures/make_rope_scaling_fixtures.cpp -L /tmp/llama-lib/bin -lllama -lggml -lggml-base \
 *       -Wl,-rpath,/tmp/llama-lib/bin -o /tmp/make_rope_scaling_fixtures
 *   /tmp/make_rope_scaling_fixtures tests/data/llm/rope
 *
 * The run follows ../shared/gguf/README.md section 3 (the architecture fixtures): one
 * thread, F32 K/V cache, flash attention off, the 8-token prompt in one batch with every
 * row's logits, then 16 greedy steps, each fed back alone. Weights come from a splitmix64
 * generator turned into floats by exact arithmetic, so the model is the same on every
 * platform.
 */

#include "gguf.h"
#include "llama.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kEmbd = 32, kHeads = 2, kHeadsKv = 1, kHeadDim = 16, kFf = 64, kVocab = 64, kLayers = 2;
constexpr int kCtxTrain = 16384;

uint64_t g_state = 0x5eed0fa11u;
uint64_t splitmix64() {
  uint64_t z = (g_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
// Uniform in [-a, a): 24 random bits, exact in float.
float uniform(float a) { return (static_cast<float>(splitmix64() >> 40) * 0x1p-23f - 1.0f) * a; }

struct Variant {
  const char* name;
  const char* type;        // rope.scaling.type, nullptr: absent
  float factor;            // rope.scaling.factor, 0: absent
  float scale_linear;      // the older rope.scale_linear, 0: absent
  float attn_factor;       // rope.scaling.attn_factor, 0: absent
  uint32_t orig_ctx;       // rope.scaling.original_context_length, 0: absent
};
const Variant kVariants[] = {
    {"none", nullptr, 0, 0, 0, 0},
    {"linear", "linear", 4, 0, 0, 0},
    {"scale-linear", nullptr, 0, 2, 0, 0},
    {"linear-attn", "linear", 2, 0, 1.25f, 0},
    {"yarn", "yarn", 4, 0, 0, 4096},
    {"yarn-attn", "yarn", 8, 0, 0.8f, 2048},
};

// The model's metadata and tensors (F32), plus a variant's keys.
void write_model(const std::string& path, const Variant* v) {
  g_state = 0x5eed0fa11u;  // the same weights for every variant
  const size_t mem = 4u << 20;
  ggml_init_params ip{mem, nullptr, false};
  ggml_context* ctx = ggml_init(ip);
  gguf_context* g = gguf_init_empty();
  gguf_set_val_str(g, "general.architecture", "llama");
  gguf_set_val_str(g, "general.name", "rope-scaling-fixture");
  gguf_set_val_u32(g, "llama.context_length", kCtxTrain);
  gguf_set_val_u32(g, "llama.embedding_length", kEmbd);
  gguf_set_val_u32(g, "llama.block_count", kLayers);
  gguf_set_val_u32(g, "llama.feed_forward_length", kFf);
  gguf_set_val_u32(g, "llama.attention.head_count", kHeads);
  gguf_set_val_u32(g, "llama.attention.head_count_kv", kHeadsKv);
  gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  gguf_set_val_f32(g, "llama.rope.freq_base", 10000.0f);
  gguf_set_val_u32(g, "llama.vocab_size", kVocab);
  gguf_set_val_str(g, "tokenizer.ggml.model", "none");
  if (v) {
    if (v->type) gguf_set_val_str(g, "llama.rope.scaling.type", v->type);
    if (v->factor != 0) gguf_set_val_f32(g, "llama.rope.scaling.factor", v->factor);
    if (v->scale_linear != 0) gguf_set_val_f32(g, "llama.rope.scale_linear", v->scale_linear);
    if (v->attn_factor != 0) gguf_set_val_f32(g, "llama.rope.scaling.attn_factor", v->attn_factor);
    if (v->orig_ctx != 0) gguf_set_val_u32(g, "llama.rope.scaling.original_context_length", v->orig_ctx);
  }
  auto add = [&](const std::string& name, int64_t n0, int64_t n1, float a, float center) {
    ggml_tensor* t = n1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n0, n1) : ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n0);
    ggml_set_name(t, name.c_str());
    float* d = static_cast<float*>(t->data);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) d[i] = center + uniform(a);
    gguf_add_tensor(g, t);
  };
  add("token_embd.weight", kEmbd, kVocab, 1.0f, 0);
  add("output_norm.weight", kEmbd, 0, 0.2f, 1);
  for (int il = 0; il < kLayers; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    add(b + "attn_norm.weight", kEmbd, 0, 0.2f, 1);
    add(b + "attn_q.weight", kEmbd, kHeads * kHeadDim, 0.6f, 0);
    add(b + "attn_k.weight", kEmbd, kHeadsKv * kHeadDim, 0.6f, 0);
    add(b + "attn_v.weight", kEmbd, kHeadsKv * kHeadDim, 0.4f, 0);
    add(b + "attn_output.weight", kHeads * kHeadDim, kEmbd, 0.3f, 0);
    add(b + "ffn_norm.weight", kEmbd, 0, 0.2f, 1);
    add(b + "ffn_gate.weight", kEmbd, kFf, 0.4f, 0);
    add(b + "ffn_up.weight", kEmbd, kFf, 0.4f, 0);
    add(b + "ffn_down.weight", kFf, kEmbd, 0.3f, 0);
  }
  if (!gguf_write_to_file(g, path.c_str(), false)) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  gguf_free(g);
  ggml_free(ctx);
}

int argmax(const float* row) {
  int best = 0;
  for (int i = 1; i < kVocab; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// llama.cpp's logits for the prompt and 16 greedy steps: 24 rows.
std::vector<float> run(const std::string& path, const std::vector<int>& prompt, std::vector<int>& greedy) {
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "llama.cpp cannot load %s\n", path.c_str());
    std::exit(1);
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = cp.n_ubatch = 256;
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* lc = llama_init_from_model(model, cp);
  std::vector<float> rows;
  llama_batch b = llama_batch_init(256, 0, 1);
  auto decode = [&](const std::vector<int>& ids, int pos) {
    b.n_tokens = static_cast<int32_t>(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      b.token[i] = ids[i];
      b.pos[i] = pos + static_cast<int>(i);
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = 1;
    }
    if (llama_decode(lc, b) != 0) {
      std::fprintf(stderr, "llama_decode failed\n");
      std::exit(1);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const float* r = llama_get_logits_ith(lc, static_cast<int32_t>(i));
      rows.insert(rows.end(), r, r + kVocab);
    }
  };
  decode(prompt, 0);
  greedy.clear();
  int next = argmax(rows.data() + 7 * kVocab);
  for (int j = 0; j < 16; ++j) {
    greedy.push_back(next);
    decode({next}, 8 + j);
    next = argmax(rows.data() + (8 + j) * kVocab);
  }
  llama_batch_free(b);
  llama_free(lc);
  llama_model_free(model);
  return rows;
}

std::string ints(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  llama_backend_init();
  write_model(out + "/rope-llama.gguf", nullptr);
  const std::vector<int> prompt{1, 9, 17, 25, 33, 41, 49, 57};
  std::vector<float> none;
  for (const Variant& v : kVariants) {
    const std::string tmp = "/tmp/rope-fixture-" + std::string(v.name) + ".gguf";
    write_model(tmp, &v);
    std::vector<int> greedy, greedy2;
    std::vector<float> rows = run(tmp, prompt, greedy);
    const bool same = run(tmp, prompt, greedy2) == rows && greedy2 == greedy;
    std::remove(tmp.c_str());
    if (none.empty()) none = rows;
    double diff = 0, peak = 0, gap = 1e30;
    for (size_t i = 0; i < rows.size(); ++i) {
      diff = std::fmax(diff, std::fabs(rows[i] - none[i]));
      peak = std::fmax(peak, std::fabs(rows[i]));
    }
    for (int r = 0; r < 24; ++r) {
      const float* row = rows.data() + r * kVocab;
      const int best = argmax(row);
      float second = -1e30f;
      for (int i = 0; i < kVocab; ++i)
        if (i != best) second = std::fmax(second, row[i]);
      gap = std::fmin(gap, row[best] - second);
    }
    const std::string base = out + "/rope-" + v.name;
    FILE* f = std::fopen((base + ".ref.f32").c_str(), "wb");
    std::fwrite(rows.data(), 4, rows.size(), f);
    std::fclose(f);
    f = std::fopen((base + ".ref.json").c_str(), "w");
    std::fprintf(f,
                 "{\n  \"format\": \"rlx-llamacpp-ref/1\",\n  \"name\": \"rope-%s\",\n  \"model_file\": \"rope-llama.gguf\",\n"
                 "  \"keys\": {\"llama.rope.scaling.type\": %s%s%s, \"llama.rope.scaling.factor\": %g, "
                 "\"llama.rope.scale_linear\": %g, \"llama.rope.scaling.attn_factor\": %g, "
                 "\"llama.rope.scaling.original_context_length\": %u},\n"
                 "  \"keys_note\": \"written into a copy of the model for the run; 0 and null: key absent\",\n"
                 "  \"llama_cpp\": {\"release_tag\": \"v0.5.0\", \"system_info\": \"%s\"},\n"
                 "  \"settings\": \"n_ctx 256, n_batch 256, 1 thread, K/V f32, flash attention off\",\n"
                 "  \"prompt_ids\": %s,\n  \"n_prompt\": 8,\n  \"greedy_ids\": %s,\n  \"n_gen\": 16,\n"
                 "  \"n_vocab\": %d,\n  \"n_rows\": 24,\n  \"logits_layout\": \"[24][n_vocab] f32 little-endian\",\n"
                 "  \"max_abs_logit\": %.6g,\n  \"smallest_top2_gap\": %.6g,\n  \"max_abs_diff_from_none\": %.6g,\n"
                 "  \"second_run_bit_identical\": %s\n}\n",
                 v.name, v.type ? "\"" : "", v.type ? v.type : "null", v.type ? "\"" : "", v.factor, v.scale_linear,
                 v.attn_factor, v.orig_ctx, llama_print_system_info(), ints(prompt).c_str(), ints(greedy).c_str(),
                 kVocab, peak, gap, diff, same ? "true" : "false");
    std::fclose(f);
    std::printf("%-13s greedy %s  max |logit| %.4g  top-2 gap %.3g  max |d| from none %.4g  rerun identical %d\n",
                v.name, ints(greedy).c_str(), peak, gap, diff, same);
  }
  llama_backend_free();
  return 0;
}
