// rlx::llm::Tokenizer: construction, encode (special-token partitioning around the SPM / BPE
// encoders), decode, accessors, and DecodeStream.
#include "rlx/tokenizer.h"

#include "llm/tokenizer_impl.h"
#include "rlx/gguf.h"

namespace rlx::llm {

namespace {

bool is_space(char c) {  // C isspace in the "C" locale
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

struct Fragment {
  int32_t token;       // >= 0: a special token; -1: raw text [off, off + len)
  size_t off, len;
};

// Cuts the text at special tokens: each token in turn (longest first) splits every raw
// fragment at all of its occurrences. Control / unknown tokens only with parse_special.
std::vector<Fragment> partition(const Tokenizer::Impl& t, std::string_view text,
                                bool parse_special) {
  std::vector<Fragment> cur, next;
  if (text.empty()) return cur;
  cur.push_back({-1, 0, text.size()});
  for (const int32_t id : t.special) {
    const uint32_t a = t.attr[id];
    if (!parse_special && (a & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = t.v.tokens[id];
    next.clear();
    bool any = false;
    for (const Fragment& f : cur) {
      if (f.token >= 0) { next.push_back(f); continue; }
      size_t off = f.off, len = f.len;
      while (len > 0) {
        const size_t m = text.substr(0, off + len).find(tok, off);
        if (m == std::string_view::npos) break;
        any = true;
        size_t left_len = m - off;
        if (a & kAttrLStrip)
          while (left_len > 0 && is_space(text[off + left_len - 1])) --left_len;
        if (left_len > 0) next.push_back({-1, off, left_len});
        next.push_back({id, m, tok.size()});
        size_t r_off = m + tok.size(), r_len = off + len - r_off;
        if (a & kAttrRStrip)
          while (r_len > 0 && is_space(text[r_off])) { ++r_off; --r_len; }
        off = r_off;
        len = r_len;
      }
      if (len > 0) next.push_back({-1, off, len});
    }
    if (any) std::swap(cur, next);
  }
  return cur;
}

std::string escape_spaces(std::string_view s) {  // ' ' -> U+2581
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (char c : s) {
    if (c == ' ') out += "\xE2\x96\x81";
    else out += c;
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(Vocab v) {
  impl_ = detail::guard("tokenizer", [&] {
    auto impl = std::make_shared<Impl>();
    impl->v = std::move(v);
    build_tokenizer(*impl);
    return std::shared_ptr<const Impl>(std::move(impl));
  });
}

Tokenizer Tokenizer::from_gguf(const gguf::File& f) {
  return detail::guard("tokenizer", [&] { return Tokenizer(Vocab::from_gguf(f)); });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return detail::guard("tokenizer encode", [&] {
    const Impl& t = *impl_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && t.v.add_bos) {
      if (t.v.bos < 0)
        fail(ErrorCategory::InvalidArgument, "tokenizer: add_bos is set but there is no BOS");
      out.push_back(t.v.bos);
    }
    const bool spm = t.kind == Impl::Kind::Spm;
    bool after_special = true;  // SPM: a space goes before text that starts or follows a token
    for (const Fragment& f : partition(t, text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      const std::string_view s = text.substr(f.off, f.len);
      if (spm) {
        const bool prefix = t.v.add_space_prefix && after_special;
        t.encode_spm(escape_spaces(prefix ? " " + std::string(s) : std::string(s)), out);
      } else {
        t.encode_bpe(s, out);
      }
      after_special = false;
    }
    if (add_special && t.v.add_eos) {
      if (t.v.eos < 0)
        fail(ErrorCategory::InvalidArgument, "tokenizer: add_eos is set but there is no EOS");
      out.push_back(t.v.eos);
    }
    return out;
  });
}

std::string Tokenizer::piece(int32_t id) const {
  impl_->check_id(id);
  return std::string(impl_->piece_of(id));
}

std::string Tokenizer::decode(std::span<const int32_t> ids, DecodeOptions opt) const {
  const Impl& t = *impl_;
  for (int32_t id : ids) t.check_id(id);
  return detail::guard("tokenizer decode", [&] {
    std::string out;
    bool strip = opt.remove_prefix_space && t.kind == Impl::Kind::Spm && t.v.add_space_prefix;
    for (int32_t id : ids) {
      std::string_view p = t.piece_of(id);
      if (!opt.render_special && (t.attr[id] & (kAttrControl | kAttrUnknown))) p = {};
      if (strip && !p.empty() && p[0] == ' ') p.remove_prefix(1);
      strip = false;
      out += p;
    }
    return out;
  });
}

const Vocab& Tokenizer::vocab() const { return impl_->v; }
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
int32_t Tokenizer::token_id(std::string_view text) const { return impl_->find(text); }
TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.types.empty() ? TokenType::Normal : static_cast<TokenType>(impl_->v.types[id]);
}
bool Tokenizer::is_control(int32_t id) const {
  impl_->check_id(id);
  return impl_->attr[id] & (kAttrControl | kAttrUnknown);
}
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[id] != 0;
}
int32_t Tokenizer::bos() const { return impl_->v.bos; }
int32_t Tokenizer::eos() const { return impl_->v.eos; }
int32_t Tokenizer::eot() const { return impl_->v.eot; }
int32_t Tokenizer::unk() const { return impl_->v.unk; }
int32_t Tokenizer::pad() const { return impl_->v.pad; }
bool Tokenizer::add_bos() const { return impl_->v.add_bos; }
bool Tokenizer::add_eos() const { return impl_->v.add_eos; }

// ---- DecodeStream

namespace {

enum class Seq { Complete, Incomplete, Invalid };

// Strict UTF-8 check of the sequence at s[0..]: Complete (len set), Incomplete (a valid prefix
// that needs more bytes), or Invalid (len = bytes to replace by one U+FFFD).
Seq classify(std::string_view s, size_t& len) {
  const auto c = static_cast<unsigned char>(s[0]);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) { len = 1; return Seq::Complete; }
  if (c >= 0xC2 && c <= 0xDF) need = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else { len = 1; return Seq::Invalid; }
  for (size_t k = 1; k < need; ++k) {
    if (k >= s.size()) return Seq::Incomplete;
    const auto b = static_cast<unsigned char>(s[k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) { len = k; return Seq::Invalid; }
  }
  len = need;
  return Seq::Complete;
}

}  // namespace

DecodeStream::DecodeStream(Tokenizer tok, DecodeOptions opt) : tok_(std::move(tok)), opt_(opt) {}

std::string DecodeStream::push(int32_t id) {
  const int32_t ids[1] = {id};
  DecodeOptions o = opt_;
  o.remove_prefix_space = opt_.remove_prefix_space && first_;
  pending_ += tok_.decode(ids, o);
  first_ = false;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 0;
    const Seq s = classify(std::string_view(pending_).substr(i), len);
    if (s == Seq::Incomplete) break;
    if (s == Seq::Complete) out.append(pending_, i, len);
    else out += "\xEF\xBF\xBD";
    i += len;
  }
  pending_.erase(0, i);
  return out;
}

std::string DecodeStream::flush() {
  std::string out = pending_.empty() ? "" : "\xEF\xBF\xBD";
  pending_.clear();
  return out;
}

}  // namespace rlx::llm
