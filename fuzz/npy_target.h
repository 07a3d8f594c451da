// Fuzz target body for the .npy reader (rlx::runtime::parse_npy_any). See fuzz_common.h for
// the contract. Per input: parse; a tensor that parses must have bytes matching its dims
// and dtype, and must encode and parse back to the same dtype, dims and bytes; strings
// must number as many as the dims say and encode and parse back to the same strings.
#pragma once
#include <span>
#include <string>

#include "fuzz_common.h"
#include "runtime/npy.h"

namespace rlx::fuzz {

inline constexpr size_t kNpyMaxInput = 1 << 20;

inline bool npy_one_input(const uint8_t* data, size_t size) {
  if (size > kNpyMaxInput) return false;
  return guard([&] {
    runtime::NpyArray arr = runtime::parse_npy_any(std::span<const uint8_t>(data, size), "fuzz.npy");
    if (arr.is_strings) {
      const runtime::NpyStrings& s = arr.text;
      int64_t count = 1;
      for (int64_t d : s.dims) count = (d != 0 && count > kSaturated / d) ? kSaturated : count * d;
      if (count >= kSaturated || size_t(count) != s.strings.size())
        throw Finding("parse_npy_any returned " + std::to_string(s.strings.size()) + " strings for dims of " +
                      std::to_string(count) + " elements");
      // '|S' bytes need not be UTF-8, and encode_npy_strings refuses those with an Error: such
      // strings are not round-tripped. What encodes must parse back to the same strings.
      std::vector<uint8_t> encoded;
      try {
        encoded = runtime::encode_npy_strings(s);
      } catch (const Error&) {
        return;
      }
      runtime::NpyArray back;
      try {
        back = runtime::parse_npy_any(encoded, "fuzz.npy (encoded)");
      } catch (const Error& e) {
        throw Finding(std::string("encoded strings do not parse back: ") + e.what());
      }
      if (!back.is_strings || back.text.dims != s.dims || back.text.strings != s.strings)
        throw Finding("npy string round trip changed the strings");
      return;
    }
    TypedTensor& t = arr.tensor;
    int64_t n = 1;
    for (int64_t d : t.dims) {
      if (d < 0) throw Finding("parse_npy returned a negative dim");
      n = (d != 0 && n > kSaturated / d) ? kSaturated : n * d;
    }
    if (n >= kSaturated || size_t(n) * dtype_size(t.dtype) != t.bytes.size())
      throw Finding("parse_npy returned " + std::to_string(t.bytes.size()) + " bytes for " + std::to_string(n) +
                    " elements of " + std::string(dtype_name(t.dtype)));
    std::vector<uint8_t> encoded;
    TypedTensor back;
    try {
      encoded = runtime::encode_npy(t);
      back = runtime::parse_npy(encoded, "fuzz.npy (encoded)");
    } catch (const Error& e) {
      throw Finding(std::string("a parsed tensor does not encode and parse back: ") + e.what());
    }
    if (back.dtype != t.dtype || back.dims != t.dims || back.bytes != t.bytes)
      throw Finding("npy round trip changed the tensor (" + std::string(dtype_name(t.dtype)) + ")");
  });
}

}  // namespace rlx::fuzz
