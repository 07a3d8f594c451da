// A small deterministic input mutator for the fuzz smoke test: same seed, same
// sequence of inputs on every machine (splitmix64, no std::*_distribution, whose
// results differ between standard libraries). Each mutate() applies 1-3 steps: bit
// flips, byte sets to boundary values, little-endian integer overwrites, truncations,
// splices with another corpus entry, chunk erase/duplicate, digit edits and dictionary
// token inserts (1 step in half of the inputs). Results never exceed max_size bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace rlx::fuzz {

class Mutator {
 public:
  using Bytes = std::vector<uint8_t>;

  Mutator(uint64_t seed, std::vector<std::string> tokens) : state_(seed), tokens_(std::move(tokens)) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n) for n > 0; 0 when n == 0.
  size_t below(size_t n) { return n == 0 ? 0 : size_t(next() % n); }

  Bytes mutate(const Bytes& in, const std::vector<Bytes>& corpus, size_t max_size) {
    Bytes b = in;
    size_t roll = below(10);  // 1 step half of the time: most inputs stay near valid
    int steps = roll < 5 ? 1 : roll < 8 ? 2 : 3;
    for (int s = 0; s < steps; ++s) step(b, corpus);
    if (b.size() > max_size) b.resize(max_size);
    return b;
  }

 private:
  void step(Bytes& b, const std::vector<Bytes>& corpus) {
    switch (below(11)) {
      case 0:  // flip 1-4 bits
        for (size_t i = 0, n = 1 + below(4); i < n && !b.empty(); ++i) b[below(b.size())] ^= uint8_t(1u << below(8));
        break;
      case 1: {  // a byte to a boundary value
        static const uint8_t kVals[] = {0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, 0x10, 0x40};
        if (!b.empty()) b[below(b.size())] = below(4) == 0 ? uint8_t(next()) : kVals[below(sizeof(kVals))];
        break;
      }
      case 2: {  // a little-endian integer to a boundary value
        static const uint64_t kInts[] = {0, 1, ~0ull, 0x7fffffffull, 0x80000000ull, 0xffffffffull,
                                         0x7fffffffffffffffull, 0x8000000000000000ull, 1ull << 40, 0x7ff8000000000000ull};
        size_t width = size_t(1) << (1 + below(3));  // 2, 4 or 8 bytes
        if (b.size() >= width) {
          uint64_t v = kInts[below(sizeof(kInts) / sizeof(kInts[0]))];
          std::memcpy(b.data() + below(b.size() - width + 1), &v, width);
        }
        break;
      }
      case 3:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 4:
      case 5: {  // splice: a prefix of this input + a suffix of another corpus entry
        const Bytes& o = corpus[below(corpus.size())];
        size_t cut = below(b.size() + 1), from = below(o.size() + 1);
        b.resize(cut);
        b.insert(b.end(), o.begin() + std::ptrdiff_t(from), o.end());
        break;
      }
      case 6: {  // erase a chunk
        if (b.empty()) break;
        size_t at = below(b.size()), n = 1 + below(std::min<size_t>(b.size() - at, 16));
        b.erase(b.begin() + std::ptrdiff_t(at), b.begin() + std::ptrdiff_t(at + n));
        break;
      }
      case 7: {  // duplicate a chunk somewhere else
        if (b.empty()) break;
        size_t at = below(b.size()), n = 1 + below(std::min<size_t>(b.size() - at, 32));
        Bytes chunk(b.begin() + std::ptrdiff_t(at), b.begin() + std::ptrdiff_t(at + n));
        b.insert(b.begin() + std::ptrdiff_t(below(b.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
      case 8: {  // edit a decimal digit run (text headers: dims, labels, attributes)
        std::vector<size_t> digits;
        for (size_t i = 0; i < b.size(); ++i)
          if (b[i] >= '0' && b[i] <= '9') digits.push_back(i);
        if (digits.empty()) break;
        size_t at = digits[below(digits.size())];
        static const char* kNums[] = {"0", "1", "-1", "65535", "2147483648", "9223372036854775807",
                                      "99999999999999999999", "00"};
        if (below(2) == 0) {
          b[at] = uint8_t('0' + below(10));
        } else {
          const char* s = kNums[below(sizeof(kNums) / sizeof(kNums[0]))];
          b.insert(b.begin() + std::ptrdiff_t(at), s, s + std::strlen(s));
        }
        break;
      }
      default: {  // insert or overwrite with a dictionary token
        if (tokens_.empty()) break;
        const std::string& t = tokens_[below(tokens_.size())];
        size_t at = below(b.size() + 1);
        if (below(2) == 0 || at + t.size() > b.size()) b.insert(b.begin() + std::ptrdiff_t(at), t.begin(), t.end());
        else std::memcpy(b.data() + at, t.data(), t.size());
        break;
      }
    }
  }

  uint64_t state_;
  std::vector<std::string> tokens_;
};

}  // namespace rlx::fuzz
