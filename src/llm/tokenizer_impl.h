// Internal state of rlx::llm::Tokenizer, shared by the tokenizer_*.cpp files.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/utf8.h"
#include "rlx/tokenizer.h"

namespace rlx::llm {

// Hash for heterogeneous lookup (find by string_view in a map keyed by std::string).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Token attributes (llama.cpp derives them from the GGUF types plus a few fix-ups by text).
enum TokenAttr : uint32_t {
  kAttrNormal = 1u << 0,
  kAttrUnknown = 1u << 1,
  kAttrControl = 1u << 2,
  kAttrUserDefined = 1u << 3,
  kAttrUnused = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLStrip = 1u << 6,  // a special-token match eats the whitespace before it
  kAttrRStrip = 1u << 7,  // ... or after it
};

// Pre-tokenizer: splits text into words by one or more regexes applied in sequence (each
// regex splits the pieces the previous one produced). Implemented with ICU (pretokenize.cpp).
class PreTokenizer {
 public:
  // `patterns` are ICU regex strings; Error(Internal) if one does not compile.
  explicit PreTokenizer(const std::vector<std::string>& patterns);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;
  // Appends the words of `text` (valid UTF-8, with llama.cpp's U+FFFD substitution already
  // applied) as [begin, end) byte ranges into `text`.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& words) const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// The regexes of a supported BPE pre-tokenizer, and its flags. Error(Unsupported) naming
// `pre` when it is not one we implement.
struct PreTokenizerSpec {
  std::vector<std::string> patterns;
  bool ignore_merges = false;  // a word that is a whole token is emitted as is
  bool default_add_bos = false;
};
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);

// UTF-8 helpers (pretokenize.cpp; utf8_append is ir/utf8.h's).
// Length of the sequence a lead byte announces (1 for ASCII and for stray bytes), as llama.cpp
// computes it: from the top four bits only.
size_t utf8_len_from_lead(unsigned char c);
// Re-encodes `text` the way llama.cpp reads it for BPE: each byte that does not start a
// well-formed sequence becomes U+FFFD. Returns `text` unchanged when it is already valid.
std::string utf8_sanitize(std::string_view text);

struct Tokenizer::Impl {
  enum class Kind { Spm, Bpe };
  Vocab v;
  Kind kind = Kind::Spm;
  std::vector<uint32_t> attr;       // TokenAttr bits per id
  // text -> id; the keys view v.tokens (never modified once the index is built; Impl is
  // shared, never copied), so the vocabulary's strings are held once.
  std::unordered_map<std::string_view, int32_t> tok2id;
  std::vector<int32_t> special;     // control / user-defined / unknown ids, longest text first
  std::vector<uint8_t> eog;         // 1 for end-of-generation ids
  // Decoded bytes of each token (piece()), all in one buffer: token i is
  // piece_bytes[piece_at[i], piece_at[i + 1]) (one string per token would cost ~32 bytes each).
  std::string piece_bytes;
  std::vector<uint32_t> piece_at;
  std::string_view piece_of(int32_t id) const {
    return std::string_view(piece_bytes).substr(piece_at[size_t(id)], piece_at[size_t(id) + 1] - piece_at[size_t(id)]);
  }

  // SPM
  std::array<int32_t, 256> byte_tok{};  // byte -> id ("<0xNN>" or the one-byte token), -1 none

  // BPE
  std::unique_ptr<PreTokenizer> pretok;
  bool ignore_merges = false;
  std::unordered_map<uint64_t, int32_t> rank_by_ids;  // (left id << 32 | right id) -> rank
  TokenMap rank_by_text;  // "left right" -> rank, for merges with a side that is no token
  std::array<std::string, 256> byte_to_cp;  // GPT-2 byte -> its unicode char (UTF-8)

  int32_t find(std::string_view s) const {
    auto it = tok2id.find(s);
    return it == tok2id.end() ? -1 : it->second;
  }
  int32_t bpe_rank(int32_t lid, std::string_view l, int32_t rid, std::string_view r,
                   std::string& scratch) const;

  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;  // tokenizer_spm.cpp
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;  // tokenizer_bpe.cpp
  void check_id(int32_t id) const;
};

// Builds every table of `impl` from impl.v (tokenizer_vocab.cpp).
void build_tokenizer(Tokenizer::Impl& impl);
// GPT-2 byte <-> unicode table: the code point that byte b is written as.
uint32_t gpt2_byte_to_cpt(uint8_t b);
// Inverse; -1 for a code point that is not in the table.
int gpt2_cpt_to_byte(uint32_t cpt);

}  // namespace rlx::llm
