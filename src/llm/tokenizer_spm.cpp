// SentencePiece-style BPE over token scores (tokenizer.ggml.model = "llama").
//
// The text (already space-prefixed and with spaces written as U+2581) starts as one symbol per
// UTF-8 character. Repeatedly, the adjacent pair whose concatenation is a token with the
// highest score is merged (ties: the leftmost pair). Symbols that are not tokens at the end
// (single characters missing from the vocabulary) are written as byte tokens.
#include <queue>

#include "llm/tokenizer_impl.h"

namespace rlx::llm {

namespace {

struct Symbol {
  int32_t prev, next;
  size_t off, len;  // bytes of the text; len 0 once merged into the left neighbour
};

struct Candidate {
  float score;
  int32_t left, right;
  size_t len;  // bytes of left + right when the candidate was made (stale if they changed)
};

struct Lower {  // priority_queue puts the "largest" on top: highest score, then leftmost
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len =
        std::min(utf8_len_from_lead(static_cast<unsigned char>(text[off])), text.size() - off);
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({i - 1, off + len == text.size() ? -1 : i + 1, off, len});
    off += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, Lower> queue;
  const auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const size_t len = sym[l].len + sym[r].len;
    const int32_t id = find(text.substr(sym[l].off, len));
    if (id < 0) return;
    queue.push({v.scores.empty() ? 0.0f : v.scores[id], l, r, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view s = text.substr(sym[i].off, sym[i].len);
    if (const int32_t id = find(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char b : s) {
      int32_t id = byte_tok[b];
      if (id < 0) id = v.unk;
      if (id < 0)
        fail(ErrorCategory::InvalidArgument, "tokenizer: byte 0x", std::hex,
             static_cast<int>(b), " has no token (no <0xNN> byte token and no unknown token)");
      out.push_back(id);
    }
  }
}

}  // namespace rlx::llm
