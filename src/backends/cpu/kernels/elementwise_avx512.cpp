// AVX-512 (F, BW, DQ, VL) F32 spans. Only this file's functions carry the AVX-512 target; they are
// reached only through f32_vec_table_avx512(), which callers use when detect_isa() says
// the CPU has AVX-512 (the rest of the binary stays baseline x86-64).
#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/elementwise_types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

RLX_ISA_REGION_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")

namespace rlx::cpu::ew::avx512_impl {
namespace {
#include "backends/cpu/kernels/vec_traits_avx512.h"
}  // namespace
}  // namespace rlx::cpu::ew::avx512_impl

#define RLX_VEC_NS avx512_impl
#include "backends/cpu/kernels/elementwise_vec_impl.h"
#undef RLX_VEC_NS

RLX_ISA_REGION_END()

namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx512() {
  static const F32VecTable table = [] {
    F32VecTable t;
    avx512_impl::fill_table(t);
    // AVX-512 CPUs have AVX2: reuse its half-precision converters.
    const F32VecTable& v2 = f32_vec_table_avx2();
    for (int i = 0; i < kNumDTypes; ++i) {
      t.to_f32[i] = v2.to_f32[i];
      t.from_f32[i] = v2.from_f32[i];
    }
    return t;
  }();
  return table;
}
}  // namespace rlx::cpu::ew

#else  // no x86-64: no vector table (detect_isa() never reports AVX-512 there)
namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx512() {
  static const F32VecTable table;
  return table;
}
}  // namespace rlx::cpu::ew
#endif
