// The scalar RowKernels (any CPU; also the reference activation) and the choice by ISA.
#include "backends/cpu/kernels/row_kernels.h"

#include <cmath>
#include <limits>

namespace rlx::cpu {

namespace {

void activate_scalar_n(float* x, int64_t n, Activation act, float alpha) {
  if (act == Activation::None) return;
  for (int64_t i = 0; i < n; ++i) x[i] = activate_scalar(x[i], act, alpha);
}

float exp_sum_scalar(float* x, int64_t n, float shift) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    s += x[i];
  }
  return s;
}

float max_scalar(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

void add_scalar(float* y, int64_t n, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] += b;
}

void accumulate_scalar(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_scalar(float* y, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

float scale_add_max_scalar(float* y, int64_t n, float s, const float* add) {
  scale_scalar(y, n, s);
  if (add)
    for (int64_t i = 0; i < n; ++i) y[i] += add[i];
  return max_scalar(y, n);
}

void tile_epilogue_scalar(float* c, int64_t ldc, int64_t m, int64_t n, const float* bias, const float* res,
                          int64_t ldr, Activation act, float alpha) {
  for (int64_t r = 0; r < m; ++r) {
    float* y = c + r * ldc;
    if (bias) add_scalar(y, n, bias[r]);
    if (res) accumulate_scalar(y, res + r * ldr, n);
    activate_scalar_n(y, n, act, alpha);
  }
}

void max_taps_scalar(float* out, int64_t taps, const float* const* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float a = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < taps; ++t) {
      const float v = src[t][i];
      a = (v > a) | (v != v) ? v : a;
    }
    out[i] = a;
  }
}

void conv_row_scalar(float* out, int64_t taps, const float* const* src, const float* w, const int64_t* lo,
                     const int64_t* hi, int64_t ilo, int64_t ihi) {
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t x = lo[t]; x < hi[t]; ++x) out[x] += w[t] * src[t][x];
}

void copy_even_scalar(float* d, const float* s, int64_t n) {
  for (int64_t t = 0; t < n; ++t) d[t] = s[2 * t];
}

void max3_s2_scalar(float* out, const float* const* rows, int64_t taps, int64_t w, int64_t n) {
  for (int64_t ox = 0; ox < n; ++ox) {
    float a = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < taps; ++t) {
      float h = -std::numeric_limits<float>::infinity();
      for (int64_t c = 2 * ox - 1; c <= 2 * ox + 1; ++c) {
        if (c < 0 || c >= w) continue;
        const float v = rows[t][c];
        h = (v > h) | (v != v) ? v : h;
      }
      a = (h > a) | (h != h) ? h : a;
    }
    out[ox] = a;
  }
}

void dw_rows_scalar(float* out, int64_t ldo, int64_t rows, const float* const* src, int64_t sh, int64_t dh,
                    const float* w, int64_t kh, int64_t kw, int64_t sw, int64_t dw, int64_t pl, int64_t iw, int64_t ow,
                    float bias) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t ox = 0; ox < ow; ++ox) {
      float a = bias;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const float* s = src[r * sh + ky * dh];
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t c = ox * sw + kx * dw - pl;
          a += w[ky * kw + kx] * (c >= 0 && c < iw ? s[c] : 0.0f);
        }
      }
      out[r * ldo + ox] = a;
    }
}

}  // namespace

const RowKernels& row_kernels(Isa isa) {
  static const RowKernels scalar{activate_scalar_n, exp_sum_scalar, max_scalar, scale_scalar, add_scalar,
                                 accumulate_scalar, tile_epilogue_scalar, max_taps_scalar, conv_row_scalar,
                                 copy_even_scalar, max3_s2_scalar, scale_add_max_scalar, dw_rows_scalar};
  if (isa == Isa::Avx512)
    if (const RowKernels* t = row_kernels_avx512()) return *t;
  if (isa == Isa::Avx512 || isa == Isa::Avx2)
    if (const RowKernels* t = row_kernels_avx2()) return *t;
  return scalar;
}

}  // namespace rlx::cpu
