// Internal: the vector RowKernels (row_kernels.h), written once over the V of the including
// namespace and vec_math.h, pasted into a region compiled for that ISA
// (row_kernels_avx2.cpp, row_kernels_avx512.cpp). No include guard: one copy per ISA.

inline F activate_v(F x, Activation act, F alpha) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Relu: return V::max(V::zero(), x);
    case Activation::LeakyRelu: return V::select(V::lt(x, V::zero()), V::mul(x, alpha), x);
    case Activation::Sigmoid: return vsigmoid(x);
    case Activation::Silu: return V::mul(x, vsigmoid(x));
    case Activation::Tanh: return vtanh(x);
    case Activation::Gelu: return vgelu_erf(x);
    case Activation::GeluTanh: return vgelu_tanh(x);
  }
  return x;
}

// One loop per activation so the switch is resolved outside the loop.
template <Activation A>
void activate_loop(float* x, int64_t n, float alpha) {
  const F va = splat(alpha);
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(x + i, activate_v(V::load(x + i), A, va));
  if (i < n) {
    const auto t = V::tail(n - i);
    V::store_tail(x + i, t, activate_v(V::load_tail(x + i, t, 0.0f), A, va));
  }
}

void activate_row(float* x, int64_t n, Activation act, float alpha) {
  switch (act) {
    case Activation::None: return;
    case Activation::Relu: return activate_loop<Activation::Relu>(x, n, alpha);
    case Activation::Gelu: return activate_loop<Activation::Gelu>(x, n, alpha);
    case Activation::GeluTanh: return activate_loop<Activation::GeluTanh>(x, n, alpha);
    case Activation::Silu: return activate_loop<Activation::Silu>(x, n, alpha);
    case Activation::Sigmoid: return activate_loop<Activation::Sigmoid>(x, n, alpha);
    case Activation::Tanh: return activate_loop<Activation::Tanh>(x, n, alpha);
    case Activation::LeakyRelu: return activate_loop<Activation::LeakyRelu>(x, n, alpha);
  }
}

float exp_sum_row(float* x, int64_t n, float shift) { return vexp_sum_row(x, x, n, shift, true); }
float max_row(const float* x, int64_t n) { return vmax_row(x, n); }

void scale_row(float* y, int64_t n, float s) {
  const F vs = splat(s);
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(y + i, V::mul(V::load(y + i), vs));
  if (i < n) {
    const auto t = V::tail(n - i);
    V::store_tail(y + i, t, V::mul(V::load_tail(y + i, t, 0.0f), vs));
  }
}
