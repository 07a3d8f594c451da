// Internal: the Winograd input and output transforms (conv_winograd.h), written once over the
// vector-traits struct V of the including namespace and pasted into a region compiled for
// that ISA (vec_kernels_avx2.cpp, vec_kernels_avx512.cpp). No include guard: one copy per ISA.
//
// The matrices are compile-time constants: after unrolling, a coefficient of 0 costs nothing,
// 1 and -1 an add or a subtract, any other an FMA.

// sum over r < N of coef[r] * get(r), the terms in order of r.
template <int N, class Get>
inline __attribute__((always_inline)) F wino_combine(const float (&coef)[N], Get get) {
  F acc = V::zero();
  bool first = true;
#pragma GCC unroll 8
  for (int r = 0; r < N; ++r) {
    const float cf = coef[r];
    if (cf == 0.0f) continue;
    const F v = get(r);
    if (first) acc = cf == 1.0f ? v : cf == -1.0f ? V::neg(v) : V::mul(V::set1(cf), v);
    else acc = cf == 1.0f ? V::add(acc, v) : cf == -1.0f ? V::sub(acc, v) : V::fmadd(V::set1(cf), v, acc);
    first = false;
  }
  return acc;
}

// Lanes l = element Mt * l of p[0 .. Mt * W), of which only the positions in [lo, hi) are read
// (the rest count as zero).
template <int Mt>
inline __attribute__((always_inline)) F wino_strided(const float* p, const typename V::Tail (&mask)[Mt]) {
  F v[Mt];
#pragma GCC unroll 4
  for (int q = 0; q < Mt; ++q) v[q] = V::load_tail(p + q * W, mask[q], 0.0f);
  if constexpr (Mt == 2) return V::even(v[0], v[1]);
  else return V::even(V::even(v[0], v[1]), V::even(v[2], v[3]));
}

template <int Mt>
void wino_input(const float* x, int64_t h, int64_t w, int64_t nch, const int64_t* y0, const int64_t* x0, int lanes,
                int mr, float* dst, int64_t xi_stride) {
  using Mx = WinogradMatrices<Mt>;
  constexpr int A = Mx::A;
  // Runs of lanes whose tiles follow each other along one tile row (each read with strided
  // loads) and, per run and patch element, the offset of lane 0's element and the load masks.
  struct Run {
    int l0, l1;
  } runs[16];
  int nrun = 0;
  for (int l = 0; l < lanes; ++l)
    if (l > 0 && y0[l] == y0[l - 1] && x0[l] == x0[l - 1] + Mt) runs[nrun - 1].l1 = l + 1;
    else runs[nrun++] = {l, l + 1};
  int64_t off[16][A][A];
  bool live[16][A];
  typename V::Tail mask[16][A][Mt];
  for (int s = 0; s < nrun; ++s) {
    const int l0 = runs[s].l0, l1 = runs[s].l1;
    for (int c = 0; c < A; ++c) {
      // Position k of the run's strided read is column col + k; lane l reads position Mt * l.
      const int64_t col = x0[l0] + c - int64_t(Mt) * l0;
      const int64_t lo = std::max<int64_t>(int64_t(Mt) * l0, -col);
      const int64_t hi = std::min<int64_t>(int64_t(Mt) * (l1 - 1) + 1, w - col);
      for (int q = 0; q < Mt; ++q) {
        const int64_t a = std::clamp<int64_t>(lo - q * W, 0, W), b = std::clamp<int64_t>(hi - q * W, 0, W);
        mask[s][c][q] = V::range(a, std::max(a, b));
      }
      for (int r = 0; r < A; ++r) off[s][r][c] = (y0[l0] + r) * w + col;
    }
    for (int r = 0; r < A; ++r) live[s][r] = y0[l0] + r >= 0 && y0[l0] + r < h;
  }
  const bool full = mr == W;
  const auto store_mask = V::tail(full ? 0 : mr);
  for (int64_t ch = 0; ch < nch; ++ch, x += h * w, dst += mr) {
    F g[A][A];
#pragma GCC unroll 6
    for (int r = 0; r < A; ++r)
#pragma GCC unroll 6
      for (int c = 0; c < A; ++c) {
        F v = V::zero();
        for (int s = 0; s < nrun; ++s)
          if (live[s][r]) v = V::bit_or(v, wino_strided<Mt>(x + off[s][r][c], mask[s][c]));
        g[r][c] = v;
      }
    // t = B^T g (down the columns), then v = t B (along the rows).
    F t[A][A];
#pragma GCC unroll 6
    for (int i = 0; i < A; ++i)
#pragma GCC unroll 6
      for (int c = 0; c < A; ++c) t[i][c] = wino_combine(Mx::BT[i], [&](int r) { return g[r][c]; });
#pragma GCC unroll 6
    for (int i = 0; i < A; ++i)
#pragma GCC unroll 6
      for (int j = 0; j < A; ++j) {
        const F v = wino_combine(Mx::BT[j], [&](int c) { return t[i][c]; });
        float* d = dst + (i * A + j) * xi_stride;
        if (full) V::store(d, v);
        else V::store_tail(d, store_mask, v);
      }
  }
}

template <int Mt>
void wino_output(const float* src, int64_t xi_stride, int64_t n, const float* bias, const float* res,
                 Activation act, float alpha, float* out, int64_t plane, int64_t ow, int rows, int cols) {
  using Mx = WinogradMatrices<Mt>;
  constexpr int A = Mx::A;
  alignas(64) float y[Mt][Mt][W] = {};
  for (int64_t j0 = 0; j0 < n; j0 += W) {
    const int64_t nn = std::min<int64_t>(W, n - j0);
    const auto mask = V::tail(nn);
    auto load = [&](const float* p) { return nn == W ? V::load(p) : V::load_tail(p, mask, 0.0f); };
    F s[Mt][A];  // s = A^T m (down the columns)
#pragma GCC unroll 6
    for (int i = 0; i < Mt; ++i)
#pragma GCC unroll 6
      for (int k = 0; k < A; ++k)
        s[i][k] = wino_combine(Mx::AT[i], [&](int r) { return load(src + (r * A + k) * xi_stride + j0); });
    const F b = bias ? load(bias + j0) : V::zero();
    if (res)  // the residual, channels as lanes (the tile's valid outputs only)
      for (int64_t c = 0; c < nn; ++c)
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < cols; ++j) y[i][j][c] = res[(j0 + c) * plane + i * ow + j];
    const F va = V::set1(alpha);
#pragma GCC unroll 4
    for (int i = 0; i < Mt; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < Mt; ++j) {
        F v = wino_combine(Mx::AT[j], [&](int k) { return s[i][k]; });
        if (bias) v = V::add(v, b);
        if (res) v = V::add(v, V::load(y[i][j]));
        if (act != Activation::None) v = activate_v(v, act, va);
        V::store(y[i][j], v);
      }
    for (int64_t c = 0; c < nn; ++c) {
      float* o = out + (j0 + c) * plane;
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) o[i * ow + j] = y[i][j][c];
    }
  }
}
