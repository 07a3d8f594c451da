// Element-wise kernels of the CUDA backend: unary, binary with broadcasting through
// strides, fused programs, where, cast. f16 / bf16 operands are computed in f32 and
// rounded once on store (the CPU oracle's half kernels do the same). Grid-stride loops, 64-bit indices; math in float as the CPU
// oracle does it (erf / tanh forms of gelu as in the op table's definitions).
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <cuda_fp16.h>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

using dev::Elem;
using dev::ldf;
using dev::offset_of;
using dev::stf;

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) { return dev::grid_for(n, kThreads); }

// Integer arithmetic in the unsigned type of at least T's width and 32 bits: it wraps (no
// signed overflow, no promotion of 8- and 16-bit operands to int), and narrowing back to T
// keeps the low bits, as the CPU's wrapping arithmetic does.
template <class T>
using Wrap = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
// The storage types whose values f32 holds or rounds to directly.
template <class T>
constexpr bool kF32Like = std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Float ops in T (float or double: the overloads of CUDA's math library pick the precision).
template <class T>
__device__ inline T unary_f(const UnaryArgs& a, T x) {
  const T one = T(1), zero = T(0), half = T(0.5);
  switch (a.op) {
    case UnaryOp::Abs: return fabs(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return log(x);
    case UnaryOp::Sqrt: return sqrt(x);
    case UnaryOp::Rsqrt: return one / sqrt(x);
    case UnaryOp::Reciprocal: return one / x;
    case UnaryOp::Sin: return sin(x);
    case UnaryOp::Cos: return cos(x);
    case UnaryOp::Tan: return tan(x);
    case UnaryOp::Asin: return asin(x);
    case UnaryOp::Acos: return acos(x);
    case UnaryOp::Atan: return atan(x);
    case UnaryOp::Sinh: return sinh(x);
    case UnaryOp::Cosh: return cosh(x);
    case UnaryOp::Asinh: return asinh(x);
    case UnaryOp::Acosh: return acosh(x);
    case UnaryOp::Atanh: return atanh(x);
    case UnaryOp::Tanh: return tanh(x);
    case UnaryOp::Sigmoid: return one / (one + exp(-x));
    case UnaryOp::Relu: return x > zero ? x : (x == x ? zero : x);
    case UnaryOp::Gelu: return half * x * (one + erf(x * T(0.70710678118654752440)));
    case UnaryOp::GeluTanh: return half * x * (one + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
    case UnaryOp::Silu: return x / (one + exp(-x));
    case UnaryOp::Softplus: return x > T(20) ? x : log1p(exp(x));
    case UnaryOp::Softsign: return x / (one + fabs(x));
    case UnaryOp::Mish: return x * tanh(x > T(20) ? x : log1p(exp(x)));
    case UnaryOp::HardSwish: return x * fmin(fmax(x / T(6) + half, zero), one);
    case UnaryOp::HardSigmoid: return fmin(fmax(T(a.alpha) * x + T(a.beta), zero), one);
    case UnaryOp::LeakyRelu: return x >= zero ? x : T(a.alpha) * x;
    case UnaryOp::Elu: return x >= zero ? x : T(a.alpha) * (exp(x) - one);
    case UnaryOp::Selu: return T(a.beta) * (x > zero ? x : T(a.alpha) * (exp(x) - one));
    case UnaryOp::Celu: return fmax(zero, x) + fmin(zero, T(a.alpha) * (exp(x / T(a.alpha)) - one));
    case UnaryOp::ThresholdedRelu: return x > T(a.alpha) ? x : zero;
    case UnaryOp::Clip: return x != x ? x : fmin(fmax(x, T(a.alpha)), T(a.beta));
    case UnaryOp::Erf: return erf(x);
    case UnaryOp::Floor: return floor(x);
    case UnaryOp::Ceil: return ceil(x);
    case UnaryOp::Round: return rint(x);
    case UnaryOp::Sign: return x > zero ? one : x < zero ? -one : x;
    default: return x;
  }
}

// Integer ops (abs, neg, sign, relu, bitwise not), wrapping like the CPU's.
template <class T>
__device__ inline T unary_i(const UnaryArgs& a, T x) {
  using U = Wrap<T>;
  const T neg = T(U(0) - U(x));  // -MIN wraps to MIN
  switch (a.op) {
    case UnaryOp::Abs: if constexpr (std::is_signed_v<T>) return x < 0 ? neg : x; else return x;
    case UnaryOp::Neg: return neg;
    case UnaryOp::Sign: if constexpr (std::is_signed_v<T>) return T(x > 0 ? 1 : x < 0 ? -1 : 0); else return T(x > 0 ? 1 : 0);
    case UnaryOp::Relu: if constexpr (std::is_signed_v<T>) return x > 0 ? x : T(0); else return x;
    default: return T(~x);  // BitNot
  }
}

template <class T>
__global__ void unary_kernel(UnaryArgs a, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_floating_point_v<T>) y[i] = unary_f(a, x[i]);
    else y[i] = unary_i(a, x[i]);
  }
}
template <class T>
__global__ void unary_low_kernel(UnaryArgs a, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = stf<T>(unary_f(a, ldf(x[i])));
}
template <class T>
__global__ void unary_low_bool_kernel(UnaryArgs a, const T* x, bool* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = ldf(x[i]);
    y[i] = a.op == UnaryOp::IsNaN ? v != v : ((a.pos && v == INFINITY) || (a.neg && v == -INFINITY));
  }
}
template <class T>
__global__ void unary_bool_kernel(UnaryArgs a, const T* x, bool* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i];
    if constexpr (std::is_same_v<T, bool>) y[i] = !v;
    else y[i] = a.op == UnaryOp::IsNaN ? v != v : ((a.pos && v == T(INFINITY)) || (a.neg && v == T(-INFINITY)));
  }
}

template <class T>
__device__ inline T pow_t(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return powf(a, b);
  else if constexpr (std::is_floating_point_v<T>) return pow(a, b);
  else {  // integer power by squaring (negative exponents: 0 unless |a| == 1)
    if constexpr (std::is_signed_v<T>)
      if (b < 0) return a == 1 ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
    Wrap<T> r = 1, base = Wrap<T>(a);
    for (auto e = b; e > 0; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return T(r);
  }
}

// Integer arithmetic wraps (Wrap); x / 0 and x % 0 give 0, MIN / -1 wraps to MIN and MIN % -1 is 0, as the CPU
// oracle defines them.
template <class T>
__device__ inline T arith(BinaryOp op, T a, T b) {
  constexpr bool fl = std::is_floating_point_v<T>;
  using U = Wrap<T>;
  switch (op) {
    case BinaryOp::Add: if constexpr (fl) return a + b; else return T(U(a) + U(b));
    case BinaryOp::Sub: if constexpr (fl) return a - b; else return T(U(a) - U(b));
    case BinaryOp::Mul: if constexpr (fl) return a * b; else return T(U(a) * U(b));
    case BinaryOp::Div:
      if constexpr (fl) return a / b;
      else if (b == 0) return T(0);
      else if (std::is_signed_v<T> && b == T(-1)) return T(U(0) - U(a));
      else return T(a / b);  // integers truncate toward zero, as the CPU oracle does
    case BinaryOp::Pow: return pow_t(a, b);
    case BinaryOp::Max: if constexpr (fl) return (a != a || b != b) ? a + b : (a > b ? a : b); else return a > b ? a : b;
    case BinaryOp::Min: if constexpr (fl) return (a != a || b != b) ? a + b : (a < b ? a : b); else return a < b ? a : b;
    case BinaryOp::FMod:
      if constexpr (fl) return T(fmod(double(a), double(b)));
      else return (b == 0 || (std::is_signed_v<T> && b == T(-1))) ? T(0) : T(a % b);
    case BinaryOp::FloorMod:
      if constexpr (fl) {
        const double r = fmod(double(a), double(b));
        return T((r != 0 && ((r < 0) != (b < 0))) ? r + double(b) : r);
      } else {
        if (b == 0 || (std::is_signed_v<T> && b == T(-1))) return T(0);
        const T r = a % b;
        if constexpr (std::is_signed_v<T>) return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
        else return r;
      }
    case BinaryOp::BitAnd: if constexpr (!fl) return a & b; else return a;
    case BinaryOp::BitOr: if constexpr (!fl) return a | b; else return a;
    case BinaryOp::BitXor: if constexpr (!fl) return a ^ b; else return a;
    default: return a;
  }
}

template <class T>
__device__ inline bool predicate(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::And: return a && b;
    case BinaryOp::Or: return a || b;
    case BinaryOp::Xor: return bool(a) != bool(b);
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    default: return a >= b;
  }
}

template <class T>
__global__ void binary_kernel(BinaryOp op, const T* a, Strides sa, const T* b, Strides sb, void* y, Iter it) {
  const bool pred = op >= BinaryOp::And;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < it.numel; i += int64_t(gridDim.x) * blockDim.x) {
    const T x = a[offset_of(i, it, sa)], z = b[offset_of(i, it, sb)];
    if (pred) static_cast<bool*>(y)[i] = predicate(op, x, z);
    else static_cast<T*>(y)[i] = arith(op, x, z);
  }
}

// The contiguous fast paths: y[i] = f(x0[i], x1[i], ...) over n elements, 16 bytes of every
// operand per iteration (all 16-byte aligned), then a scalar tail; f is the arithmetic of
// the strided kernel the path replaces, element by element, so the bits are the same.
struct alignas(16) Vec16 {
  uint32_t w[4];
};
template <class T, class F, size_t... Is, class... In>
__device__ inline void map16(std::index_sequence<Is...>, F f, int64_t n, T* y, const In*... x) {
  constexpr int V = 16 / sizeof(T);
  const int64_t nv = n / V, step = int64_t(gridDim.x) * blockDim.x, first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t j = first; j < nv; j += step) {
    const Vec16 v[] = {reinterpret_cast<const Vec16*>(x)[j]...};
    Vec16 r;
#pragma unroll
    for (int e = 0; e < V; ++e) reinterpret_cast<T*>(&r)[e] = f(reinterpret_cast<const T*>(&v[Is])[e]...);
    reinterpret_cast<Vec16*>(y)[j] = r;
  }
  for (int64_t i = nv * V + first; i < n; i += step) y[i] = f(x[i]...);
}

// Both operands contiguous and of the output's shape (a residual add): binary_kernel's
// (float) or binary_low_kernel's (half types) arithmetic.
template <class T>
__global__ void binary_vec_kernel(BinaryOp op, const T* a, const T* b, T* y, int64_t n) {
  map16(std::make_index_sequence<2>(), [op](T x, T z) -> T {
    if constexpr (std::is_same_v<T, float>) return arith(op, x, z);
    else return stf<T>(arith(op, ldf(x), ldf(z)));
  }, n, y, a, b);
}

// unary_kernel's / unary_low_kernel's arithmetic (x and y 16-byte aligned).
template <class T>
__global__ void unary_vec_kernel(UnaryArgs a, const T* x, T* y, int64_t n) {
  map16(std::make_index_sequence<1>(), [&a](T v) -> T {
    if constexpr (std::is_same_v<T, float>) return unary_f(a, v);
    else return stf<T>(unary_f(a, ldf(v)));
  }, n, y, x);
}

template <class T>
__global__ void binary_low_kernel(BinaryOp op, const T* a, Strides sa, const T* b, Strides sb, void* y, Iter it) {
  const bool pred = op >= BinaryOp::And;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < it.numel; i += int64_t(gridDim.x) * blockDim.x) {
    const float x = ldf(a[offset_of(i, it, sa)]), z = ldf(b[offset_of(i, it, sb)]);
    if (pred) static_cast<bool*>(y)[i] = predicate(op, x, z);
    else static_cast<T*>(y)[i] = stf<T>(arith(op, x, z));
  }
}

// One thread per output element: the inputs loaded once, the program run in f32 (storage
// in T, each instruction's result rounded to T as the program's types say). The loops run
// over the constant maxima so that every parameter index is a compile-time constant (see
// offset_of); the values live in shared memory, one row per thread (an odd row length:
// no bank conflicts), as instructions name their operands at run time.
constexpr int kFusedRow = kMaxFusedInputs + kMaxFusedOps + 1;
template <class T>
__global__ void fused_kernel(FusedArgs a, FusedPtrs p, T* y) {
  constexpr bool low = !std::is_same_v<T, float>;
  extern __shared__ float fused_values[];
  float* v = fused_values + threadIdx.x * kFusedRow;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < a.it.numel; i += int64_t(gridDim.x) * blockDim.x) {
#pragma unroll
    for (int k = 0; k < kMaxFusedInputs; ++k)
      if (k < a.n_in) v[k] = ldf(static_cast<const T*>(p.in[k])[offset_of(i, a.it, a.in[k])]);
    float r = 0;
#pragma unroll
    for (int j = 0; j < kMaxFusedOps; ++j) {
      if (j >= a.n_ops) break;
      const FusedInstr& o = a.ops[j];
      r = o.kind == 0 ? unary_f(o.u, v[o.x]) : o.kind == 1 ? arith(o.b, v[o.x], v[o.y]) : v[o.x];
      if constexpr (low) r = ldf(stf<T>(r));
      v[a.n_in + j] = r;
    }
    y[i] = stf<T>(r);
  }
}

template <int E>
__global__ void where_kernel(const bool* c, Strides sc, const void* a, Strides sa, const void* b, Strides sb, void* y,
                             Iter it) {
  using T = typename Elem<E>::T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < it.numel; i += int64_t(gridDim.x) * blockDim.x)
    static_cast<T*>(y)[i] = c[offset_of(i, it, sc)] ? static_cast<const T*>(a)[offset_of(i, it, sa)]
                                                     : static_cast<const T*>(b)[offset_of(i, it, sb)];
}

template <int E>
__global__ void strided_copy_kernel(const void* x, Strides sx, void* y, Strides sy, Iter it) {
  using T = typename Elem<E>::T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < it.numel; i += int64_t(gridDim.x) * blockDim.x)
    static_cast<T*>(y)[offset_of(i, it, sy)] = static_cast<const T*>(x)[offset_of(i, it, sx)];
}

// ---- cast: through the widest type of each kind (double for floats, int64 for ints)
template <class T> __device__ inline double to_d(T v) { return double(v); }
template <> __device__ inline double to_d(__half v) { return double(__half2float(v)); }
template <> __device__ inline double to_d(__nv_bfloat16 v) { return double(__bfloat162float(v)); }
template <class T> __device__ inline T from_d(double v) { return T(v); }
template <> __device__ inline __half from_d(double v) { return stf<__half>(float(v)); }
template <> __device__ inline __nv_bfloat16 from_d(double v) { return stf<__nv_bfloat16>(float(v)); }
template <> __device__ inline bool from_d(double v) { return v != 0.0; }

template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  constexpr bool s_int = std::is_integral_v<S>;
  constexpr bool d_int = std::is_integral_v<D> && !std::is_same_v<D, bool>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (s_int && d_int) {
      y[i] = D(int64_t(x[i]));  // integer to integer: wraps like the CPU's static_cast
    } else if constexpr (s_int && kF32Like<D>) {
      y[i] = stf<D>(float(x[i]));  // rounded to f32 once (not through f64: 64-bit integers), as the CPU
    } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, float>) {
      y[i] = x[i];
    } else if constexpr (kF32Like<S> && kF32Like<D>) {
      y[i] = stf<D>(ldf(x[i]));  // f32 holds every f16 / bf16 exactly: one rounding, as through double
    } else if constexpr (d_int) {
      const double v = to_d(x[i]);  // float to integer: truncation; NaN / out of range as the CPU does (0)
      y[i] = (v != v) ? D(0) : D(int64_t(v));
    } else {
      y[i] = from_d<D>(to_d(x[i]));
    }
  }
}

template <class S>
cudaError_t cast_from(ET to, const S* x, void* y, int64_t n, cudaStream_t s) {
  const unsigned g = blocks_for(n);
  switch (to) {
    case ET::F32: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<float*>(y), n); break;
    case ET::F16: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<__half*>(y), n); break;
    case ET::BF16: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<__nv_bfloat16*>(y), n); break;
    case ET::F64: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<double*>(y), n); break;
    case ET::I8: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<int8_t*>(y), n); break;
    case ET::U8: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<uint8_t*>(y), n); break;
    case ET::I16: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<int16_t*>(y), n); break;
    case ET::I32: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<int32_t*>(y), n); break;
    case ET::I64: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<int64_t*>(y), n); break;
    case ET::Bool: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<bool*>(y), n); break;
    case ET::U32: cast_kernel<<<g, kThreads, 0, s>>>(x, static_cast<uint32_t*>(y), n); break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t unary(const UnaryArgs& a, ET t, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const unsigned g = blocks_for(n);
  if (a.op == UnaryOp::Not) {
    unary_bool_kernel<<<g, kThreads, 0, s>>>(a, static_cast<const bool*>(x), static_cast<bool*>(y), n);
    return cudaGetLastError();
  }
  if (a.op == UnaryOp::IsNaN || a.op == UnaryOp::IsInf) {
    if (t == ET::F16) unary_low_bool_kernel<<<g, kThreads, 0, s>>>(a, static_cast<const __half*>(x), static_cast<bool*>(y), n);
    else if (t == ET::BF16)
      unary_low_bool_kernel<<<g, kThreads, 0, s>>>(a, static_cast<const __nv_bfloat16*>(x), static_cast<bool*>(y), n);
    else if (t == ET::F64) unary_bool_kernel<<<g, kThreads, 0, s>>>(a, static_cast<const double*>(x), static_cast<bool*>(y), n);
    else unary_bool_kernel<<<g, kThreads, 0, s>>>(a, static_cast<const float*>(x), static_cast<bool*>(y), n);
    return cudaGetLastError();
  }
  if ((t == ET::F32 || t == ET::F16 || t == ET::BF16) &&
      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0) {
    const unsigned gv = blocks_for(n / (t == ET::F32 ? 4 : 8) + 1);
    if (t == ET::F32) unary_vec_kernel<<<gv, kThreads, 0, s>>>(a, static_cast<const float*>(x), static_cast<float*>(y), n);
    else if (t == ET::F16) unary_vec_kernel<<<gv, kThreads, 0, s>>>(a, static_cast<const __half*>(x), static_cast<__half*>(y), n);
    else
      unary_vec_kernel<<<gv, kThreads, 0, s>>>(a, static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), n);
    return cudaGetLastError();
  }
#define RLX_UN(ET_, T_) \
  case ET_: unary_kernel<T_><<<g, kThreads, 0, s>>>(a, static_cast<const T_*>(x), static_cast<T_*>(y), n); break;
#define RLX_UN_LOW(ET_, T_) \
  case ET_: unary_low_kernel<T_><<<g, kThreads, 0, s>>>(a, static_cast<const T_*>(x), static_cast<T_*>(y), n); break;
  switch (t) {
    RLX_UN(ET::F32, float)
    RLX_UN_LOW(ET::F16, __half)
    RLX_UN_LOW(ET::BF16, __nv_bfloat16)
    RLX_UN(ET::F64, double)
    RLX_UN(ET::I8, int8_t)
    RLX_UN(ET::U8, uint8_t)
    RLX_UN(ET::I16, int16_t)
    RLX_UN(ET::I32, int32_t)
    RLX_UN(ET::I64, int64_t)
    RLX_UN(ET::U32, uint32_t)
    default: return cudaErrorInvalidValue;
  }
#undef RLX_UN
#undef RLX_UN_LOW
  return cudaGetLastError();
}

cudaError_t binary(BinaryOp op, ET t, const void* a, const Strides& sa_in, const void* b, const Strides& sb_in, void* y,
                   const Iter& it_in, cudaStream_t s) {
  if (it_in.numel == 0) return cudaSuccess;
  Iter it = it_in;
  Strides sa = sa_in, sb = sb_in;
  Strides* ops[] = {&sa, &sb};
  coalesce(it, ops, 2);
  const bool contiguous = it.rank == 1 && sa.s[0] == 1 && sb.s[0] == 1 && op < BinaryOp::And &&
                          (t == ET::F32 || t == ET::F16 || t == ET::BF16);
  if (contiguous) {
    const size_t esz = t == ET::F32 ? 4 : 2;
    const auto* pa = static_cast<const uint8_t*>(a) + sa.base * int64_t(esz);
    const auto* pb = static_cast<const uint8_t*>(b) + sb.base * int64_t(esz);
    if (((reinterpret_cast<uintptr_t>(pa) | reinterpret_cast<uintptr_t>(pb) | reinterpret_cast<uintptr_t>(y)) & 15) == 0) {
      const unsigned gv = blocks_for(it.numel / int64_t(16 / esz) + 1);
      if (t == ET::F32)
        binary_vec_kernel<<<gv, kThreads, 0, s>>>(op, reinterpret_cast<const float*>(pa), reinterpret_cast<const float*>(pb),
                                                  static_cast<float*>(y), it.numel);
      else if (t == ET::F16)
        binary_vec_kernel<<<gv, kThreads, 0, s>>>(op, reinterpret_cast<const __half*>(pa), reinterpret_cast<const __half*>(pb),
                                                  static_cast<__half*>(y), it.numel);
      else
        binary_vec_kernel<<<gv, kThreads, 0, s>>>(op, reinterpret_cast<const __nv_bfloat16*>(pa),
                                                  reinterpret_cast<const __nv_bfloat16*>(pb),
                                                  static_cast<__nv_bfloat16*>(y), it.numel);
      return cudaGetLastError();
    }
  }
  const unsigned g = blocks_for(it.numel);
#define RLX_BIN(ET_, T_) \
  case ET_: binary_kernel<T_><<<g, kThreads, 0, s>>>(op, static_cast<const T_*>(a), sa, static_cast<const T_*>(b), sb, y, it); break;
  switch (t) {
    case ET::F16:
      binary_low_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const __half*>(a), sa, static_cast<const __half*>(b), sb, y, it);
      break;
    case ET::BF16:
      binary_low_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const __nv_bfloat16*>(a), sa,
                                               static_cast<const __nv_bfloat16*>(b), sb, y, it);
      break;
    RLX_BIN(ET::F32, float)
    RLX_BIN(ET::F64, double)
    RLX_BIN(ET::I32, int32_t)
    RLX_BIN(ET::I64, int64_t)
    RLX_BIN(ET::I8, int8_t)
    RLX_BIN(ET::U8, uint8_t)
    RLX_BIN(ET::I16, int16_t)
    RLX_BIN(ET::U32, uint32_t)
    RLX_BIN(ET::Bool, uint8_t)
    default: return cudaErrorInvalidValue;
  }
#undef RLX_BIN
  return cudaGetLastError();
}

cudaError_t fused(ET t, const FusedArgs& args, const FusedPtrs& p, void* y, cudaStream_t s) {
  if (args.it.numel == 0) return cudaSuccess;
  if (args.n_in < 1 || args.n_in > kMaxFusedInputs || args.n_ops < 1 || args.n_ops > kMaxFusedOps)
    return cudaErrorInvalidValue;
  FusedArgs a = args;
  Strides* ops[kMaxFusedInputs];
  for (int k = 0; k < a.n_in; ++k) ops[k] = &a.in[k];
  coalesce(a.it, ops, a.n_in);
  const unsigned g = blocks_for(a.it.numel);
  const size_t shm = size_t(kThreads) * kFusedRow * sizeof(float);
  switch (t) {
    case ET::F32: fused_kernel<<<g, kThreads, shm, s>>>(a, p, static_cast<float*>(y)); break;
    case ET::F16: fused_kernel<<<g, kThreads, shm, s>>>(a, p, static_cast<__half*>(y)); break;
    case ET::BF16: fused_kernel<<<g, kThreads, shm, s>>>(a, p, static_cast<__nv_bfloat16*>(y)); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t where(int elem, const void* c, const Strides& sc_in, const void* a, const Strides& sa_in, const void* b,
                  const Strides& sb_in, void* y, const Iter& it_in, cudaStream_t s) {
  if (it_in.numel == 0) return cudaSuccess;
  Iter it = it_in;
  Strides sc = sc_in, sa = sa_in, sb = sb_in;
  Strides* ops[] = {&sc, &sa, &sb};
  coalesce(it, ops, 3);
  const unsigned g = blocks_for(it.numel);
  const bool* cb = static_cast<const bool*>(c);
  switch (elem) {
    case 1: where_kernel<1><<<g, kThreads, 0, s>>>(cb, sc, a, sa, b, sb, y, it); break;
    case 2: where_kernel<2><<<g, kThreads, 0, s>>>(cb, sc, a, sa, b, sb, y, it); break;
    case 4: where_kernel<4><<<g, kThreads, 0, s>>>(cb, sc, a, sa, b, sb, y, it); break;
    case 8: where_kernel<8><<<g, kThreads, 0, s>>>(cb, sc, a, sa, b, sb, y, it); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {
// A copy whose innermost dim is contiguous in both operands (a head transpose [B,S,H,D] ->
// [B,H,S,D], a slice or concat of whole rows) moves the widest unit of 16, 8 or 4 bytes that
// divides that run, every outer stride, both bases and both pointers' alignment: one thread
// per unit, so fewer index divisions and wider memory transactions than one per element
// (the transposes of BERT's attention heads were 0.6 of its 2.8 ms in f16).
void widen_copy(int& elem, const void* x, Strides& sx, void* y, Strides& sy, Iter& it) {
  const int last = it.rank - 1;
  if (last < 0 || sx.s[last] != 1 || sy.s[last] != 1) return;
  for (int v : {16, 8, 4}) {
    if (v <= elem) return;
    const int64_t r = v / elem;
    bool ok = it.dims[last] % r == 0 && sx.base % r == 0 && sy.base % r == 0 &&
              reinterpret_cast<uintptr_t>(x) % uintptr_t(v) == 0 && reinterpret_cast<uintptr_t>(y) % uintptr_t(v) == 0;
    for (int k = 0; k < last && ok; ++k) ok = sx.s[k] % r == 0 && sy.s[k] % r == 0;
    if (!ok) continue;
    it.dims[last] /= r;
    it.numel /= r;
    for (int k = 0; k < last; ++k) {
      sx.s[k] /= r;
      sy.s[k] /= r;
    }
    sx.base /= r;
    sy.base /= r;
    elem = v;
    return;
  }
}

// A copy whose output runs along one dim and whose input runs along another (a true
// transpose, e.g. BERT's K heads [B,S,H,D] -> [B,H,D,S]): element by element, one side's
// accesses are strided and each touches its own 32-byte sector. Here a block moves 32 x 32
// tiles through shared memory, reading along the input's contiguous dim and writing along
// the output's, both coalesced. The remaining dims index the tile's batch.
struct TileCopy {
  int64_t rows = 0, cols = 0;    // the input-contiguous dim (rows of the tile) and the output-contiguous one
  int64_t sx_row = 1, sx_col = 0, sy_row = 0, sy_col = 1;
  int nb = 0;                    // batch dims
  int64_t bdims[kMaxRank] = {}, bsx[kMaxRank] = {}, bsy[kMaxRank] = {};
  int64_t base_x = 0, base_y = 0, batches = 1, tiles_r = 0, tiles_c = 0;
};

template <int E>
__global__ void tile_copy_kernel(const void* xv, void* yv, TileCopy t) {
  using T = typename Elem<E>::T;
  __shared__ T tile[32][33];
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  const int64_t tiles = t.tiles_r * t.tiles_c;
  for (int64_t job = blockIdx.x; job < tiles * t.batches; job += gridDim.x) {
    int64_t b = job / tiles, tr = (job % tiles) / t.tiles_c, tc = job % t.tiles_c;
    int64_t ox = t.base_x, oy = t.base_y;
    for (int d = t.nb - 1; d >= 0; --d) {
      const int64_t q = b % t.bdims[d];
      b /= t.bdims[d];
      ox += q * t.bsx[d];
      oy += q * t.bsy[d];
    }
    const int64_t r0 = tr * 32, c0 = tc * 32;
    __syncthreads();  // the previous tile's reads are done
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
      const int64_t r = r0 + threadIdx.x, c = c0 + j;
      if (r < t.rows && c < t.cols) tile[j][threadIdx.x] = x[ox + r * t.sx_row + c * t.sx_col];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
      const int64_t c = c0 + threadIdx.x, r = r0 + j;
      if (r < t.rows && c < t.cols) y[oy + r * t.sy_row + c * t.sy_col] = tile[threadIdx.x][j];
    }
  }
}

// The tiled plan when the output's innermost dim is contiguous there and strided in the
// input, and another dim of at least 8 is contiguous in the input.
bool tile_plan(const Strides& sx, const Strides& sy, const Iter& it, TileCopy& t) {
  const int last = it.rank - 1;
  if (last < 1 || sy.s[last] != 1 || sx.s[last] == 1 || it.dims[last] < 8) return false;
  int row = -1;
  for (int k = 0; k < last; ++k)
    if (sx.s[k] == 1 && it.dims[k] >= 8) row = k;
  if (row < 0) return false;
  t.rows = it.dims[row], t.cols = it.dims[last];
  t.sx_row = sx.s[row], t.sx_col = sx.s[last], t.sy_row = sy.s[row], t.sy_col = sy.s[last];
  t.base_x = sx.base, t.base_y = sy.base;
  for (int k = 0; k < last; ++k) {
    if (k == row) continue;
    t.bdims[t.nb] = it.dims[k], t.bsx[t.nb] = sx.s[k], t.bsy[t.nb] = sy.s[k];
    t.batches *= it.dims[k];
    ++t.nb;
  }
  t.tiles_r = (t.rows + 31) / 32, t.tiles_c = (t.cols + 31) / 32;
  return true;
}
}  // namespace

cudaError_t strided_copy(int elem, const void* x, const Strides& sx_in, void* y, const Strides& sy_in, const Iter& it_in,
                         cudaStream_t s) {
  if (it_in.numel == 0) return cudaSuccess;
  Iter it = it_in;
  Strides sx = sx_in, sy = sy_in;
  Strides* ops[] = {&sx, &sy};
  coalesce(it, ops, 2);
  widen_copy(elem, x, sx, y, sy, it);
  TileCopy t;
  if (elem <= 8 && tile_plan(sx, sy, it, t)) {
    const unsigned gt = unsigned(std::min<int64_t>(t.tiles_r * t.tiles_c * t.batches, 65535LL * 4));
    const dim3 block(32, 8);
    switch (elem) {
      case 1: tile_copy_kernel<1><<<gt, block, 0, s>>>(x, y, t); break;
      case 2: tile_copy_kernel<2><<<gt, block, 0, s>>>(x, y, t); break;
      case 4: tile_copy_kernel<4><<<gt, block, 0, s>>>(x, y, t); break;
      default: tile_copy_kernel<8><<<gt, block, 0, s>>>(x, y, t); break;
    }
    return cudaGetLastError();
  }
  const unsigned g = blocks_for(it.numel);
  switch (elem) {
    case 1: strided_copy_kernel<1><<<g, kThreads, 0, s>>>(x, sx, y, sy, it); break;
    case 2: strided_copy_kernel<2><<<g, kThreads, 0, s>>>(x, sx, y, sy, it); break;
    case 4: strided_copy_kernel<4><<<g, kThreads, 0, s>>>(x, sx, y, sy, it); break;
    case 8: strided_copy_kernel<8><<<g, kThreads, 0, s>>>(x, sx, y, sy, it); break;
    case 16: strided_copy_kernel<16><<<g, kThreads, 0, s>>>(x, sx, y, sy, it); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {
__global__ void spin_kernel(int64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (int64_t(t - t0) < ns);
}
}  // namespace

cudaError_t spin(int64_t ns, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(ns);
  return cudaGetLastError();
}

namespace {
// Copies of at most RunEnd::kMaxBytes each over one block, 16 bytes at a time where both
// ends and the size allow it, else byte by byte (a handful of bytes in practice: a launch,
// not bandwidth, is what they cost).
__global__ void run_end_kernel(RunEnd e) {
  dev::grid_wait();
  for (int c = 0; c < e.n; ++c) {
    if (((reinterpret_cast<uintptr_t>(e.src[c]) | reinterpret_cast<uintptr_t>(e.dst[c]) | e.bytes[c]) & 15) == 0) {
      const uint4* s = reinterpret_cast<const uint4*>(e.src[c]);
      uint4* d = reinterpret_cast<uint4*>(e.dst[c]);
      for (uint32_t i = threadIdx.x; i < e.bytes[c] / 16; i += blockDim.x) d[i] = s[i];
    } else {
      for (uint32_t i = threadIdx.x; i < e.bytes[c]; i += blockDim.x) e.dst[c][i] = e.src[c][i];
    }
  }
  if (e.err_host && threadIdx.x < 2) e.err_host[threadIdx.x] = e.err[threadIdx.x];
}
}  // namespace

cudaError_t run_end(const RunEnd& e, cudaStream_t s) {
  if (e.n == 0 && !e.err_host) return cudaSuccess;
  return dev::launch(run_end_kernel, 1, 256, 0, s, e);
}

cudaError_t cast(ET from, ET to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case ET::F32: return cast_from(to, static_cast<const float*>(x), y, n, s);
    case ET::F16: return cast_from(to, static_cast<const __half*>(x), y, n, s);
    case ET::BF16: return cast_from(to, static_cast<const __nv_bfloat16*>(x), y, n, s);
    case ET::F64: return cast_from(to, static_cast<const double*>(x), y, n, s);
    case ET::I8: return cast_from(to, static_cast<const int8_t*>(x), y, n, s);
    case ET::U8: return cast_from(to, static_cast<const uint8_t*>(x), y, n, s);
    case ET::I16: return cast_from(to, static_cast<const int16_t*>(x), y, n, s);
    case ET::I32: return cast_from(to, static_cast<const int32_t*>(x), y, n, s);
    case ET::I64: return cast_from(to, static_cast<const int64_t*>(x), y, n, s);
    case ET::Bool: return cast_from(to, static_cast<const bool*>(x), y, n, s);
    case ET::U32: return cast_from(to, static_cast<const uint32_t*>(x), y, n, s);
  }
  return cudaErrorInvalidValue;
}

bool clusters() {
  static const bool ok = [] {
    int dev = 0, v = 0;
    const bool r = cudaGetDevice(&dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&v, cudaDevAttrClusterLaunch, dev) == cudaSuccess && v != 0;
    cudaGetLastError();
    return r;
  }();
  return ok;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("RLX_CUDA_PDL");
    if (v && std::string(v) == "0") return false;
    int dev = 0, major = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
  }();
  return on;
}

}  // namespace rlx::cuda
