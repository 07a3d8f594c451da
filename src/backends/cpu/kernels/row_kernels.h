// Vector row helpers of the kernel families, chosen by ISA like the GEMM tables: the
// fused-matmul epilogue activation, the online-softmax steps of attention and the
// direct-convolution row. One
// implementation (row_kernels_vec.h over vec_math.h) compiled per ISA, plus a scalar one.
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/cpu/isa.h"
#include "rlx/attrs.h"

namespace rlx::cpu {

struct RowKernels {
  // x[i] = act(x[i]) for i < n (alpha: leaky_relu slope).
  void (*activate)(float* x, int64_t n, Activation act, float alpha) = nullptr;
  // x[i] = exp(x[i] - shift); returns the sum. exp(-inf) is 0.
  float (*exp_sum)(float* x, int64_t n, float shift) = nullptr;
  float (*max)(const float* x, int64_t n) = nullptr;  // -inf for n == 0
  // y[i] = y[i] * s (rescales running attention outputs).
  void (*scale)(float* y, int64_t n, float s) = nullptr;
  // y[i] = y[i] + b (a convolution's bias on a row of its GEMM's output tile).
  void (*add)(float* y, int64_t n, float b) = nullptr;
  // y[i] = y[i] + x[i] (a fused convolution's residual).
  void (*accumulate)(float* y, const float* x, int64_t n) = nullptr;
  // A GEMM tile's epilogue in one call: for r < m, j < n, in this order, y = c[r*ldc + j];
  // y += bias[r] (bias given); y += res[r*ldr + j] (res given); c[r*ldc + j] = act(y). The
  // same operations as add, accumulate and activate row by row (the same bits), without
  // three calls per row of a tile whose rows are a couple of vectors long.
  void (*tile_epilogue)(float* c, int64_t ldc, int64_t m, int64_t n, const float* bias, const float* res, int64_t ldr,
                        Activation act, float alpha) = nullptr;
  // Max pooling's window over precomputed tap rows: for i < n, out[i] = a after a = -inf and,
  // for t < taps in order, a = src[t][i] where src[t][i] > a or src[t][i] is NaN (a NaN, once
  // taken, stays unless a later NaN replaces it; equal values keep a, so -0 and +0 stay as they
  // came). The whole window in registers: one store per output vector.
  void (*max_taps)(float* out, int64_t taps, const float* const* src, int64_t n) = nullptr;
  // One output row of a stride-1 direct convolution: for t < taps (in order) and
  // x in [lo[t], hi[t]): out[x] += w[t] * src[t][x]. [ilo, ihi) must lie inside every
  // tap's range; there all taps are summed in registers.
  void (*conv_row)(float* out, int64_t taps, const float* const* src, const float* w, const int64_t* lo,
                   const int64_t* hi, int64_t ilo, int64_t ihi) = nullptr;
  // d[t] = s[2t] for t < n, reading s[0 .. 2n - 2] only (the last element may end a row): the
  // width-stride-2 gathers of whole rows (strided pointwise inputs, the read-in-place conv's row
  // buffer, max pooling's phase rows), a vector of outputs per permute with masked loads at the
  // end. (im2col's pieces of a few dozen floats keep conv.cpp's inline copy: the call and the
  // masks cost more there.)
  void (*copy_even)(float* d, const float* s, int64_t n) = nullptr;
  // Max pooling's output row for a 3-wide window at width stride 2 with one column of left
  // padding (ResNet's 3x3 / 2 pool) over `taps` (1 .. kMax3S2Rows) input rows: for ox < n,
  // out[ox] is max_taps' fold, in row order, of each row's fold over rows[t][2 ox - 1],
  // rows[t][2 ox], rows[t][2 ox + 1] in that order (the columns outside [0, w) skipped). Reads
  // rows[t][0 .. w) only. One pass in registers (even and odd columns by permutes, every row's
  // fold then the fold over rows) instead of a row of horizontal maxima per input row written
  // and read back.
  void (*max3_s2)(float* out, const float* const* rows, int64_t taps, int64_t w, int64_t n) = nullptr;
  // Attention's score row in one pass: y[i] = y[i] * s, then + add[i] where add is given;
  // returns max's fold of the result (the same values and maximum as scale, the add and max in
  // turn).
  float (*scale_add_max)(float* y, int64_t n, float s, const float* add) = nullptr;
  // Up to kDwRows output rows of a depthwise convolution's plane, width stride sw (1 or 2):
  // for r < rows and ox < ow, out[r * ldo + ox] = bias, then for ky < kh and kx < kw in that
  // order (one multiply-add each, fused in the vector tables)
  //   += w[ky * kw + kx] * row[ox * sw + kx * dw - pl],   row = src[r * sh + ky * dh],
  // where src[i] (i <= (rows - 1) * sh + (kh - 1) * dh) is an input row of iw floats (a row of
  // zeros for one outside the map), and a column outside [0, iw) reads zero (kw <= kDwMaxKw).
  // Straight from the input rows, masked loads only in the vectors at the map's edges (stride
  // 2: even lanes of pairs of loads); a call's rows share each tap's weight broadcast.
  void (*dw_rows)(float* out, int64_t ldo, int64_t rows, const float* const* src, int64_t sh, int64_t dh,
                  const float* w, int64_t kh, int64_t kw, int64_t sw, int64_t dw, int64_t pl, int64_t iw,
                  int64_t ow, float bias) = nullptr;
};

constexpr int64_t kDwRows = 4;
constexpr int64_t kDwMaxKw = 16;  // dw_rows' widest window (kw)

constexpr int64_t kMax3S2Rows = 8;

// Best available for `isa` (a level this build lacks falls back to the next lower one).
const RowKernels& row_kernels(Isa isa);
// The vector tables (nullptr where not compiled in); use only when the CPU has the ISA.
const RowKernels* row_kernels_avx2();
const RowKernels* row_kernels_avx512();
// The scalar activation in T (float: the reference the vector versions are tested against;
// double: the f64 matmul epilogue).
template <class T> T activate_scalar(T x, Activation act, T alpha) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Relu: return x < T(0) ? T(0) : x;
    case Activation::LeakyRelu: return x < T(0) ? x * alpha : x;
    case Activation::Sigmoid: return T(1) / (T(1) + std::exp(-x));
    case Activation::Silu: return x / (T(1) + std::exp(-x));
    case Activation::Tanh: return std::tanh(x);
    case Activation::Gelu: return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752)));
    case Activation::GeluTanh: return T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
  }
  return x;
}

}  // namespace rlx::cpu
