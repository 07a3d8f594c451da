// qmatmul: y[m, n] = sum_k x[m, k] * W[n, k] with W's rows in a block format (rlx/quant.h),
// read as stored (GGUF's layout: N rows of K elements).
//   - Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K, any row count: x quantized to int8 blocks,
//     per weight row the BlockDot kernel (qdot.h) over 4 x rows at a time, from the blocks.
//   - Q8_0 / Q4_0 with 2..kGemvRows rows (batched decode): the same, as BlockDot kernels.
//   - Few rows (decode, m <= kGemvRows): per weight row, a dot product with every x row:
//     Q8_0 / Q4_0 against x quantized to int8 blocks (qdot.h), F16 / F32 in float, the
//     remaining formats dequantized one row at a time into a thread-local buffer of K floats.
//   - More rows (prefill): Q8_0 / Q4_0 on VNNI as an int8 GEMM over 16-row panels; else
//     sgemm with B = W^T, packed straight from the blocks: pack_b dequantizes only the
//     kc x nr panels it is asked for (F32/F16/BF16 rows are plain strided operands).
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

struct QCfg {
  uint32_t format = 0;
  int64_t m = 0, n = 0, k = 0, row_bytes = 0, block_elems = 1;
  const QDotKernels* dot = nullptr;
  const IsaKernels* gemm = nullptr;
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

// Packs weight rows [j0, j0 + rows) (rows <= 16) of Q8_0 / Q4_0 into the int8 panel of
// QDotKernels::i8_panel (missing rows are zero), with their block scales and 128 * sums.
void pack_i8_panel(const QCfg& c, const uint8_t* w, int64_t j0, int64_t rows, int8_t* panel, float* d, float* wsum) {
  const int64_t nb = c.k / 32;
  std::memset(panel, 0, static_cast<size_t>(nb * 512));
  std::fill(d, d + nb * 16, 0.0f);
  std::fill(wsum, wsum + nb * 16, 0.0f);
  int8_t q[32];
  for (int64_t n = 0; n < rows; ++n) {
    const uint8_t* wr = w + (j0 + n) * c.row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = wr + (c.format == quant::kQ8_0 ? 34 : 18) * b;
      if (c.format == quant::kQ8_0) {
        std::memcpy(q, blk + 2, 32);
      } else {
        for (int i = 0; i < 16; ++i) {
          q[i] = static_cast<int8_t>((blk[2 + i] & 0x0F) - 8);
          q[16 + i] = static_cast<int8_t>((blk[2 + i] >> 4) - 8);
        }
      }
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += q[i];
      for (int g = 0; g < 8; ++g) std::memcpy(panel + b * 512 + g * 64 + n * 4, q + 4 * g, 4);
      d[b * 16 + n] = quant::detail::h2f(blk);
      wsum[b * 16 + n] = 128.0f * static_cast<float>(sum);
    }
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

// Q8_0 / Q4_0 prefill on VNNI: activations quantized once to int8 blocks (stored + 128 as
// bytes), then per panel of 16 weight rows an int8 GEMM over 4 activation rows at a time.
void run_gemm_i8(const RunCtx& ctx, const QCfg& c, const float* x, const uint8_t* w, float* y, int64_t m) {
  const int64_t nb = c.k / 32;
  const QuantizedRows q = quantize_rows(x, m, c.k, 128);
  const uint8_t* xup = reinterpret_cast<const uint8_t*>(q.xq);
  const float* xsp = q.xs;
  const int64_t panels = (c.n + 15) / 16;
  auto work = [&](int64_t p0, int64_t p1) {
    thread_local std::vector<int8_t> panel;
    thread_local std::vector<float> d, ws;
    panel.resize(static_cast<size_t>(nb * 512));
    d.resize(static_cast<size_t>(nb * 16));
    ws.resize(static_cast<size_t>(nb * 16));
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t j0 = p * 16, cols = std::min<int64_t>(16, c.n - j0);
      pack_i8_panel(c, w, j0, cols, panel.data(), d.data(), ws.data());
      for (int64_t i = 0; i < m; i += 4)
        c.dot->i8_panel(panel.data(), d.data(), ws.data(), nb, xup + i * c.k, c.k, xsp + i * nb, std::min<int64_t>(4, m - i),
                        y + i * c.n + j0, c.n, cols);
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
  if (c.dot->i8_panel && (c.format == quant::kQ8_0 || c.format == quant::kQ4_0)) return run_gemm_i8(ctx, c, x, w, y, m);
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
  if (auto dot = block_dot(c, m)) run_block_dot(ctx, c, dot, x, w, y, m);
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
