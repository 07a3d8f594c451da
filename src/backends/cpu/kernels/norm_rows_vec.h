// Internal: the vectorized f32 norm rows (softmax, log_softmax, layer_norm, rms_norm; see
// norm_rows.h), written once over the vector-traits struct V and vec_math.h of the
// including namespace, and pasted into a region compiled for that ISA
// (vec_kernels_avx2.cpp, vec_kernels_avx512.cpp). Every reduction runs full vectors then one
// masked tail, in a fixed lane order. No include guard: one copy per ISA namespace.

// y = (x - shift) * mul [* s] [+ b] - post
inline void affine_row(const float* x, float* y, int64_t n, float shift, float mul, const float* s, const float* b,
                       float post = 0.0f) {
  const F vs = splat(shift), vr = splat(mul), vp = splat(post);
  auto one = [&](F v, F sv, F bv) {
    v = V::mul(V::sub(v, vs), vr);
    if (s) v = V::mul(v, sv);
    if (b) v = V::add(v, bv);
    return post != 0.0f ? V::sub(v, vp) : v;
  };
  int64_t i = 0;
  for (; i + W <= n; i += W)
    V::store(y + i, one(V::load(x + i), s ? V::load(s + i) : vr, b ? V::load(b + i) : vr));
  if (i < n) {
    const auto t = V::tail(n - i);
    V::store_tail(y + i, t, one(V::load_tail(x + i, t, 0.0f), s ? V::load_tail(s + i, t, 0.0f) : vr,
                                b ? V::load_tail(b + i, t, 0.0f) : vr));
  }
}

// Sum of (x - shift) or of its square; inactive tail lanes contribute 0.
inline float sum_row(const float* x, int64_t n, float shift, bool square) {
  const F vs = splat(shift);
  F acc = V::zero();
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const F d = V::sub(V::load(x + i), vs);
    acc = square ? V::fmadd(d, d, acc) : V::add(acc, d);
  }
  if (i < n) {
    const auto t = V::tail(n - i);
    const F d = V::zero_inactive(V::sub(V::load_tail(x + i, t, 0.0f), vs), t);
    acc = square ? V::fmadd(d, d, acc) : V::add(acc, d);
  }
  return V::hsum(acc);
}

void softmax_row(const float* x, float* y, int64_t n) {
  const float m = vmax_row(x, n);
  const float s = vexp_sum_row(x, y, n, m, true);
  affine_row(y, y, n, 0.0f, 1.0f / s, nullptr, nullptr);
}
void log_softmax_row(const float* x, float* y, int64_t n) {
  const float m = vmax_row(x, n);
  const float ls = std::log(vexp_sum_row(x, y, n, m, false));
  affine_row(x, y, n, m, 1.0f, nullptr, nullptr, ls);
}
void layer_norm_row(const float* x, float* y, int64_t n, const float* s, const float* b, float eps) {
  const float mean = sum_row(x, n, 0.0f, false) / float(n);
  const float var = sum_row(x, n, mean, true) / float(n);
  affine_row(x, y, n, mean, 1.0f / std::sqrt(var + eps), s, b);
}
void rms_norm_row(const float* x, float* y, int64_t n, const float* s, float eps) {
  const float ms = sum_row(x, n, 0.0f, true) / float(n);
  affine_row(x, y, n, 0.0f, 1.0f / std::sqrt(ms + eps), s, nullptr);
}
