// qmatmul: y[m, n] = sum_k x[m, k] * W[n, k] with W's rows in a block format (rlx/quant.h),
// read as stored (GGUF's layout: N rows of K elements).
//   - Prefill (more than kGemvRows rows for Q8_0 / Q4_0 / IQ4_NL / IQ4_XS, at least 24 for
//     Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K, which have row kernels: resolve_panel): an int8
//     GEMM over 16-row panels (each weight row decoded once per call to int8 values with a
//     scale per 32 -- per 16 for Q6_K -- and a min term per 32), by vpdpbusd on AVX-512 VNNI,
//     by maddubs on AVX2.
//   - Otherwise Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K, any row count: x quantized to int8
//     blocks, per weight row the BlockDot kernel (qdot.h) over 4 x rows at a time.
//   - Q8_0 / Q4_0 with 2..kGemvRows rows (batched decode): the same, as BlockDot kernels.
//   - Few rows (decode, m <= kGemvRows): per weight row, a dot product with every x row:
//     Q8_0 / Q4_0 against x quantized to int8 blocks (qdot.h), F16 / F32 in float, the
//     remaining formats dequantized one row at a time into a thread-local buffer of K floats.
//   - More rows, the rest: sgemm with B = W^T, packed straight from the blocks: pack_b
//     dequantizes only the kc x nr panels it is asked for (F32/F16/BF16 rows are plain
//     strided operands).
//   - q4_0x16 (repacked Q4_0): one VNNI panel kernel for decode and prefill.
// Weight rows are split over the pool; each output is computed by one thread in a fixed
// order, so results do not depend on the thread count.
// qmatmul_id (mixture of experts): the (token, slot) pairs are bucketed by expert id, each
// selected expert's rows gathered into a scratch block and multiplied as above; experts
// nobody selected are never read.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/qdot.h"
#include "backends/cpu/thread_pool.h"
#include "ir/quant/block_util.h"
#include "rlx/quant.h"

namespace rlx::cpu {

namespace {

constexpr int64_t kGemvRows = 8;

// One weight row of k elements of a panel format as int8 values, block scales and mins
// (decode_row_i8 below).
using DecodeRow = void (*)(const uint8_t* w, int64_t k, int8_t* q, float* d, float* mn);

struct QCfg {
  uint32_t format = 0;
  int64_t m = 0, n = 0, k = 0, row_bytes = 0, block_elems = 1;
  const QDotKernels* dot = nullptr;
  const IsaKernels* gemm = nullptr;
  // The int8 panel GEMM (run_gemm_i8), resolved at build (resolve_panel): the format's row
  // decoder, nullptr where the format or the CPU's table has no panel path, and the fewest
  // activation rows it is taken for.
  DecodeRow panel_decode = nullptr;
  int64_t panel_rows = 0;
};

struct PackCtx {
  const QCfg* cfg;
  const uint8_t* w;
};

// B[k][j] = W[j][k]: panels of `width` weight rows, k0..k0+kc of each, dequantized by
// whole blocks into a thread-local row.
void pack_b_quant(const void* vctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int64_t width, float* dst) {
  const PackCtx& p = *static_cast<const PackCtx*>(vctx);
  const QCfg& c = *p.cfg;
  const int64_t be = c.block_elems;
  const int64_t b0 = k0 / be, b1 = (k0 + kc + be - 1) / be;
  const int64_t bb = c.row_bytes / (c.k / be);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>((b1 - b0) * be));
  const int64_t off = k0 - b0 * be;
  const int64_t panels = (n + width - 1) / width;
  for (int64_t q = 0; q < panels; ++q) {
    float* panel = dst + q * width * kc;
    for (int64_t jj = 0; jj < width; ++jj) {
      const int64_t j = q * width + jj;
      if (j >= n) {
        for (int64_t kk = 0; kk < kc; ++kk) panel[kk * width + jj] = 0.0f;
        continue;
      }
      quant::dequantize(c.format, p.w + (j0 + j) * c.row_bytes + b0 * bb, row.data(), (b1 - b0) * be);
      for (int64_t kk = 0; kk < kc; ++kk) panel[kk * width + jj] = row[static_cast<size_t>(off + kk)];
    }
  }
}

int panel_block(uint32_t f) { return f == quant::kQ6_K ? 16 : 32; }
bool panel_mins(uint32_t f) {
  return f == quant::kQ4_1 || f == quant::kQ5_1 || f == quant::kQ4_K || f == quant::kQ5_K;
}

// One weight row of k elements (a panel format: resolve_panel) as int8 values q[k] (within -128..127: at
// most 6 bits here), the float scale of each block of panel_block(f) elements (d) and, where
// the format has them, the term of each 32-element block that multiplies the activations'
// block sum (mn): value i = d[i / be] * q[i] + (mn[i / 32] per unit of x). Layouts: QbLayout and
// K4Block (qdot.h), Q6_K and IQ4 below. A template per format, so each inner loop is branch-free.
template <uint32_t F>
void decode_row_i8(const uint8_t* w, int64_t k, int8_t* q, float* d, float* mn) {
  using quant::detail::h2f;
  if constexpr (F == quant::kQ4_K || F == quant::kQ5_K) {
    constexpr bool five = F == quant::kQ5_K;
    for (int64_t s = 0; s < k / 256; ++s) {
      const K4Block kb = k4_block(w + s * (five ? 176 : 144), five);
      for (int j = 0; j < 8; ++j) {
        d[8 * s + j] = kb.d * float(kb.sc[j]);
        mn[8 * s + j] = -(kb.dmin * float(kb.mn[j]));
      }
      for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles) and 2c + 1 (high)
        int8_t* lo = q + 256 * s + 64 * c;
        int8_t* hi = lo + 32;
        const uint8_t* src = kb.qs + 32 * c;
        for (int l = 0; l < 32; ++l) {
          int a = src[l] & 0x0F, b = src[l] >> 4;
          if constexpr (five) {
            a |= ((kb.qh[l] >> (2 * c)) & 1) << 4;
            b |= ((kb.qh[l] >> (2 * c + 1)) & 1) << 4;
          }
          lo[l] = static_cast<int8_t>(a);
          hi[l] = static_cast<int8_t>(b);
        }
      }
    }
  } else if constexpr (F == quant::kIQ4_NL || F == quant::kIQ4_XS) {
    // IQ4_NL: blocks of 32 (d, 16 nibble bytes); IQ4_XS: super-blocks of 256 (d, 2 high
    // bits of each 32's 6-bit scale in a u16, their low nibbles in 4 bytes, 128 nibble
    // bytes; scale d * (ls - 32)). A nibble picks one of the 16 levels; element j of a 32 is
    // byte j's low nibble, element 16 + j its high one.
    using quant::detail::kIq4nl;
    constexpr bool xs = F == quant::kIQ4_XS;
    for (int64_t b = 0; b < k / 32; ++b) {
      const uint8_t* qs;
      if constexpr (xs) {
        const uint8_t* blk = w + (b / 8) * 136;
        const int ib = static_cast<int>(b % 8);
        uint16_t sh;
        std::memcpy(&sh, blk + 2, 2);
        const int ls = ((blk[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4);
        d[b] = h2f(blk) * float(ls - 32);
        qs = blk + 8 + 16 * ib;
      } else {
        const uint8_t* blk = w + b * 18;
        d[b] = h2f(blk);
        qs = blk + 2;
      }
      int8_t* o = q + 32 * b;
      for (int j = 0; j < 16; ++j) {
        o[j] = kIq4nl[qs[j] & 0x0F];
        o[16 + j] = kIq4nl[qs[j] >> 4];
      }
    }
  } else if constexpr (F == quant::kQ6_K) {
    for (int64_t s = 0; s < k / 256; ++s) {
      const uint8_t* blk = w + s * 210;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
      const float dd = h2f(blk + 208);
      for (int i = 0; i < 16; ++i) d[16 * s + i] = dd * float(sc[i]);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = blk + 64 * h;
        const uint8_t* qh = blk + 128 + 32 * h;
        int8_t* o = q + 256 * s + 128 * h;
        for (int l = 0; l < 32; ++l) {
          o[l] = static_cast<int8_t>(((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32);
          o[32 + l] = static_cast<int8_t>(((ql[32 + l] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
          o[64 + l] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          o[96 + l] = static_cast<int8_t>(((ql[32 + l] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
    }
  } else {
    // Blocks of 32 (QbLayout): the values signed (the offset taken off), the min apart.
    using L = QbLayout<F>;
    for (int64_t b = 0; b < k / 32; ++b) {
      const uint8_t* blk = w + b * L::bytes;
      d[b] = h2f(blk);
      if constexpr (L::has_min) mn[b] = h2f(blk + 2);
      int8_t* o = q + 32 * b;
      if constexpr (L::q8) {
        std::memcpy(o, blk + L::qs_at, 32);
      } else {
        uint32_t qh = 0;
        if constexpr (L::five) std::memcpy(&qh, blk + L::qh_at, 4);
        const uint8_t* qs = blk + L::qs_at;
        for (int e = 0; e < 16; ++e) {
          int a = qs[e] & 0x0F, c = qs[e] >> 4;
          if constexpr (L::five) {
            a |= ((qh >> e) & 1) << 4;
            c |= ((qh >> (e + 16)) & 1) << 4;
          }
          o[e] = static_cast<int8_t>(a - L::offset);
          o[16 + e] = static_cast<int8_t>(c - L::offset);
        }
      }
    }
  }
}

// The formats the int8 panel GEMM takes (QDotKernels::i8_panel) -- values that are small
// integers (IQ4: one of 16 int8 levels) under a float scale per 32 elements (16 for Q6_K),
// and for some a min per 32 -- and the fewest activation rows each is taken for. A panel
// decodes every weight row once per product, the BlockDot row kernels once per 4 activation
// rows: the formats with row kernels and a costly decode (fifth bits, scales, mins) take the
// panel from 24 rows (rlx_bench_qmatmul --rows R --k 2048 on one thread, session 55: BlockDot
// 33-35 GMAC/s for Q4_K at 16 rows against the panel's 15-27, the panel 43 at 32 rows against
// 34); Q8_0 / Q4_0 (a copy, a nibble split) and IQ4 (no row kernel) past the GEMV rows.
void resolve_panel(QCfg& c) {
  c.panel_decode = nullptr;
  if (!c.dot->i8_panel) return;
  c.panel_rows = 24;
  switch (c.format) {
    case quant::kQ4_1: c.panel_decode = decode_row_i8<quant::kQ4_1>; break;
    case quant::kQ5_0: c.panel_decode = decode_row_i8<quant::kQ5_0>; break;
    case quant::kQ5_1: c.panel_decode = decode_row_i8<quant::kQ5_1>; break;
    case quant::kQ4_K: c.panel_decode = decode_row_i8<quant::kQ4_K>; break;
    case quant::kQ5_K: c.panel_decode = decode_row_i8<quant::kQ5_K>; break;
    case quant::kQ6_K: c.panel_decode = decode_row_i8<quant::kQ6_K>; break;
    default:
      c.panel_rows = kGemvRows + 1;
      switch (c.format) {
        case quant::kQ8_0: c.panel_decode = decode_row_i8<quant::kQ8_0>; break;
        case quant::kQ4_0: c.panel_decode = decode_row_i8<quant::kQ4_0>; break;
        case quant::kIQ4_NL: c.panel_decode = decode_row_i8<quant::kIQ4_NL>; break;
        case quant::kIQ4_XS: c.panel_decode = decode_row_i8<quant::kIQ4_XS>; break;
        default: break;
      }
  }
}

// Packs weight rows [j0, j0 + rows) (rows <= 16) into the int8 panel of
// QDotKernels::i8_panel (missing rows are zero): blocks of panel_block(format), their
// scales and 128 * sums, and the mins per 32 where the format has them.
void pack_i8_panel(const QCfg& c, const uint8_t* w, int64_t j0, int64_t rows, int8_t* panel, float* d, float* wsum,
                   float* mins) {
  const int be = panel_block(c.format), groups = be / 4;
  const int64_t nb = c.k / be, nb32 = c.k / 32;
  std::memset(panel, 0, static_cast<size_t>(c.k * 16));
  std::fill(d, d + nb * 16, 0.0f);
  std::fill(wsum, wsum + nb * 16, 0.0f);
  if (mins) std::fill(mins, mins + nb32 * 16, 0.0f);
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> rd, rm;
  q.resize(static_cast<size_t>(c.k));
  rd.resize(static_cast<size_t>(nb));
  rm.resize(static_cast<size_t>(nb32));
  for (int64_t n = 0; n < rows; ++n) {
    c.panel_decode(w + (j0 + n) * c.row_bytes, c.k, q.data(), rd.data(), rm.data());
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* qb = q.data() + b * be;
      int32_t sum = 0;
      for (int i = 0; i < be; ++i) sum += qb[i];
      int8_t* pb = panel + b * 64 * groups;
      for (int g = 0; g < groups; ++g) std::memcpy(pb + g * 64 + n * 4, qb + 4 * g, 4);
      d[b * 16 + n] = rd[static_cast<size_t>(b)];
      wsum[b * 16 + n] = 128.0f * static_cast<float>(sum);
    }
    if (mins)
      for (int64_t b = 0; b < nb32; ++b) mins[b * 16 + n] = rm[static_cast<size_t>(b)];
  }
}

// x's m rows of k quantized to int8 blocks of 32 (quantize_activations_q8, stored + `offset`:
// 128 gives the unsigned bytes of the int8 GEMM) in thread-local buffers, valid until the
// thread's next call: row i at xq + i * k, xs / xsum + i * k / 32.
struct QuantizedRows {
  const int8_t* xq;
  const float *xs, *xsum;
};
QuantizedRows quantize_rows(const float* x, int64_t m, int64_t k, int offset = 0) {
  const int64_t nb = k / 32;
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xs, xsum;
  xq.resize(static_cast<size_t>(m * k));
  xs.resize(static_cast<size_t>(m * nb));
  xsum.resize(static_cast<size_t>(m * nb));
  for (int64_t i = 0; i < m; ++i)
    quantize_activations_q8(x + i * k, k, xs.data() + i * nb, xq.data() + i * k, xsum.data() + i * nb, offset);
  return {xq.data(), xs.data(), xsum.data()};
}

// Prefill of the panel formats: activations quantized once to int8 blocks (stored + 128 as
// bytes for VNNI's unsigned operand, signed for AVX2's sign trick: i8_panel_signed_x), then
// per panel of 16 weight rows (decoded to int8 once per call) an int8 GEMM over 4 activation
// rows at a time.
void run_gemm_i8(const RunCtx& ctx, const QCfg& c, const float* x, const uint8_t* w, float* y, int64_t m) {
  const int be = panel_block(c.format);
  const int64_t nb = c.k / be, nb32 = c.k / 32;
  const bool has_mins = panel_mins(c.format);
  const QuantizedRows q = quantize_rows(x, m, c.k, c.dot->i8_panel_signed_x ? 0 : 128);
  const uint8_t* xup = reinterpret_cast<const uint8_t*>(q.xq);
  const float *xsp = q.xs, *xsump = q.xsum;
  const int64_t panels = (c.n + 15) / 16;
  auto work = [&](int64_t p0, int64_t p1) {
    thread_local std::vector<int8_t> panel;
    thread_local std::vector<float> d, ws, mn;
    panel.resize(static_cast<size_t>(c.k * 16));
    d.resize(static_cast<size_t>(nb * 16));
    ws.resize(static_cast<size_t>(nb * 16));
    mn.resize(has_mins ? static_cast<size_t>(nb32 * 16) : 0);
    float* mins = has_mins ? mn.data() : nullptr;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t j0 = p * 16, cols = std::min<int64_t>(16, c.n - j0);
      pack_i8_panel(c, w, j0, cols, panel.data(), d.data(), ws.data(), mins);
      for (int64_t i = 0; i < m; i += 4)
        c.dot->i8_panel(panel.data(), d.data(), ws.data(), mins, nb, be, xup + i * c.k, c.k, xsp + i * nb32,
                        xsump + i * nb32, std::min<int64_t>(4, m - i), y + i * c.n + j0, c.n, cols);
    }
  };
  if (ctx.pool && panels > 1) ctx.pool->parallel_for(panels, 1, work);
  else work(0, panels);
}

// q4_0x16 (repacked at load time): every product, decode or prefill, runs the VNNI panel
// kernel: 16 weight rows per task, 4 activation rows per pass, nothing packed per call.
void run_q4x16(const RunCtx& ctx, const QCfg& c, const float* x, const uint8_t* w, float* y, int64_t m) {
  const int64_t nb = c.k / 32;
  const QuantizedRows q = quantize_rows(x, m, c.k);
  const int8_t* xqp = q.xq;
  const float *xsp = q.xs, *xsump = q.xsum;
  auto work = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t i = 0; i < m; i += 4)
        c.dot->q4x16_panel(w + p * nb * 288, nb, xqp + i * c.k, c.k, xsp + i * nb, xsump + i * nb,
                           std::min<int64_t>(4, m - i), y + i * c.n + p * 16, c.n);
  };
  const int64_t panels = c.n / 16;
  // ~32 KiB of weights per task, as for the dot path.
  const int64_t grain = std::max<int64_t>(1, (int64_t(32) << 10) / std::max<int64_t>(nb * 288, 1));
  if (ctx.pool && panels > grain) ctx.pool->parallel_for(panels, grain, work);
  else work(0, panels);
}

void run_gemm(const RunCtx& ctx, const QCfg& c, const float* x, const uint8_t* w, float* y, int64_t m) {
  SgemmProblem p;
  p.m = m;
  p.n = c.n;
  p.k = c.k;
  p.a = GemmOperand{x, DType::F32, c.k, 1};
  PackCtx pc{&c, w};
  if (c.format == quant::kF32 || c.format == quant::kF16 || c.format == quant::kBF16) {
    const DType t = c.format == quant::kF32 ? DType::F32 : c.format == quant::kF16 ? DType::F16 : DType::BF16;
    p.b = GemmOperand{w, t, 1, c.k};  // element (k, j) of B = W[j][k]
  } else {
    p.pack_b = pack_b_quant;
    p.pack_b_ctx = &pc;
  }
  p.c = y;
  p.ldc = c.n;
  sgemm(p, ctx.pool, *c.gemm);
}

void run_gemv(const RunCtx& ctx, const QCfg& c, const float* x, const uint8_t* w, float* y, int64_t m) {
  const bool q8 = c.format == quant::kQ8_0 || c.format == quant::kQ4_0;
  const int64_t nb = c.k / 32;
  const QuantizedRows q = q8 ? quantize_rows(x, m, c.k) : QuantizedRows{nullptr, nullptr, nullptr};
  const float* xsp = q.xs;
  const float* xsump = q.xsum;
  const int8_t* xqp = q.xq;
  auto rows = [&](int64_t n0, int64_t n1) {
    thread_local std::vector<float> deq;
    for (int64_t j = n0; j < n1; ++j) {
      const uint8_t* wr = w + j * c.row_bytes;
      if (c.format == quant::kQ8_0) {
        for (int64_t i = 0; i < m; ++i) y[i * c.n + j] = c.dot->q8_0(wr, xsp + i * nb, xqp + i * c.k, nb);
      } else if (c.format == quant::kQ4_0) {
        for (int64_t i = 0; i < m; ++i)
          y[i * c.n + j] = c.dot->q4_0(wr, xsp + i * nb, xqp + i * c.k, xsump + i * nb, nb);
      } else if (c.format == quant::kF16) {
        for (int64_t i = 0; i < m; ++i) y[i * c.n + j] = c.dot->f16(reinterpret_cast<const uint16_t*>(wr), x + i * c.k, c.k);
      } else if (c.format == quant::kF32) {
        for (int64_t i = 0; i < m; ++i) y[i * c.n + j] = c.dot->f32(reinterpret_cast<const float*>(wr), x + i * c.k, c.k);
      } else {
        deq.resize(static_cast<size_t>(c.k));
        quant::dequantize(c.format, wr, deq.data(), c.k);
        for (int64_t i = 0; i < m; ++i) y[i * c.n + j] = c.dot->f32(deq.data(), x + i * c.k, c.k);
      }
    }
  };
  // ~32 KiB of weights per task: enough work to pay for a hand-off to another thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t(32) << 10) / std::max<int64_t>(c.row_bytes, 1));
  if (ctx.pool && c.n > grain) ctx.pool->parallel_for(c.n, grain, rows);
  else rows(0, c.n);
}

// Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K at any row count, Q8_0 / Q4_0 at 2..8 rows: x
// quantized once per row to int8 blocks of 32, then per weight row the BlockDot kernel over
// 4 activation rows at a time (each block decoded once per 4 rows). Activation rows are
// taken in tiles of ~128 KiB so a task's weight rows and the tile stay in cache.
QDotKernels::BlockDot block_dot(const QCfg& c, int64_t m) {
  switch (c.format) {
    case quant::kQ8_0: return m >= 2 && m <= kGemvRows ? c.dot->q8_0_rows : nullptr;
    case quant::kQ4_0: return m >= 2 && m <= kGemvRows ? c.dot->q4_0_rows : nullptr;
    case quant::kQ4_1: return c.dot->q4_1;
    case quant::kQ5_0: return c.dot->q5_0;
    case quant::kQ5_1: return c.dot->q5_1;
    case quant::kQ4_K: return c.dot->q4_k;
    case quant::kQ5_K: return c.dot->q5_k;
    case quant::kQ6_K: return c.dot->q6_k;
    default: return nullptr;
  }
}

void run_block_dot(const RunCtx& ctx, const QCfg& c, QDotKernels::BlockDot dot, const float* x, const uint8_t* w,
                   float* y, int64_t m) {
  const int64_t nb = c.k / 32, nsb = c.k / c.block_elems;
  const QuantizedRows q = quantize_rows(x, m, c.k);
  const int8_t* xqp = q.xq;
  const float *xsp = q.xs, *xsump = q.xsum;
  const int64_t tile = std::max<int64_t>(4, ((int64_t(128) << 10) / c.k) & ~int64_t(3));
  auto rows = [&](int64_t n0, int64_t n1) {
    for (int64_t t0 = 0; t0 < m; t0 += tile) {
      const int64_t t1 = std::min(m, t0 + tile);
      for (int64_t j = n0; j < n1; ++j)
        for (int64_t i = t0; i < t1; i += 4)
          dot(w + j * c.row_bytes, nsb, xqp + i * c.k, xsp + i * nb, xsump + i * nb, c.k, std::min<int64_t>(4, t1 - i),
              y + i * c.n + j, c.n);
    }
  };
  const int64_t grain = std::max<int64_t>(1, (int64_t(32) << 10) / std::max<int64_t>(c.row_bytes, 1));
  if (ctx.pool && c.n > grain) ctx.pool->parallel_for(c.n, grain, rows);
  else rows(0, c.n);
}

// Every product of a qmatmul or of one expert's rows, by format and row count.
void run_rows(const RunCtx& ctx, const QCfg& c, const float* x, const uint8_t* w, float* y, int64_t m) {
  if (c.panel_decode && m >= c.panel_rows) run_gemm_i8(ctx, c, x, w, y, m);
  else if (auto dot = block_dot(c, m)) run_block_dot(ctx, c, dot, x, w, y, m);
  else if (m <= kGemvRows) run_gemv(ctx, c, x, w, y, m);
  else run_gemm(ctx, c, x, w, y, m);
}

void run_qmatmul(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const QCfg& c = *static_cast<const QCfg*>(vcfg);
  const float* x = static_cast<const float*>(bufs[0]);
  const uint8_t* w = static_cast<const uint8_t*>(bufs[1]);
  float* y = static_cast<float*>(bufs[2]);
  if (c.m == 0 || c.n == 0) return;
  if (c.format == quant::kQ4_0x16) run_q4x16(ctx, c, x, w, y, c.m);
  else run_rows(ctx, c, x, w, y, c.m);
}

struct QIdCfg {
  QCfg q;
  int64_t experts = 0, tokens = 0, slots = 0;
  bool x_per_slot = false;  // x is [T, S, K] (else [T, K], shared by a token's slots)
  bool ids_i32 = false;
};

void run_qmatmul_id(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const QIdCfg& c = *static_cast<const QIdCfg*>(vcfg);
  const float* x = static_cast<const float*>(bufs[0]);
  const uint8_t* w = static_cast<const uint8_t*>(bufs[1]);
  float* y = static_cast<float*>(bufs[3]);
  const int64_t pairs = c.tokens * c.slots, K = c.q.k, N = c.q.n;
  thread_local std::vector<std::vector<int64_t>> bucket;
  bucket.resize(static_cast<size_t>(c.experts));
  for (auto& b : bucket) b.clear();
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t e = c.ids_i32 ? static_cast<const int32_t*>(bufs[2])[p] : static_cast<const int64_t*>(bufs[2])[p];
    if (e < 0 || e >= c.experts)
      fail(ErrorCategory::InvalidArgument, "qmatmul_id: expert id ", e, " (token ", p / c.slots, ", slot ", p % c.slots,
           ") is outside [0, ", c.experts, ")");
    bucket[static_cast<size_t>(e)].push_back(p);
  }
  thread_local std::vector<float> xs, ys;
  const int64_t expert_bytes = N * c.q.row_bytes;
  for (int64_t e = 0; e < c.experts; ++e) {
    const auto& b = bucket[static_cast<size_t>(e)];
    const int64_t m = static_cast<int64_t>(b.size());
    if (m == 0) continue;
    xs.resize(static_cast<size_t>(m * K));
    ys.resize(static_cast<size_t>(m * N));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t p = b[static_cast<size_t>(i)];
      const float* src = x + (c.x_per_slot ? p : p / c.slots) * K;
      std::memcpy(xs.data() + i * K, src, static_cast<size_t>(K) * sizeof(float));
    }
    const uint8_t* we = w + e * expert_bytes;
    run_rows(ctx, c.q, xs.data(), we, ys.data(), m);
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(y + b[static_cast<size_t>(i)] * N, ys.data() + i * N, static_cast<size_t>(N) * sizeof(float));
  }
}

bool supports_qmatmul(const Node& node, const std::vector<const Shape*>&) {
  const uint32_t f = static_cast<uint32_t>(node.attr<QMatMulAttrs>().format);
  if (f == quant::kQ4_0x16) return node.kind == OpKind::QMatMul && has_avx512_vnni();  // its one kernel
  return quant::can_dequantize(f);
}

KernelCall build_qmatmul(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const auto& a = node.attr<QMatMulAttrs>();
  QCfg c;
  c.format = static_cast<uint32_t>(a.format);
  c.k = a.k;
  c.n = in[1]->static_dims()[0];
  c.row_bytes = in[1]->static_dims()[1];
  c.block_elems = quant::get(c.format).block_elems;
  c.m = out[0].numel() / std::max<int64_t>(c.n, 1);
  const Isa isa = detect_isa();
  c.dot = &qdot_kernels(isa);
  c.gemm = &isa_kernels(isa);
  resolve_panel(c);
  return make_call(run_qmatmul, c);
}

KernelCall build_qmatmul_id(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>&) {
  const auto& a = node.attr<QMatMulAttrs>();
  QIdCfg c;
  c.q.format = static_cast<uint32_t>(a.format);
  c.q.k = a.k;
  const std::vector<int64_t> wd = in[1]->static_dims(), idd = in[2]->static_dims();
  c.experts = wd[0];
  c.q.n = wd[1];
  c.q.row_bytes = wd[2];
  c.q.block_elems = quant::get(c.q.format).block_elems;
  c.tokens = idd[0];
  c.slots = idd[1];
  c.x_per_slot = in[0]->rank() == 3;
  c.ids_i32 = in[2]->dtype() == DType::I32;
  const Isa isa = detect_isa();
  c.q.dot = &qdot_kernels(isa);
  c.q.gemm = &isa_kernels(isa);
  resolve_panel(c.q);
  return make_call(run_qmatmul_id, c);
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t k, float* xs, int8_t* xq, float* xsum, int offset) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* v = x + 32 * b;
    float amax = 0;
    bool finite = true;
    for (int i = 0; i < 32; ++i) {
      const float a = std::fabs(v[i]);
      finite = finite && a <= std::numeric_limits<float>::max();  // false for inf and NaN
      amax = std::max(amax, a);
    }
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    if (!finite) {
      // inf or NaN in the block: a NaN scale and zero values, so every product that reads
      // the block is NaN, as in f32 (through 1/d the values would be NaN, their int sum undefined).
      d = std::numeric_limits<float>::quiet_NaN();
      id = 0;
    } else if (!(id <= std::numeric_limits<float>::max())) {
      d = id = 0;  // amax so small (below ~3.7e-37) that 1/d overflows: the block is zero
    }
    xs[b] = d;
    int32_t q[32], sum = 0;
    for (int i = 0; i < 32; ++i) {  // round to nearest even through the float mantissa (|v*id| <= 127)
      float t = (finite ? v[i] * id : 0.0f) + 12582912.0f;
      int32_t bits;
      std::memcpy(&bits, &t, 4);
      q[i] = bits - 0x4B400000;
    }
    for (int i = 0; i < 32; ++i) {
      sum += q[i];
      xq[32 * b + i] = static_cast<int8_t>(static_cast<uint8_t>(q[i] + offset));
    }
    xsum[b] = static_cast<float>(sum);
  }
}

const QDotKernels& qdot_kernels(Isa isa) {
  if (isa == Isa::Avx512 && has_avx512_vnni()) return *qdot_avx512_kernels();
  if (isa != Isa::Scalar) return *qdot_avx2_kernels();
  return *qdot_scalar_kernels();
}

void register_qmatmul_kernels(KernelRegistry& r) {
  r.add(OpKind::QMatMul, build_qmatmul, supports_qmatmul);
  r.add(OpKind::QMatMulId, build_qmatmul_id, supports_qmatmul);
}

}  // namespace rlx::cpu
