// Internal: arithmetic on static dim lists shared by passes, the importer and kernels' builders.
#pragma once
#include <cstdint>
#include <vector>

namespace rlx {

// Elements of a tensor with these static dims (1 for rank 0).
inline int64_t dims_numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// Element strides of a dense row-major tensor with these dims.
inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

}  // namespace rlx
