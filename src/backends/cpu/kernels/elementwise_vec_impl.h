// Internal: vectorized F32 math and spans, written once over a vector-traits struct V
// and included by elementwise_avx2.cpp and elementwise_avx512.cpp inside a region
// compiled for that ISA. Requires, before inclusion: namespace RLX_VEC_NS containing
// struct V (see either .cpp for the members). Defines RLX_VEC_NS::fill_table().
//
// Accuracy (vs correctly rounded): exp, log, sigmoid, silu ~2 ulp; tanh, erf, gelu ~1e-6
// relative. Tails shorter than one vector go through the same code on a padded copy,
// so every element is computed identically whatever the chunking.

namespace rlx::cpu::ew::RLX_VEC_NS {
namespace {

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

// ---- span drivers
template <class Op>
void map1(const void* xv, void* yv, int64_t n, const OpParams& p) {
  const float* x = static_cast<const float*>(xv);
  float* y = static_cast<float*>(yv);
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(y + i, Op::f(V::load(x + i), p));
  if (i < n) {
    alignas(64) float tmp[W] = {};
    for (int64_t j = 0; i + j < n; ++j) tmp[j] = x[i + j];
    V::store(tmp, Op::f(V::load(tmp), p));
    for (int64_t j = 0; i + j < n; ++j) y[i + j] = tmp[j];
  }
}

template <class Op, int Form>  // Form 0: vv, 1: vs (b scalar), 2: sv (a scalar)
void map2(const void* av, const void* bv, void* yv, int64_t n, const OpParams& p) {
  const float* a = static_cast<const float*>(av);
  const float* b = static_cast<const float*>(bv);
  float* y = static_cast<float*>(yv);
  const F as = V::set1(*a), bs = V::set1(*b);
  auto lhs = [&](int64_t i) { return Form == 2 ? as : V::load(a + i); };
  auto rhs = [&](int64_t i) { return Form == 1 ? bs : V::load(b + i); };
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(y + i, Op::f(lhs(i), rhs(i), p));
  if (i < n) {
    alignas(64) float ta[W] = {}, tb[W] = {};
    for (int64_t j = 0; i + j < n; ++j) {
      ta[j] = Form == 2 ? *a : a[i + j];
      tb[j] = Form == 1 ? *b : b[i + j];
    }
    V::store(ta, Op::f(V::load(ta), V::load(tb), p));
    for (int64_t j = 0; i + j < n; ++j) y[i + j] = ta[j];
  }
}

template <class Op> Span2Set set2() { return Span2Set{&map2<Op, 0>, &map2<Op, 1>, &map2<Op, 2>}; }

#define RLX_V1(Name, expr) \
  struct Name { static F f(F x, const OpParams& p) { (void)p; return (expr); } };
RLX_V1(VExp, vexp(x))
RLX_V1(VLog, vlog(x))
RLX_V1(VSigmoid, vsigmoid(x))
RLX_V1(VTanh, vtanh(x))
RLX_V1(VErf, verf(x))
RLX_V1(VGelu, p.flag ? vgelu_tanh(x) : vgelu_erf(x))
RLX_V1(VSilu, V::mul(x, vsigmoid(x)))
RLX_V1(VRelu, V::max(splat(0.0f), x))  // max(0, NaN) = NaN, max(0, -0) = -0
RLX_V1(VNeg, V::neg(x))
RLX_V1(VAbs, V::abs(x))
RLX_V1(VSqrt, V::sqrt(x))
RLX_V1(VReciprocal, V::div(splat(1.0f), x))
RLX_V1(VRsqrt, V::div(splat(1.0f), V::sqrt(x)))
#undef RLX_V1

#define RLX_V2(Name, expr) \
  struct Name { static F f(F a, F b, const OpParams& p) { (void)p; return (expr); } };
RLX_V2(VAdd, V::add(a, b))
RLX_V2(VSub, V::sub(a, b))
RLX_V2(VMul, V::mul(a, b))
RLX_V2(VDiv, V::div(a, b))
// Hardware max/min return the second operand when either is NaN; put NaN of a back.
RLX_V2(VMax, V::select(V::isnan(a), a, V::max(a, b)))
RLX_V2(VMin, V::select(V::isnan(a), a, V::min(a, b)))
#undef RLX_V2

void fill_table(F32VecTable& t) {
  auto u = [&](OpKind k, Span1 s) { t.unary[size_t(k)] = s; };
  u(OpKind::Exp, &map1<VExp>);
  u(OpKind::Log, &map1<VLog>);
  u(OpKind::Sigmoid, &map1<VSigmoid>);
  u(OpKind::Tanh, &map1<VTanh>);
  u(OpKind::Erf, &map1<VErf>);
  u(OpKind::Gelu, &map1<VGelu>);
  u(OpKind::Silu, &map1<VSilu>);
  u(OpKind::Relu, &map1<VRelu>);
  u(OpKind::Neg, &map1<VNeg>);
  u(OpKind::Abs, &map1<VAbs>);
  u(OpKind::Sqrt, &map1<VSqrt>);
  u(OpKind::Reciprocal, &map1<VReciprocal>);
  u(OpKind::Rsqrt, &map1<VRsqrt>);
  t.binary[size_t(OpKind::Add)] = set2<VAdd>();
  t.binary[size_t(OpKind::Sub)] = set2<VSub>();
  t.binary[size_t(OpKind::Mul)] = set2<VMul>();
  t.binary[size_t(OpKind::Div)] = set2<VDiv>();
  t.binary[size_t(OpKind::Max)] = set2<VMax>();
  t.binary[size_t(OpKind::Min)] = set2<VMin>();
}

}  // namespace
}  // namespace rlx::cpu::ew::RLX_VEC_NS
