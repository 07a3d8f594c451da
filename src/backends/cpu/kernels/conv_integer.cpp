// conv_integer (ONNX ConvInteger): integer convolution with int32 accumulation, never
// widened to floats.
//
// Per (image, group) a GEMM of the weights [M, K] (K = C/group * kh * kw) by the image's
// columns [K, OH*OW]. Both operands are shifted into the types the int8 dot instructions
// take: x' = x (+128 for i8 input) as u8, w' = w (-128 for u8 weights) as s8, and the zero
// points shifted alike (X = x_zp + sx, W[m] = w_zp[m] + sw). Then
//   sum (x - x_zp)(w - w_zp) = sum x'w' - W[m] * colsum(x') - X * rowsum(w') + K * X * W[m],
// exact in wrapping int32 whenever the result fits int32 (ONNX's output type). Padding
// reads x_zp (x' = X), so padded taps add nothing after the correction.
// The columns go through in chunks of up to 256 (one task each): the chunk's im2col is
// packed in groups of 4 bytes per column (conv_integer.h), multiplied by the ISA's kernel
// (VNNI, AVX2, scalar), corrected and stored. Constant weights (with a constant w_zp) are
// packed once, shared by runs and clones. Every path computes the same integers, so the
// result does not depend on the ISA or the thread count.
#include "backends/cpu/kernels/conv_integer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/scratch.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"

namespace rlx::cpu {

void int_gemm_scalar(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c) {
  for (int64_t m = 0; m < m_pad; ++m) {
    int32_t* cr = c + m * nc;
    for (int64_t j = 0; j < nc; ++j) cr[j] = 0;
    const int8_t* wr = w4 + m * 4 * k4n;
    for (int64_t g = 0; g < k4n; ++g) {
      const uint8_t* xg = x4 + g * 4 * nc;
      const int32_t w0 = wr[4 * g], w1 = wr[4 * g + 1], w2 = wr[4 * g + 2], w3 = wr[4 * g + 3];
      for (int64_t j = 0; j < nc; ++j) {
        const uint8_t* xp = xg + 4 * j;
        // Wrapping adds, as the vector kernels'.
        cr[j] = int32_t(uint32_t(cr[j]) + uint32_t(w0 * xp[0] + w1 * xp[1] + w2 * xp[2] + w3 * xp[3]));
      }
    }
  }
}

namespace {

constexpr int64_t kChunk = 256;  // columns per task (a multiple of kIntCols)

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

thread_local Scratch<uint8_t> tl_cols;
thread_local Scratch<int32_t> tl_acc;
thread_local Scratch<int8_t> tl_weights;

// The weights of every group packed (conv_integer.h layout, rows padded to kIntRows with
// zeros) with their row sums and shifted zero points.
struct PackedWeights {
  std::vector<int8_t> w4;        // [group][m_pad][4 * k4n]
  std::vector<int64_t> row_sum;  // [cout]: sum of w' over the row's K taps
  std::vector<int64_t> zp;       // [cout]: W
};

struct ConvIntCfg {
  int64_t n = 0, c = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, group = 1, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, dh = 1, dw = 1;
  int64_t k = 0, k4n = 0, m = 0, m_pad = 0;  // per group: K, groups of 4, rows, rows padded
  bool x_signed = false, w_signed = false;
  bool wz_per_channel = false;
  IntGemmFn gemm = nullptr;
  struct Once {
    std::once_flag once;
    PackedWeights packed;
  };
  std::shared_ptr<Once> constant;  // set when the weights and w_zp are constants
};

int64_t read_int(const void* p, bool is_signed) {
  return is_signed ? int64_t(*static_cast<const int8_t*>(p)) : int64_t(*static_cast<const uint8_t*>(p));
}

void pack_weights(const ConvIntCfg& cfg, const void* w, const void* wz, PackedWeights& out) {
  const int64_t sw = cfg.w_signed ? 0 : -128;
  out.w4.assign(size_t(cfg.group * cfg.m_pad * 4 * cfg.k4n), 0);
  out.row_sum.assign(size_t(cfg.cout), 0);
  out.zp.assign(size_t(cfg.cout), 0);
  for (int64_t o = 0; o < cfg.cout; ++o) {
    const int64_t g = o / cfg.m, r = o % cfg.m;
    int8_t* dst = out.w4.data() + (g * cfg.m_pad + r) * 4 * cfg.k4n;
    int64_t sum = 0;
    for (int64_t t = 0; t < cfg.k; ++t) {
      const int64_t v = read_int(static_cast<const uint8_t*>(w) + o * cfg.k + t, cfg.w_signed) + sw;
      dst[t] = int8_t(v);
      sum += v;
    }
    out.row_sum[size_t(o)] = sum;
    out.zp[size_t(o)] = read_int(static_cast<const uint8_t*>(wz) + (cfg.wz_per_channel ? o : 0), cfg.w_signed) + sw;
  }
}

// One tap's values for output columns [ox0, ox0 + len) of output row oy: the strided run of
// input row iy (x' = x ^ flip), X where the window reads padding.
void gather_tap(const ConvIntCfg& cfg, const uint8_t* xc, int64_t oy, int64_t ox0, int64_t len, int64_t ky,
                int64_t kx, uint8_t flip, uint8_t xz, uint8_t* r) {
  const int64_t iy = oy * cfg.sh - cfg.pt + ky * cfg.dh;
  if (iy < 0 || iy >= cfg.h) {
    std::memset(r, xz, size_t(len));
    return;
  }
  // ix = ox * sw + off is inside [0, w) for ox in [lo, hi).
  const int64_t off = kx * cfg.dw - cfg.pl;
  const int64_t lo = std::clamp<int64_t>(off >= 0 ? 0 : (-off + cfg.sw - 1) / cfg.sw, ox0, ox0 + len);
  const int64_t hi = std::clamp<int64_t>((cfg.w - off + cfg.sw - 1) / cfg.sw, lo, ox0 + len);
  const uint8_t* src = xc + iy * cfg.w + off;
  std::memset(r, xz, size_t(lo - ox0));
  uint8_t* rr = r - ox0;
  if (cfg.sw == 1) {
    for (int64_t ox = lo; ox < hi; ++ox) rr[ox] = uint8_t(src[ox] ^ flip);
  } else {
    for (int64_t ox = lo; ox < hi; ++ox) rr[ox] = uint8_t(src[ox * cfg.sw] ^ flip);
  }
  std::memset(r + (hi - ox0), xz, size_t(ox0 + len - hi));
}

// Columns [p0, p0 + nc) of image `img`, group `g` as x' in groups of 4 (padding reads X;
// the taps past K read 0, the columns past `live` X), and each column's sum of x' over its
// taps. The columns go by output row: per tap a row's values are one strided run of the
// image, gathered into `rows` (4 x nc bytes), then four taps interleaved into their group.
void pack_columns(const ConvIntCfg& cfg, const uint8_t* x, int64_t img, int64_t g, int64_t p0, int64_t nc,
                  int64_t live, uint8_t xz, uint8_t* x4, int32_t* col_sum, uint8_t* rows) {
  const uint8_t flip = cfg.x_signed ? 0x80 : 0;  // i8 -> u8 by +128: the sign bit flipped
  const int64_t cg = cfg.c / cfg.group, plane = cfg.h * cfg.w, taps = cfg.kh * cfg.kw;
  std::fill(col_sum, col_sum + nc, 0);
  for (int64_t grp = 0; grp < cfg.k4n; ++grp) {
    for (int q = 0; q < 4; ++q) {
      uint8_t* r = rows + q * nc;
      const int64_t t = 4 * grp + q;
      if (t >= cfg.k) {  // past K: zeros (the weights are zero there too)
        std::memset(r, 0, size_t(nc));
        continue;
      }
      const int64_t ci = t / taps, ky = t / cfg.kw % cfg.kh, kx = t % cfg.kw;
      const uint8_t* xc = x + (img * cfg.c + g * cg + ci) * plane;
      for (int64_t j = 0; j < live;) {
        const int64_t p = p0 + j, oy = p / cfg.ow, ox0 = p % cfg.ow;
        const int64_t len = std::min(cfg.ow - ox0, live - j);
        gather_tap(cfg, xc, oy, ox0, len, ky, kx, flip, xz, r + j);
        j += len;
      }
      std::memset(r + live, xz, size_t(nc - live));
    }
    const uint8_t *r0 = rows, *r1 = rows + nc, *r2 = rows + 2 * nc, *r3 = rows + 3 * nc;
    uint32_t* d = reinterpret_cast<uint32_t*>(x4 + grp * 4 * nc);
    for (int64_t j = 0; j < nc; ++j) {
      d[j] = uint32_t(r0[j]) | uint32_t(r1[j]) << 8 | uint32_t(r2[j]) << 16 | uint32_t(r3[j]) << 24;
      col_sum[j] += int32_t(r0[j]) + r1[j] + r2[j] + r3[j];
    }
  }
  // Padded columns: X in every real tap (their sums are never read).
}

void run_conv_integer(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const ConvIntCfg& cfg = *static_cast<const ConvIntCfg*>(vcfg);
  const uint8_t* x = static_cast<const uint8_t*>(bufs[0]);
  int32_t* out = static_cast<int32_t*>(bufs[4]);
  const int64_t p_total = cfg.oh * cfg.ow;
  if (cfg.n == 0 || cfg.cout == 0 || p_total == 0) return;
  const PackedWeights* pw;
  PackedWeights local;
  if (cfg.constant) {
    std::call_once(cfg.constant->once, [&] { pack_weights(cfg, bufs[1], bufs[3], cfg.constant->packed); });
    pw = &cfg.constant->packed;
  } else {
    pack_weights(cfg, bufs[1], bufs[3], local);
    pw = &local;
  }
  const int64_t xz = read_int(bufs[2], cfg.x_signed) + (cfg.x_signed ? 128 : 0);
  const int64_t chunks = (p_total + kChunk - 1) / kChunk;
  const int64_t tasks = cfg.n * cfg.group * chunks;
  auto task = [&](int64_t i) {
    const int64_t img = i / (cfg.group * chunks), g = i / chunks % cfg.group, ch = i % chunks;
    const int64_t p0 = ch * kChunk, live = std::min(kChunk, p_total - p0), nc = round_up(live, kIntCols);
    uint8_t* x4 = tl_cols.get(cfg.k4n * 4 * nc + 4 * nc);
    int32_t* acc = tl_acc.get(cfg.m_pad * nc + nc);
    int32_t* col_sum = acc + cfg.m_pad * nc;
    pack_columns(cfg, x, img, g, p0, nc, live, uint8_t(xz), x4, col_sum, x4 + cfg.k4n * 4 * nc);
    cfg.gemm(pw->w4.data() + g * cfg.m_pad * 4 * cfg.k4n, cfg.k4n, x4, nc, cfg.m_pad, acc);
    for (int64_t r = 0; r < cfg.m; ++r) {
      const int64_t o = g * cfg.m + r;
      const int64_t wz = pw->zp[size_t(o)];
      const int64_t bias = cfg.k * xz * wz - xz * pw->row_sum[size_t(o)];
      int32_t* dst = out + (img * cfg.cout + o) * p_total + p0;
      const int32_t* src = acc + r * nc;
      for (int64_t j = 0; j < live; ++j)
        dst[j] = int32_t(uint32_t(src[j]) + uint32_t(uint64_t(bias - wz * int64_t(col_sum[j]))));
    }
  };
  if (ctx.pool && ctx.pool->size() > 1 && tasks > 1) {
    ctx.pool->parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) task(i);
    });
  } else {
    for (int64_t i = 0; i < tasks; ++i) task(i);
  }
}

bool supports_conv_integer(const Node&, const std::vector<const Shape*>& in) {
  if (in.size() != 4) return false;
  for (const Shape* s : in)
    if (!s || (s->dtype() != DType::U8 && s->dtype() != DType::I8)) return false;
  return true;
}

KernelCall build(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                 const BuildInfo* info) {
  const auto& a = node.attr<ConvAttrs>();
  const std::vector<int64_t> xd = in[0]->static_dims(), wd = in[1]->static_dims(), od = out[0].static_dims();
  if (xd.size() != 4 || wd.size() != 4 || od.size() != 4 || a.strides.size() != 2 || a.pads.size() != 4 ||
      a.dilations.size() != 2 || a.group < 1 || xd[1] % a.group || wd[0] % a.group || wd[1] * a.group != xd[1])
    fail(ErrorCategory::Shape, "node '", node.name, "' (conv_integer): malformed shapes or attributes");
  ConvIntCfg c;
  c.n = xd[0], c.c = xd[1], c.h = xd[2], c.w = xd[3];
  c.cout = wd[0], c.kh = wd[2], c.kw = wd[3], c.group = a.group;
  c.oh = od[2], c.ow = od[3];
  c.sh = a.strides[0], c.sw = a.strides[1], c.pt = a.pads[0], c.pl = a.pads[1];
  c.dh = a.dilations[0], c.dw = a.dilations[1];
  c.k = wd[1] * c.kh * c.kw;
  c.k4n = (c.k + 3) / 4;
  c.m = c.cout / c.group;
  c.m_pad = round_up(c.m, kIntRows);
  c.x_signed = in[0]->dtype() == DType::I8;
  c.w_signed = in[1]->dtype() == DType::I8;
  c.wz_per_channel = in[3]->numel() > 1;
  c.gemm = has_avx512_vnni() ? int_gemm_vnni : detect_isa() != Isa::Scalar ? int_gemm_avx2 : int_gemm_scalar;
  if (info && info->const_inputs.size() > 3 && info->const_inputs[1] && info->const_inputs[3])
    c.constant = std::make_shared<ConvIntCfg::Once>();
  return make_call(run_conv_integer, std::move(c));
}

KernelCall build_conv_integer(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  return build(node, in, out, nullptr);
}

KernelCall build_conv_integer_info(const Node& node, const std::vector<const Shape*>& in,
                                   const std::vector<Shape>& out, const BuildInfo& info) {
  return build(node, in, out, &info);
}

}  // namespace

void register_conv_integer_kernels(KernelRegistry& r) {
  r.add(OpKind::ConvInteger, build_conv_integer, supports_conv_integer);
  r.add_build_info(OpKind::ConvInteger, build_conv_integer_info);
}

}  // namespace rlx::cpu
