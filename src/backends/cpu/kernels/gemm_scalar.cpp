// Scalar (baseline x86-64 / any CPU) kernel table: the same contracts as the AVX2 and
// AVX-512 tables, written as plain loops; also the reference activation functions.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/row_kernels.h"

namespace rlx::cpu {

namespace {

constexpr int kScalarMr = 4, kScalarNr = 16;

template <int M>
void ukr_scalar(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                bool accumulate) {
  float acc[M][kScalarNr] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < M; ++i) {
      const float ai = a[i];
      for (int j = 0; j < kScalarNr; ++j) acc[i][j] += ai * b[j];
    }
    a += kScalarMr;
    b += ldb;
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < kScalarNr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

template <int M>
void ukr_off_scalar(int64_t kc, const float* a, const float* b, const int64_t* off, float* c, int64_t ldc,
                    bool accumulate) {
  float acc[M][kScalarNr] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + off[k];
    for (int i = 0; i < M; ++i) {
      const float ai = a[i];
      for (int j = 0; j < kScalarNr; ++j) acc[i][j] += ai * bk[j];
    }
    a += kScalarMr;
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < kScalarNr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

void dot_scalar(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                int64_t ldb, float* c, int64_t rsc, int64_t csc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += a[i * lda + kk] * b[j * ldb + kk];
      float& cij = c[i * rsc + j * csc];
      cij = accumulate ? cij + s : s;
    }
}

void gemv_scalar(int64_t m, int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa,
                 const float* b, int64_t ldb, float* acc) {
  std::fill(acc, acc + m * w, 0.0f);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t i = 0; i < m; ++i) {
      const float ai = a[i * rsa + kk * csa];
      for (int64_t j = 0; j < w; ++j) acc[i * w + j] += ai * b[kk * ldb + j];
    }
}

void transpose_pack_scalar(const float* src, int64_t ld, int64_t rows, int64_t kc, int64_t width, float* dst) {
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t r = 0; r < width; ++r) dst[k * width + r] = r < rows ? src[r * ld + k] : 0.0f;
}


void widen_scalar(const uint16_t* src, float* dst, int64_t n, bool bf16) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16 ? bf16_to_f32(src[i]) : f16_to_f32(src[i]);
}

IsaKernels make_scalar_table() {
  IsaKernels t;
  t.isa = Isa::Scalar;
  t.mr = kScalarMr;
  t.nr = kScalarNr;
  t.mc = 64;
  t.kc = 256;
  t.nc = 1024;
  t.ukr[1] = ukr_scalar<1>;
  t.ukr[2] = ukr_scalar<2>;
  t.ukr[3] = ukr_scalar<3>;
  t.ukr[4] = ukr_scalar<4>;
  t.ukr_off[1] = ukr_off_scalar<1>;
  t.ukr_off[2] = ukr_off_scalar<2>;
  t.ukr_off[3] = ukr_off_scalar<3>;
  t.ukr_off[4] = ukr_off_scalar<4>;
  t.dot = dot_scalar;
  t.gemv = gemv_scalar;
  t.rows = &row_kernels(t.isa);
  t.transpose_pack = transpose_pack_scalar;
  t.widen = widen_scalar;
  return t;
}

}  // namespace

const IsaKernels* scalar_kernels() {
  static const IsaKernels table = make_scalar_table();
  return &table;
}

}  // namespace rlx::cpu
