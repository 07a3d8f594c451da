// Byte-level BPE with merge ranks (tokenizer.ggml.model = "gpt2").
//
// The pre-tokenizer cuts the text into words; each word's bytes are written with GPT-2's
// byte -> unicode table and start as one symbol per byte. Repeatedly, the adjacent pair with
// the lowest merge rank is merged (ties: the leftmost pair). For the llama-bpe family a word
// that is itself a token is emitted whole without merging ("ignore_merges"). A final symbol
// that is not a token (only possible with an incomplete vocabulary) is written as the tokens of
// its single bytes, skipping bytes that have none, as llama.cpp does.
#include <algorithm>

#include "llm/tokenizer_impl.h"

namespace rlx::llm {

namespace {

struct Symbol {
  int32_t prev, next;
  size_t off, len;  // bytes of the encoded word; len 0 once merged into the left neighbour
  int32_t id;       // token of this text, -1 if none
};

struct Candidate {
  int32_t rank;
  int32_t left, right;
  size_t len;
};

struct Greater {  // heap order: the top is the lowest rank, then the leftmost
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

}  // namespace

void Tokenizer::Impl::encode_bpe(std::string_view raw, std::vector<int32_t>& out) const {
  const std::string text = utf8_sanitize(raw);
  std::vector<std::pair<size_t, size_t>> words;
  pretok->split(text, words);

  // One id per GPT-2 byte character (the initial symbols).
  std::array<int32_t, 256> byte_id;
  for (int b = 0; b < 256; ++b) byte_id[b] = find(byte_to_cp[b]);

  std::string word, scratch;
  std::vector<Symbol> sym;
  std::vector<Candidate> heap;  // binary heap, top = lowest rank, then leftmost
  for (auto [wb, we] : words) {
    word.clear();
    for (size_t k = wb; k < we; ++k) word += byte_to_cp[static_cast<unsigned char>(text[k])];
    if (ignore_merges) {
      if (const int32_t id = find(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    sym.clear();
    size_t off = 0;
    for (size_t k = wb; k < we; ++k) {
      const auto b = static_cast<unsigned char>(text[k]);
      const size_t len = byte_to_cp[b].size();
      const auto i = static_cast<int32_t>(sym.size());
      sym.push_back({i - 1, k + 1 == we ? -1 : i + 1, off, len, byte_id[b]});
      off += len;
    }
    const std::string_view w(word);

    heap.clear();
    const auto consider = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0) return;
      const Symbol& a = sym[l];
      const Symbol& b = sym[r];
      const int32_t rank = bpe_rank(a.id, w.substr(a.off, a.len), b.id, w.substr(b.off, b.len),
                                    scratch);
      if (rank < 0) return;
      heap.push_back({rank, l, r, a.len + b.len});
      std::push_heap(heap.begin(), heap.end(), Greater{});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), Greater{});
      const Candidate c = heap.back();
      heap.pop_back();
      Symbol& l = sym[c.left];
      Symbol& r = sym[c.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;  // stale
      l.len += r.len;
      r.len = 0;
      l.id = find(w.substr(l.off, l.len));
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      consider(l.prev, c.left);
      consider(c.left, l.next);
    }

    for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      if (sym[i].id >= 0) {
        out.push_back(sym[i].id);
        continue;
      }
      for (char ch : w.substr(sym[i].off, sym[i].len))
        if (const int32_t id = find(std::string_view(&ch, 1)); id >= 0) out.push_back(id);
    }
  }
}

}  // namespace rlx::llm
