// Conversions between every pair of dtypes with Cast semantics. Values pass through
// one of three exact intermediates: int64 (integers, bool), double (floats) or
// complex<double>, so integer->integer casts never lose bits.
#include <cmath>
#include <complex>
#include <type_traits>

#include "backends/cpu/kernels/elementwise_types.h"

namespace rlx::cpu::ew {
namespace {

template <class T> struct IsComplex : std::false_type {};
template <class T> struct IsComplex<std::complex<T>> : std::true_type {};

template <class S> inline constexpr bool is_floatish_v =
    std::is_floating_point_v<S> || std::is_same_v<S, Half> || std::is_same_v<S, BHalf>;

template <class S> inline double load_float(S s) {
  if constexpr (std::is_same_v<S, Half>) return half_to_float(s.bits);
  else if constexpr (std::is_same_v<S, BHalf>) return bhalf_to_float(s.bits);
  else return double(s);
}

// float -> integer: truncate toward zero; NaN -> 0; saturate to int64, then wrap.
inline int64_t float_to_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return int64_t(v);
}

template <class D> inline D store_int(int64_t v) {
  if constexpr (std::is_same_v<D, Bool8>) return Bool8{uint8_t(v != 0)};
  else if constexpr (std::is_same_v<D, Half>) return Half{float_to_half(float(v))};
  else if constexpr (std::is_same_v<D, BHalf>) return BHalf{float_to_bhalf(float(v))};
  else if constexpr (IsComplex<D>::value) return D(typename D::value_type(v), 0);
  else if constexpr (std::is_floating_point_v<D>) return D(v);
  else return D(static_cast<std::make_unsigned_t<D>>(v));  // modular wrap
}

// F32 source to a half type rounds once; wider sources go through f32 first.
template <class D> inline D store_float(double v, float vf) {
  if constexpr (std::is_same_v<D, Bool8>) return Bool8{uint8_t(v != 0)};
  else if constexpr (std::is_same_v<D, Half>) return Half{float_to_half(vf)};
  else if constexpr (std::is_same_v<D, BHalf>) return BHalf{float_to_bhalf(vf)};
  else if constexpr (IsComplex<D>::value) return D(typename D::value_type(v), 0);
  else if constexpr (std::is_floating_point_v<D>) return D(v);
  else return store_int<D>(float_to_i64(v));
}

template <class D, class S> inline D cast_one(S s) {
  if constexpr (std::is_same_v<S, D>) {
    return s;
  } else if constexpr (IsComplex<S>::value) {
    if constexpr (IsComplex<D>::value) return D(typename D::value_type(s.real()), typename D::value_type(s.imag()));
    else if constexpr (std::is_same_v<D, Bool8>) return Bool8{uint8_t(s.real() != 0 || s.imag() != 0)};
    else return store_float<D>(double(s.real()), float(s.real()));
  } else if constexpr (is_floatish_v<S>) {
    const double v = load_float(s);
    return store_float<D>(v, float(v));
  } else if constexpr (std::is_same_v<S, Bool8>) {
    return store_int<D>(s.v != 0 ? 1 : 0);
  } else {
    return store_int<D>(int64_t(s));
  }
}

template <class S, class D> void convert_impl(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const S*>(src);
  auto d = static_cast<D*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = cast_one<D>(s[i]);
}

template <class S> ConvertFn from(DType to) {
  switch (to) {
    case DType::F32: return &convert_impl<S, float>;
    case DType::F16: return &convert_impl<S, Half>;
    case DType::BF16: return &convert_impl<S, BHalf>;
    case DType::F64: return &convert_impl<S, double>;
    case DType::I8: return &convert_impl<S, int8_t>;
    case DType::I16: return &convert_impl<S, int16_t>;
    case DType::I32: return &convert_impl<S, int32_t>;
    case DType::I64: return &convert_impl<S, int64_t>;
    case DType::U8: return &convert_impl<S, uint8_t>;
    case DType::U32: return &convert_impl<S, uint32_t>;
    case DType::Bool: return &convert_impl<S, Bool8>;
    case DType::C64: return &convert_impl<S, C64>;
    case DType::C128: return &convert_impl<S, C128>;
  }
  return nullptr;
}

}  // namespace

ConvertFn convert_fn(DType f, DType to) {
  switch (f) {
    case DType::F32: return from<float>(to);
    case DType::F16: return from<Half>(to);
    case DType::BF16: return from<BHalf>(to);
    case DType::F64: return from<double>(to);
    case DType::I8: return from<int8_t>(to);
    case DType::I16: return from<int16_t>(to);
    case DType::I32: return from<int32_t>(to);
    case DType::I64: return from<int64_t>(to);
    case DType::U8: return from<uint8_t>(to);
    case DType::U32: return from<uint32_t>(to);
    case DType::Bool: return from<Bool8>(to);
    case DType::C64: return from<C64>(to);
    case DType::C128: return from<C128>(to);
  }
  return nullptr;
}

}  // namespace rlx::cpu::ew
