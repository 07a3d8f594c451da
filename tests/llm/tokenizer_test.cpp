// rlx::llm::Tokenizer against llama.cpp v0.5.0's tokenizer test vectors
// (RLX_SHARED_DIR/gguf/vocab/ggml-vocab-<name>.gguf + .inp + .out; see the README there),
// plus round trips, streaming decode, special tokens and error cases.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "rlx/gguf.h"
#include "rlx/tokenizer.h"

#ifndef RLX_SHARED_DIR
#define RLX_SHARED_DIR "/work/shared"
#endif

namespace {

using rlx::llm::DecodeOptions;
using rlx::llm::DecodeStream;
using rlx::llm::Tokenizer;
using rlx::llm::Vocab;

std::string vocab_dir() { return std::string(RLX_SHARED_DIR) + "/gguf/vocab/"; }
std::string vocab_path(const std::string& name) {
  return vocab_dir() + "ggml-vocab-" + name + ".gguf";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: inputs joined (and terminated) by "\n__ggml_vocab_test__\n"; .out: one line of
// space-separated ids per input.
std::vector<Case> read_cases(const std::string& name) {
  const std::string inp = read_file(vocab_path(name) + ".inp");
  const std::string out = read_file(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      cases.push_back({inp.substr(pos), {}});
      break;
    }
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (Case& c : cases) {
    if (!std::getline(lines, line)) throw std::runtime_error(name + ".out has too few lines");
    std::istringstream ids(line);
    for (int64_t id; ids >> id;) c.ids.push_back(static_cast<int32_t>(id));
  }
  return cases;
}

bool have_shared() { return std::filesystem::exists(vocab_dir()); }

#define SKIP_WITHOUT_SHARED()                                                          \
  do {                                                                                 \
    if (!have_shared())                                                                \
      GTEST_SKIP() << "reference data not found: " << vocab_dir()                      \
                   << " (set RLX_SHARED_DIR to the folder holding gguf/vocab)";        \
  } while (0)

const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) t = std::make_unique<Tokenizer>(Tokenizer::from_gguf(rlx::gguf::File::open(vocab_path(name))));
  return *t;
}

std::string show_text(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '"') o += "\\\"";
    else o += static_cast<char>(c);
  }
  return o + "\"";
}

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string o = "[";
  for (size_t i = 0; i < ids.size(); ++i) o += (i ? " " : "") + std::to_string(ids[i]);
  return o + "]";
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
             : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

void check_vectors(const std::string& name) {
  const Tokenizer& tok = tokenizer(name);
  const std::vector<Case> cases = read_cases(name);
  EXPECT_EQ(cases.size(), 46u) << name;
  int passed = 0;
  for (const Case& c : cases) {
    const std::vector<int32_t> got = tok.encode(c.text, /*add_special=*/false,
                                                /*parse_special=*/false);
    if (got == c.ids) ++passed;
    else ADD_FAILURE() << name << ": text " << show_text(c.text) << "\n  expected "
                       << show_ids(c.ids) << "\n  got      " << show_ids(got);
  }
  std::printf("[ vectors  ] %s: %d/%zu cases pass\n", name.c_str(), passed, cases.size());
}

}  // namespace

TEST(TokenizerVectors, LlamaSpm) { SKIP_WITHOUT_SHARED(); check_vectors("llama-spm"); }
TEST(TokenizerVectors, Phi3) { SKIP_WITHOUT_SHARED(); check_vectors("phi-3"); }
TEST(TokenizerVectors, LlamaBpe) { SKIP_WITHOUT_SHARED(); check_vectors("llama-bpe"); }
TEST(TokenizerVectors, Qwen2) { SKIP_WITHOUT_SHARED(); check_vectors("qwen2"); }
TEST(TokenizerVectors, Gpt2) { SKIP_WITHOUT_SHARED(); check_vectors("gpt-2"); }

// decode(encode(t)): BPE gives t back exactly. SPM gives " " + t for non-empty t (the prefix
// space encode() adds) and t with remove_prefix_space.
TEST(Tokenizer, RoundTrip) {
  SKIP_WITHOUT_SHARED();
  for (const std::string name : {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2"}) {
    const Tokenizer& tok = tokenizer(name);
    const bool spm = tok.vocab().model == "llama";
    std::vector<Case> cases = read_cases(name);
    cases.push_back({"<s> and <|endoftext|> are text here", {}});
    for (const Case& c : cases) {
      const std::vector<int32_t> ids = tok.encode(c.text);
      const std::string plain = tok.decode(ids);
      const std::string stripped = tok.decode(ids, {.remove_prefix_space = true});
      if (spm) {
        EXPECT_EQ(plain, c.text.empty() ? "" : " " + c.text) << name << " " << show_text(c.text);
      } else {
        EXPECT_EQ(plain, c.text) << name << " " << show_text(c.text);
      }
      EXPECT_EQ(stripped, c.text) << name << " " << show_text(c.text);
    }
  }
}

TEST(Tokenizer, DecodeStreamHoldsSplitCharacters) {
  SKIP_WITHOUT_SHARED();
  for (const std::string name : {"llama-spm", "gpt-2", "qwen2"}) {
    const Tokenizer& tok = tokenizer(name);
    const std::string text = "llama 🦙 and 👩‍👩‍👧 Cửa Việt";
    const std::vector<int32_t> ids = tok.encode(text);
    DecodeStream ds(tok, {.remove_prefix_space = true});
    std::string all;
    int held = 0;
    for (int32_t id : ids) {
      const std::string part = ds.push(id);
      EXPECT_TRUE(valid_utf8(part)) << name << " piece of id " << id;
      if (ds.pending_bytes() > 0) ++held;  // part of a character is waiting for the rest
      all += part;
    }
    all += ds.flush();
    EXPECT_EQ(all, text) << name;
    EXPECT_GT(held, 0) << name << ": expected the emoji to be split over several tokens";
  }
  // The 4 bytes of U+1F999 arrive one token at a time: nothing until the last one.
  const Tokenizer& spm = tokenizer("llama-spm");
  DecodeStream ds(spm);
  const char* bytes[] = {"<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"};
  for (int i = 0; i < 4; ++i) {
    const int32_t id = spm.token_id(bytes[i]);
    ASSERT_GE(id, 0) << bytes[i];
    const std::string out = ds.push(id);
    if (i < 3) EXPECT_EQ(out, "") << i;
    else EXPECT_EQ(out, "🦙");
  }
  EXPECT_EQ(ds.flush(), "");
  // An incomplete character at the end comes out of flush() as U+FFFD.
  ds.push(spm.token_id("<0xF0>"));
  EXPECT_EQ(ds.pending_bytes(), 1u);
  EXPECT_EQ(ds.flush(), "\xEF\xBF\xBD");
}

TEST(Tokenizer, AddSpecialAndParseSpecial) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& spm = tokenizer("llama-spm");
  EXPECT_TRUE(spm.add_bos());
  EXPECT_FALSE(spm.add_eos());
  EXPECT_EQ(spm.bos(), 1);
  EXPECT_EQ(spm.encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(spm.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(spm.encode("Hello world", false), (std::vector<int32_t>{15043, 3186}));
  // parse_special: "<s>" is the BOS token and the text after it gets the prefix space again.
  EXPECT_EQ(spm.encode("<s>Hello world", false, true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_NE(spm.encode("<s>Hello world", false, false)[0], 1);
  EXPECT_TRUE(spm.is_eog(spm.eos()));
  EXPECT_EQ(spm.decode(spm.encode("Hello world", true)), "<s> Hello world");
  EXPECT_EQ(spm.decode(spm.encode("Hello world", true), {.render_special = false}), " Hello world");

  const Tokenizer& gpt2 = tokenizer("gpt-2");
  EXPECT_FALSE(gpt2.add_bos());
  EXPECT_EQ(gpt2.encode("Hello world", true), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(gpt2.encode("<|endoftext|>", false, true), (std::vector<int32_t>{50256}));
  EXPECT_GT(gpt2.encode("<|endoftext|>", false, false).size(), 1u);
  EXPECT_TRUE(gpt2.is_eog(50256));

  const Tokenizer& llama3 = tokenizer("llama-bpe");
  EXPECT_TRUE(llama3.add_bos());  // llama.cpp's default for the llama-bpe pre-tokenizer
  const std::vector<int32_t> ids = llama3.encode("Hello<|eot_id|>", true, true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[2], llama3.token_id("<|eot_id|>"));
  EXPECT_TRUE(llama3.is_eog(ids[2]));

  const Tokenizer& qwen = tokenizer("qwen2");
  const std::vector<int32_t> q = qwen.encode("<|im_start|>user\nhi<|im_end|>", false, true);
  ASSERT_GE(q.size(), 3u);
  EXPECT_EQ(q.front(), qwen.token_id("<|im_start|>"));
  EXPECT_EQ(q.back(), qwen.token_id("<|im_end|>"));
  EXPECT_TRUE(qwen.is_eog(q.back()));
  // User-defined tokens are matched even without parse_special.
  const std::vector<int32_t> pad = qwen.encode("a[PAD151650]b");
  EXPECT_EQ(pad.size(), 3u);
  EXPECT_EQ(pad[1], 151650);
}

TEST(Tokenizer, Errors) {
  Vocab v;
  v.model = "gpt2";
  v.pre = "nonsense";
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  try {
    Tokenizer t(v);
    FAIL() << "an unknown pre-tokenizer was accepted";
  } catch (const rlx::Error& e) {
    EXPECT_EQ(e.category(), rlx::ErrorCategory::Unsupported);
    EXPECT_NE(std::string(e.what()).find("nonsense"), std::string::npos) << e.what();
  }
  v.model = "t5";
  v.pre = "";
  try {
    Tokenizer t(v);
    FAIL() << "an unknown tokenizer model was accepted";
  } catch (const rlx::Error& e) {
    EXPECT_EQ(e.category(), rlx::ErrorCategory::Unsupported);
    EXPECT_NE(std::string(e.what()).find("t5"), std::string::npos) << e.what();
  }

  // A small hand-built byte-level BPE vocab works, and ids out of range are refused.
  v.model = "gpt2";
  v.pre = "gpt-2";
  Tokenizer t(v);
  EXPECT_EQ(t.encode("ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ(t.encode("ba"), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{2, 0}), "aba");
  for (int32_t bad : {3, -1, 1 << 30}) {
    try {
      t.decode(std::vector<int32_t>{0, bad});
      FAIL() << "id " << bad << " was accepted";
    } catch (const rlx::Error& e) {
      EXPECT_EQ(e.category(), rlx::ErrorCategory::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(t.piece(3), rlx::Error);
  DecodeStream ds(t);
  EXPECT_THROW(ds.push(7), rlx::Error);
}

// Rough speed figure (printed, not checked): a few hundred KB of mixed text.
TEST(Tokenizer, Speed) {
  SKIP_WITHOUT_SHARED();
  std::string text;
  for (const Case& c : read_cases("gpt-2")) text += c.text + "\n";
  const std::string unit =
      "The quick brown fox jumps over the lazy dog. In 2024, 3,141 llamas (🦙) walked 27.5 km "
      "across the Andes; Cửa Việt and Ελλάδα and 北京 were mentioned too.\n";
  while (text.size() < 400000) text += unit;
  for (const std::string name : {"llama-spm", "llama-bpe", "qwen2", "gpt-2"}) {
    const Tokenizer& tok = tokenizer(name);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok.encode(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ speed    ] %-9s %zu bytes -> %zu tokens in %.3f s: %.2f MB/s, %.0f tokens/s\n",
                name.c_str(), text.size(), ids.size(), s, text.size() / s / 1e6, ids.size() / s);
    EXPECT_EQ(tok.decode(ids, {.remove_prefix_space = true}), text);
  }
}
