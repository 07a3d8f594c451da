// Internal: the one set of vectorized F32 math functions of the CPU kernels, written once
// over the vector-traits struct V of the including namespace (vec_traits_avx2.h /
// vec_traits_avx512.h) and pasted into a region compiled for that ISA, after V. Used by the
// elementwise spans (elementwise_vec_impl.h) and the norm rows (norm_rows_vec.h).
//
// Accuracy (vs correctly rounded): exp, log, sigmoid, silu ~2 ulp; tanh, erf, gelu ~1e-6
// relative. No include guard: each ISA's namespace gets its own copy.

using F = V::F;
constexpr int W = V::W;

inline F splat(float v) { return V::set1(v); }

// e^x: n = round(x / ln2), r = x - n ln2 (two-part constant), Taylor to r^7, scale by
// 2^n in two steps so results down to the subnormal range and up to overflow are right.
inline F vexp(F x) {
  x = V::clamp(x, -104.0f, 89.0f);  // NaN preserved
  const F n = V::round(V::mul(x, splat(1.44269504088896341f)));
  F r = V::fnmadd(n, splat(0.693359375f), x);
  r = V::fnmadd(n, splat(-2.12194440054690583e-4f), r);
  F p = splat(1.0f / 5040.0f);
  p = V::fmadd(p, r, splat(1.0f / 720.0f));
  p = V::fmadd(p, r, splat(1.0f / 120.0f));
  p = V::fmadd(p, r, splat(1.0f / 24.0f));
  p = V::fmadd(p, r, splat(1.0f / 6.0f));
  p = V::fmadd(p, r, splat(0.5f));
  p = V::fmadd(p, r, splat(1.0f));
  p = V::fmadd(p, r, splat(1.0f));
  return V::scale_pow2(p, n);
}

// sigmoid via e = e^{-|x|} (never overflows): 1/(1+e) for x >= 0, e/(1+e) below, so
// results for x << 0 reach the subnormal range instead of flushing to 0.
inline F vsigmoid(F x) {
  const F e = vexp(V::neg(V::abs(x)));
  const F r = V::div(splat(1.0f), V::add(splat(1.0f), e));
  return V::select(V::lt(x, splat(0.0f)), V::mul(e, r), r);
}

// tanh: odd polynomial (minimax fit of tanh(x)/x in x^2) below 0.6, else
// 1 - 2/(e^{2|x|}+1) with the sign restored.
inline F vtanh(F x) {
  const F ax = V::abs(x);
  const F x2 = V::mul(x, x);
  F p = splat(-0.00584964391f);
  p = V::fmadd(p, x2, splat(0.02075134911f));
  p = V::fmadd(p, x2, splat(-0.05376798351f));
  p = V::fmadd(p, x2, splat(0.1333167963f));
  p = V::fmadd(p, x2, splat(-0.3333328283f));
  p = V::fmadd(p, x2, splat(0.9999999975f));
  const F small = V::mul(x, p);
  const F e = vexp(V::add(ax, ax));
  const F one = splat(1.0f);
  const F big = V::copysign(V::sub(one, V::div(splat(2.0f), V::add(e, one))), x);
  return V::select(V::lt(ax, splat(0.6f)), small, big);
}

// erfc(z) for z >= 0 given z^2 = z2 + z2lo exactly: below 1 from the erf polynomial,
// above as e^{-z^2} * g(1/z) / z with g a fitted polynomial in s = (1/z - 0.55)/0.45.
inline F erf_small(F z) {  // erf(z) for |z| <= 1: z * P(z^2)
  const F t = V::mul(z, z);
  F p = splat(7.875875063e-5f);
  p = V::fmadd(p, t, splat(-0.0008016864287f));
  p = V::fmadd(p, t, splat(0.005189087423f));
  p = V::fmadd(p, t, splat(-0.02685421201f));
  p = V::fmadd(p, t, splat(0.1128359472f));
  p = V::fmadd(p, t, splat(-0.3761262667f));
  p = V::fmadd(p, t, splat(1.128379166f));
  return V::mul(z, p);
}
inline F erfc_large(F z, F z2, F z2lo) {  // z > 1
  const F t = V::div(splat(1.0f), z);
  const F s = V::mul(V::sub(V::max(t, splat(0.1f)), splat(0.55f)), splat(1.0f / 0.45f));
  F g = splat(1.755872569e-5f);
  g = V::fmadd(g, s, splat(-1.649908412e-5f));
  g = V::fmadd(g, s, splat(-7.069583937e-5f));
  g = V::fmadd(g, s, splat(0.0001779930204f));
  g = V::fmadd(g, s, splat(-0.0002276435375f));
  g = V::fmadd(g, s, splat(7.990062515e-5f));
  g = V::fmadd(g, s, splat(0.0009206597581f));
  g = V::fmadd(g, s, splat(-0.003974019145f));
  g = V::fmadd(g, s, splat(0.008962741819f));
  g = V::fmadd(g, s, splat(-0.004124047068f));
  g = V::fmadd(g, s, splat(-0.076515798f));
  g = V::fmadd(g, s, splat(0.5023534283f));
  // e^{-(z2 + z2lo)} ~= e^{-z2} (1 - z2lo): z2lo is below half an ulp of z2.
  const F e = V::mul(vexp(V::neg(z2)), V::fnmadd(z2lo, splat(1.0f), splat(1.0f)));
  return V::mul(V::mul(e, g), t);
}
inline F verf(F x) {
  const F ax = V::min(splat(10.0f), V::abs(x));  // erf(10) rounds to 1; keeps x*x finite
  const F z2 = V::mul(ax, ax);
  const F z2lo = V::fmsub(ax, ax, z2);
  const F big = V::copysign(V::sub(splat(1.0f), erfc_large(ax, z2, z2lo)), x);
  return V::select(V::le(ax, splat(1.0f)), erf_small(x), big);
}

// gelu(x) = 0.5 x erfc(-x/sqrt2): for x < 0 uses erfc directly (no cancellation).
inline F vgelu_erf(F x) {
  const F xc = V::min(splat(20.0f), V::abs(x));  // erfc(20/sqrt2) underflows; keeps x*x finite
  const F z = V::mul(xc, splat(0.70710678118654752f));
  const F xx = V::mul(xc, xc);
  const F z2 = V::mul(xx, splat(0.5f));
  const F z2lo = V::mul(V::fmsub(xc, xc, xx), splat(0.5f));
  const F c_small = V::sub(splat(1.0f), erf_small(z));
  const F c = V::select(V::le(z, splat(1.0f)), c_small, erfc_large(z, z2, z2lo));  // erfc(|x|/sqrt2)
  const F half_c = V::mul(splat(0.5f), c);
  return V::mul(x, V::select(V::lt(x, splat(0.0f)), half_c, V::sub(splat(1.0f), half_c)));
}
inline F vgelu_tanh(F x) {  // x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
  const F x3 = V::mul(V::mul(x, x), x);
  const F u = V::mul(splat(0.79788456080286536f), V::fmadd(x3, splat(0.044715f), x));
  return V::mul(x, vsigmoid(V::add(u, u)));
}

// log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s) with
// s = (m-1)/(m+1), |s| <= 0.172, as an odd series to s^11. Subnormals are pre-scaled.
inline F vlog(F x) {
  const F tiny = splat(1.17549435e-38f);
  const auto sub = V::lt(x, tiny);
  const F xs = V::select(sub, V::mul(x, splat(8388608.0f)), x);  // * 2^23
  F m, e;
  V::split_exp(xs, m, e);  // xs = m * 2^e, m in [1, 2)
  const auto big = V::lt(splat(1.41421356f), m);
  m = V::select(big, V::mul(m, splat(0.5f)), m);
  e = V::add(V::select(big, V::add(e, splat(1.0f)), e), V::select(sub, splat(-23.0f), splat(0.0f)));
  const F f = V::sub(m, splat(1.0f));
  const F sv = V::div(f, V::add(m, splat(1.0f)));
  const F s2 = V::mul(sv, sv);
  F p = splat(2.0f / 11.0f);
  p = V::fmadd(p, s2, splat(2.0f / 9.0f));
  p = V::fmadd(p, s2, splat(2.0f / 7.0f));
  p = V::fmadd(p, s2, splat(2.0f / 5.0f));
  p = V::fmadd(p, s2, splat(2.0f / 3.0f));
  // log(m) = 2s + s*s2*p; add e*ln2 in two parts so e*ln2_hi is exact.
  const F lm = V::fmadd(V::mul(sv, s2), p, V::add(sv, sv));
  F r = V::fmadd(e, splat(-2.12194440054690583e-4f), lm);
  r = V::fmadd(e, splat(0.693359375f), r);
  // Specials: log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
  r = V::select(V::le(x, splat(0.0f)), splat(-__builtin_inff()), r);
  r = V::select(V::lt(x, splat(0.0f)), splat(__builtin_nanf("")), r);
  r = V::select(V::lt(splat(3.40282347e38f), x), x, r);  // +inf
  return V::select(V::isnan(x), x, r);
}

// ---- row helpers: one contiguous row of n floats, full vectors then one masked tail, so a
// row reduces in the same lane order whatever produced it.
inline float vmax_row(const float* x, int64_t n) {
  F acc = splat(-__builtin_inff());
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = V::max(acc, V::load(x + i));
  if (i < n) acc = V::max(acc, V::load_tail(x + i, V::tail(n - i), -__builtin_inff()));
  return V::hmax(acc);
}

// Writes exp(x - m) to y (may alias x; only when `store`) and returns the sum.
inline float vexp_sum_row(const float* x, float* y, int64_t n, float m, bool store) {
  const F vm = splat(m);
  F acc = V::zero();
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const F e = vexp(V::sub(V::load(x + i), vm));
    if (store) V::store(y + i, e);
    acc = V::add(acc, e);
  }
  if (i < n) {
    const auto t = V::tail(n - i);
    const F e = V::zero_inactive(vexp(V::sub(V::load_tail(x + i, t, -__builtin_inff()), vm)), t);
    if (store) V::store_tail(y + i, t, e);
    acc = V::add(acc, e);
  }
  return V::hsum(acc);
}
