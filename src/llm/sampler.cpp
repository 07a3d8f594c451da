// Sampling: repetition penalty, then greedy, or temperature with top-k, top-p and min-p
// filters and a seeded draw (splitmix64 -> uniform in [0, 1) with 53 bits).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>

#include "rlx/llm.h"

namespace rlx::llm {

int32_t greedy_token(std::span<const float> l) {
  // The maximum in four 4-float vectors (GCC vector extensions: compare and select, at any ISA
  // level; NaN never replaces a lane's value) and whether any NaN was seen, then the first
  // index holding the answer (16 values compared at a time). std::max_element walked a
  // 32,000-long row at a compare a value, ~18 us here and ~43 us on a GPU machine's host.
  using F4 = float __attribute__((vector_size(16)));
  using I4 = int32_t __attribute__((vector_size(16)));
  const size_t n = l.size();
  const float* p = l.data();
  auto load = [p](size_t i) {
    F4 v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  };
  const F4 lo = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  F4 m0 = lo, m1 = lo, m2 = lo, m3 = lo;
  I4 nan = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F4 a = load(i), b = load(i + 4), c = load(i + 8), d = load(i + 12);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
    m2 = c > m2 ? c : m2;
    m3 = d > m3 ? d : m3;
    nan |= (a != a) | (b != b) | (c != c) | (d != d);
  }
  float m = -INFINITY;
  bool any_nan = false;
  for (int j = 0; j < 4; ++j) {
    for (float v : {m0[j], m1[j], m2[j], m3[j]}) m = v > m ? v : m;
    any_nan |= nan[j] != 0;
  }
  for (; i < n; ++i) {
    m = p[i] > m ? p[i] : m;
    any_nan |= p[i] != p[i];
  }
  size_t k = 0;
  if (!any_nan) {  // whole blocks of 16 without the maximum are skipped at once
    const F4 mm = {m, m, m, m};
    for (; k + 16 <= n; k += 16) {
      const I4 hit = (load(k) == mm) | (load(k + 4) == mm) | (load(k + 8) == mm) | (load(k + 12) == mm);
      if (hit[0] | hit[1] | hit[2] | hit[3]) break;
    }
  }
  for (; k < n; ++k)
    if (any_nan ? p[k] != p[k] : p[k] == m) return static_cast<int32_t>(k);
  return 0;  // empty
}

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

Sampler::Sampler(SamplerOptions o) : o_(o), state_(o.seed) {
  if (!(o.temperature >= 0) || !(o.top_p > 0 && o.top_p <= 1) || !(o.min_p >= 0 && o.min_p <= 1) ||
      !(o.repeat_penalty > 0) || o.top_k < 0 || o.repeat_last_n < 0)
    fail(ErrorCategory::InvalidArgument, "sampler: temperature must be >= 0, top-p in (0, 1], min-p in [0, 1], ",
         "repeat penalty > 0, top-k and repeat-last-n >= 0");
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (n == 0) fail(ErrorCategory::InvalidArgument, "sampler: empty logits");
  std::vector<float> l(logits.begin(), logits.end());
  if (o_.repeat_penalty != 1.0f && o_.repeat_last_n > 0) {
    std::unordered_set<int32_t> seen;
    const size_t from = history.size() > size_t(o_.repeat_last_n) ? history.size() - size_t(o_.repeat_last_n) : 0;
    for (size_t i = from; i < history.size(); ++i)
      if (history[i] >= 0 && history[i] < n) seen.insert(history[i]);
    for (int32_t id : seen) {  // llama.cpp's convention: shrink positive logits, grow negative ones
      float& v = l[static_cast<size_t>(id)];
      v = v > 0 ? v / o_.repeat_penalty : v * o_.repeat_penalty;
    }
  }
  if (o_.temperature == 0) return greedy_token(l);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b);
  };
  size_t k = o_.top_k > 0 ? std::min<size_t>(size_t(o_.top_k), ids.size()) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), by_logit);
  ids.resize(k);
  // Softmax over the survivors at the temperature (in double: stable and order-free).
  std::vector<double> p(k);
  const double mx = l[size_t(ids[0])];
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp((l[size_t(ids[i])] - mx) / o_.temperature);
  for (double& v : p) v /= sum;
  if (o_.min_p > 0) {  // drop tokens below min_p times the most likely one
    size_t keep = 1;
    while (keep < k && p[keep] >= o_.min_p * p[0]) ++keep;
    k = keep;
  }
  if (o_.top_p < 1) {  // smallest prefix whose mass reaches top_p
    double acc = 0;
    size_t keep = 0;
    while (keep < k) {
      acc += p[keep++];
      if (acc >= o_.top_p) break;
    }
    k = keep;
  }
  double total = 0;
  for (size_t i = 0; i < k; ++i) total += p[i];
  const double u = double(splitmix(state_) >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (size_t i = 0; i < k; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[k - 1];
}

}  // namespace rlx::llm
