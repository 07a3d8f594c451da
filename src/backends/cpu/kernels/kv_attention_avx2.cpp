// AVX2 kernels of kv_attention (kv_attention.h): kv_attention_vec.h over 8-lane vectors.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/kv_attention.h"

RLX_ISA_REGION_BEGIN("avx2,fma,f16c")
namespace rlx::cpu {
namespace {

#include "backends/cpu/kernels/vec_traits_avx2.h"

inline V::F load_half(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline V::F pair_sum(V::F a, V::F b) { return _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b)); }
inline V::F quad_sum(V::F a, V::F b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xEE));
}
inline V::F lane_sum(V::F* c) {
  return _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20), _mm256_permute2f128_ps(c[0], c[1], 0x31));
}

#include "backends/cpu/kernels/kv_attention_vec.h"

}  // namespace
}  // namespace rlx::cpu
RLX_ISA_REGION_END()

namespace rlx::cpu {
const KvKernels* kv_kernels_avx2() {  // outside the region: callable on any CPU
  static const KvKernels k{kv_scores, kv_mix};
  return &k;
}
}  // namespace rlx::cpu
