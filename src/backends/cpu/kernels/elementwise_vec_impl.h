// Internal: the vectorized F32 elementwise spans, written once over a vector-traits struct V
// and included by elementwise_avx2.cpp and elementwise_avx512.cpp inside a region
// compiled for that ISA. Requires, before inclusion: namespace RLX_VEC_NS containing
// struct V (vec_traits_*.h). The math itself is vec_math.h. Defines RLX_VEC_NS::fill_table().
//
// Tails shorter than one vector go through the same code on a padded copy, so every element
// is computed identically whatever the chunking.

namespace rlx::cpu::ew::RLX_VEC_NS {
namespace {

#include "backends/cpu/kernels/vec_math.h"

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
RLX_V1(VRound, V::round(x))  // to nearest, ties to even: the scalar nearbyint in the default mode
// x < lo ? lo : (x > hi ? hi : x), as the scalar Clip: NaN and -0 pass through unchanged
// (only comparisons and selects: the same bits as the scalar path).
RLX_V1(VClip, V::select(V::lt(x, splat(float(p.alpha))), splat(float(p.alpha)),
                        V::select(V::lt(splat(float(p.beta)), x), splat(float(p.beta)), x)))
// x * clamp01(x / 6 + 0.5) as x * clamp01((x + 3) / 6): near x = -3, where the clamp's argument
// crosses 0, x + 3 is exact, so the relative error stays a few ulp (the scalar computes in
// double); NaN passes the clamp. Over 32x160x160, one thread: 0.81 ms as the scalar span, 0.063.
// (HardSigmoid keeps the scalar span: alpha x + beta in f32 loses its relative accuracy where it
// crosses 0, alpha and beta being doubles.)
inline F vclamp01(F t) {  // t < 0 ? 0 : (t > 1 ? 1 : t): NaN passes
  return V::select(V::lt(t, V::zero()), V::zero(), V::select(V::lt(splat(1.0f), t), splat(1.0f), t));
}
RLX_V1(VHardSwish, V::mul(x, vclamp01(V::div(V::add(x, splat(3.0f)), splat(6.0f)))))
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

// Every op with a vector form, once: its span in the table and its step in a chain come from
// these lists, so that a kind the table has is a kind the chain runs.
#define RLX_VEC_UNARY(X)                                                                                          \
  X(Exp, VExp) X(Log, VLog) X(Sigmoid, VSigmoid) X(Tanh, VTanh) X(Erf, VErf) X(Gelu, VGelu) X(Silu, VSilu) \
      X(Relu, VRelu) X(Neg, VNeg) X(Abs, VAbs) X(Sqrt, VSqrt) X(Reciprocal, VReciprocal) X(Rsqrt, VRsqrt)     \
          X(Clip, VClip) X(Round, VRound) X(HardSwish, VHardSwish)
#define RLX_VEC_BINARY(X) X(Add, VAdd) X(Sub, VSub) X(Mul, VMul) X(Div, VDiv) X(Max, VMax) X(Min, VMin)

// ---- chains: the running value of kU vectors in registers through every step, the steps'
// operations the spans' functors (one switch per step per kU vectors instead of a pass over a
// block in memory per instruction).
constexpr int kU = 4;

template <int N>
inline void chain_group(const ChainStep* steps, int nsteps, const float* const* in, const bool* scalar, int seed,
                        float* out, int64_t i) {
  F v[N], b[N];
#pragma GCC unroll 4
  for (int u = 0; u < N; ++u) v[u] = V::load(in[seed] + i + u * W);
  for (int s = 0; s < nsteps; ++s) {
    const ChainStep& st = steps[s];
    const OpParams& p = st.params;
    if (!st.binary) {
      switch (st.kind) {
#define RLX_CHAIN1(K, Op) \
  case OpKind::K:         \
    _Pragma("GCC unroll 4") for (int u = 0; u < N; ++u) v[u] = Op::f(v[u], p); break;
        RLX_VEC_UNARY(RLX_CHAIN1)
#undef RLX_CHAIN1
        default: break;
      }
      continue;
    }
    const float* x = in[st.operand];
    if (scalar[st.operand]) {
      const F bs = V::set1(*x);
#pragma GCC unroll 4
      for (int u = 0; u < N; ++u) b[u] = bs;
    } else {
#pragma GCC unroll 4
      for (int u = 0; u < N; ++u) b[u] = V::load(x + i + u * W);
    }
    if (st.operand_first) {
#pragma GCC unroll 4
      for (int u = 0; u < N; ++u) std::swap(v[u], b[u]);
    }
    switch (st.kind) {
#define RLX_CHAIN2(K, Op) \
  case OpKind::K:         \
    _Pragma("GCC unroll 4") for (int u = 0; u < N; ++u) v[u] = Op::f(v[u], b[u], p); break;
      RLX_VEC_BINARY(RLX_CHAIN2)
#undef RLX_CHAIN2
      default: break;
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < N; ++u) V::store(out + i + u * W, v[u]);
}

void run_chain(const ChainStep* steps, int nsteps, const void* const* inv, const bool* scalar, int seed, float* out,
               int64_t m) {
  constexpr int kMaxIn = kMaxChainInputs;
  const float* in[kMaxIn];
  bool used[kMaxIn] = {};
  used[seed] = true;
  for (int s = 0; s < nsteps; ++s)
    if (steps[s].binary) used[steps[s].operand] = true;
  int ni = 0;
  for (int k = 0; k < kMaxIn; ++k)
    if (used[k]) ni = k + 1;
  for (int k = 0; k < ni; ++k) in[k] = used[k] ? static_cast<const float*>(inv[k]) : nullptr;
  int64_t i = 0;
  for (; i + kU * W <= m; i += kU * W) chain_group<kU>(steps, nsteps, in, scalar, seed, out, i);
  for (; i + W <= m; i += W) chain_group<1>(steps, nsteps, in, scalar, seed, out, i);
  if (i < m) {  // the tail through padded copies of the vector inputs, as the spans do
    alignas(64) float pad[kMaxIn][W];
    const float* pin[kMaxIn];
    for (int k = 0; k < ni; ++k) {
      if (!used[k] || scalar[k]) {
        pin[k] = in[k];
        continue;
      }
      for (int j = 0; j < W; ++j) pad[k][j] = i + j < m ? in[k][i + j] : 0.0f;
      pin[k] = pad[k];
    }
    alignas(64) float res[W];
    chain_group<1>(steps, nsteps, pin, scalar, seed, res, 0);
    for (int64_t j = 0; i + j < m; ++j) out[i + j] = res[j];
  }
}

void fill_table(F32VecTable& t) {
  t.chain = &run_chain;
#define RLX_SPAN1(K, Op) t.unary[size_t(OpKind::K)] = &map1<Op>;
#define RLX_SPAN2(K, Op) t.binary[size_t(OpKind::K)] = set2<Op>();
  RLX_VEC_UNARY(RLX_SPAN1)
  RLX_VEC_BINARY(RLX_SPAN2)
#undef RLX_SPAN1
#undef RLX_SPAN2
}
#undef RLX_VEC_UNARY
#undef RLX_VEC_BINARY

}  // namespace
}  // namespace rlx::cpu::ew::RLX_VEC_NS
