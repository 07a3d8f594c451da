// Internal: opens and closes a region of functions compiled for one ISA (the target
// attribute on every function in between, on GCC and clang alike), so that code written
// once over the vector traits can be instantiated per ISA in a baseline-ISA build:
//   RLX_ISA_REGION_BEGIN("avx2,fma,f16c")
//   namespace ... { #include "vec_traits_avx2.h" ... }
//   RLX_ISA_REGION_END()
// GCC 12 reports its own _mm512_undefined_* (inside the AVX-512 headers) as uninitialized:
// those two warnings are off inside a region.
#pragma once

#define RLX_PRAGMA_STR(x) _Pragma(#x)
#define RLX_PRAGMA(x) RLX_PRAGMA_STR(x)

#if defined(__clang__)
#define RLX_ISA_REGION_BEGIN(isa) \
  RLX_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define RLX_ISA_REGION_END() RLX_PRAGMA(clang attribute pop)
#else
#define RLX_ISA_REGION_BEGIN(isa)                           \
  RLX_PRAGMA(GCC push_options)                                 \
  RLX_PRAGMA(GCC target(isa))                                  \
  RLX_PRAGMA(GCC diagnostic push)                              \
  RLX_PRAGMA(GCC diagnostic ignored "-Wuninitialized")         \
  RLX_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")
#define RLX_ISA_REGION_END() \
  RLX_PRAGMA(GCC diagnostic pop) \
  RLX_PRAGMA(GCC pop_options)
#endif
