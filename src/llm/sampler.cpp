// Sampling: repetition penalty, then greedy, or temperature with top-k, top-p and min-p
// filters and a seeded draw (splitmix64 -> uniform in [0, 1) with 53 bits).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "rlx/llm.h"

namespace rlx::llm {

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
  if (o_.temperature == 0) {  // greedy: the first (lowest) id of the maximum
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  }
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
