// Vocab::from_gguf and the tables a Tokenizer builds from a Vocab: token attributes (with the
// fix-ups llama.cpp applies by token text), the special-token list, end-of-generation ids,
// decoded pieces, byte tokens and BPE merge ranks.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <limits>

#include "llm/tokenizer_impl.h"
#include "rlx/gguf.h"

namespace rlx::llm {

namespace {

constexpr const char* kSpm = "llama";
constexpr const char* kBpe = "gpt2";
using TextList = std::vector<std::string_view>;

// Texts llama.cpp takes as end-of-turn when the file names none (first match in this order).
const TextList kEotTexts = {
    "<|eot_id|>", "<|im_end|>",   "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>",      "_<EOT>",       "[EOT]",   "<｜end▁of▁sentence｜>",            "<end_of_utterance>"};
// Fill-in-the-middle markers: llama.cpp marks the first one found of each kind control; the
// pad / repo / file-separator kinds also end generation.
const std::vector<TextList> kFimKinds = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
     "<|code_prefix|>", "<|prefix|>"},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
     "<|code_suffix|>", "<|suffix|>"},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
     "<|code_middle|>", "<|middle|>"},
};
const std::vector<TextList> kFimEogKinds = {
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    {"<|file_sep|>"},
};
// Texts that end generation wherever they appear in a vocabulary.
const TextList kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~["};

uint32_t attr_of_type(int32_t t) {
  switch (static_cast<TokenType>(t)) {
    case TokenType::Normal: return kAttrNormal;
    case TokenType::Unknown: return kAttrUnknown;
    case TokenType::Control: return kAttrControl;
    case TokenType::UserDefined: return kAttrUserDefined;
    case TokenType::Unused: return kAttrUnused;
    case TokenType::Byte: return kAttrByte;
    default: return 0;  // undefined
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xNN>" -> NN, else -1.
int byte_token_value(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  const int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

}  // namespace

uint32_t gpt2_byte_to_cpt(uint8_t b) {
  const auto printable = [](int c) {
    return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  if (printable(b)) return b;
  uint32_t n = 0;  // the bytes that are not printable get 256, 257, ... in byte order
  for (int c = 0; c < b; ++c)
    if (!printable(c)) ++n;
  return 256 + n;
}

int gpt2_cpt_to_byte(uint32_t cpt) {
  static const std::vector<int16_t> table = [] {
    std::vector<int16_t> t(324, -1);
    for (int b = 0; b < 256; ++b) t[gpt2_byte_to_cpt(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return t;
  }();
  return cpt < table.size() ? table[cpt] : -1;
}

Vocab Vocab::from_gguf(const gguf::File& f) {
  Vocab v;
  v.model = f.get_string("tokenizer.ggml.model");
  v.pre = f.get_string("tokenizer.ggml.pre", "");
  v.name = f.get_string("general.name", "");
  if (v.model != kSpm && v.model != kBpe)
    fail(ErrorCategory::Unsupported, "tokenizer: unsupported tokenizer model '", v.model,
         "' (tokenizer.ggml.model) in ", f.path(), "; supported: llama, gpt2");
  v.tokens = f.get_strings("tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();
  const auto numbers = [&](const char* key) {
    std::vector<double> x = f.get_numbers(key);
    if (x.size() < n)
      fail(ErrorCategory::Parse, "tokenizer: ", key, " in ", f.path(), " has ", x.size(),
           " entries for ", n, " tokens");
    x.resize(n);
    return x;
  };
  // Values are clamped so that no conversion overflows on a hostile file.
  if (f.has("tokenizer.ggml.scores"))
    for (double s : numbers("tokenizer.ggml.scores"))
      v.scores.push_back(std::isnan(s) ? s : static_cast<float>(std::clamp<double>(
                                                 s, -std::numeric_limits<float>::max(),
                                                 std::numeric_limits<float>::max())));
  if (f.has("tokenizer.ggml.token_type"))
    for (double t : numbers("tokenizer.ggml.token_type"))
      v.types.push_back(t >= INT32_MIN && t <= INT32_MAX ? static_cast<int32_t>(t) : 0);

  if (v.model == kSpm) {
    v.bos = 1; v.eos = 2; v.unk = 0;
    v.add_bos = true; v.add_eos = false; v.add_space_prefix = true;
  } else {
    if (!f.has("tokenizer.ggml.merges"))
      fail(ErrorCategory::Parse, "tokenizer: gpt2 vocabulary without tokenizer.ggml.merges in ",
           f.path());
    v.merges = f.get_strings("tokenizer.ggml.merges");
    v.add_bos = pre_tokenizer_spec(v.pre).default_add_bos;  // Unsupported for an unknown pre
    v.add_eos = false;
    v.add_space_prefix = false;
  }
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},     {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},     {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk}, {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.padding_token_id", &v.pad},
  };
  for (auto [key, id] : ids) {
    if (*id >= static_cast<int64_t>(n)) *id = -1;  // a default outside the vocabulary
    const int64_t x = f.get_int(key, -1);
    if (x >= 0 && x < static_cast<int64_t>(n)) *id = static_cast<int32_t>(x);
  }
  return v;
}

int32_t Tokenizer::Impl::bpe_rank(int32_t lid, std::string_view l, int32_t rid,
                                  std::string_view r, std::string& scratch) const {
  if (lid >= 0 && rid >= 0) {
    auto it = rank_by_ids.find((static_cast<uint64_t>(lid) << 32) | static_cast<uint32_t>(rid));
    return it == rank_by_ids.end() ? -1 : it->second;
  }
  if (rank_by_text.empty()) return -1;
  scratch.assign(l);
  scratch += ' ';
  scratch += r;
  auto it = rank_by_text.find(std::string_view(scratch));
  return it == rank_by_text.end() ? -1 : it->second;
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(v.tokens.size()))
    fail(ErrorCategory::InvalidArgument, "tokenizer: token id ", id, " is out of range [0, ",
         v.tokens.size(), ")");
}

void build_tokenizer(Tokenizer::Impl& t) {
  Vocab& v = t.v;
  if (v.model == kSpm) {
    t.kind = Tokenizer::Impl::Kind::Spm;
    if (!v.pre.empty() && v.pre != "default")
      fail(ErrorCategory::Unsupported, "tokenizer: unsupported pre-tokenizer '", v.pre,
           "' for a llama (SentencePiece) vocabulary; expected none or 'default'");
  } else if (v.model == kBpe) {
    t.kind = Tokenizer::Impl::Kind::Bpe;
  } else {
    fail(ErrorCategory::Unsupported, "tokenizer: unsupported tokenizer model '", v.model,
         "'; supported: llama, gpt2");
  }
  const size_t n = v.tokens.size();
  if (n == 0) fail(ErrorCategory::InvalidArgument, "tokenizer: the vocabulary has no tokens");
  if (n > 0x7FFFFFFF) fail(ErrorCategory::InvalidArgument, "tokenizer: too many tokens: ", n);
  if (!v.scores.empty() && v.scores.size() != n)
    fail(ErrorCategory::InvalidArgument, "tokenizer: ", v.scores.size(), " scores for ", n,
         " tokens");
  for (float& s : v.scores)  // keeps the merge order a strict weak order
    if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();
  if (!v.types.empty() && v.types.size() != n)
    fail(ErrorCategory::InvalidArgument, "tokenizer: ", v.types.size(), " token types for ", n,
         " tokens");
  for (int32_t* id : {&v.bos, &v.eos, &v.unk, &v.pad, &v.eot, &v.eom, &v.sep})
    if (*id < -1 || *id >= static_cast<int64_t>(n))
      fail(ErrorCategory::InvalidArgument, "tokenizer: special token id ", *id,
           " is out of range [0, ", n, ")");

  // Token texts (llama.cpp renames empty ones) and the text -> id map.
  for (size_t i = 0; i < n; ++i)
    if (v.tokens[i].empty()) v.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  t.tok2id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, fresh] = t.tok2id.emplace(std::string_view(v.tokens[i]), static_cast<int32_t>(i));
    if (!fresh)
      fail(ErrorCategory::InvalidArgument, "tokenizer: token text of id ", i, " repeats id ", it->second);
  }

  // Attributes from the types, then llama.cpp's fix-ups by text.
  t.attr.assign(n, kAttrNormal);
  if (!v.types.empty())
    for (size_t i = 0; i < n; ++i) t.attr[i] = attr_of_type(v.types[i]);
  t.eog.assign(n, 0);
  const auto mark_control = [&](int32_t id) { t.attr[id] |= kAttrControl; };
  const auto first_of = [&](const TextList& texts) {
    for (std::string_view s : texts)
      if (int32_t id = t.find(s); id >= 0) return id;
    return -1;
  };
  if (v.eot < 0)
    if (int32_t id = first_of(kEotTexts); id >= 0) { v.eot = id; mark_control(id); }
  if (v.eom < 0)
    if (int32_t id = t.find("<|eom_id|>"); id >= 0) { v.eom = id; mark_control(id); }
  for (const TextList& kind : kFimKinds)
    if (int32_t id = first_of(kind); id >= 0) mark_control(id);
  for (const TextList& kind : kFimEogKinds)
    if (int32_t id = first_of(kind); id >= 0) { mark_control(id); t.eog[id] = 1; }
  for (size_t i = 0; i < n; ++i)
    if ((t.attr[i] & kAttrControl) && v.tokens[i].find("unused") != std::string::npos)
      t.attr[i] |= kAttrUnused;
  for (std::string_view s : kEogTexts)
    if (int32_t id = t.find(s); id >= 0) { mark_control(id); t.eog[id] = 1; }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) t.eog[id] = 1;

  // Special tokens, longest text first (ties: lower id first).
  for (size_t i = 0; i < n; ++i)
    if (t.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      t.special.push_back(static_cast<int32_t>(i));
  std::stable_sort(t.special.begin(), t.special.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].size() > v.tokens[b].size();
  });

  // Phi-3: special tokens swallow the whitespace after them (llama.cpp keys it on the name).
  std::string lname = v.name;
  for (char& c : lname) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lname.find("phi-3") != std::string::npos || lname.find("phi3") != std::string::npos) {
    for (int32_t id : t.special) t.attr[id] |= kAttrRStrip;
    if (int32_t id = t.find("</s>"); id >= 0) t.attr[id] |= kAttrRStrip;
    for (std::string_view s : {"<unk>", "<s>", "<|endoftext|>"})
      if (int32_t id = t.find(s); id >= 0) t.attr[id] &= ~kAttrRStrip;
  }

  if (t.kind == Tokenizer::Impl::Kind::Spm) {
    for (int b = 0; b < 256; ++b) {
      static const char* hex = "0123456789ABCDEF";
      const std::string name = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
      int32_t id = t.find(name);
      if (id < 0) id = t.find(std::string(1, static_cast<char>(b)));
      t.byte_tok[b] = id;
    }
  } else {
    const PreTokenizerSpec spec = pre_tokenizer_spec(v.pre);
    t.pretok = std::make_unique<PreTokenizer>(spec.patterns);
    t.ignore_merges = spec.ignore_merges;
    for (int b = 0; b < 256; ++b) {
      t.byte_to_cp[b].clear();
      utf8_append(t.byte_to_cp[b], gpt2_byte_to_cpt(static_cast<uint8_t>(b)));
    }
    t.rank_by_ids.reserve(v.merges.size() * 2);
    for (size_t r = 0; r < v.merges.size(); ++r) {
      const std::string& m = v.merges[r];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) continue;  // never matches anything in llama.cpp either
      const std::string_view l(m.data(), sp), rt(m.data() + sp + 1, m.size() - sp - 1);
      const int32_t lid = t.find(l), rid = t.find(rt);
      if (lid >= 0 && rid >= 0)
        t.rank_by_ids.emplace((static_cast<uint64_t>(lid) << 32) | static_cast<uint32_t>(rid),
                              static_cast<int32_t>(r));
      else
        t.rank_by_text.emplace(m, static_cast<int32_t>(r));
    }
  }

  // Decoded pieces, appended to one buffer.
  t.piece_at.assign(n + 1, 0);
  std::string p;
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = v.tokens[i];
    const uint32_t a = t.attr[i];
    p.clear();
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      p = s;
    } else if (a & kAttrNormal) {
      if (t.kind == Tokenizer::Impl::Kind::Spm) {
        p = replace_all(s, "\xE2\x96\x81", " ");
      } else {
        // Byte-level text back to bytes; a character outside the GPT-2 table is kept as is.
        for (size_t k = 0; k < s.size();) {
          const size_t at = k;
          uint32_t c = static_cast<unsigned char>(s[k]);
          const size_t len = std::min(utf8_len_from_lead(static_cast<unsigned char>(c)), s.size() - k);
          if (len == 2) c = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[k + 1]) & 0x3Fu);
          k += len;
          const int b = len <= 2 ? gpt2_cpt_to_byte(c) : -1;
          if (b >= 0) p += static_cast<char>(b);
          else p.append(s, at, len);
        }
      }
    } else if (a & kAttrByte) {
      const int b = byte_token_value(s);
      if (b >= 0) p = std::string(1, static_cast<char>(b));
    }
    t.piece_bytes += p;
    if (t.piece_bytes.size() > 0xFFFFFFFFu)
      fail(ErrorCategory::InvalidArgument, "tokenizer: the vocabulary's text exceeds 4 GiB");
    t.piece_at[i + 1] = static_cast<uint32_t>(t.piece_bytes.size());
  }
  t.piece_bytes.shrink_to_fit();
}

}  // namespace rlx::llm
