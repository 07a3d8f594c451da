// AVX2 row kernels: row_kernels_vec.h over vec_traits_avx2.h. Only this file's functions
// carry the AVX2 target; they are reached only through row_kernels_avx2(), which
// row_kernels() returns when detect_isa() says the CPU has AVX2.
#include "backends/cpu/kernels/row_kernels.h"

#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
// GCC 12 reports its own _mm512_undefined_* (inside _mm512_reduce_*) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu::avx2_row_kernels {
namespace {
#include "backends/cpu/kernels/vec_traits_avx2.h"
#include "backends/cpu/kernels/vec_math.h"
#include "backends/cpu/kernels/row_kernels_vec.h"
}  // namespace
}  // namespace rlx::cpu::avx2_row_kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace rlx::cpu {
const RowKernels* row_kernels_avx2() {
  using namespace avx2_row_kernels;
  static const RowKernels table{activate_row, exp_sum_row, max_row, scale_row, conv_row};
  return &table;
}
}  // namespace rlx::cpu

#else
namespace rlx::cpu {
const RowKernels* row_kernels_avx2() { return nullptr; }
}  // namespace rlx::cpu
#endif
