// Internal: arithmetic on static dim lists shared by passes, the importer and kernels' builders.
// Products and sums of sizes are checked: a result past int64 is Error(Shape), never a wrap.
#pragma once
#include <cstdint>
#include <vector>

#include "rlx/error.h"

namespace rlx {

// a * b and a + b for non-negative sizes; Error(Shape) naming `what` if the result does not fit.
inline int64_t checked_mul(int64_t a, int64_t b, const char* what = "size") {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) fail(ErrorCategory::Shape, what, " overflows: ", a, " * ", b);
  return r;
}
inline int64_t checked_add(int64_t a, int64_t b, const char* what = "size") {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) fail(ErrorCategory::Shape, what, " overflows: ", a, " + ", b);
  return r;
}

// Elements of a tensor with these static dims (1 for rank 0); checked.
inline int64_t dims_numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n = checked_mul(n, v, "element count");
  return n;
}

// Element strides of a dense row-major tensor with these dims.
inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// Element strides of a dense row-major tensor with dims `from` read as if broadcast to
// `to` (aligned at the right; 0 where `from` has 1 or no such dim), so element idx of the
// broadcast tensor is at sum(idx[i] * strides[i]). False when `from` does not broadcast to `to`.
inline bool broadcast_read_strides(const std::vector<int64_t>& from, const std::vector<int64_t>& to,
                                   std::vector<int64_t>& strides) {
  if (from.size() > to.size()) return false;
  strides.assign(to.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < from.size(); ++i) {
    const size_t axis = to.size() - 1 - i;
    const int64_t dim = from[from.size() - 1 - i];
    if (dim != 1 && dim != to[axis]) return false;
    strides[axis] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return true;
}

}  // namespace rlx
