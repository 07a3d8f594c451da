// Internal: the SGEMM microkernel, written once over the vector-traits struct V of the
// including namespace and pasted into a region compiled for that ISA (gemm_avx2.cpp,
// gemm_avx512.cpp). A tile is M (<= Mr) rows by NR = 2 * V::W columns; A is packed in
// Mr-row panels, B in NR-column panels (gemm.h). No include guard: one copy per ISA.
//
// acc starts at zero and is added to C at the end (never FMA'd into C) so that every
// path (full tile, edge tile through a temporary) performs the same arithmetic.
template <int M, int Mr>
void ukr_vec(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  F c0[M], c1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) c0[i] = c1[i] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    const F b0 = V::load(b), b1 = V::load(b + W);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const F ai = V::set1(a[i]);
      c0[i] = V::fmadd(ai, b0, c0[i]);
      c1[i] = V::fmadd(ai, b1, c1[i]);
    }
    a += Mr;
    b += ldb;
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      c0[i] = V::add(V::load(ci), c0[i]);
      c1[i] = V::add(V::load(ci + W), c1[i]);
    }
    V::store(ci, c0[i]);
    V::store(ci + W, c1[i]);
  }
}
