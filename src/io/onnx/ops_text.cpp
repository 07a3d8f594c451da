// TfIdfVectorizer over integer token ids: every pool n-gram is counted with
// compare-and-reduce over shifted (skip-gram) slices of the input, then scattered to
// its output column by a constant gather; IDF / TFIDF weight the counts.
#include <algorithm>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

std::vector<Value> lower_tfidf_vectorizer(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.empty() || d.size() > 2) c.invalid("input must be 1-D or 2-D");
  if (!is_integer(c.dtype(0))) c.unsupported("TfIdfVectorizer over ", dtype_name(c.dtype(0)), " tokens");
  int64_t min_n = c.attr_int("min_gram_length", 1), max_n = c.attr_int("max_gram_length", 1);
  int64_t max_skip = c.attr_int("max_skip_count", 0);
  std::string mode = c.attr_str("mode", "TF");
  auto counts = c.attr_ints("ngram_counts"), indexes = c.attr_ints("ngram_indexes"), pool = c.attr_ints("pool_int64s");
  auto weights = c.attr_floats("weights");
  if (pool.empty()) c.unsupported("string pools (pool_strings)");
  if (min_n < 1 || max_n < min_n || max_skip < 0 || counts.empty()) c.invalid("bad n-gram attributes");
  bool batched = d.size() == 2;
  int64_t rows = batched ? d[0] : 1, len = d.back();
  Value x = c.reshape(c.cast(c.in(0), DType::I64), {rows, len});
  // Pool n-grams grouped by length: n-grams of length n start at counts[n-1].
  std::vector<Value> per_gram;  // [rows, 1] per pool entry, in pool order
  int64_t entry = 0;
  for (size_t gi = 0; gi < counts.size(); ++gi) {
    int64_t n = int64_t(gi) + 1;
    int64_t begin = counts[gi], end = gi + 1 < counts.size() ? counts[gi + 1] : int64_t(pool.size());
    if (begin < 0 || end < begin || end > int64_t(pool.size()) || (end - begin) % n) c.invalid("bad ngram_counts");
    int64_t g = (end - begin) / n;
    Value cnt = c.full({rows, g}, 0, DType::F32);
    if (n >= min_n && n <= max_n && g > 0) {
      for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); ++skip) {
        int64_t span = (n - 1) * (skip + 1);
        if (span >= len) break;
        int64_t valid = len - span;
        Value hit;
        for (int64_t j = 0; j < n; ++j) {
          std::vector<int64_t> vals(c.host_size(g));
          for (int64_t k = 0; k < g; ++k) vals[size_t(k)] = pool[size_t(begin + k * n + j)];
          Value s = c.reshape(c.slice(x, {j * (skip + 1)}, {j * (skip + 1) + valid}, {1}), {rows, valid, 1});
          Value eq = c.op(OpKind::Equal, {s, c.im.constant(make_i64({1, 1, g}, vals))});
          hit = hit.valid() ? c.op(OpKind::And, {hit, eq}) : eq;
        }
        cnt = c.op(OpKind::Add, {cnt, c.reduce(OpKind::ReduceSum, c.cast(hit, DType::F32), {1}, false)});
      }
    }
    for (int64_t k = 0; k < g; ++k) per_gram.push_back(c.slice(cnt, {k}, {k + 1}, {1}));
    entry += g;
  }
  if (int64_t(indexes.size()) != entry) c.invalid("ngram_indexes must have one entry per pool n-gram");
  int64_t width = 0;
  for (int64_t i : indexes) width = std::max(width, i + 1);
  // Output column o takes the pool entry whose index is o (0 when none).
  std::vector<Value> cols;
  for (int64_t o = 0; o < width; ++o) {
    auto it = std::find(indexes.begin(), indexes.end(), o);
    if (it == indexes.end()) {
      cols.push_back(c.full({rows, 1}, 0, DType::F32));
      continue;
    }
    size_t k = size_t(it - indexes.begin());
    Value v = per_gram[k];
    if (mode == "IDF" || mode == "TFIDF") {
      double w = k < weights.size() ? double(weights[k]) : 1.0;
      if (mode == "IDF") v = c.op(OpKind::Where, {c.op(OpKind::Greater, {v, c.scalar(0, DType::F32)}), c.scalar(w, DType::F32), c.scalar(0, DType::F32)});
      else v = c.op(OpKind::Mul, {v, c.scalar(w, DType::F32)});
    } else if (mode != "TF") {
      c.invalid("unknown mode '", mode, "'");
    }
    cols.push_back(v);
  }
  Value y = c.concat(cols, 1);
  if (!batched) y = c.reshape(y, {width});
  return {c.op(OpKind::Identity, {y})};
}

}  // namespace rlx::onnx
