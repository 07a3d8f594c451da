#include "ir/ops/infer_util.h"

#include <sstream>

namespace rlx::ir::detail {

std::string dim_str(Dim d) {
  std::ostringstream os;
  if (d.is_static()) os << d.raw();
  else os << 's' << d.symbol_id();
  return os.str();
}

std::string dims_str(const std::vector<Dim>& dims) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "," : "") << dim_str(dims[i]);
  os << ']';
  return os.str();
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

int norm_axis(const InferCtx& ctx, int64_t axis, int rank, const char* what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) ctx.error(what, " ", axis, " is out of range for rank ", rank);
  return int(a);
}

std::vector<int> norm_axes(const InferCtx& ctx, const std::vector<int64_t>& axes, int rank, const char* what) {
  std::vector<int> out;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : axes) {
    int n = norm_axis(ctx, a, rank, what);
    if (seen[size_t(n)]) ctx.error(what, " ", ints_str(axes), " repeats axis ", n);
    seen[size_t(n)] = true;
    out.push_back(n);
  }
  return out;
}

std::vector<Dim> broadcast(const InferCtx& ctx, const std::vector<Dim>& a, const std::vector<Dim>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<Dim> out(n);
  for (size_t i = 0; i < n; ++i) {
    Dim da = i < n - a.size() ? Dim(1) : a[i - (n - a.size())];
    Dim db = i < n - b.size() ? Dim(1) : b[i - (n - b.size())];
    if (da == db) out[i] = da;
    else if (da == Dim(1)) out[i] = db;
    else if (db == Dim(1)) out[i] = da;
    else if (da.is_symbolic() || db.is_symbolic())
      ctx.error("cannot broadcast ", dims_str(a), " with ", dims_str(b), ": dims ", dim_str(da), " and ",
                dim_str(db), " may differ; bind the symbol first");
    else
      ctx.error("cannot broadcast ", dims_str(a), " with ", dims_str(b), " (dims ", dim_str(da), " and ",
                dim_str(db), ")");
  }
  return out;
}

bool broadcasts_to(const std::vector<Dim>& small, const std::vector<Dim>& target) {
  if (small.size() > target.size()) return false;
  size_t off = target.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i)
    if (!(small[i] == target[i + off]) && !(small[i] == Dim(1))) return false;
  return true;
}

void require_float(const InferCtx& ctx, const Shape& s, const char* what) {
  if (!is_float(s.dtype())) ctx.error(what, " must be a float type (f32/f16/bf16/f64), got ", s.str());
}

void require_not_bool(const InferCtx& ctx, const Shape& s, const char* what) {
  if (s.dtype() == DType::Bool) ctx.error(what, " must be numeric, got ", s.str(), "; cast it first");
}

void require_real(const InferCtx& ctx, const Shape& s, const char* what) {
  if (is_complex(s.dtype())) ctx.error(what, " must be a real (non-complex) type, got ", s.str());
}

void require_index(const InferCtx& ctx, const Shape& s, const char* what) {
  if (s.dtype() != DType::I32 && s.dtype() != DType::I64)
    ctx.error(what, " must be i32 or i64, got ", s.str());
}

void require_same_dtype(const InferCtx& ctx, const Shape& a, const char* what_a, const Shape& b,
                        const char* what_b) {
  if (a.dtype() != b.dtype())
    ctx.error(what_a, " (", a.str(), ") and ", what_b, " (", b.str(), ") must have the same dtype");
}

void require_rank(const InferCtx& ctx, const Shape& s, int rank, const char* what) {
  if (s.rank() != rank) ctx.error(what, " must have rank ", rank, ", got ", s.str());
}

void check_float_only(const InferCtx& ctx) {
  if (has_trait(ctx.node.kind, kFloatOnly)) require_float(ctx, ctx.input(0), "input 0");
}

int64_t static_dim(const InferCtx& ctx, Dim d, const char* what) {
  if (d.is_symbolic())
    ctx.error(what, " is symbolic (", dim_str(d), ") and this rule needs its size; bind the symbol first");
  return d.raw();
}

void require_len(const InferCtx& ctx, const std::vector<int64_t>& v, size_t n, const char* what) {
  if (v.size() != n) ctx.error(what, " must have ", n, " entries, got ", ints_str(v));
}

void require_same_dim(const InferCtx& ctx, Dim a, const char* what_a, Dim b, const char* what_b) {
  if (!(a == b)) ctx.error(what_a, " (", dim_str(a), ") must equal ", what_b, " (", dim_str(b), ")");
}

}  // namespace rlx::ir::detail
