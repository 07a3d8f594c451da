// Internal to the CPU elementwise kernels: storage types per DType, the compute
// dtype each storage dtype is evaluated in, op parameters and the "span" function
// types every elementwise op is reduced to. A span applies one op to n contiguous
// elements; binary spans come in three forms by which operand is a broadcast scalar.
#pragma once
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "rlx/attrs.h"
#include "rlx/dtype.h"

namespace rlx::cpu::ew {

// Storage wrappers for the dtypes whose C++ type would otherwise collide.
struct Half { uint16_t bits; };
struct BHalf { uint16_t bits; };
struct Bool8 { uint8_t v; };  // 0 / nonzero; kernels write 0 or 1
using C64 = std::complex<float>;
using C128 = std::complex<double>;

template <DType D> struct StorageOf;
template <> struct StorageOf<DType::F32> { using type = float; };
template <> struct StorageOf<DType::F16> { using type = Half; };
template <> struct StorageOf<DType::BF16> { using type = BHalf; };
template <> struct StorageOf<DType::F64> { using type = double; };
template <> struct StorageOf<DType::I8> { using type = int8_t; };
template <> struct StorageOf<DType::I16> { using type = int16_t; };
template <> struct StorageOf<DType::I32> { using type = int32_t; };
template <> struct StorageOf<DType::I64> { using type = int64_t; };
template <> struct StorageOf<DType::U8> { using type = uint8_t; };
template <> struct StorageOf<DType::U32> { using type = uint32_t; };
template <> struct StorageOf<DType::Bool> { using type = Bool8; };
template <> struct StorageOf<DType::C64> { using type = C64; };
template <> struct StorageOf<DType::C128> { using type = C128; };

// The dtype an op on `t` computes in: half types widen to F32, the rest compute natively.
inline DType compute_dtype(DType t) {
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

// ---- half-precision conversions (round to nearest even; NaN stays a quiet NaN)
inline float bits_to_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24 is exact in f32
    float v = float(mant) * 5.9604644775390625e-8f;
    return bits_to_f32(f32_to_bits(v) | sign);
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  uint32_t x = f32_to_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {
    // Subnormal result: adding 0.5 makes the FPU round to a multiple of 2^-24.
    const float a = bits_to_f32(x) + 0.5f;
    return sign | uint16_t(f32_to_bits(a) - 0x3f000000u);
  }
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;  // rebias exponent (127 -> 15) and round to nearest even
  return sign | uint16_t(x >> 13);
}

inline float bhalf_to_float(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }
inline uint16_t float_to_bhalf(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- op parameters, resolved once when the kernel is built
struct OpParams {
  double alpha = 0, beta = 0;
  float alpha_f = 0, beta_f = 0;
  int64_t lo = 0, hi = 0;  // clip bounds for integer dtypes, already saturated to the type
  bool flag = false;       // gelu: tanh form; mod: fmod semantics
  bool detect_neg = true, detect_pos = true;  // is_inf
};

using Span1 = void (*)(const void* x, void* y, int64_t n, const OpParams& p);
using Span2 = void (*)(const void* a, const void* b, void* y, int64_t n, const OpParams& p);
struct Span2Set {
  Span2 vv = nullptr;  // both operands contiguous
  Span2 vs = nullptr;  // b is one element broadcast over n
  Span2 sv = nullptr;  // a is one element broadcast over n
  explicit operator bool() const { return vv != nullptr; }
};
// where(c, a, b): bit k of scalar_mask set = operand k (0 = c, 1 = a, 2 = b) is one element.
using Span3 = void (*)(const void* c, const void* a, const void* b, void* y, int64_t n,
                       unsigned scalar_mask);
using ConvertFn = void (*)(const void* src, void* dst, int64_t n);

// Contiguous conversion between any two dtypes with Cast semantics (float->int
// truncates, NaN->0, out-of-range saturates to int64 then wraps; ->bool is != 0;
// complex->real keeps the real part). Never null.
ConvertFn convert_fn(DType from, DType to);

// Span tables for one compute dtype (F32, F64, integers, Bool, C64, C128). F32 entries
// use the vectorized implementation for `isa` where one exists. nullptr/empty when
// the op does not accept that dtype.
Span1 unary_span(OpKind k, DType compute, Isa isa);
Span2Set binary_span(OpKind k, DType compute, Isa isa);
// Compare ops: operands in `compute`, result Bool.
Span2Set compare_span(OpKind k, DType compute);
// where over elements of `elem_bytes` (1, 2, 4, 8 or 16); condition is Bool storage.
Span3 where_span(size_t elem_bytes);

// One step of a chain program (ProgramCfg::chain): the running value v becomes kind(v)
// (unary), or kind(v, x) / kind(x, v) (binary, `operand_first`) with x node input `operand`.
struct ChainStep {
  OpKind kind = OpKind::Identity;
  bool binary = false, operand_first = false;
  int32_t operand = -1;
  OpParams params;
};
// Runs a chain over m elements: v = in[seed], then every step, out = v. in[i] points at
// input i's elements of the segment (its one element where scalar[i]). Each step is the
// vector table's own per-vector operation, so the bytes are the block engine's.
using ChainFn = void (*)(const ChainStep* steps, int nsteps, const void* const* in, const bool* scalar, int seed,
                         float* out, int64_t m);
inline constexpr int kMaxChainInputs = 32;  // node inputs of a chain program (indices below this)

// Vectorized F32 spans (defined in elementwise_avx2.cpp / elementwise_avx512.cpp);
// only called when the CPU has the level. Entries are null where no vector version exists.
// `chain` runs every kind that has a vector unary or binary span.
struct F32VecTable {
  Span1 unary[kNumOpKinds] = {};
  Span2Set binary[kNumOpKinds] = {};
  ChainFn chain = nullptr;
  ConvertFn to_f32[kNumDTypes] = {};    // F16 / BF16 / I32 / I8 / U8 -> F32
  ConvertFn from_f32[kNumDTypes] = {};  // F32 -> F16 / BF16 (round to nearest even), I32 / I8 / U8 (Cast)
};
// convert_fn, using the ISA's vector converters where the table has one (same values
// as the scalar conversion; NaN payloads may differ).
ConvertFn convert_fn(DType from, DType to, Isa isa);
const F32VecTable& f32_vec_table_avx2();
const F32VecTable& f32_vec_table_avx512();

}  // namespace rlx::cpu::ew
