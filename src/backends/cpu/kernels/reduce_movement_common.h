// Helpers shared by the reduce, norm and movement kernel families: element traits per
// dtype (storage type, accumulator type, load/store), inline half conversions, static
// dims and strides, a parallel_for wrapper that runs inline without a pool, and a
// multi-index odometer. Everything here is header-only and allocation-free at run time.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/elementwise_types.h"
#include "backends/cpu/thread_pool.h"
#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx::cpu::reduce_movement {

// Most merged dims a strided loop supports (after dropping size-1 dims and merging).
inline constexpr int kMaxDims = 16;

// ---- element traits: storage type S, accumulator/compute type A. Half types use the
// elementwise kernels' inline conversions, so inner loops stay tight.
template <DType D> struct Elem;
template <> struct Elem<DType::F32> {
  using S = float; using A = float;
  static A load(S v) { return v; }
  static S store(A v) { return v; }
};
template <> struct Elem<DType::F64> {
  using S = double; using A = double;
  static A load(S v) { return v; }
  static S store(A v) { return v; }
};
template <> struct Elem<DType::F16> {
  using S = uint16_t; using A = float;
  static A load(S v) { return ew::half_to_float(v); }
  static S store(A v) { return ew::float_to_half(v); }
};
template <> struct Elem<DType::BF16> {
  using S = uint16_t; using A = float;
  static A load(S v) { return ew::bhalf_to_float(v); }
  static S store(A v) { return ew::float_to_bhalf(v); }
};
template <class T> struct IntElem {
  using S = T; using A = int64_t;
  static A load(S v) { return A(v); }
  static S store(A v) { return S(v); }  // wraps like the integer type would
};
template <> struct Elem<DType::I8> : IntElem<int8_t> {};
template <> struct Elem<DType::I16> : IntElem<int16_t> {};
template <> struct Elem<DType::I32> : IntElem<int32_t> {};
template <> struct Elem<DType::I64> : IntElem<int64_t> {};
template <> struct Elem<DType::U8> : IntElem<uint8_t> {};
template <> struct Elem<DType::U32> : IntElem<uint32_t> {};
template <> struct Elem<DType::Bool> {
  using S = uint8_t; using A = int64_t;
  static A load(S v) { return v != 0; }
  static S store(A v) { return v != 0; }
};
template <> struct Elem<DType::C64> {
  using S = std::complex<float>; using A = std::complex<float>;
  static A load(S v) { return v; }
  static S store(A v) { return v; }
};
template <> struct Elem<DType::C128> {
  using S = std::complex<double>; using A = std::complex<double>;
  static A load(S v) { return v; }
  static S store(A v) { return v; }
};

template <class A> inline constexpr bool kIsComplex = false;
template <class T> inline constexpr bool kIsComplex<std::complex<T>> = true;

// Calls f(Elem<D>{}) for the runtime dtype; returns false for dtypes not in the list.
template <class F> bool visit_float(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(Elem<DType::F32>{}); return true;
    case DType::F64: f(Elem<DType::F64>{}); return true;
    case DType::F16: f(Elem<DType::F16>{}); return true;
    case DType::BF16: f(Elem<DType::BF16>{}); return true;
    default: return false;
  }
}
template <class F> bool visit_real(DType t, F&& f) {  // floats, integers, bool
  if (visit_float(t, f)) return true;
  switch (t) {
    case DType::I8: f(Elem<DType::I8>{}); return true;
    case DType::I16: f(Elem<DType::I16>{}); return true;
    case DType::I32: f(Elem<DType::I32>{}); return true;
    case DType::I64: f(Elem<DType::I64>{}); return true;
    case DType::U8: f(Elem<DType::U8>{}); return true;
    case DType::U32: f(Elem<DType::U32>{}); return true;
    case DType::Bool: f(Elem<DType::Bool>{}); return true;
    default: return false;
  }
}
template <class F> bool visit_any(DType t, F&& f) {
  if (visit_real(t, f)) return true;
  switch (t) {
    case DType::C64: f(Elem<DType::C64>{}); return true;
    case DType::C128: f(Elem<DType::C128>{}); return true;
    default: return false;
  }
}

// ---- byte-size generic elements for data movement
struct alignas(8) Bytes16 { uint64_t lo, hi; };
template <size_t E> struct ElemOfSize;
template <> struct ElemOfSize<1> { using T = uint8_t; };
template <> struct ElemOfSize<2> { using T = uint16_t; };
template <> struct ElemOfSize<4> { using T = uint32_t; };
template <> struct ElemOfSize<8> { using T = uint64_t; };
template <> struct ElemOfSize<16> { using T = Bytes16; };

// Picks fn<E> for the element size; nullptr for sizes other than 1, 2, 4, 8, 16.
template <template <size_t> class Pick>
KernelFn by_elem_size(size_t e) {
  switch (e) {
    case 1: return Pick<1>::fn;
    case 2: return Pick<2>::fn;
    case 4: return Pick<4>::fn;
    case 8: return Pick<8>::fn;
    case 16: return Pick<16>::fn;
    default: return nullptr;
  }
}

// ---- shapes
inline std::vector<int64_t> dims_of(const Shape& s) { return s.static_dims(); }
// Product of d[b, e) (clamped to the size of d).
inline int64_t prod(const std::vector<int64_t>& d, size_t b = 0, size_t e = SIZE_MAX) {
  const int64_t* it = d.data() + std::min(b, d.size());
  const int64_t* end = d.data() + std::min(e, d.size());
  int64_t p = 1;
  for (; it < end; ++it) p *= *it;
  return p;
}
inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = int(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

// Throws an InvalidArgument/Unsupported/Internal error naming the node.
template <class... Args>
[[noreturn]] void node_fail(ErrorCategory c, const Node& n, const Args&... args) {
  fail(c, "node '", n.name, "' (", op_name(n.kind), "): ", args...);
}

// ---- threading: f(begin, end) over [0, n). Inline without a pool or for small n.
// The std::function wraps one reference so it never allocates.
template <class F>
void par_for(const RunCtx& ctx, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (!ctx.pool || ctx.pool->size() <= 1 || n <= grain) {
    f(int64_t(0), n);
    return;
  }
  auto* fp = &f;
  ctx.pool->parallel_for(n, grain, [fp](int64_t b, int64_t e) { (*fp)(b, e); });
}

// Grain (items per chunk) so one chunk holds roughly `target` units of work.
inline int64_t grain_for(int64_t work_per_item, int64_t target = 32768) {
  return std::max<int64_t>(1, target / std::max<int64_t>(1, work_per_item));
}

// ---- multi-index walk over dims (row-major) accumulating an offset with strides.
struct Odometer {
  int n = 0;
  std::array<int64_t, kMaxDims> dim{}, stride{}, idx{};
  int64_t offset = 0;

  void init(int ndims, const int64_t* dims, const int64_t* strides) {
    n = ndims;
    for (int i = 0; i < n; ++i) { dim[i] = dims[i]; stride[i] = strides[i]; idx[i] = 0; }
    offset = 0;
  }
  void seek(int64_t flat) {  // position at row-major flat index
    offset = 0;
    for (int i = n - 1; i >= 0; --i) {
      idx[i] = dim[i] ? flat % dim[i] : 0;
      flat = dim[i] ? flat / dim[i] : 0;
      offset += idx[i] * stride[i];
    }
  }
  void next() {
    for (int i = n - 1; i >= 0; --i) {
      offset += stride[i];
      if (++idx[i] < dim[i]) return;
      offset -= stride[i] * dim[i];
      idx[i] = 0;
    }
  }
};

}  // namespace rlx::cpu::reduce_movement
