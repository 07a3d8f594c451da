// Row functions for softmax, log_softmax, layer_norm and rms_norm (see norm_rows.h): the
// scalar versions and the choice by ISA. The vector versions are one implementation
// (norm_rows_vec.h) compiled per ISA in vec_kernels_avx2.cpp / vec_kernels_avx512.cpp.
#include "backends/cpu/kernels/norm_rows.h"

#include <cmath>
#include <limits>


namespace rlx::cpu::reduce_movement {
namespace {

// ---- scalar (any float type): 8 lane accumulators in a fixed combine order
template <class A> A lanes_sum(const A* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

template <class A> A row_max(const A* x, int64_t n) {
  A m = -std::numeric_limits<A>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Writes exp(x - m) to y (may alias x) and returns the sum.
template <class A> A exp_sum(const A* x, A* y, int64_t n, A m, bool store) {
  A l[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const A e = std::exp(x[i] - m);
    if (store) y[i] = e;
    l[i & 7] += e;
  }
  return lanes_sum(l);
}

template <class A> void softmax_scalar(const A* x, A* y, int64_t n) {
  const A m = row_max(x, n);
  const A s = exp_sum(x, y, n, m, true);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] / s;
}

template <class A> void log_softmax_scalar(const A* x, A* y, int64_t n) {
  const A m = row_max(x, n);
  const A ls = std::log(exp_sum(x, y, n, m, false));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
}

template <class A> A row_sum(const A* x, int64_t n, A shift, bool square) {
  A l[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const A d = x[i] - shift;
    l[i & 7] += square ? d * d : d;
  }
  return lanes_sum(l);
}

template <class A>
void layer_norm_scalar(const A* x, A* y, int64_t n, const A* s, const A* b, A eps) {
  const A mean = row_sum(x, n, A(0), false) / A(n);
  const A var = row_sum(x, n, mean, true) / A(n);
  const A r = A(1) / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    A v = (x[i] - mean) * r;
    if (s) v *= s[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

template <class A> void rms_norm_scalar(const A* x, A* y, int64_t n, const A* s, A eps) {
  const A r = A(1) / std::sqrt(row_sum(x, n, A(0), true) / A(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = s ? x[i] * r * s[i] : x[i] * r;
}

template <class A> NormRows<A> scalar_rows() {
  NormRows<A> r;
  r.softmax = softmax_scalar<A>;
  r.log_softmax = log_softmax_scalar<A>;
  r.layer_norm = layer_norm_scalar<A>;
  r.rms_norm = rms_norm_scalar<A>;
  return r;
}


}  // namespace

const NormRows<float>& norm_rows_f32(Isa isa) {
  static const NormRows<float> scalar = scalar_rows<float>();
  if (isa == Isa::Avx512)
    if (const NormRows<float>* r = norm_rows_f32_avx512()) return *r;
  if (isa == Isa::Avx512 || isa == Isa::Avx2)
    if (const NormRows<float>* r = norm_rows_f32_avx2()) return *r;
  return scalar;
}

const NormRows<double>& norm_rows_f64() {
  static const NormRows<double> scalar = scalar_rows<double>();
  return scalar;
}

}  // namespace rlx::cpu::reduce_movement
