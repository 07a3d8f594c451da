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

// The Mt phases of Mt * W consecutive floats v[0 .. Mt): lane l of phase q is element Mt * l + q.
template <int Mt>
inline __attribute__((always_inline)) void wino_phases(const F* v, F* ph) {
  if constexpr (Mt == 2) {
    ph[0] = V::even(v[0], v[1]);
    ph[1] = V::odd(v[0], v[1]);
  } else {
    const F e1 = V::even(v[0], v[1]), e2 = V::even(v[2], v[3]), o1 = V::odd(v[0], v[1]), o2 = V::odd(v[2], v[3]);
    ph[0] = V::even(e1, e2);
    ph[1] = V::even(o1, o2);
    ph[2] = V::odd(e1, e2);
    ph[3] = V::odd(o1, o2);
  }
}

template <int Mt>
void wino_input(const float* x, int64_t h, int64_t w, int64_t nch, const int64_t* y0, const int64_t* x0, int lanes,
                int mr, float* dst, int64_t xi_stride) {
  using Mx = WinogradMatrices<Mt>;
  constexpr int A = Mx::A;
  // Runs of lanes whose tiles follow each other along one tile row. Lane l of a run reads
  // patch column c at position Mt * l + c of the row from the run's base column: each patch row
  // is Mt * W floats loaded once (masked to the image and the run's positions), split into its
  // Mt phases (column c < Mt is phase c; column Mt + q is phase q a lane on, its last lane the
  // float after the span), and masked to the run's lanes. Loaded per column (Mt masked loads and
  // Mt - 1 permutes for each of the A columns), the masks and permutes were most of a transform:
  // one thread, PP-OCRv4 det's 96 -> 24 3x3 conv at 80x80 0.98 -> 0.73 ms, ResNet-50's 56x56 3x3
  // convs 0.53 -> 0.42 ms each (the model 28.2 -> 27.4 ms). The same values: the same bits.
  struct Run {
    int l0, l1;
  } runs[16];
  int nrun = 0;
  for (int l = 0; l < lanes; ++l)
    if (l > 0 && y0[l] == y0[l - 1] && x0[l] == x0[l - 1] + Mt) runs[nrun - 1].l1 = l + 1;
    else runs[nrun++] = {l, l + 1};
  int64_t off[16][A];  // run s, patch row r: the row's base column (position 0) in the plane
  bool live[16][A];
  typename V::Tail load_mask[16][Mt], lane_mask[16];
  bool tail_ok[16][A - Mt];  // the float after the span, for the shifted columns
  for (int s = 0; s < nrun; ++s) {
    const int l0 = runs[s].l0, l1 = runs[s].l1;
    const int64_t base = x0[l0] - int64_t(Mt) * l0;
    // Positions the run reads: [Mt * l0, Mt * (l1 - 1) + A), inside the image: [-base, w - base).
    const int64_t lo = std::max<int64_t>(int64_t(Mt) * l0, -base);
    const int64_t hi = std::min<int64_t>(int64_t(Mt) * (l1 - 1) + A, w - base);
    for (int q = 0; q < Mt; ++q) {
      const int64_t a = std::clamp<int64_t>(lo - q * W, 0, W), b = std::clamp<int64_t>(hi - q * W, 0, W);
      load_mask[s][q] = V::range(a, std::max(a, b));
    }
    for (int q = 0; q < A - Mt; ++q) tail_ok[s][q] = Mt * W + q >= lo && Mt * W + q < hi;
    lane_mask[s] = V::range(l0, l1);
    for (int r = 0; r < A; ++r) {
      off[s][r] = (y0[l0] + r) * w + base;
      live[s][r] = y0[l0] + r >= 0 && y0[l0] + r < h;
    }
  }
  const bool full = mr == W;
  const auto store_mask = V::tail(full ? 0 : mr);
  // Run s's patch row r into g[r][0 .. A) (or-ed in: the other runs' lanes are zero), with the
  // run's masks passed by value so that a single run keeps them in registers over the channels.
  auto gather = [&](F (&g)[A][A], const float* xc, int s, const typename V::Tail (&lm)[Mt], typename V::Tail lanes_m,
                    bool first) __attribute__((always_inline)) {
#pragma GCC unroll 6
    for (int r = 0; r < A; ++r) {
      if (!live[s][r]) {
        if (first)
#pragma GCC unroll 6
          for (int c = 0; c < A; ++c) g[r][c] = V::zero();
        continue;
      }
      const float* p = xc + off[s][r];
      F v[Mt], ph[Mt];
#pragma GCC unroll 4
      for (int q = 0; q < Mt; ++q) v[q] = V::load_tail(p + q * W, lm[q], 0.0f);
      wino_phases<Mt>(v, ph);
#pragma GCC unroll 6
      for (int c = 0; c < A; ++c) {
        F col = ph[c % Mt];
        if (c >= Mt) col = V::shift_down(col, V::set1(tail_ok[s][c - Mt] ? p[Mt * W + c - Mt] : 0.0f));
        col = V::zero_inactive(col, lanes_m);
        g[r][c] = first ? col : V::bit_or(g[r][c], col);
      }
    }
  };
  typename V::Tail lm0[Mt];
  for (int q = 0; q < Mt; ++q) lm0[q] = load_mask[0][q];
  const typename V::Tail lane0 = lane_mask[0];
  for (int64_t ch = 0; ch < nch; ++ch, x += h * w, dst += mr) {
    F g[A][A];
    gather(g, x, 0, lm0, lane0, true);
    for (int s = 1; s < nrun; ++s) gather(g, x, s, load_mask[s], lane_mask[s], false);
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
    if (nn == W && rows == Mt && cols == Mt) {  // a whole tile of W channels: each tile row transposed
      float* o = out + j0 * plane;
#pragma GCC unroll 4
      for (int i = 0; i < Mt; ++i) {
        F v[Mt];
#pragma GCC unroll 4
        for (int j = 0; j < Mt; ++j) v[j] = V::load(y[i][j]);
        V::template store_transposed<Mt>(v, o + i * ow, plane);
      }
      continue;
    }
    for (int64_t c = 0; c < nn; ++c) {
      float* o = out + (j0 + c) * plane;
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) o[i * ow + j] = y[i][j][c];
    }
  }
}
