// Fuzz target body for the GGUF reader (rlx::gguf::File::parse) and the LLM loader. See
// fuzz_common.h for the contract. Per input: parse; a file that parses must have every tensor
// inside the data section, must write back through gguf::Writer and parse to the same
// metadata and tensor table, and its tokenizer keys (if any) must load into a Tokenizer or be
// refused with rlx::Error. A file that names an architecture (and is at most 64 KB) is then
// loaded as a model (llm::Model::load), and an Engine of one thread and a context of 8 runs a
// prompt of two tokens and one decode step on it: each must succeed or throw rlx::Error, and
// the logits must be one row of the vocabulary.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <span>
#include <string>

#include "fuzz_common.h"
#include "rlx/gguf.h"
#include "rlx/llm.h"
#include "rlx/tokenizer.h"

namespace rlx::fuzz {

inline constexpr size_t kGgufMaxInput = 1 << 20;
inline constexpr size_t kGgufMaxModelInput = 64 << 10;

// Model::load reads a path: the input goes to a file of this process's own first.
inline void gguf_model_run(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/rlx-fuzz-gguf-model-" + std::to_string(getpid()) + ".gguf";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) throw Finding("cannot write " + path);
  }
  struct Remove {
    ~Remove() { std::remove(path.c_str()); }
  } remove_after;
  std::shared_ptr<const llm::Model> m = llm::Model::load(path);
  llm::EngineOptions eo;
  eo.threads = 1;
  eo.n_ctx = 8;
  eo.kv_type = DType::F32;
  llm::Engine e(m, eo);
  const std::vector<int32_t> ids{0, int32_t(m->hp.n_vocab - 1)};
  const std::vector<float> prompt = e.eval(ids);
  if (prompt.size() != size_t(m->hp.n_vocab)) throw Finding("the prompt's logits are not one row of the vocabulary");
  const std::vector<float> step = e.eval(std::span<const int32_t>(ids.data(), 1));
  if (step.size() != size_t(m->hp.n_vocab)) throw Finding("a decode step's logits are not one row of the vocabulary");
}

inline bool gguf_one_input(const uint8_t* data, size_t size) {
  if (size > kGgufMaxInput) return false;
  bool model = false;
  const bool accepted = guard([&] {
    gguf::File f = gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
    model = size <= kGgufMaxModelInput && f.has("general.architecture");
    gguf::Writer w;
    w.copy_metadata(f);
    for (const gguf::TensorInfo& t : f.tensors()) {
      if (f.data_offset() + t.offset + t.bytes > f.file_bytes())
        throw Finding("tensor '" + t.name + "' extends past the end of the input");
      w.add_tensor(t.name, t.dims.empty() ? std::vector<int64_t>{1} : t.dims, t.type,
                   std::span<const uint8_t>(f.data(t), t.bytes));
    }
    std::vector<uint8_t> again;
    try {
      again = w.bytes();
    } catch (const Error& e) {
      if (e.category() != ErrorCategory::InvalidArgument) throw;
      return;  // e.g. a 0-dim tensor: the writer refuses what it cannot represent
    }
    gguf::File g = gguf::File::parse(again, "fuzz.gguf (written back)");
    if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size())
      throw Finding("GGUF write-back changed the number of keys or tensors");
    for (size_t i = 0; i < f.metadata().size(); ++i)
      if (g.metadata()[i].first != f.metadata()[i].first ||
          g.metadata()[i].second.to_string(1 << 20) != f.metadata()[i].second.to_string(1 << 20))
        throw Finding("GGUF write-back changed metadata key '" + f.metadata()[i].first + "'");
    for (size_t i = 0; i < f.tensors().size(); ++i) {
      const auto& a = f.tensors()[i];
      const auto& b = g.tensors()[i];
      if (a.name != b.name || a.type != b.type || a.bytes != b.bytes)
        throw Finding("GGUF write-back changed tensor '" + a.name + "'");
    }
    if (f.has("tokenizer.ggml.model")) {
      try {
        llm::Tokenizer tok = llm::Tokenizer::from_gguf(f);
        (void)tok.encode("Hello world! 123 \xe2\x96\x81 caf\xc3\xa9");
      } catch (const Error&) {
        // refused vocabularies are fine
      }
    }
  });
  if (accepted && model) guard([&] { gguf_model_run(data, size); });
  return accepted;
}

}  // namespace rlx::fuzz
