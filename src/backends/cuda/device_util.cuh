// Internal: what the .cu files share: element types by size, strided offsets, grid sizes.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels.h"

namespace rlx::cuda::dev {

template <int E>
struct Elem;
template <> struct Elem<1> { using T = uint8_t; };
template <> struct Elem<2> { using T = uint16_t; };
template <> struct Elem<4> { using T = uint32_t; };
template <> struct Elem<8> { using T = uint64_t; };

// Element offset of row-major index i of `it` in an operand with strides `st`.
__device__ inline int64_t offset_of(int64_t i, const Iter& it, const Strides& st) {
  int64_t off = st.base;
  for (int k = it.rank - 1; k >= 0; --k) {
    const int64_t d = it.dims[k];
    off += (i % d) * st.s[k];
    i /= d;
  }
  return off;
}

// Blocks for n work items of `per_block` each (at least 1, at most 65535 * 8: grid-stride
// loops cover the rest).
inline unsigned grid_for(int64_t n, int64_t per_block) {
  const int64_t b = (n + per_block - 1) / per_block;
  return unsigned(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

}  // namespace rlx::cuda::dev
