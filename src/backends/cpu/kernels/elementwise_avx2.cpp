// AVX2 + FMA F32 spans. Only this file's functions carry the AVX2 target; they are
// reached only through f32_vec_table_avx2(), which callers use when detect_isa() says
// the CPU has AVX2 (the rest of the binary stays baseline x86-64).
#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/elementwise_types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <type_traits>

RLX_ISA_REGION_BEGIN("avx2,fma,f16c")

namespace rlx::cpu::ew::avx2_impl {
namespace {
#include "backends/cpu/kernels/vec_traits_avx2.h"
}  // namespace
}  // namespace rlx::cpu::ew::avx2_impl

namespace rlx::cpu::ew::avx2_impl {
namespace {
// Half-precision block converters (F16C for f16; integer rounding for bf16). Tails use
// the scalar conversions, which round identically.
void f16_to_f32(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const uint16_t*>(src);
  auto d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = half_to_float(s[i]);
}
void f32_to_f16(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const float*>(src);
  auto d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = float_to_half(s[i]);
}
void bf16_to_f32(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const uint16_t*>(src);
  auto d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(w, 16));
  }
  for (; i < n; ++i) d[i] = bhalf_to_float(s[i]);
}
void f32_to_bf16(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const float*>(src);
  auto d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(s + i);
    const __m256i b = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(b, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
    // packus works per 128-bit lane: fix the order with a cross-lane permute.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) d[i] = float_to_bhalf(s[i]);
}
// 8-bit and int32 integers <-> f32 with Cast semantics. To f32: exact widening, int32
// rounded to nearest even as the scalar path. From f32: truncation toward zero, then the
// low bits (the scalar path's int64 wrap); a block holding NaN or |x| >= 2^31 goes to the
// scalar conversion, which saturates through int64 and maps NaN to 0.
template <class S> void int_to_f32(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const S*>(src);
  auto d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v;
    if constexpr (sizeof(S) == 4) v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    else if constexpr (std::is_signed_v<S>) v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + i)));
    else v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_cvtepi32_ps(v));
  }
  for (; i < n; ++i) d[i] = float(s[i]);
}
template <class D> void f32_to_int(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const float*>(src);
  auto d = static_cast<D*>(dst);
  const ConvertFn scalar = convert_fn(DType::F32, sizeof(D) == 4 ? DType::I32 : std::is_signed_v<D> ? DType::I8 : DType::U8);
  const __m256 limit = _mm256_set1_ps(2147483648.0f), sign = _mm256_set1_ps(-0.0f);
  // Byte 0 of each int32, gathered into the low 4 bytes of each 128-bit lane.
  const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                             0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(s + i);
    const __m256 ok = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), limit, _CMP_LT_OQ);  // false for NaN
    if (_mm256_movemask_ps(ok) != 0xFF) {
      scalar(s + i, d + i, 8);
      continue;
    }
    const __m256i v = _mm256_cvttps_epi32(x);
    if constexpr (sizeof(D) == 4) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), v);
    } else {
      const __m256i b = _mm256_shuffle_epi8(v, low_bytes);
      const __m256i packed = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
    }
  }
  if (i < n) scalar(s + i, d + i, n - i);
}
void fill_converters(F32VecTable& t) {
  t.to_f32[size_t(DType::I32)] = &int_to_f32<int32_t>;
  t.to_f32[size_t(DType::I8)] = &int_to_f32<int8_t>;
  t.to_f32[size_t(DType::U8)] = &int_to_f32<uint8_t>;
  t.from_f32[size_t(DType::I32)] = &f32_to_int<int32_t>;
  t.from_f32[size_t(DType::I8)] = &f32_to_int<int8_t>;
  t.from_f32[size_t(DType::U8)] = &f32_to_int<uint8_t>;
  t.to_f32[size_t(DType::F16)] = &f16_to_f32;
  t.to_f32[size_t(DType::BF16)] = &bf16_to_f32;
  t.from_f32[size_t(DType::F16)] = &f32_to_f16;
  t.from_f32[size_t(DType::BF16)] = &f32_to_bf16;
}
}  // namespace
}  // namespace rlx::cpu::ew::avx2_impl

#define RLX_VEC_NS avx2_impl
#include "backends/cpu/kernels/elementwise_vec_impl.h"
#undef RLX_VEC_NS

RLX_ISA_REGION_END()

namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx2() {
  static const F32VecTable table = [] {
    F32VecTable t;
    avx2_impl::fill_table(t);
    avx2_impl::fill_converters(t);
    return t;
  }();
  return table;
}
}  // namespace rlx::cpu::ew

#else  // no x86-64: no vector table (detect_isa() never reports AVX2 there)
namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx2() {
  static const F32VecTable table;
  return table;
}
}  // namespace rlx::cpu::ew
#endif
