// Internal: the scalar definition of every elementwise op, one functor each. These are
// the semantics (ONNX / numpy); vector spans must agree with them within tolerance.
// Float functors compute in double and round once; integer arithmetic wraps (computed
// in the unsigned type, so no signed overflow); integer division by zero gives 0.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernels/elementwise_types.h"

namespace rlx::cpu::ew::ops {

template <class T> inline constexpr bool is_int_v = std::is_integral_v<T>;

template <class T> inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(U(a) + U(b)));
}
template <class T> inline T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(U(a) - U(b)));
}
template <class T> inline T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if constexpr (sizeof(T) < sizeof(unsigned)) return T(U(unsigned(U(a)) * unsigned(U(b))));
  else return T(U(U(a) * U(b)));
}
template <class T> inline T wrap_neg(T a) { return wrap_sub(T(0), a); }

// ---- float unary (argument and result in double)
#define RLX_F1(Name, expr) \
  struct Name { static double f(double x, const OpParams& p) { (void)p; return (expr); } };
RLX_F1(Exp, std::exp(x))
RLX_F1(Log, std::log(x))
RLX_F1(Sqrt, std::sqrt(x))
RLX_F1(Rsqrt, 1.0 / std::sqrt(x))
RLX_F1(Reciprocal, 1.0 / x)
RLX_F1(Sin, std::sin(x))
RLX_F1(Cos, std::cos(x))
RLX_F1(Tan, std::tan(x))
RLX_F1(Asin, std::asin(x))
RLX_F1(Acos, std::acos(x))
RLX_F1(Atan, std::atan(x))
RLX_F1(Sinh, std::sinh(x))
RLX_F1(Cosh, std::cosh(x))
RLX_F1(Asinh, std::asinh(x))
RLX_F1(Acosh, std::acosh(x))
RLX_F1(Atanh, std::atanh(x))
RLX_F1(Tanh, std::tanh(x))
RLX_F1(Sigmoid, 1.0 / (1.0 + std::exp(-x)))
RLX_F1(Silu, x / (1.0 + std::exp(-x)))
// Softplus without overflow: max(x, 0) + log1p(exp(-|x|)).
RLX_F1(Softplus, (x > 0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x))))
RLX_F1(Softsign, x / (1.0 + std::fabs(x)))
RLX_F1(Mish, x * std::tanh((x > 0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)))))
// clamp01 lets NaN through (fmin/fmax would drop it).
inline double clamp01(double v) { return v < 0 ? 0.0 : (v > 1 ? 1.0 : v); }
RLX_F1(HardSwish, x * clamp01(x / 6.0 + 0.5))
RLX_F1(HardSigmoid, clamp01(p.alpha * x + p.beta))
RLX_F1(LeakyRelu, x < 0 ? p.alpha * x : x)
RLX_F1(Elu, x < 0 ? p.alpha * std::expm1(x) : x)
RLX_F1(Selu, x <= 0 ? p.beta * p.alpha * std::expm1(x) : p.beta * x)
RLX_F1(Celu, x > 0 ? x : p.alpha * std::expm1(x / p.alpha))
RLX_F1(ThresholdedRelu, x > p.alpha ? x : 0.0)
RLX_F1(Erf, std::erf(x))
RLX_F1(Floor, std::floor(x))
RLX_F1(Ceil, std::ceil(x))
RLX_F1(Round, std::nearbyint(x))  // default rounding mode: half to even
#undef RLX_F1

// gelu: exact erf form 0.5*x*erfc(-x/sqrt2) (no cancellation for x < 0); tanh form
// 0.5*x*(1+tanh(u)) written as x*sigmoid(2u).
struct Gelu {
  static double f(double x, const OpParams& p) {
    if (p.flag) {
      const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-2.0 * u));
    }
    return 0.5 * x * std::erfc(-x * 0.7071067811865476);
  }
};

// ---- unary ops that accept integers too (T is the compute type)
struct Abs {
  template <class T> static T f(T x, const OpParams&) {
    if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (is_int_v<T>) return x < 0 ? wrap_neg(x) : x;
    else return std::fabs(x);
  }
};
struct Neg {
  template <class T> static T f(T x, const OpParams&) {
    if constexpr (is_int_v<T>) return wrap_neg(x);
    else return -x;
  }
};
struct Relu {  // NaN and -0 pass through unchanged (x < 0 is false for both)
  template <class T> static T f(T x, const OpParams&) { return x < T(0) ? T(0) : x; }
};
struct Sign {
  template <class T> static T f(T x, const OpParams&) {
    if constexpr (!is_int_v<T>) {
      if (x != x) return x;
    }
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  }
};
struct Clip {  // clip(x, alpha, beta); NaN passes through
  template <class T> static T f(T x, const OpParams& p) {
    if constexpr (is_int_v<T>) {
      return x < T(p.lo) ? T(p.lo) : (x > T(p.hi) ? T(p.hi) : x);
    } else {
      const T lo = T(p.alpha), hi = T(p.beta);
      return x < lo ? lo : (x > hi ? hi : x);
    }
  }
};
struct BitwiseNot {
  template <class T> static T f(T x, const OpParams&) { return T(~x); }
};

// ---- binary arithmetic (T is the compute type)
struct Add {
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (is_int_v<T>) return wrap_add(a, b); else return a + b;
  }
};
struct Sub {
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (is_int_v<T>) return wrap_sub(a, b); else return a - b;
  }
};
struct Mul {
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (is_int_v<T>) return wrap_mul(a, b); else return a * b;
  }
};
struct Div {  // integers truncate toward zero; x/0 = 0; MIN/-1 wraps to MIN
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (is_int_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return wrap_neg(a);
      }
      return T(a / b);
    } else {
      return a / b;
    }
  }
};
struct Max {  // NaN in either operand gives NaN
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (!is_int_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? b : a;
  }
};
struct Min {
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (!is_int_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};
// mod: flag = fmod (sign of the dividend); otherwise floor mod (sign of the divisor).
struct Mod {
  template <class T> static T f(T a, T b, const OpParams& p) {
    if constexpr (is_int_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return 0;
        T r = T(a % b);
        if (!p.flag && r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
        return r;
      } else {
        return T(a % b);
      }
    } else {
      T r = std::fmod(a, b);
      if (!p.flag && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
struct Pow {  // floats: std::pow; integers (I64 compute): exact, negative exponents truncate
  template <class T> static T f(T a, T b, const OpParams&) {
    if constexpr (is_int_v<T>) {
      if (b < 0) {
        if (a == 1) return 1;
        if (a == T(-1)) return (b % 2 == 0) ? 1 : T(-1);
        return 0;
      }
      T r = 1, base = a;
      for (T e = b; e > 0; e >>= 1) {
        if (e & 1) r = wrap_mul(r, base);
        base = wrap_mul(base, base);
      }
      return r;
    } else {
      return std::pow(a, b);
    }
  }
};
struct BitAnd { template <class T> static T f(T a, T b, const OpParams&) { return T(a & b); } };
struct BitOr { template <class T> static T f(T a, T b, const OpParams&) { return T(a | b); } };
struct BitXor { template <class T> static T f(T a, T b, const OpParams&) { return T(a ^ b); } };

// ---- compare (result 0/1)
struct Eq { template <class T> static bool f(T a, T b) { return a == b; } };
struct Ne { template <class T> static bool f(T a, T b) { return a != b; } };
struct Lt { template <class T> static bool f(T a, T b) { return a < b; } };
struct Le { template <class T> static bool f(T a, T b) { return a <= b; } };
struct Gt { template <class T> static bool f(T a, T b) { return a > b; } };
struct Ge { template <class T> static bool f(T a, T b) { return a >= b; } };

}  // namespace rlx::cpu::ew::ops
