// Linear-algebra ONNX ops: MatMul, Gemm, Einsum (two operands through matmul, any
// other form as broadcast product + reduce_sum).
#include <algorithm>
#include <map>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

std::vector<Value> lower_matmul(NodeCtx& c) { return {c.op(OpKind::MatMul, {c.in(0), c.in(1)})}; }

std::vector<Value> lower_gemm(NodeCtx& c) {
  Value a = c.in(0), b = c.in(1);
  DType t = c.dtype(0);
  if (c.rank(0) != 2 || c.rank(1) != 2) c.invalid("A and B must be 2-D");
  if (c.attr_int("transA", 0)) a = c.transpose(a, {1, 0});
  if (c.attr_int("transB", 0)) b = c.transpose(b, {1, 0});
  double alpha = double(float(c.attr_float("alpha", 1.0))), beta = double(float(c.attr_float("beta", 1.0)));
  Value y = c.op(OpKind::MatMul, {a, b});
  if (alpha != 1.0) y = c.op(OpKind::Mul, {y, c.scalar(alpha, t)});
  if (c.has(2) && beta != 0.0) {
    Value bias = c.in(2);
    if (beta != 1.0) bias = c.op(OpKind::Mul, {bias, c.scalar(beta, t)});
    y = c.op(OpKind::Add, {y, bias});
  }
  return {y};
}

namespace {

struct Term {
  std::string letters;  // one char per axis after ellipsis expansion
};

// Expands "..." into distinct placeholder letters (uppercase from 'A' backwards is
// fine: ONNX einsum letters are [a-zA-Z]; we use chars >= 128 to never collide).
std::string expand_ellipsis(NodeCtx& c, const std::string& term, int64_t rank, int64_t& ell_rank) {
  auto pos = term.find("...");
  if (pos == std::string::npos) {
    if (int64_t(term.size()) != rank) c.invalid("term '", term, "' does not match rank ", rank);
    return term;
  }
  int64_t named = int64_t(term.size()) - 3;
  int64_t e = rank - named;
  if (e < 0) c.invalid("term '", term, "' has more letters than rank ", rank);
  ell_rank = std::max(ell_rank, e);
  std::string mid;
  for (int64_t i = 0; i < e; ++i) mid += char(0x80 + (ell_rank - e) + i);  // right-aligned
  return term.substr(0, pos) + mid + term.substr(pos + 3);
}

// Takes the diagonal for letters repeated within one operand.
Value dedupe(NodeCtx& c, Value x, std::string& letters) {
  std::string uniq;
  for (char ch : letters)
    if (uniq.find(ch) == std::string::npos) uniq += ch;
  if (uniq.size() == letters.size()) return x;
  auto d = c.vdims(x);
  std::vector<int64_t> od;
  for (char ch : uniq) od.push_back(d[letters.find(ch)]);
  std::vector<int64_t> stride(d.size(), 1);
  for (int i = int(d.size()) - 2; i >= 0; --i) stride[size_t(i)] = stride[size_t(i + 1)] * d[size_t(i + 1)];
  int64_t n = 1;
  for (int64_t v : od) n *= v;
  std::vector<int64_t> idx(c.host_size(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    std::vector<int64_t> coord(uniq.size());
    for (int k = int(uniq.size()) - 1; k >= 0; --k) {
      coord[size_t(k)] = rem % od[size_t(k)];
      rem /= od[size_t(k)];
    }
    for (size_t a = 0; a < letters.size(); ++a) off += coord[uniq.find(letters[a])] * stride[a];
    idx[size_t(i)] = off;
  }
  int64_t total = 1;
  for (int64_t v : d) total *= v;
  Value flat = c.reshape(x, {total});
  letters = uniq;
  return c.op(OpKind::Gather, {flat, c.im.constant(make_i64(od, idx))}, AxisAttrs{0});
}

}  // namespace

std::vector<Value> lower_einsum(NodeCtx& c) {
  std::string eq;
  for (char ch : c.attr_str("equation", ""))
    if (ch != ' ') eq += ch;
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    auto comma = lhs.find(',', s);
    terms.push_back(lhs.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
    if (comma == std::string::npos) break;
    s = comma + 1;
  }
  if (int(terms.size()) != c.num_inputs()) c.invalid("equation has ", terms.size(), " terms for ", c.num_inputs(), " inputs");
  int64_t ell = 0;
  std::vector<Value> xs;
  std::vector<std::string> lets;
  for (size_t i = 0; i < terms.size(); ++i) {
    xs.push_back(c.in(int(i)));
    lets.push_back(expand_ellipsis(c, terms[i], c.rank(int(i)), ell));
  }
  // Re-expand with the final ellipsis rank so every term is right-aligned the same way.
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t dummy = ell;
    lets[i] = expand_ellipsis(c, terms[i], c.rank(int(i)), dummy);
  }
  std::string ell_letters;
  for (int64_t i = 0; i < ell; ++i) ell_letters += char(0x80 + i);
  std::string out;
  if (arrow != std::string::npos) {
    std::string rhs = eq.substr(arrow + 2);
    auto pos = rhs.find("...");
    out = pos == std::string::npos ? rhs : rhs.substr(0, pos) + ell_letters + rhs.substr(pos + 3);
  } else {
    std::map<char, int> count;
    for (const auto& l : lets)
      for (char ch : l) count[ch]++;
    out = ell_letters;
    for (auto [ch, n] : count)
      if (n == 1 && !(ch & 0x80)) out += ch;
  }
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = dedupe(c, xs[i], lets[i]);
  // All letters: output first, then contracted ones.
  std::string all = out;
  for (const auto& l : lets)
    for (char ch : l)
      if (all.find(ch) == std::string::npos) all += ch;
  // Sizes per letter (max over operands so size-1 broadcasts).
  std::map<char, int64_t> size;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto d = c.vdims(xs[i]);
    for (size_t a = 0; a < lets[i].size(); ++a) size[lets[i][a]] = std::max(size[lets[i][a]], d[a]);
  }
  // Each operand: transpose into `all` order and insert size-1 axes for missing letters.
  Value prod;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<int64_t> perm;
    std::string ordered;
    for (char ch : all) {
      auto p = lets[i].find(ch);
      if (p != std::string::npos) {
        perm.push_back(int64_t(p));
        ordered += ch;
      }
    }
    Value v = c.transpose(xs[i], perm);
    auto d = c.vdims(v);
    std::vector<int64_t> shape;
    size_t j = 0;
    for (char ch : all) shape.push_back(ordered.find(ch) != std::string::npos ? d[j++] : 1);
    v = c.reshape(v, shape);
    prod = prod.valid() ? c.op(OpKind::Mul, {prod, v}) : v;
  }
  std::vector<int64_t> red;
  for (size_t a = out.size(); a < all.size(); ++a) red.push_back(int64_t(a));
  if (!red.empty()) prod = c.reduce(OpKind::ReduceSum, prod, red, false);
  std::vector<int64_t> final_shape;
  for (char ch : out) final_shape.push_back(size[ch]);
  return {c.expand(prod, final_shape)};
}

// Det of [..., n, n] by the Leibniz sum over permutations (n <= 5: at most 120 terms).
std::vector<Value> lower_det(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2]) c.invalid("input must be [..., n, n]");
  int64_t n = d.back();
  if (n > 5) c.unsupported("Det of ", n, "x", n, " matrices (only n <= 5 is lowered)");
  std::vector<int64_t> batch(d.begin(), d.end() - 2);
  int64_t r = int64_t(d.size());
  DType t = c.dtype(0);
  if (n == 0) return {c.full(batch, 1, t)};
  std::vector<std::vector<Value>> e(static_cast<size_t>(n), std::vector<Value>(static_cast<size_t>(n)));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) e[size_t(i)][size_t(j)] = c.reshape(c.slice(c.in(0), {i, j}, {i + 1, j + 1}, {r - 2, r - 1}), batch);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
  Value acc;
  do {
    int inversions = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) inversions += perm[size_t(i)] > perm[size_t(j)];
    Value term = e[0][size_t(perm[0])];
    for (int64_t i = 1; i < n; ++i) term = c.op(OpKind::Mul, {term, e[size_t(i)][size_t(perm[size_t(i)])]});
    if (!acc.valid()) acc = inversions % 2 ? c.op(OpKind::Neg, {term}) : term;
    else acc = c.op(inversions % 2 ? OpKind::Sub : OpKind::Add, {acc, term});
  } while (std::next_permutation(perm.begin(), perm.end()));
  return {acc};
}

}  // namespace rlx::onnx
