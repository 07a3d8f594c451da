// AVX-512 kernels of kv_attention (kv_attention.h): kv_attention_vec.h over 16-lane vectors.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/kv_attention.h"

RLX_ISA_REGION_BEGIN("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c")
namespace rlx::cpu {
namespace {

#include "backends/cpu/kernels/vec_traits_avx512.h"

inline V::F load_half(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline V::F pair_sum(V::F a, V::F b) { return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); }
inline V::F quad_sum(V::F a, V::F b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
// Quarters: (c0, c1) and (c2, c3) to halves, then the halves to one vector.
inline V::F lane_sum(V::F* c) {
  auto halves = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
  };
  return halves(halves(c[0], c[1]), halves(c[2], c[3]));
}

#include "backends/cpu/kernels/kv_attention_vec.h"

}  // namespace
}  // namespace rlx::cpu
RLX_ISA_REGION_END()

namespace rlx::cpu {
const KvKernels* kv_kernels_avx512() {  // outside the region: callable on any CPU
  static const KvKernels k{kv_scores, kv_mix};
  return &k;
}
}  // namespace rlx::cpu
