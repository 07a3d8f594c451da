// Scalar span tables: every (op, compute dtype) pair the elementwise family accepts,
// instantiated from the functors in elementwise_scalar_ops.h. F32 lookups prefer the
// vectorized table of the requested ISA.
#include <complex>

#include "backends/cpu/kernels/elementwise_scalar_ops.h"
#include "backends/cpu/kernels/elementwise_types.h"

namespace rlx::cpu::ew {
namespace {

// ---- span templates
template <class T, class F>
void float_unary(const void* x, void* y, int64_t n, const OpParams& p) {
  const T* a = static_cast<const T*>(x);
  T* o = static_cast<T*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = T(F::f(double(a[i]), p));
}
template <class T, class F>
void typed_unary(const void* x, void* y, int64_t n, const OpParams& p) {
  const T* a = static_cast<const T*>(x);
  T* o = static_cast<T*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::template f<T>(a[i], p);
}
template <class T, class F>
void bin_vv(const void* a, const void* b, void* y, int64_t n, const OpParams& p) {
  const T* x = static_cast<const T*>(a);
  const T* z = static_cast<const T*>(b);
  T* o = static_cast<T*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::template f<T>(x[i], z[i], p);
}
template <class T, class F>
void bin_vs(const void* a, const void* b, void* y, int64_t n, const OpParams& p) {
  const T* x = static_cast<const T*>(a);
  const T z = *static_cast<const T*>(b);
  T* o = static_cast<T*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::template f<T>(x[i], z, p);
}
template <class T, class F>
void bin_sv(const void* a, const void* b, void* y, int64_t n, const OpParams& p) {
  const T x = *static_cast<const T*>(a);
  const T* z = static_cast<const T*>(b);
  T* o = static_cast<T*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::template f<T>(x, z[i], p);
}
template <class T, class F> Span2Set bin_set() {
  return Span2Set{&bin_vv<T, F>, &bin_vs<T, F>, &bin_sv<T, F>};
}

template <class T, class F>
void cmp_vv(const void* a, const void* b, void* y, int64_t n, const OpParams&) {
  const T* x = static_cast<const T*>(a);
  const T* z = static_cast<const T*>(b);
  uint8_t* o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::f(x[i], z[i]) ? 1 : 0;
}
template <class T, class F>
void cmp_vs(const void* a, const void* b, void* y, int64_t n, const OpParams&) {
  const T* x = static_cast<const T*>(a);
  const T z = *static_cast<const T*>(b);
  uint8_t* o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::f(x[i], z) ? 1 : 0;
}
template <class T, class F>
void cmp_sv(const void* a, const void* b, void* y, int64_t n, const OpParams&) {
  const T x = *static_cast<const T*>(a);
  const T* z = static_cast<const T*>(b);
  uint8_t* o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = F::f(x, z[i]) ? 1 : 0;
}
template <class T, class F> Span2Set cmp_set() {
  return Span2Set{&cmp_vv<T, F>, &cmp_vs<T, F>, &cmp_sv<T, F>};
}

// ---- Bool (0 / nonzero bytes) logic; results are 0 or 1
enum class Logic { And, Or, Xor };
template <Logic L> inline uint8_t logic(uint8_t a, uint8_t b) {
  const bool x = a != 0, z = b != 0;
  if constexpr (L == Logic::And) return x && z;
  else if constexpr (L == Logic::Or) return x || z;
  else return x != z;
}
template <Logic L> void logic_vv(const void* a, const void* b, void* y, int64_t n, const OpParams&) {
  auto x = static_cast<const uint8_t*>(a), z = static_cast<const uint8_t*>(b);
  auto o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = logic<L>(x[i], z[i]);
}
template <Logic L> void logic_vs(const void* a, const void* b, void* y, int64_t n, const OpParams&) {
  auto x = static_cast<const uint8_t*>(a);
  const uint8_t z = *static_cast<const uint8_t*>(b);
  auto o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = logic<L>(x[i], z);
}
template <Logic L> void logic_sv(const void* a, const void* b, void* y, int64_t n, const OpParams& p) {
  logic_vs<L>(b, a, y, n, p);  // all three are commutative
}
template <Logic L> Span2Set logic_set() { return Span2Set{&logic_vv<L>, &logic_vs<L>, &logic_sv<L>}; }

void bool_not(const void* x, void* y, int64_t n, const OpParams&) {
  auto a = static_cast<const uint8_t*>(x);
  auto o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] == 0;
}
template <class T> void is_nan(const void* x, void* y, int64_t n, const OpParams&) {
  auto a = static_cast<const T*>(x);
  auto o = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] != a[i];
}
template <class T> void is_inf(const void* x, void* y, int64_t n, const OpParams& p) {
  auto a = static_cast<const T*>(x);
  auto o = static_cast<uint8_t*>(y);
  const T inf = std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) o[i] = (p.detect_pos && a[i] == inf) || (p.detect_neg && a[i] == -inf);
}
template <class T> void complex_neg(const void* x, void* y, int64_t n, const OpParams&) {
  auto a = static_cast<const T*>(x);
  auto o = static_cast<T*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = -a[i];
}

// ---- per-family pickers over compute dtypes
template <class F> Span1 pick_float(DType c) {
  switch (c) {
    case DType::F32: return &float_unary<float, F>;
    case DType::F64: return &float_unary<double, F>;
    default: return nullptr;
  }
}
// Real numeric types (floats and integers) for functors templated on T.
template <class F, bool Floats = true> Span1 pick_real1(DType c) {
  switch (c) {
    case DType::F32:
      if constexpr (Floats) return &typed_unary<float, F>; else return nullptr;
    case DType::F64:
      if constexpr (Floats) return &typed_unary<double, F>; else return nullptr;
    case DType::I8: return &typed_unary<int8_t, F>;
    case DType::I16: return &typed_unary<int16_t, F>;
    case DType::I32: return &typed_unary<int32_t, F>;
    case DType::I64: return &typed_unary<int64_t, F>;
    case DType::U8: return &typed_unary<uint8_t, F>;
    case DType::U32: return &typed_unary<uint32_t, F>;
    default: return nullptr;
  }
}
template <class F, bool Floats = true> Span2Set pick_real2(DType c) {
  switch (c) {
    case DType::F32:
      if constexpr (Floats) return bin_set<float, F>(); else return {};
    case DType::F64:
      if constexpr (Floats) return bin_set<double, F>(); else return {};
    case DType::I8: return bin_set<int8_t, F>();
    case DType::I16: return bin_set<int16_t, F>();
    case DType::I32: return bin_set<int32_t, F>();
    case DType::I64: return bin_set<int64_t, F>();
    case DType::U8: return bin_set<uint8_t, F>();
    case DType::U32: return bin_set<uint32_t, F>();
    default: return {};
  }
}
template <class F> Span2Set pick_arith2(DType c) {
  if (c == DType::C64) return bin_set<C64, F>();
  if (c == DType::C128) return bin_set<C128, F>();
  return pick_real2<F>(c);
}
template <class F, bool ComplexOk> Span2Set pick_cmp(DType c) {
  switch (c) {
    case DType::F32: return cmp_set<float, F>();
    case DType::F64: return cmp_set<double, F>();
    case DType::I8: return cmp_set<int8_t, F>();
    case DType::I16: return cmp_set<int16_t, F>();
    case DType::I32: return cmp_set<int32_t, F>();
    case DType::I64: return cmp_set<int64_t, F>();
    case DType::U8: case DType::Bool: return cmp_set<uint8_t, F>();
    case DType::U32: return cmp_set<uint32_t, F>();
    case DType::C64:
      if constexpr (ComplexOk) return cmp_set<C64, F>(); else return {};
    case DType::C128:
      if constexpr (ComplexOk) return cmp_set<C128, F>(); else return {};
    default: return {};
  }
}

Span1 scalar_unary(OpKind k, DType c) {
  using namespace ops;
  switch (k) {
    case OpKind::Exp: return pick_float<Exp>(c);
    case OpKind::Log: return pick_float<Log>(c);
    case OpKind::Sqrt: return pick_float<Sqrt>(c);
    case OpKind::Rsqrt: return pick_float<Rsqrt>(c);
    case OpKind::Reciprocal: return pick_float<Reciprocal>(c);
    case OpKind::Sin: return pick_float<Sin>(c);
    case OpKind::Cos: return pick_float<Cos>(c);
    case OpKind::Tan: return pick_float<Tan>(c);
    case OpKind::Asin: return pick_float<Asin>(c);
    case OpKind::Acos: return pick_float<Acos>(c);
    case OpKind::Atan: return pick_float<Atan>(c);
    case OpKind::Sinh: return pick_float<Sinh>(c);
    case OpKind::Cosh: return pick_float<Cosh>(c);
    case OpKind::Asinh: return pick_float<Asinh>(c);
    case OpKind::Acosh: return pick_float<Acosh>(c);
    case OpKind::Atanh: return pick_float<Atanh>(c);
    case OpKind::Tanh: return pick_float<Tanh>(c);
    case OpKind::Sigmoid: return pick_float<Sigmoid>(c);
    case OpKind::Gelu: return pick_float<Gelu>(c);
    case OpKind::Silu: return pick_float<Silu>(c);
    case OpKind::Softplus: return pick_float<Softplus>(c);
    case OpKind::Softsign: return pick_float<Softsign>(c);
    case OpKind::Mish: return pick_float<Mish>(c);
    case OpKind::HardSwish: return pick_float<HardSwish>(c);
    case OpKind::HardSigmoid: return pick_float<HardSigmoid>(c);
    case OpKind::LeakyRelu: return pick_float<LeakyRelu>(c);
    case OpKind::Elu: return pick_float<Elu>(c);
    case OpKind::Selu: return pick_float<Selu>(c);
    case OpKind::Celu: return pick_float<Celu>(c);
    case OpKind::ThresholdedRelu: return pick_float<ThresholdedRelu>(c);
    case OpKind::Erf: return pick_float<Erf>(c);
    case OpKind::Floor: return pick_float<Floor>(c);
    case OpKind::Ceil: return pick_float<Ceil>(c);
    case OpKind::Round: return pick_float<Round>(c);
    case OpKind::Abs: return pick_real1<Abs>(c);
    case OpKind::Neg:
      if (c == DType::C64) return &complex_neg<C64>;
      if (c == DType::C128) return &complex_neg<C128>;
      return pick_real1<Neg>(c);
    case OpKind::Relu: return pick_real1<Relu>(c);
    case OpKind::Sign: return pick_real1<Sign>(c);
    case OpKind::Clip: return pick_real1<Clip>(c);
    case OpKind::BitwiseNot:
      if (c == DType::Bool) return &bool_not;
      return pick_real1<BitwiseNot, false>(c);
    case OpKind::Not: return c == DType::Bool ? &bool_not : nullptr;
    case OpKind::IsNaN:
      return c == DType::F32 ? &is_nan<float> : c == DType::F64 ? &is_nan<double> : nullptr;
    case OpKind::IsInf:
      return c == DType::F32 ? &is_inf<float> : c == DType::F64 ? &is_inf<double> : nullptr;
    default: return nullptr;
  }
}

Span2Set scalar_binary(OpKind k, DType c) {
  using namespace ops;
  switch (k) {
    case OpKind::Add: return pick_arith2<Add>(c);
    case OpKind::Sub: return pick_arith2<Sub>(c);
    case OpKind::Mul: return pick_arith2<Mul>(c);
    case OpKind::Div: return pick_arith2<Div>(c);
    case OpKind::Max: return pick_real2<Max>(c);
    case OpKind::Min: return pick_real2<Min>(c);
    case OpKind::Mod: return pick_real2<Mod>(c);
    case OpKind::Pow:
      if (c == DType::F32) return bin_set<float, Pow>();
      if (c == DType::F64) return bin_set<double, Pow>();
      if (c == DType::I64) return bin_set<int64_t, Pow>();
      return {};
    case OpKind::BitwiseAnd:
      return c == DType::Bool ? logic_set<Logic::And>() : pick_real2<BitAnd, false>(c);
    case OpKind::BitwiseOr:
      return c == DType::Bool ? logic_set<Logic::Or>() : pick_real2<BitOr, false>(c);
    case OpKind::BitwiseXor:
      return c == DType::Bool ? logic_set<Logic::Xor>() : pick_real2<BitXor, false>(c);
    case OpKind::And: return c == DType::Bool ? logic_set<Logic::And>() : Span2Set{};
    case OpKind::Or: return c == DType::Bool ? logic_set<Logic::Or>() : Span2Set{};
    case OpKind::Xor: return c == DType::Bool ? logic_set<Logic::Xor>() : Span2Set{};
    default: return {};
  }
}

// where over fixed-size elements (the select never looks inside an element).
struct E16 { uint64_t w[2]; };
template <class E>
void where_impl(const void* c, const void* a, const void* b, void* y, int64_t n, unsigned mask) {
  auto cc = static_cast<const uint8_t*>(c);
  auto x = static_cast<const E*>(a);
  auto z = static_cast<const E*>(b);
  auto o = static_cast<E*>(y);
  const int64_t sc = (mask & 1) ? 0 : 1, sa = (mask & 2) ? 0 : 1, sb = (mask & 4) ? 0 : 1;
  if (mask == 0) {
    for (int64_t i = 0; i < n; ++i) o[i] = cc[i] ? x[i] : z[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = cc[i * sc] ? x[i * sa] : z[i * sb];
}

}  // namespace

Span1 unary_span(OpKind k, DType c, Isa isa) {
  if (c == DType::F32 && isa != Isa::Scalar) {
    const F32VecTable& t = isa == Isa::Avx512 ? f32_vec_table_avx512() : f32_vec_table_avx2();
    if (t.unary[size_t(k)]) return t.unary[size_t(k)];
  }
  return scalar_unary(k, c);
}

Span2Set binary_span(OpKind k, DType c, Isa isa) {
  if (c == DType::F32 && isa != Isa::Scalar) {
    const F32VecTable& t = isa == Isa::Avx512 ? f32_vec_table_avx512() : f32_vec_table_avx2();
    if (t.binary[size_t(k)]) return t.binary[size_t(k)];
  }
  return scalar_binary(k, c);
}

Span2Set compare_span(OpKind k, DType c) {
  using namespace ops;
  switch (k) {
    case OpKind::Equal: return pick_cmp<Eq, true>(c);
    case OpKind::NotEqual: return pick_cmp<Ne, true>(c);
    case OpKind::Less: return pick_cmp<Lt, false>(c);
    case OpKind::LessEqual: return pick_cmp<Le, false>(c);
    case OpKind::Greater: return pick_cmp<Gt, false>(c);
    case OpKind::GreaterEqual: return pick_cmp<Ge, false>(c);
    default: return {};
  }
}

ConvertFn convert_fn(DType from, DType to, Isa isa) {
  if (isa != Isa::Scalar) {
    const F32VecTable& t = isa == Isa::Avx512 ? f32_vec_table_avx512() : f32_vec_table_avx2();
    if (to == DType::F32 && t.to_f32[size_t(from)]) return t.to_f32[size_t(from)];
    if (from == DType::F32 && t.from_f32[size_t(to)]) return t.from_f32[size_t(to)];
  }
  return convert_fn(from, to);
}

Span3 where_span(size_t elem_bytes) {
  switch (elem_bytes) {
    case 1: return &where_impl<uint8_t>;
    case 2: return &where_impl<uint16_t>;
    case 4: return &where_impl<uint32_t>;
    case 8: return &where_impl<uint64_t>;
    case 16: return &where_impl<E16>;
    default: return nullptr;
  }
}

}  // namespace rlx::cpu::ew
