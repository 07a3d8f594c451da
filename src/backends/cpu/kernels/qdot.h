// Internal: the dot-product kernels of qmatmul (decode and prefill), per ISA.
// Activations are quantized per 32 elements like ggml's Q8_0 (scale = amax/127, values
// rounded to nearest) so the weight blocks multiply as int8 x int8 sums, one float scale
// product per (sub-)block; the error this adds is bounded in the tests.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "ir/quant/block_util.h"
#include "rlx/quant.h"

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
  // Prefill-sized products of the block formats as int8 GEMM (AVX-512 VNNI and AVX2; nullptr
  // in the scalar table). The panel holds 16 weight rows as signed int8 in blocks of `be`
  // elements (32; 16 for Q6_K, whose scales are per 16), laid out [block][group of 4][row][4
  // bytes], with per (block, row) a float scale d[16b + j] and wsum[16b + j] = 128 * the
  // block's integer sum (the activations' offset's share); `mins` (nullable, be = 32 only)
  // holds per (block, row) a float term that multiplies the activations' block sum (Q4_1 /
  // Q5_1's min, Q4_K / Q5_K's -dmin * m). For r < m (m <= 4) and j < ncols (ncols <= 16):
  // c[r][j] = sum_b d[16b + j] * xs[r][b'] * (sum_i xu[r][be b + i] * w_j[be b + i] - wsum[16b + j])
  //         + sum_b mins[16b + j] * xs[r][b] * xsum[r][b]
  // where b' = be b / 32, xu are the activations as unsigned bytes (int8 + 128; signed int8
  // where i8_panel_signed_x), and xs / xsum are their per-32 scales and int8 sums (row r at
  // r * ldx / 32).
  void (*i8_panel)(const int8_t* panel, const float* d, const float* wsum, const float* mins, int64_t nb, int be,
                   const uint8_t* xu, int64_t ldx, const float* xs, const float* xsum, int64_t m, float* c, int64_t ldc,
                   int64_t ncols) = nullptr;
  // The AVX2 panel kernel reads the activations as signed int8 (no offset; wsum unused): its
  // products go through maddubs with the sign trick (|w| as u8 times x carrying w's sign),
  // whose 16-bit pair sums cannot saturate (|w| <= 128, |x| <= 127).
  bool i8_panel_signed_x = false;
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

// The 6-bit scales and mins of a Q4_K / Q5_K super-block's 12 scale bytes, unpacked
// (quant::detail::scale_min_k4 for every j) four at a time in 32-bit words: bytes 0-3 hold
// scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; bytes 8-11 the low 4 bits of scale
// (low nibble) and min (high nibble) 4-7, whose top 2 bits are the top bits of bytes 0-3
// (scales) and 4-7 (mins). Inline: the decode kernels call it once per super-block.
inline void unpack_scales_k4(const uint8_t* q, uint8_t sc[8], uint8_t mn[8]) {
  uint32_t u0, u1, u2;
  __builtin_memcpy(&u0, q, 4);
  __builtin_memcpy(&u1, q + 4, 4);
  __builtin_memcpy(&u2, q + 8, 4);
  const uint32_t s_lo = u0 & 0x3F3F3F3Fu, m_lo = u1 & 0x3F3F3F3Fu;
  const uint32_t s_hi = (u2 & 0x0F0F0F0Fu) | (((u0 >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | (((u1 >> 6) & 0x03030303u) << 4);
  __builtin_memcpy(sc, &s_lo, 4);
  __builtin_memcpy(sc + 4, &s_hi, 4);
  __builtin_memcpy(mn, &m_lo, 4);
  __builtin_memcpy(mn + 4, &m_hi, 4);
}

// Blocks of 32 elements, as the kernels and the panel decoder read them: d (f16), then for
// Q4_1 / Q5_1 a min m (f16), for Q5_0 / Q5_1 32 fifth bits (u32, bit e for element e), then 16
// bytes of nibbles (element i the low nibble of byte i, element 16 + i its high nibble); Q8_0:
// d, 32 int8. Values: Q4_0 d (q - 8), Q4_1 d q + m, Q5_0 d (q - 16), Q5_1 d q + m, Q8_0 d q.
template <uint32_t F>
struct QbLayout {
  static constexpr bool q8 = F == quant::kQ8_0;
  static constexpr bool five = F == quant::kQ5_0 || F == quant::kQ5_1;
  static constexpr bool has_min = F == quant::kQ4_1 || F == quant::kQ5_1;
  static constexpr int offset = F == quant::kQ4_0 ? 8 : F == quant::kQ5_0 ? 16 : 0;
  static constexpr int bytes = q8 ? 34 : 2 + (has_min ? 2 : 0) + (five ? 4 : 0) + 16;
  static constexpr int qh_at = has_min ? 4 : 2;
  static constexpr int qs_at = q8 ? 2 : bytes - 16;
};

// A Q4_K (144 bytes) / Q5_K (176) super-block's header: d, dmin, the 6-bit scales and mins of
// its 8 sub-blocks of 32, and where its fifth bits (Q5_K: qh[32], bit j of qh[l] is sub-block
// j's element l) and its 128 nibble bytes start (element 64c + l the low nibble of qs[32c + l],
// element 64c + 32 + l its high nibble).
struct K4Block {
  float d, dmin;
  uint8_t sc[8], mn[8];
  const uint8_t *qh, *qs;
};
inline K4Block k4_block(const uint8_t* blk, bool five) {
  K4Block b;
  b.d = quant::detail::h2f(blk);
  b.dmin = quant::detail::h2f(blk + 2);
  unpack_scales_k4(blk + 4, b.sc, b.mn);
  b.qh = blk + 16;
  b.qs = blk + (five ? 48 : 16);
  return b;
}

// Quantizes k floats (a multiple of 32) into k/32 blocks: xs[b] scale, xq[32*b + i] (the
// int8 value plus `offset`, as a byte: offset 128 gives the unsigned form the int8 GEMM
// reads), and xsum[b] = the sum of the block's 32 int8 values (exact in float).
void quantize_activations_q8(const float* x, int64_t k, float* xs, int8_t* xq, float* xsum, int offset = 0);

}  // namespace rlx::cpu
