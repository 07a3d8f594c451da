#include "rlx/shape.h"

#include <sstream>

#include "rlx/error.h"

namespace rlx {

int64_t Dim::value() const {
  if (raw_ < 0) fail(ErrorCategory::Shape, "dim is symbolic (s", symbol_id(), "); bind it before use");
  return raw_;
}

int Dim::symbol_id() const {
  if (raw_ >= 0) fail(ErrorCategory::Internal, "dim ", raw_, " is static, not a symbol");
  return int(-raw_ - 1);
}

namespace {
std::vector<Dim> to_dims(const std::vector<int64_t>& v) {
  std::vector<Dim> d;
  d.reserve(v.size());
  for (int64_t x : v) {
    if (x < 0) fail(ErrorCategory::Shape, "negative dim ", x, " in shape");
    d.emplace_back(x);
  }
  return d;
}

// Enforces the class invariant (see shape.h): static dims, zeros as 1, times the element
// size stay within kMaxTensorBytes.
void check_fits(const std::vector<Dim>& dims, DType dtype) {
  const int64_t limit = kMaxTensorBytes / int64_t(dtype_size(dtype));
  int64_t n = 1;
  for (Dim d : dims) {
    if (d.is_symbolic() || d.raw() <= 1) continue;
    if (n > limit / d.raw()) {
      std::string text;
      for (Dim e : dims) {
        if (!text.empty()) text += ',';
        if (e.is_symbolic()) text += 's';
        text += std::to_string(e.is_static() ? e.raw() : int64_t(e.symbol_id()));
      }
      fail(ErrorCategory::Shape, "shape ", dtype_name(dtype), "[", text, "] is too large: its size exceeds 2^62 bytes");
    }
    n *= d.raw();
  }
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims, DType dtype)
    : dims_(to_dims(std::vector<int64_t>(dims))), dtype_(dtype) {
  check_fits(dims_, dtype_);
}
Shape::Shape(std::vector<int64_t> dims, DType dtype) : dims_(to_dims(dims)), dtype_(dtype) {
  check_fits(dims_, dtype_);
}
Shape::Shape(std::vector<Dim> dims, DType dtype) : dims_(std::move(dims)), dtype_(dtype) {
  check_fits(dims_, dtype_);
}

Dim Shape::dim(int axis) const { return dims_[size_t(normalize_axis(axis, rank(), "Shape::dim"))]; }

bool Shape::is_static() const {
  for (Dim d : dims_)
    if (d.is_symbolic()) return false;
  return true;
}

std::vector<int64_t> Shape::static_dims() const {
  std::vector<int64_t> v;
  v.reserve(dims_.size());
  for (Dim d : dims_) {
    if (d.is_symbolic()) fail(ErrorCategory::Shape, "shape ", str(), " has symbolic dims; bind them first");
    v.push_back(d.value());
  }
  return v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : static_dims()) n *= d;
  return n;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) os << ",";
    if (dims_[i].is_symbolic()) os << "s" << dims_[i].symbol_id();
    else os << dims_[i].value();
  }
  os << "]";
  return os.str();
}

int normalize_axis(int64_t axis, int rank, const char* what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    fail(ErrorCategory::Shape, what, ": axis ", axis, " out of range for rank ", rank);
  return int(a);
}

std::vector<Dim> broadcast_dims(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<Dim> out(n);
  for (size_t i = 0; i < n; ++i) {
    Dim da = i < n - a.size() ? Dim(1) : a[i - (n - a.size())];
    Dim db = i < n - b.size() ? Dim(1) : b[i - (n - b.size())];
    if (da == db) out[i] = da;
    else if (da.is_static() && da.value() == 1) out[i] = db;
    else if (db.is_static() && db.value() == 1) out[i] = da;
    else {
      auto s = [](Dim d) { return d.is_static() ? std::to_string(d.value()) : std::string("s").append(std::to_string(d.symbol_id())); };
      fail(ErrorCategory::Shape, "cannot broadcast dims ", s(da), " and ", s(db), " (axis ", i, ")");
    }
  }
  return out;
}

}  // namespace rlx
