// Internal: the vector RowKernels (row_kernels.h), written once over the V of the including
// namespace and vec_math.h, pasted into a region compiled for that ISA
// (vec_kernels_avx2.cpp, vec_kernels_avx512.cpp). No include guard: one copy per ISA.

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

float scale_add_max_row(float* y, int64_t n, float s, const float* add) {
  const F vs = splat(s);
  F acc = splat(-__builtin_inff());
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    F v = V::mul(V::load(y + i), vs);
    if (add) v = V::add(v, V::load(add + i));
    V::store(y + i, v);
    acc = V::max(acc, v);
  }
  if (i < n) {  // vmax_row's tail: the inactive lanes -inf
    const auto t = V::tail(n - i);
    F v = V::mul(V::load_tail(y + i, t, 0.0f), vs);
    if (add) v = V::add(v, V::load_tail(add + i, t, 0.0f));
    V::store_tail(y + i, t, v);
    acc = V::max(acc, V::load_tail(y + i, t, -__builtin_inff()));
  }
  return V::hmax(acc);
}

void add_row(float* y, int64_t n, float b) {
  const F vb = splat(b);
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(y + i, V::add(V::load(y + i), vb));
  if (i < n) {
    const auto t = V::tail(n - i);
    V::store_tail(y + i, t, V::add(V::load_tail(y + i, t, 0.0f), vb));
  }
}

void accumulate_row(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(y + i, V::add(V::load(y + i), V::load(x + i)));
  if (i < n) {
    const auto t = V::tail(n - i);
    V::store_tail(y + i, t, V::add(V::load_tail(y + i, t, 0.0f), V::load_tail(x + i, t, 0.0f)));
  }
}

template <Activation A>
void tile_epilogue_loop(float* c, int64_t ldc, int64_t m, int64_t n, const float* bias, const float* res, int64_t ldr,
                        float alpha) {
  const F va = splat(alpha);
  for (int64_t r = 0; r < m; ++r) {
    float* y = c + r * ldc;
    const float* x = res ? res + r * ldr : nullptr;
    const F vb = splat(bias ? bias[r] : 0.0f);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      F v = V::load(y + i);
      if (bias) v = V::add(v, vb);  // not + 0 when absent: that would turn -0 into +0
      if (x) v = V::add(v, V::load(x + i));
      V::store(y + i, activate_v(v, A, va));
    }
    if (i < n) {
      const auto t = V::tail(n - i);
      F v = V::load_tail(y + i, t, 0.0f);
      if (bias) v = V::add(v, vb);
      if (x) v = V::add(v, V::load_tail(x + i, t, 0.0f));
      V::store_tail(y + i, t, activate_v(v, A, va));
    }
  }
}

void tile_epilogue(float* c, int64_t ldc, int64_t m, int64_t n, const float* bias, const float* res, int64_t ldr,
                   Activation act, float alpha) {
  switch (act) {
    case Activation::None: return tile_epilogue_loop<Activation::None>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::Relu: return tile_epilogue_loop<Activation::Relu>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::Gelu: return tile_epilogue_loop<Activation::Gelu>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::GeluTanh: return tile_epilogue_loop<Activation::GeluTanh>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::Silu: return tile_epilogue_loop<Activation::Silu>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::Sigmoid: return tile_epilogue_loop<Activation::Sigmoid>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::Tanh: return tile_epilogue_loop<Activation::Tanh>(c, ldc, m, n, bias, res, ldr, alpha);
    case Activation::LeakyRelu: return tile_epilogue_loop<Activation::LeakyRelu>(c, ldc, m, n, bias, res, ldr, alpha);
  }
}

// Max pooling's step: v where v > a or v is NaN, else a.
inline F max_step(F a, F v) { return V::select(V::isnan(v), v, V::select(V::lt(a, v), v, a)); }

void max_taps(float* out, int64_t taps, const float* const* src, int64_t n) {
  const F ninf = V::set1(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    F a = ninf;
    for (int64_t t = 0; t < taps; ++t) a = max_step(a, V::load(src[t] + i));
    V::store(out + i, a);
  }
  if (i < n) {
    const auto m = V::tail(n - i);
    F a = ninf;
    for (int64_t t = 0; t < taps; ++t) a = max_step(a, V::load_tail(src[t] + i, m, 0.0f));
    V::store_tail(out + i, m, a);
  }
}

// d[t] = s[2t] (contract in row_kernels.h). A full step's loads reach s[2t + 2W - 1], inside
// [0, 2n - 2] while t + W < n; the last 1..W outputs read their 2r - 1 elements masked.
void copy_even(float* d, const float* s, int64_t n) {
  int64_t t = 0;
  for (; t + W < n; t += W) V::store(d + t, V::even(V::load(s + 2 * t), V::load(s + 2 * t + W)));
  if (t < n) {
    const int64_t r = n - t, e = 2 * r - 1;
    const F a = V::load_tail(s + 2 * t, V::tail(std::min<int64_t>(e, W)), 0.0f);
    const F b = e > W ? V::load_tail(s + 2 * t + W, V::tail(e - W), 0.0f) : V::zero();
    V::store_tail(d + t, V::tail(r), V::even(a, b));
  }
}

// max_pool's 3-wide stride-2 output row (contract in row_kernels.h). Outputs [o, o + W) of a
// row read its columns 2o - 1 .. 2o + 2W - 1: the even and odd lanes of two loads from 2o
// (masked to -inf past w, a skipped column for the fold: max_step keeps a against -inf) and
// that row's previous block's last odd column shifted in (-inf left of the image). The first
// step of a row's fold takes the left column as it is, which max_step(-inf, v) also gives bit
// for bit; the rows' results are then folded in order from -inf, as max_taps folds them.
void max3_s2(float* out, const float* const* rows, int64_t taps, int64_t w, int64_t n) {
  const float ninf_s = -std::numeric_limits<float>::infinity();
  F prev_odd[kMax3S2Rows];
  for (int64_t t = 0; t < taps; ++t) prev_odd[t] = V::set1(ninf_s);
  for (int64_t o = 0; o < n; o += W) {
    const int64_t c = 2 * o;
    const bool full = c + 2 * W <= w;
    const int64_t r0 = std::clamp<int64_t>(w - c, 0, W), r1 = std::clamp<int64_t>(w - c - W, 0, W);
    F acc = V::set1(ninf_s);
    for (int64_t t = 0; t < taps; ++t) {
      const float* s = rows[t];
      const F lo = full ? V::load(s + c) : V::load_tail(s + c, V::tail(r0), ninf_s);
      const F hi = full ? V::load(s + c + W) : V::load_tail(s + c + W, V::tail(r1), ninf_s);
      const F ev = V::even(lo, hi), od = V::odd(lo, hi);
      F a = V::shift_in(od, prev_odd[t]);
      a = max_step(a, ev);
      a = max_step(a, od);
      prev_odd[t] = od;
      acc = max_step(acc, a);
    }
    if (o + W <= n) V::store(out + o, acc);
    else V::store_tail(out + o, V::tail(n - o), acc);
  }
}

// One output row of a stride-1 direct convolution (contract in row_kernels.h): the interior in
// chunks of up to four independent accumulators (masked at the end) to hide the FMA latency,
// the edge columns below. NV vectors of one chunk starting at column x (masked past ihi): every tap summed in registers.
template <int NV>
inline void conv_row_chunk(float* out, int64_t taps, const float* const* src, const float* w, int64_t x, int64_t ihi) {
  decltype(V::tail(0)) m[NV];
  for (int c = 0; c < NV; ++c) {
    const int64_t lanes = ihi - x - c * W;
    m[c] = V::tail(lanes < 0 ? 0 : lanes > W ? W : lanes);
  }
  F acc[NV];
  for (int c = 0; c < NV; ++c) acc[c] = V::load_tail(out + x + c * W, m[c], 0.0f);
  for (int64_t t = 0; t < taps; ++t) {
    const F wv = V::set1(w[t]);
    for (int c = 0; c < NV; ++c) acc[c] = V::fmadd(wv, V::load_tail(src[t] + x + c * W, m[c], 0.0f), acc[c]);
  }
  for (int c = 0; c < NV; ++c) V::store_tail(out + x + c * W, m[c], acc[c]);
}

void conv_row(float* out, int64_t taps, const float* const* src, const float* w, const int64_t* lo, const int64_t* hi,
              int64_t ilo, int64_t ihi) {
  // The edge columns (left of ilo, right of ihi) a vector at a time, each tap masked to the
  // columns it reaches: the same fmas per column, in tap order, as one at a time (a 10-wide
  // row of a 5x5 window has 4 edge columns of 10).
  int64_t right = ihi;
  for (int64_t t = 0; t < taps; ++t) right = hi[t] > right ? hi[t] : right;
  auto edge = [&](int64_t x0, int64_t x1) {
    for (; x0 < x1; x0 += W) {
      const int64_t n = x1 - x0 < W ? x1 - x0 : W;
      const auto all = V::tail(n);
      F acc = V::load_tail(out + x0, all, 0.0f);
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t a = lo[t] > x0 ? lo[t] : x0, b = hi[t] < x0 + n ? hi[t] : x0 + n;
        if (b <= a) continue;
        const auto m = V::range(a - x0, b - x0);
        acc = V::fmadd_tail(V::set1(w[t]), V::load_tail(src[t] + x0, m, 0.0f), acc, m);
      }
      V::store_tail(out + x0, all, acc);
    }
  };
  edge(0, ilo);
  edge(ihi, right);
  // Chunks of four vectors; the last one only as many vectors as columns remain (rows of
  // 10 or 20 outputs, the late depthwise layers, used one vector of four).
  for (int64_t x = ilo; x < ihi; x += 4 * W) {
    switch ((ihi - x + W - 1) / W) {
      case 1: conv_row_chunk<1>(out, taps, src, w, x, ihi); break;
      case 2: conv_row_chunk<2>(out, taps, src, w, x, ihi); break;
      case 3: conv_row_chunk<3>(out, taps, src, w, x, ihi); break;
      default: conv_row_chunk<4>(out, taps, src, w, x, ihi); break;
    }
  }
}

// The input of a depthwise chunk of NV vectors of output columns from column x at width stride
// SW: at(s, kx, v) is vector v of tap kx from input row s, with a Masked chunk's loads masked to
// the row [0, iw) (zeros outside, never read), the masks made once for all rows and taps.
template <int NV, int SW, bool Masked>
struct DwLoads {
  int64_t x0;  // the row position of vector 0 of tap 0
  int64_t dw;
  // Load (kx, v, half) covers positions c .. c + W - 1, c = x0 + kx dw + v W SW + half W.
  typename V::Tail mask[Masked ? kDwMaxKw : 1][NV][SW];
  DwLoads(int64_t x, int64_t kw, int64_t dw_, int64_t pl, int64_t iw) : x0(x * SW - pl), dw(dw_) {
    if constexpr (Masked)
      for (int64_t kx = 0; kx < kw; ++kx)
        for (int v = 0; v < NV; ++v)
          for (int q = 0; q < SW; ++q) {
            const int64_t c = x0 + kx * dw + v * W * SW + q * W;
            const int64_t lo = c < 0 ? -c : 0, hi = iw - c;
            const int64_t a = lo < W ? lo : W, b = hi < a ? a : hi < W ? hi : W;
            mask[kx][v][q] = V::range(a, b);
          }
  }
  F half(const float* s, int64_t c, int64_t kx, int v, int q) const {
    if constexpr (Masked) return V::load_tail(s + c, mask[kx][v][q], 0.0f);
    else return V::load(s + c);
  }
  F at(const float* s, int64_t kx, int v) const {
    const int64_t c = x0 + kx * dw + v * W * SW;
    if constexpr (SW == 1) return half(s, c, kx, v, 0);
    else return V::even(half(s, c, kx, v, 0), half(s, c + W, kx, v, 1));
  }
};

// The accumulators of R output rows x NV vectors: set to the bias, and stored from column x
// (the last vector masked at ow).
template <int R, int NV>
inline void dw_init(F (&acc)[R][NV], float bias) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V::set1(bias);
}
template <int R, int NV>
inline void dw_store(const F (&acc)[R][NV], float* out, int64_t ldo, int64_t x, int64_t ow) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int64_t c = x + v * W;
      if (c + W <= ow) V::store(out + r * ldo + c, acc[r][v]);
      else V::store_tail(out + r * ldo + c, V::tail(ow - c), acc[r][v]);
    }
}

// R output rows x NV vectors of columns from column x of a depthwise plane at width stride SW
// (dw_rows' contract): tap by tap in (ky, kx) order, its weight broadcast once and multiplied
// into all R x NV accumulators (every output row reads its own input row of the tap).
template <int R, int NV, int SW, bool Masked>
inline void dw_chunk_body(float* out, int64_t ldo, const float* const* src, int64_t sh, int64_t dh, const float* w,
                          int64_t kh, int64_t kw, int64_t dw, int64_t pl, int64_t iw, int64_t x, int64_t ow,
                          float bias) {
  F acc[R][NV];
  dw_init(acc, bias);
  const DwLoads<NV, SW, Masked> in(x, kw, dw, pl, iw);
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* rows[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) rows[r] = src[r * sh + ky * dh];
    for (int64_t kx = 0; kx < kw; ++kx) {
      const F wv = V::set1(w[ky * kw + kx]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(wv, in.at(rows[r], kx, v), acc[r][v]);
    }
  }
  dw_store(acc, out, ldo, x, ow);
}

// Four output rows of a kh = KH window at height stride SH without dilation (PP-OCR's 3x3 and
// 5x5, strides 1 and 2): which output rows read an input row is known at compile time, so each
// input row's tap vectors are loaded once and multiplied into every output row that reads them
// (a 5x5 at stride 1: 8 input rows a tap column instead of 20), in the same per-element order
// as dw_chunk_body. The depthwise convs of 12x80 maps under 5x5 (PP-OCRv4 rec): 0.148 -> 0.121
// ms for 240 channels, one thread.
template <int NV, int SW, int KH, int SH, bool Masked>
inline void dw_chunk_rows4(float* out, int64_t ldo, const float* const* src, const float* w, int64_t kw, int64_t dw,
                           int64_t pl, int64_t iw, int64_t x, int64_t ow, float bias) {
  constexpr int R = 4, NIN = (R - 1) * SH + KH;
  F acc[R][NV];
  dw_init(acc, bias);
  const DwLoads<NV, SW, Masked> in(x, kw, dw, pl, iw);
#pragma GCC unroll 16
  for (int i = 0; i < NIN; ++i) {
    const float* s = src[i];
    for (int64_t kx = 0; kx < kw; ++kx) {
      F xv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) xv[v] = in.at(s, kx, v);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int ky = i - r * SH;
        if (ky < 0 || ky >= KH) continue;
        const F wv = V::set1(w[ky * kw + kx]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(wv, xv[v], acc[r][v]);
      }
    }
  }
  dw_store(acc, out, ldo, x, ow);
}

// Calls body.template operator()<NV, Masked>(x) for each chunk of up to four vectors of output
// columns from column x: Masked where some load of the chunk falls outside the row [0, iw).
template <int SW, class Body>
inline void dw_columns(int64_t kw, int64_t dw, int64_t pl, int64_t iw, int64_t ow, Body&& body) {
  for (int64_t x = 0; x < ow; x += 4 * W) {
    auto chunk = [&]<int NV>() {
      if (x * SW - pl >= 0 && (x + NV * W) * SW + (kw - 1) * dw - pl <= iw) body.template operator()<NV, false>(x);
      else body.template operator()<NV, true>(x);
    };
    switch ((ow - x + W - 1) / W) {
      case 1: chunk.template operator()<1>(); break;
      case 2: chunk.template operator()<2>(); break;
      case 3: chunk.template operator()<3>(); break;
      default: chunk.template operator()<4>(); break;
    }
  }
}

template <int R, int SW>
inline void dw_rows_r(float* out, int64_t ldo, const float* const* src, int64_t sh, int64_t dh, const float* w,
                      int64_t kh, int64_t kw, int64_t dw, int64_t pl, int64_t iw, int64_t ow, float bias) {
  dw_columns<SW>(kw, dw, pl, iw, ow, [&]<int NV, bool Masked>(int64_t x) {
    dw_chunk_body<R, NV, SW, Masked>(out, ldo, src, sh, dh, w, kh, kw, dw, pl, iw, x, ow, bias);
  });
}

template <int SW, int KH, int SH>
void dw_rows4(float* out, int64_t ldo, const float* const* src, const float* w, int64_t kw, int64_t dw, int64_t pl,
              int64_t iw, int64_t ow, float bias) {
  dw_columns<SW>(kw, dw, pl, iw, ow, [&]<int NV, bool Masked>(int64_t x) {
    dw_chunk_rows4<NV, SW, KH, SH, Masked>(out, ldo, src, w, kw, dw, pl, iw, x, ow, bias);
  });
}

template <int SW>
void dw_rows_sw(float* out, int64_t ldo, int64_t rows, const float* const* src, int64_t sh, int64_t dh, const float* w,
                int64_t kh, int64_t kw, int64_t dw, int64_t pl, int64_t iw, int64_t ow, float bias) {
  if (rows == 4 && dh == 1 && (kh == 3 || kh == 5) && (sh == 1 || sh == 2)) {
    if (kh == 3 && sh == 1) return dw_rows4<SW, 3, 1>(out, ldo, src, w, kw, dw, pl, iw, ow, bias);
    if (kh == 3) return dw_rows4<SW, 3, 2>(out, ldo, src, w, kw, dw, pl, iw, ow, bias);
    if (sh == 1) return dw_rows4<SW, 5, 1>(out, ldo, src, w, kw, dw, pl, iw, ow, bias);
    return dw_rows4<SW, 5, 2>(out, ldo, src, w, kw, dw, pl, iw, ow, bias);
  }
  switch (rows) {
    case 1: return dw_rows_r<1, SW>(out, ldo, src, sh, dh, w, kh, kw, dw, pl, iw, ow, bias);
    case 2: return dw_rows_r<2, SW>(out, ldo, src, sh, dh, w, kh, kw, dw, pl, iw, ow, bias);
    case 3: return dw_rows_r<3, SW>(out, ldo, src, sh, dh, w, kh, kw, dw, pl, iw, ow, bias);
    default: return dw_rows_r<4, SW>(out, ldo, src, sh, dh, w, kh, kw, dw, pl, iw, ow, bias);
  }
}

void dw_rows(float* out, int64_t ldo, int64_t rows, const float* const* src, int64_t sh, int64_t dh, const float* w,
             int64_t kh, int64_t kw, int64_t sw, int64_t dw, int64_t pl, int64_t iw, int64_t ow, float bias) {
  if (sw == 1) dw_rows_sw<1>(out, ldo, rows, src, sh, dh, w, kh, kw, dw, pl, iw, ow, bias);
  else dw_rows_sw<2>(out, ldo, rows, src, sh, dh, w, kh, kw, dw, pl, iw, ow, bias);
}
