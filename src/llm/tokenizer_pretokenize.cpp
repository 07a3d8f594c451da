// BPE pre-tokenizers: the regexes of each supported `tokenizer.ggml.pre`, run with ICU, and the
// UTF-8 handling that goes with them.
//
// The regexes are those of the models' tokenizer.json, written for ICU:
//   * \p{L} and \p{N} follow llama.cpp's Unicode 15.1 tables (see letters() below).
//   * `\s` is spelled \p{White_Space}: ICU's own \s is [\t\n\f\r\p{Z}], which leaves out U+000B
//     and U+0085; llama.cpp (and the original Rust/Python regex engines) count them as space.
//   * (?i:'s|...) is spelled with explicit case classes ('[sS]|...), as llama.cpp does.
//   * The gpt-2 regex gets a final `|\s+` alternative. Without it a lone whitespace character
//     before a non-space (as in "\tx") is left unmatched; llama.cpp makes such a gap its own
//     word, and so does the extra alternative, so the words are the same.
// A lookahead at the end of a piece does not see past it (ICU's default opaque region bounds):
// when regexes run in sequence, `\s+(?!\S)` at the end of a piece takes all of its spaces,
// which is what llama.cpp's splitters do.
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include "llm/tokenizer_impl.h"

namespace rlx::llm {

namespace {

#define RLX_WS "\\p{White_Space}"
#define RLX_NOT_WS "\\P{White_Space}"

// \p{L} and \p{N} as llama.cpp's tables (Unicode 15.1) define them, as ICU set expressions
// usable inside [...]. ICU 72 knows Unicode 15.0, which lacks CJK Extension I
// (U+2EBF0..U+2EE5D, letters in 15.1), so it is added; an ICU on a newer Unicode version would
// know letters and digits assigned after 15.1 that llama.cpp does not, so they are cut off by
// age there. (Checked over all code points against llama.cpp v0.5.0's unicode-data.cpp: with
// this, letters, numbers and White_Space agree everywhere.)
bool icu_newer_than_15_1() {
  UVersionInfo v;
  u_getUnicodeVersion(v);
  return v[0] > 15 || (v[0] == 15 && v[1] > 1);
}
std::string letters() {
  const std::string base = "\\p{L}\\x{2EBF0}-\\x{2EE5D}";
  return icu_newer_than_15_1() ? "[[" + base + "]&&[\\p{Age=15.1}]]" : base;
}
std::string numbers() {
  return icu_newer_than_15_1() ? "[[\\p{N}]&&[\\p{Age=15.1}]]" : "\\p{N}";
}

const char* const kContractions = "'s|'t|'re|'ve|'m|'ll|'d";
const char* const kContractionsAnyCase = "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]";

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::string gpt2_regex() {
  const std::string L = letters(), N = numbers();
  return std::string(kContractions) + "| ?[" + L + "]+| ?[" + N + "]+| ?[^" RLX_WS + L + N +
         "]+|" RLX_WS "+(?!" RLX_NOT_WS ")|" RLX_WS "+";
}

// Llama 3 / Qwen 2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|<digits>|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with <digits> \p{N}{1,3} (Llama 3) or \p{N} (Qwen 2).
std::string llama3_regex(bool three_digits) {
  const std::string L = letters(), N = numbers();
  return std::string(kContractionsAnyCase) + "|[^\\r\\n" + L + N + "]?[" + L + "]+|[" + N +
         "]" + (three_digits ? "{1,3}" : "") + "| ?[^" RLX_WS + L + N +
         "]+[\\r\\n]*|" RLX_WS "*[\\r\\n]+|" RLX_WS "+(?!" RLX_NOT_WS ")|" RLX_WS "+";
}

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
  PreTokenizerSpec spec;
  if (one_of(pre, {"gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "gigachat", "a.x-4.0",
                   "mellum"})) {
    spec.patterns = {gpt2_regex()};
  } else if (one_of(pre, {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral",
                          "midm-2.0", "lfm2"})) {
    spec.patterns = {llama3_regex(true)};
    spec.ignore_merges = true;
    spec.default_add_bos = true;
  } else if (one_of(pre, {"dbrx", "smaug-bpe"})) {
    spec.patterns = {llama3_regex(true)};
  } else if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"})) {
    spec.patterns = {llama3_regex(false)};
  } else if (one_of(pre, {"smollm", "starcoder", "refact", "codeshell", "exaone",
                          "minerva-7b"})) {
    spec.patterns = {"[" + numbers() + "]", gpt2_regex()};
  } else if (pre.empty()) {
    fail(ErrorCategory::Unsupported,
         "tokenizer: gpt2 (byte-level BPE) vocabulary without tokenizer.ggml.pre; llama.cpp "
         "would guess its 'default' regex, rlx does not (supported: gpt-2, llama-bpe, qwen2, "
         "smollm and their aliases)");
  } else {
    fail(ErrorCategory::Unsupported, "tokenizer: unsupported pre-tokenizer '", pre,
         "' (tokenizer.ggml.pre) for a gpt2 (byte-level BPE) vocabulary; supported: gpt-2, "
         "llama-bpe, qwen2, smollm and their aliases");
  }
  return spec;
}

// ---- UTF-8

size_t utf8_len_from_lead(unsigned char c) {
  static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

namespace {

// Decodes one code point at `i` the lenient way llama.cpp does: the lead byte gives the length,
// the following bytes must be continuation bytes; overlong forms and surrogates are accepted.
// Returns false (and consumes one byte) when the sequence is malformed.
bool decode_lenient(std::string_view s, size_t& i, uint32_t& cpt) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(i);
  if (c < 0x80) { cpt = c; i += 1; return true; }
  if ((c & 0x40) == 0) { i += 1; return false; }
  if ((c & 0x20) == 0) {
    if (!cont(i + 1)) { i += 1; return false; }
    cpt = ((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu);
    i += 2;
    return true;
  }
  if ((c & 0x10) == 0) {
    if (!cont(i + 1) || !cont(i + 2)) { i += 1; return false; }
    cpt = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu);
    i += 3;
    return true;
  }
  if ((c & 0x08) == 0) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) { i += 1; return false; }
    cpt = ((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12) | ((b(i + 2) & 0x3Fu) << 6) |
          (b(i + 3) & 0x3Fu);
    i += 4;
    if (cpt > 0x10FFFF) return false;  // llama.cpp cannot re-encode these; we use U+FFFD
    return true;
  }
  i += 1;
  return false;
}

}  // namespace

std::string utf8_sanitize(std::string_view text) {
  // Bytes change only where a sequence is malformed or overlong; copy lazily from the first.
  std::string out;
  bool changed = false;
  size_t i = 0;
  while (i < text.size()) {
    const size_t at = i;
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      if (changed) out += text[at];
      continue;
    }
    uint32_t cpt = 0;
    const bool ok = decode_lenient(text, i, cpt);
    const size_t enc_len = !ok ? 0 : cpt < 0x80 ? 1 : cpt < 0x800 ? 2 : cpt < 0x10000 ? 3 : 4;
    if (!changed && enc_len == i - at) continue;
    if (!changed) {
      out.assign(text.substr(0, at));
      changed = true;
    }
    utf8_append(out, ok ? cpt : 0xFFFDu);
  }
  return changed ? out : std::string(text);
}

// ---- ICU splitting

struct PreTokenizer::State {
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns)
    : st_(std::make_unique<State>()) {
  for (const auto& p : patterns) {
    UErrorCode status = U_ZERO_ERROR;
    UParseError perr;
    std::unique_ptr<icu::RegexPattern> rp(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(p), 0, perr, status));
    if (U_FAILURE(status) || !rp)
      fail(ErrorCategory::Internal, "tokenizer: ICU could not compile pre-tokenizer regex '", p,
           "': ", u_errorName(status), " at offset ", perr.offset);
    st_->patterns.push_back(std::move(rp));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<size_t, size_t>>& words) const {
  if (text.empty()) return;
  // UTF-16 copy of the text, with the byte offset of every UTF-16 unit (+ the end).
  icu::UnicodeString u;
  std::vector<size_t> byte_at;
  byte_at.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    uint32_t cpt = 0;
    if (!decode_lenient(text, i, cpt)) cpt = 0xFFFD;  // cannot happen on sanitized text
    u.append(static_cast<UChar32>(cpt));
    while (byte_at.size() < static_cast<size_t>(u.length())) byte_at.push_back(at);
  }
  byte_at.push_back(text.size());

  std::vector<std::pair<int32_t, int32_t>> cur{{0, u.length()}}, next;
  for (const auto& pat : st_->patterns) {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(pat->matcher(u, status));
    if (U_FAILURE(status) || !m)
      fail(ErrorCategory::Internal, "tokenizer: ICU matcher failed: ", u_errorName(status));
    next.clear();
    for (auto [b, e] : cur) {
      m->region(b, e, status);
      int32_t pos = b;
      while (m->find(status) && U_SUCCESS(status)) {
        const int32_t s = m->start(status), t = m->end(status);
        if (t == s) continue;  // none of our regexes matches empty; be safe anyway
        if (s > pos) next.emplace_back(pos, s);  // unmatched gap: a word of its own
        next.emplace_back(s, t);
        pos = t;
      }
      if (U_FAILURE(status))
        fail(ErrorCategory::Internal, "tokenizer: ICU regex search failed: ",
             u_errorName(status));
      if (pos < e) next.emplace_back(pos, e);
    }
    std::swap(cur, next);
  }
  for (auto [b, e] : cur) words.emplace_back(byte_at[b], byte_at[e]);
}

}  // namespace rlx::llm
