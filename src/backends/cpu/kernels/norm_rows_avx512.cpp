// AVX-512 f32 norm rows: norm_rows_vec.h over vec_traits_avx512.h. Only this file's functions
// carry the AVX-512 target; they are reached only through norm_rows_f32_avx512(), which
// norm_rows_f32() returns when detect_isa() says the CPU has AVX-512.
#include "backends/cpu/kernels/norm_rows.h"

#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")
// GCC 12 reports its own _mm512_undefined_* (inside _mm512_reduce_*) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu::reduce_movement::avx512_rows {
namespace {
#include "backends/cpu/kernels/vec_traits_avx512.h"
#include "backends/cpu/kernels/vec_math.h"
#include "backends/cpu/kernels/norm_rows_vec.h"
}  // namespace
}  // namespace rlx::cpu::reduce_movement::avx512_rows

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace rlx::cpu::reduce_movement {
const NormRows<float>* norm_rows_f32_avx512() {
  using namespace avx512_rows;
  static const NormRows<float> rows{softmax_row, log_softmax_row, layer_norm_row, rms_norm_row};
  return &rows;
}
}  // namespace rlx::cpu::reduce_movement

#else
namespace rlx::cpu::reduce_movement {
const NormRows<float>* norm_rows_f32_avx512() { return nullptr; }
}  // namespace rlx::cpu::reduce_movement
#endif
