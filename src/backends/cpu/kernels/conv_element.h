// Internal: element access shared by the convolution and pooling kernels (conv.cpp, pool.cpp):
// the half types as 16-bit payloads, loads and stores through f32 (f64 as itself), the
// accumulator type per element type, the float types they take, and floor(q / 2) for the
// stride-2 phase geometry.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/elementwise_types.h"
#include "rlx/dtype.h"

namespace rlx::cpu::conv_element {

struct F16 { uint16_t bits; };
struct BF16 { uint16_t bits; };
inline float load(const float* p) { return *p; }
inline double load(const double* p) { return *p; }
inline float load(const F16* p) { return f16_to_f32(p->bits); }
inline float load(const BF16* p) { return bf16_to_f32(p->bits); }
inline void store(float* p, float v) { *p = v; }
inline void store(double* p, double v) { *p = v; }
inline void store(F16* p, float v) { p->bits = f32_to_f16(v); }
inline void store(BF16* p, float v) { p->bits = f32_to_bf16(v); }
template <class T> using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The element types the float conv and pool kernels take.
inline bool conv_float_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

inline int64_t floor_half(int64_t q) { return q >= 0 ? q / 2 : -((-q + 1) / 2); }  // floor(q / 2)

}  // namespace rlx::cpu::conv_element
