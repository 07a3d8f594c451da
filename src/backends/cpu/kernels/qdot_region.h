// Internal: what the qdot kernel files share (qdot_avx2.cpp, qdot_avx512.cpp,
// qdot_kquant_avx2.cpp, qdot_kquant_avx512.cpp, qdot_blocks_impl.h). Include it inside an
// ISA region with F16C, within the file's namespace, after <immintrin.h>; it also pastes
// vec_traits_avx2.h's `struct V` there (V::hsum: the sum of 8 float lanes).
#pragma once

#include "backends/cpu/kernels/vec_traits_avx2.h"

// The IEEE half at p (unaligned) as float: the block scales of the GGUF formats.
inline float half_at(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
