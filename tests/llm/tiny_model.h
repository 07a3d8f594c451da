// Small GGUF models for the LLM tests, written with gguf::Writer: random weights in one
// matrix format, the tokenizer keys of a real vocab GGUF from ../shared/gguf/vocab; and where
// the LLM tests find their files and which device they run the engine on.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "rlx/gguf.h"
#include "rlx/options.h"

namespace rlx::llm::test {

// ../shared of the build, or RLX_SHARED_DIR from the environment (runs on another machine).
inline std::string shared_dir() {
  const char* env = std::getenv("RLX_SHARED_DIR");
  return env && *env ? env : RLX_SHARED_DIR;
}
inline std::string vocab_path(const std::string& file) { return shared_dir() + "/gguf/vocab/" + file; }
// RLX_LLM_DEVICE=cuda: the engines of the tests that honour it run on the CUDA backend.
inline Device llm_device() {
  const char* d = std::getenv("RLX_LLM_DEVICE");
  return d && std::string(d) == "cuda" ? Device::Cuda : Device::Cpu;
}

struct ArchCase {
  std::string name, arch, vocab;
  int64_t experts = 0;
};
inline void PrintTo(const ArchCase& c, std::ostream* os) { *os << c.name; }  // readable ctest names

// A 2-layer model of family `c.arch` (n_embd 64, 2 heads of 32, 1 KV head, FFN 128, with
// experts when c.experts > 0), written to `path`.
inline void write_model(const ArchCase& c, const std::string& path, gguf::TensorType mtype) {
  gguf::File v = gguf::File::open(vocab_path(c.vocab));
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

// A tensor for rewrite_gguf: it takes the place of the file's tensor of the same name.
struct NewTensor {
  std::string name;
  std::vector<int64_t> dims;
  gguf::TensorType type = gguf::TensorType::F32;
  std::vector<uint8_t> bytes;
};

// Writes the GGUF at `from` again to `to`: its metadata with the keys of `set` set (replaced or
// added) and those of `drop` left out, its tensors with `tensors` in place of the ones of the
// same name (appended where the file has none). The tests' way to a file that differs from a
// good one in one place.
inline void rewrite_gguf(const std::string& from, const std::string& to,
                         const std::vector<std::pair<std::string, gguf::MetaValue>>& set,
                         const std::vector<std::string>& drop = {}, const std::vector<NewTensor>& tensors = {}) {
  gguf::File src = gguf::File::open(from);
  gguf::Writer w;
  for (const auto& [key, v] : src.metadata())
    if (std::find(drop.begin(), drop.end(), key) == drop.end()) w.set(key, v);
  for (const auto& [key, v] : set) w.set(key, v);
  auto replacement = [&](const std::string& name) {
    return std::find_if(tensors.begin(), tensors.end(), [&](const NewTensor& t) { return t.name == name; });
  };
  for (const auto& t : src.tensors()) {
    if (auto r = replacement(t.name); r != tensors.end()) w.add_tensor(r->name, r->dims, r->type, r->bytes);
    else w.add_tensor(t.name, t.dims, t.type, std::span<const uint8_t>(src.data(t), t.bytes));
  }
  for (const NewTensor& t : tensors)
    if (!src.find_tensor(t.name)) w.add_tensor(t.name, t.dims, t.type, t.bytes);
  w.write(to);
}

}  // namespace rlx::llm::test
