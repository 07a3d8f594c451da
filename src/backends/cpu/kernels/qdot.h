// Internal: the dot-product kernels of qmatmul (decode and prefill), per ISA.
// Activations are quantized per 32 elements like ggml's Q8_0 (scale = amax/127, values
// rounded to nearest) so the weight blocks multiply as int8 x int8 sums, one float scale
// product per (sub-)block; the error this adds is bounded in the tests.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/cpu/isa.h"

namespace rlx::cpu {

struct QDotKernels {
  // dot of a row of nb Q8_0 (or Q4_0) weight blocks with nb quantized activation blocks
  // (xs: the block scales, xq: 32 int8 per block).
  float (*q8_0)(const uint8_t* w, const float* xs, const int8_t* xq, int64_t nb) = nullptr;
  // Q4_0 multiplies the unsigned nibbles (0..15) and corrects by 8 * the block's sum of x
  // (xsum[b]): no sign handling per element.
  float (*q4_0)(const uint8_t* w, const float* xs, const int8_t* xq, const float* xsum, int64_t nb) = nullptr;
  float (*f16)(const uint16_t* w, const float* x, int64_t k) = nullptr;
  float (*f32)(const float* w, const float* x, int64_t k) = nullptr;
  // Prefill-sized Q8_0 / Q4_0 products as int8 GEMM (AVX-512 VNNI; nullptr elsewhere):
  // c[r][j] = sum_b d[16b + j] * xs[r*nb + b] * (sum_i xu[r][32b + i] * w_j[32b + i] - wsum[16b + j])
  // for r < m (m <= 4) and j < ncols (ncols <= 16), where the panel holds 16 weight rows as
  // signed int8 laid out [block][group of 4][row][4 bytes], xu are the activations as
  // unsigned bytes (int8 + 128) and wsum = 128 * the block's weight sum (the offset's share).
  void (*i8_panel)(const int8_t* panel, const float* d, const float* wsum, int64_t nb, const uint8_t* xu, int64_t ldx,
                   const float* xs, int64_t m, float* c, int64_t ldc, int64_t ncols) = nullptr;
  // q4_0x16 (rlx/quant.h) panel of 16 weight rows times m <= 4 activation rows (signed
  // int8 blocks xq with scales xs and sums xsum, row stride ldx / nb):
  // c[r][j] = sum_b d_j,b * xs[r][b] * (sum_i nib_j[32b + i] * xq[r][32b + i] - 8 * xsum[r][b]).
  void (*q4x16_panel)(const uint8_t* panel, int64_t nb, const int8_t* xq, int64_t ldx, const float* xs,
                      const float* xsum, int64_t m, float* c, int64_t ldc) = nullptr;
  // Rows of nblk blocks of a format whose values are unsigned integers under a scale (and
  // a min or an offset) -- Q4_1, Q5_0, Q5_1 (blocks of 32) and Q4_K, Q5_K, Q6_K (super-blocks
  // of 256) -- times m <= 4 activation rows quantized per 32 as above (row r at xq + r * ldx,
  // xs / xsum + r * ldx / 32): out[r * ldo] = sum over (sub-)blocks of its weight scale * xs
  // * (int8 dot of the unsigned values with xq) + (its min or offset term) * xs * xsum.
  // The same kernel serves decode and prefill: the weights are read as stored, decoded
  // once per 4 activation rows, and never widened to floats.
  using BlockDot = void (*)(const uint8_t* w, int64_t nblk, const int8_t* xq, const float* xs, const float* xsum,
                            int64_t ldx, int64_t m, float* out, int64_t ldo);
  // Q8_0 / Q4_0 as BlockDot: the few-row products (batched decode: 2..8 rows) read each
  // block once for 4 rows; one row keeps q8_0 / q4_0 above.
  BlockDot q8_0_rows = nullptr, q4_0_rows = nullptr;
  BlockDot q4_1 = nullptr, q5_0 = nullptr, q5_1 = nullptr, q4_k = nullptr, q5_k = nullptr, q6_k = nullptr;
  // y[i] += a * x[i] for an f16 / f32 row x (attention's weighted sum of value rows).
  void (*axpy_f16)(float a, const uint16_t* x, float* y, int64_t n) = nullptr;
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n) = nullptr;
};

// Calls f(std::integral_constant<int, R>{}) for the row count m (R = m for 1..4; the row
// kernels are templates on it, so their accumulators stay in registers).
template <class F>
inline void with_rows(int64_t m, F&& f) {
  switch (m) {
    case 4: return f(std::integral_constant<int, 4>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 1>{});
  }
}

const QDotKernels& qdot_kernels(Isa isa);
const QDotKernels* qdot_scalar_kernels();
// The block-format entries (BlockDot) of the AVX2 and AVX-512 VNNI tables
// (qdot_kquant_*.cpp: Q4_K / Q5_K / Q6_K and, through qdot_blocks_impl.h, Q4_1 / Q5_0 / Q5_1).
void add_kquant_avx2(QDotKernels& k);
void add_kquant_avx512(QDotKernels& k);
const QDotKernels* qdot_avx2_kernels();
const QDotKernels* qdot_avx512_kernels();  // AVX-512 VNNI int8 dots (AVX2 for the float rows)

// The 6-bit scales and mins of a Q4_K / Q5_K super-block's 12 scale bytes, unpacked.
void unpack_scales_k4(const uint8_t* q, uint8_t sc[8], uint8_t mn[8]);

// Quantizes k floats (a multiple of 32) into k/32 blocks: xs[b] scale, xq[32*b + i] (the
// int8 value plus `offset`, as a byte: offset 128 gives the unsigned form the int8 GEMM
// reads), and xsum[b] = the sum of the block's 32 int8 values (exact in float).
void quantize_activations_q8(const float* x, int64_t k, float* xs, int8_t* xq, float* xsum, int offset = 0);

}  // namespace rlx::cpu
