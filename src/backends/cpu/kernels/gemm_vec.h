// Internal: the SGEMM microkernel, the small-M dot and GEMV kernels, written once over the vector-traits struct V of the
// including namespace and pasted into a region compiled for that ISA (gemm_avx2.cpp,
// gemm_avx512.cpp). A tile is M (<= Mr) rows by NR = 2 * V::W columns; A is packed in
// Mr-row panels, B in NR-column panels (gemm.h). No include guard: one copy per ISA.
//
// acc starts at zero and is added to C at the end (never FMA'd into C) so that every
// path (full tile, edge tile through a temporary) performs the same arithmetic.
// The tile's arithmetic, with row k of B at row(k) (2W floats, unaligned): ukr_vec reads packed
// panels (row k at b + k*ldb), ukr_off_vec rows in place (b + off[k], e.g. a convolution's
// input rows); both therefore give the same bits for the same values.
//
// Prefetching. Weights packed once are A (most convolutions) or B (the transposed ones,
// ResNet-50's 7x7 layers with 4 MB of weights each, Winograd's transformed weights, matmuls'
// constant right operands) and come from DRAM on every call of a model larger than the cache;
// the hardware prefetcher alone left the FMAs waiting at every page (a chain of eight 7x7
// layers, one thread: 5.25 -> 4.40 ms with the first prefetches). Prefetches never fault, so
// reading past the last panel is harmless; they change no arithmetic.
// - A: a row tile's packed panel is reused by every column tile of its sweep (or, over
//   pre-packed B, the row tiles of a panel follow each other), and panels of one K block are
//   contiguous: each kernel fetches the next panel's rows (kc steps on) as it goes, so the
//   next sweep's weights arrive during this one. Fetching kPrefetchRows steps ahead in the
//   same panel only helped the sweep's first tile, which then waited on memory: ResNet-50 one
//   thread -0.27 ms in kernels (its layer 3, 1 MB of weights per 1x1 conv, -0.28), two -0.13.
// - B, kPrefetchBRows (B panels packed per call, or B's rows read in place): kPrefetchRows
//   rows ahead, which streams the next panel in as well where panels follow each other.
constexpr int64_t kPrefetchRows = 32;
// - B, kPrefetchBPanel (B panels packed once: sgemm's b_packed), walked panel by panel, every
//   row tile of a panel before the next (block_tiles): kPrefetchBRows fetched only what the
//   panel's first row tile was about to read, ~4 KB ahead of a kernel that consumes a 32 KB
//   panel in a few microseconds. Row k of the next panel (kc rows on) at step k of every row
//   tile instead: the next panel arrives while this one is computed (its later row tiles'
//   prefetches hit the cache). ResNet-50's layer 4 alone (75 MB of packed weights, one
//   thread): 8.59 -> 7.81 ms. Not for B read in place, where kc rows on is the next K block
//   (ResNet-50's layers 1-2 slowed by 0.4 ms with it).
constexpr int kPrefetchBNone = 0, kPrefetchBRows = 1, kPrefetchBPanel = 2;
//
// NV: vectors per row, 2 (the full NR columns) or 1 (the left half: a panel's last W or fewer
// columns, e.g. 112 = 3 x 32 + 16, whose right half the full kernel would compute and throw
// away). Each lane's sum is the same FMAs in the same order either way: the same bits.
// With Epi, the row epilogue (gemm.h's GemmRowEpilogue: + bias[i], + res, ReLU, in that order)
// runs on each row's vectors between the accumulate and the store.
//
// A finished tile's rows (c0[i], and c1[i] with NV == 2) added to C where accumulating, then the
// epilogue, then stored: the tail of every kernel over row accumulators.
template <int M, int NV = 2, bool Epi = false>
inline __attribute__((always_inline)) void store_rows(F* c0, F* c1, float* c, int64_t ldc, bool accumulate,
                                                      const GemmRowEpilogue* e) {
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      c0[i] = V::add(V::load(ci), c0[i]);
      if constexpr (NV == 2) c1[i] = V::add(V::load(ci + W), c1[i]);
    }
    if constexpr (Epi) {
      if (e->bias) {
        const F bv = V::set1(e->bias[i]);
        c0[i] = V::add(c0[i], bv);
        if constexpr (NV == 2) c1[i] = V::add(c1[i], bv);
      }
      if (e->res) {
        const float* ri = e->res + i * e->ldr;
        c0[i] = V::add(c0[i], V::load(ri));
        if constexpr (NV == 2) c1[i] = V::add(c1[i], V::load(ri + W));
      }
      if (e->relu) {
        c0[i] = V::max(V::zero(), c0[i]);
        if constexpr (NV == 2) c1[i] = V::max(V::zero(), c1[i]);
      }
    }
    V::store(ci, c0[i]);
    if constexpr (NV == 2) V::store(ci + W, c1[i]);
  }
}

template <int M, int Mr, int PrefetchB = kPrefetchBNone, int NV = 2, bool Epi = false, class Row>
inline __attribute__((always_inline)) void ukr_rows(int64_t kc, const float* a, Row row, float* c, int64_t ldc,
                                                    bool accumulate, const GemmRowEpilogue* e = nullptr) {
  static_assert(NV == 1 || NV == 2, "one or two vectors per row");
  F c0[M], c1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) c0[i] = c1[i] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = row(k);
    if constexpr (PrefetchB != kPrefetchBNone)
      for (int o = 0; o < NV * W; o += 64 / int(sizeof(float)))
        __builtin_prefetch(row(k + (PrefetchB == kPrefetchBPanel ? kc : kPrefetchRows)) + o, 0, 3);
    if ((k & 3) == 0)  // the next packed A panel: four steps' floats every fourth step
      for (int o = 0; o < 4 * Mr; o += 64 / int(sizeof(float))) __builtin_prefetch(a + kc * Mr + o, 0, 3);
    const F b0 = V::load(bk);
    const F b1 = NV == 2 ? V::load(bk + W) : b0;
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const F ai = V::set1(a[i]);
      c0[i] = V::fmadd(ai, b0, c0[i]);
      if constexpr (NV == 2) c1[i] = V::fmadd(ai, b1, c1[i]);
    }
    a += Mr;
  }
  store_rows<M, NV, Epi>(c0, c1, c, ldc, accumulate, e);
}

// Packed B panels (row k at b + k*ldb). Pf: kPrefetchBRows for panels packed per call (the
// tables' ukr, ukr_epi, ukr_half), kPrefetchBPanel for panels packed once (ldb == nr, panels kc
// rows apart: ukr_stream, ukr_epi_stream, ukr_half_stream); the same arithmetic either way.
template <int M, int Mr, int Pf = kPrefetchBRows>
void ukr_vec(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  ukr_rows<M, Mr, Pf>(kc, a, [b, ldb](int64_t k) { return b + k * ldb; }, c, ldc, accumulate);
}

template <int M, int Mr, int Pf = kPrefetchBRows>
void ukr_epi_vec(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                 const GemmRowEpilogue& e) {
  ukr_rows<M, Mr, Pf, 2, true>(kc, a, [b, ldb](int64_t k) { return b + k * ldb; }, c, ldc, accumulate, &e);
}

// The left W columns of the tile only (NV = 1 above); B as for ukr_vec / ukr_off_vec.
template <int M, int Mr, int Pf = kPrefetchBRows>
void ukr_half_vec(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  ukr_rows<M, Mr, Pf, 1>(kc, a, [b, ldb](int64_t k) { return b + k * ldb; }, c, ldc, accumulate);
}
template <int M, int Mr>
void ukr_off_half_vec(int64_t kc, const float* a, const float* b, const int64_t* off, float* c, int64_t ldc,
                      bool accumulate) {
  ukr_rows<M, Mr, kPrefetchBNone, 1>(kc, a, [b, off](int64_t k) { return b + off[k]; }, c, ldc, accumulate);
}

template <int M, int Mr>
void ukr_off_epi_vec(int64_t kc, const float* a, const float* b, const int64_t* off, float* c, int64_t ldc,
                     bool accumulate, const GemmRowEpilogue& e) {
  ukr_rows<M, Mr, kPrefetchBNone, 2, true>(kc, a, [b, off](int64_t k) { return b + off[k]; }, c, ldc, accumulate, &e);
}
template <int M, int Mr>
void ukr_off_half_epi_vec(int64_t kc, const float* a, const float* b, const int64_t* off, float* c, int64_t ldc,
                          bool accumulate, const GemmRowEpilogue& e) {
  ukr_rows<M, Mr, kPrefetchBNone, 1, true>(kc, a, [b, off](int64_t k) { return b + off[k]; }, c, ldc, accumulate, &e);
}

template <int M, int Mr>
void ukr_off_vec(int64_t kc, const float* a, const float* b, const int64_t* off, float* c, int64_t ldc,
                 bool accumulate) {
  ukr_rows<M, Mr>(kc, a, [b, off](int64_t k) { return b + off[k]; }, c, ldc, accumulate);
}

// A tile whose rows are read where they lie: row i of step k at a[aoff[k] + i] (a strided
// convolution's output positions of one row as the tile's rows, broadcast from the input's
// phase planes: nothing packed), B a pre-packed panel (row k at b + k * 2W; not prefetched: the
// caller runs every row tile of its positions over one panel, which stays in L1). C's row i (a
// position) at c + i * ldc, its 2W columns (output channels) contiguous. Each element is the
// same FMA chain over k as in ukr_rows (a * b is b * a), then the same store_rows: the same
// bits for the same values.
template <int M, int Mr>
void ukr_arows_vec(int64_t kc, const float* a, const int64_t* aoff, const float* b, float* c, int64_t ldc,
                   bool accumulate) {
  F c0[M], c1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) c0[i] = c1[i] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    const float* ak = a + aoff[k];
    const float* bk = b + k * 2 * W;
    const F b0 = V::load(bk), b1 = V::load(bk + W);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const F ai = V::set1(ak[i]);
      c0[i] = V::fmadd(ai, b0, c0[i]);
      c1[i] = V::fmadd(ai, b1, c1[i]);
    }
  }
  store_rows<M>(c0, c1, c, ldc, accumulate, nullptr);
}

// A tile of NC <= 8 columns (a panel's last few: 196 = 6 x 32 + 4): the rows are the vector
// (step k's Mr floats of the packed A panel, Mr <= W) and each column's B value is broadcast,
// so a step costs NC FMAs instead of the half kernel's M, whose lanes past NC were thrown
// away (a 4-column tail cost as much as 16 columns). Each element is the same chain of FMAs
// over k as in ukr_rows, then added to C in the same order: the same bits.
template <int NC, int Mr>
void ukr_cols_vec(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                  int64_t rows) {
  static_assert(Mr <= W, "the A panel's rows fit one vector");
  F acc[NC];
#pragma GCC unroll 8
  for (int j = 0; j < NC; ++j) acc[j] = V::zero();
  const auto ma = V::tail(Mr);
  for (int64_t k = 0; k < kc; ++k) {
    if ((k & 3) == 0)  // the packed A panel, as ukr_rows fetches it
      for (int o = 0; o < 4 * Mr; o += 64 / int(sizeof(float))) __builtin_prefetch(a + kc * Mr + o, 0, 3);
    const F av = V::load_tail(a, ma, 0.0f);
    const float* bk = b + k * ldb;
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) acc[j] = V::fmadd(av, V::set1(bk[j]), acc[j]);
    a += Mr;
  }
  alignas(64) float t[NC][W];
#pragma GCC unroll 8
  for (int j = 0; j < NC; ++j) V::store(t[j], acc[j]);
  for (int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < NC; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[j][i] : t[j][i];
}

// Small-M products: C[i][j] (+)= dot(A row i, B row j) over k, M, N <= 4 rows each. Full
// vectors then one masked tail, summed per (i, j) in a fixed order.
template <int M, int N>
void dot_mn(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t rsc, int64_t csc,
            bool accumulate) {
  F acc[M][N];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[i][j] = V::zero();
  auto step = [&](auto load) {
    F bv[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) bv[j] = load(b + j * ldb);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const F av = load(a + i * lda);
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = V::fmadd(av, bv[j], acc[i][j]);
    }
  };
  int64_t kk = 0;
  for (; kk + W <= k; kk += W) step([&](const float* p) { return V::load(p + kk); });
  if (kk < k) {
    const auto t = V::tail(k - kk);
    step([&](const float* p) { return V::load_tail(p + kk, t, 0.0f); });
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const float s = V::hsum(acc[i][j]);
      float& cij = c[i * rsc + j * csc];
      cij = accumulate ? cij + s : s;
    }
}

using DotFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);
template <int M>
constexpr DotFn kDotRow[4] = {dot_mn<M, 1>, dot_mn<M, 2>, dot_mn<M, 3>, dot_mn<M, 4>};
constexpr const DotFn* kDot[4] = {kDotRow<1>, kDotRow<2>, kDotRow<3>, kDotRow<4>};

void dot(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
         int64_t rsc, int64_t csc, bool accumulate) {
  kDot[m - 1][n - 1](k, a, lda, b, ldb, c, rsc, csc, accumulate);
}

// acc rows live in L1 (w <= 1024 floats each); every B row segment is one contiguous
// run. Each element sums over k in order.
template <int M>
void gemv_m(int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa, const float* b, int64_t ldb,
            float* acc) {
  const int64_t wv = w / W * W;
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < w; ++j) acc[i * w + j] = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* bk = b + kk * ldb;
    F av[M];
    float as[M];
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      as[i] = a[i * rsa + kk * csa];
      av[i] = V::set1(as[i]);
    }
    int64_t j = 0;
    const float* ahead = bk + 4 * ldb;  // rows are separate pages: prefetch 4 rows ahead
    for (; j + 2 * W <= wv; j += 2 * W) {
      if (kk + 4 < k)
        for (int p = 0; p < 2 * W; p += 16) _mm_prefetch(reinterpret_cast<const char*>(ahead + j + p), _MM_HINT_T0);
      const F b0 = V::load(bk + j), b1 = V::load(bk + j + W);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        float* ci = acc + i * w + j;
        V::store(ci, V::fmadd(av[i], b0, V::load(ci)));
        V::store(ci + W, V::fmadd(av[i], b1, V::load(ci + W)));
      }
    }
    for (; j < wv; j += W) {
      const F b0 = V::load(bk + j);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) V::store(acc + i * w + j, V::fmadd(av[i], b0, V::load(acc + i * w + j)));
    }
    for (; j < w; ++j)
      for (int i = 0; i < M; ++i) acc[i * w + j] = std::fma(as[i], bk[j], acc[i * w + j]);
  }
}

void gemv(int64_t m, int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa, const float* b, int64_t ldb,
          float* acc) {
  switch (m) {
    case 1: return gemv_m<1>(w, k, a, rsa, csa, b, ldb, acc);
    case 2: return gemv_m<2>(w, k, a, rsa, csa, b, ldb, acc);
    case 3: return gemv_m<3>(w, k, a, rsa, csa, b, ldb, acc);
    default: return gemv_m<4>(w, k, a, rsa, csa, b, ldb, acc);
  }
}
