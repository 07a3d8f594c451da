// LLM tokenizers loaded from GGUF metadata (the `tokenizer.ggml.*` keys).
//
// Two tokenizer families are supported, chosen by `tokenizer.ggml.model`:
//   "llama"  SentencePiece BPE over token scores (Llama 1/2, Mistral, Phi-3, TinyLlama, ...):
//            spaces become U+2581 ("▁"), one space is put in front of the text when
//            add_space_prefix is on (the default), pieces are merged highest score first, and
//            characters that no token covers fall back to byte tokens "<0xNN>".
//   "gpt2"   byte-level BPE with merge ranks (GPT-2, Llama 3, Qwen 2, ...): the text is split
//            by a pre-tokenizer regex chosen by `tokenizer.ggml.pre`, each piece is mapped byte
//            by byte through GPT-2's byte<->unicode table, and merged lowest rank first.
//            Supported `pre` values (and the llama.cpp aliases sharing the same regex):
//              gpt-2     (phi-2, mpt, olmo, jais, exaone4, gigachat, a.x-4.0, mellum)
//              llama-bpe (llama3, llama-v3, falcon3, falcon-h1, pixtral, midm-2.0, lfm2;
//                         and dbrx, smaug-bpe: same regex, merges not bypassed)
//              qwen2     (deepseek-r1-qwen, megrez, stablelm2)
//              smollm    (starcoder, refact, codeshell, exaone, minerva-7b: digits split one
//                         by one, then the gpt-2 regex)
// Any other model or pre-tokenizer name is Error(Unsupported) naming the value; nothing falls
// back silently to a different tokenizer. For "llama" the pre name must be empty or "default".
//
// encode() reproduces llama.cpp v0.5.0's llama_tokenize(): the ids are the same on llama.cpp's
// own test vectors for llama-spm, phi-3, llama-bpe (Llama 3), qwen2 and gpt-2.
//   * Tokens of type USER_DEFINED found in the text are always emitted as one token; with
//     parse_special, CONTROL and UNKNOWN tokens (e.g. "<s>", "<|im_end|>") are too. The text is
//     cut at special tokens longest token first (each token splits every remaining text
//     fragment at all its occurrences, left to right), as llama.cpp does.
//   * add_special puts BOS in front when the vocab's add_bos is on and EOS at the end when
//     add_eos is on.
//   * SPM: a space is put in front of each text fragment that starts the input or follows a
//     special token (when add_space_prefix); the empty text gives no tokens.
//   * Invalid UTF-8: SPM keeps the bytes (they become byte tokens); BPE reads each byte that does
//     not start a well-formed sequence as U+FFFD, like llama.cpp.
//
// Thread safety: a Tokenizer is immutable after construction; encode/decode/piece may be called
// from any number of threads at once. Copies share the same tables (cheap to copy).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/error.h"

namespace rlx::gguf {
class File;
}

namespace rlx::llm {

// GGUF token types (tokenizer.ggml.token_type), numbered as in the file format.
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// The tokenizer description as stored in GGUF. Build one by hand (tests, converters) or with
// from_gguf(). ids are -1 when absent.
struct Vocab {
  std::string model;                // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;                  // tokenizer.ggml.pre (see the list above)
  std::string name;                 // general.name (llama.cpp keys one quirk on it: Phi-3)
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens; id = index
  std::vector<float> scores;        // tokenizer.ggml.scores (SPM merge priority); may be empty
  std::vector<int32_t> types;       // tokenizer.ggml.token_type (TokenType values); may be empty
  std::vector<std::string> merges;  // tokenizer.ggml.merges "left right", rank = index (gpt2)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1, sep = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;     // SPM only; BPE never adds a prefix

  // Reads the tokenizer keys of `f` with llama.cpp's defaults: for "llama", bos 1, eos 2, unk 0,
  // add_bos true, add_space_prefix true; for "gpt2", add_bos true only for the llama-bpe family.
  // Keys present in the file override them (ids outside the vocabulary are ignored).
  // Error(Parse) if tokens are missing or arrays are shorter than the token list,
  // Error(Unsupported) for an unknown model or pre-tokenizer.
  static Vocab from_gguf(const gguf::File& f);
};

struct DecodeOptions {
  // Control and unknown tokens ("<s>", "<|eot_id|>") give their text; false: nothing.
  bool render_special = true;
  // SPM with add_space_prefix: drop one leading space of the first piece (the space encode()
  // added), unless the ids start with BOS. With it, decode(encode(t)) == t for valid UTF-8 t.
  bool remove_prefix_space = false;
};

class Tokenizer {
 public:
  // Validates the vocab (Error(Unsupported) for unknown model/pre, Error(InvalidArgument) for
  // inconsistent arrays or special ids) and builds the lookup tables and the pre-tokenizer.
  explicit Tokenizer(Vocab v);
  static Tokenizer from_gguf(const gguf::File& f);

  // Text (UTF-8 bytes) -> token ids; see the header comment for the exact behaviour.
  std::vector<int32_t> encode(std::string_view text, bool add_special = false,
                              bool parse_special = false) const;

  // The bytes a token stands for: byte tokens give their byte, "▁" gives a space (SPM),
  // byte-level BPE text is mapped back to raw bytes, control / user-defined tokens give their
  // text. A piece may be part of a multi-byte UTF-8 character. Error(InvalidArgument) for an
  // id outside [0, n_vocab).
  std::string piece(int32_t id) const;
  // Concatenated pieces. Error(InvalidArgument) naming the first id out of range.
  // Round trip: for BPE vocabs decode(encode(t)) == t for every valid UTF-8 t. For SPM it is
  // " " + t when t is non-empty (the added prefix space); with remove_prefix_space it is t.
  std::string decode(std::span<const int32_t> ids, DecodeOptions opt = {}) const;

  // The vocab as used: empty token texts renamed "[EMPTY_<id>]" and eot / eom filled in from
  // the token texts when the file names none, as llama.cpp does.
  const Vocab& vocab() const;
  int32_t n_vocab() const;
  int32_t token_id(std::string_view text) const;  // exact token text -> id, -1 if none
  TokenType token_type(int32_t id) const;
  bool is_control(int32_t id) const;  // control or unknown: not rendered as text by default
  // End of generation: eos, eot, eom and the tokens llama.cpp recognises by text
  // ("<|eot_id|>", "<|im_end|>", "<|endoftext|>", "</s>", ...).
  bool is_eog(int32_t id) const;
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

// Streaming detokenizer for generation: push() returns the text that became complete, valid
// UTF-8 with this token. Bytes of a multi-byte character split across tokens are held until the
// character is complete; bytes that can never form a valid character are returned as U+FFFD.
// So the concatenation of all push() results plus flush() is always valid UTF-8.
class DecodeStream {
 public:
  explicit DecodeStream(Tokenizer tok, DecodeOptions opt = {});
  std::string push(int32_t id);  // Error(InvalidArgument) for an id out of range
  // Returns what is still held (an incomplete character, as U+FFFD) and resets.
  std::string flush();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tok_;
  DecodeOptions opt_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace rlx::llm
