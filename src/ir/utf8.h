// UTF-8 helpers shared by the layers that handle text (the .npy string reader and writer, the
// LLM tokenizers).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

// Appends the UTF-8 encoding of `cpt` (1 to 4 bytes by its magnitude). No validity check:
// callers that need a Unicode scalar value test it with is_unicode_scalar first.
void utf8_append(std::string& out, uint32_t cpt);

// At most U+10FFFF and not a surrogate (U+D800..U+DFFF).
inline bool is_unicode_scalar(uint32_t cpt) { return cpt < 0x110000 && (cpt < 0xD800 || cpt >= 0xE000); }

// The code points of well-formed UTF-8 (no overlong forms, surrogates, values past U+10FFFF
// or truncated sequences) into `out`; false, with `out` unspecified, otherwise.
bool utf8_decode_strict(std::string_view s, std::vector<uint32_t>& out);

}  // namespace rlx
