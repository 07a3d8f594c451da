// Shape: a tensor type — element dtype plus dims that are static sizes or symbols.
// Symbols are small integer ids owned by a Graph (Graph::symbol); equal ids mean
// equal sizes. Compiling binds every symbol to a size (specialization).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "rlx/dtype.h"

namespace rlx {

class Dim {
 public:
  Dim() = default;
  Dim(int64_t size) : raw_(size) {}  // NOLINT: implicit from a static size
  static Dim symbol(int id) { Dim d; d.raw_ = -int64_t(id) - 1; return d; }

  bool is_static() const { return raw_ >= 0; }
  bool is_symbolic() const { return raw_ < 0; }
  int64_t value() const;     // throws if symbolic
  int symbol_id() const;     // throws if static
  int64_t raw() const { return raw_; }
  friend bool operator==(Dim a, Dim b) { return a.raw_ == b.raw_; }

 private:
  int64_t raw_ = 0;
};

// The largest byte size of one tensor (2^62). No machine rlx runs on can address more,
// and with every size below 2^62 the sum of two sizes cannot wrap an int64.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 62;

// A Shape always describes a tensor that fits: its static dims (zero dims counted as 1,
// so strides stay representable too) times the element size are at most kMaxTensorBytes.
// Every constructor checks this and throws Error(Shape) naming the shape otherwise, so
// numel() and bytes() never wrap and code computing offsets or strides from a Shape's
// dims needs no overflow checks of its own.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims, DType dtype);
  Shape(std::vector<int64_t> dims, DType dtype);
  Shape(std::vector<Dim> dims, DType dtype);
  static Shape scalar(DType dtype) { return Shape(std::vector<Dim>{}, dtype); }

  DType dtype() const { return dtype_; }
  int rank() const { return int(dims_.size()); }
  const std::vector<Dim>& dims() const { return dims_; }
  Dim dim(int axis) const;            // negative axes count from the end; throws if out of range
  bool is_static() const;
  std::vector<int64_t> static_dims() const;  // throws if any dim is symbolic
  int64_t numel() const;                     // throws if any dim is symbolic
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype_); }  // <= kMaxTensorBytes

  Shape with_dtype(DType t) const { return Shape(dims_, t); }
  Shape with_dims(std::vector<Dim> d) const { return Shape(std::move(d), dtype_); }

  // "f32[1,4]" with symbols printed as s0, s1, ... (Graph's printer uses names).
  std::string str() const;
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.dtype_ == b.dtype_ && a.dims_ == b.dims_;
  }

 private:
  std::vector<Dim> dims_;
  DType dtype_ = DType::F32;
};

// Normalizes a possibly negative axis against rank; throws Shape error naming `what`.
int normalize_axis(int64_t axis, int rank, const char* what);

// Numpy broadcasting of two dim lists; throws a Shape error when incompatible.
std::vector<Dim> broadcast_dims(const std::vector<Dim>& a, const std::vector<Dim>& b);

}  // namespace rlx
