// conv2d (NCHW, groups, stride, pads [top, left, bottom, right], dilation, bias); the pools are
// in pool.cpp.
//
// Float conv runs per (image, group) as a GEMM: weights [Cout/g, Cin/g*kh*kw] times the
// virtual im2col matrix [Cin/g*kh*kw, OH*OW], which is never materialized: the GEMM's B
// packer gathers each cache block straight from the image. A 1x1/stride-1/unpadded conv
// reads the image as B directly. Convs whose output channels each read one input
// channel (depthwise, any multiplier) use a direct kernel. F64 uses plain loops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include <xmmintrin.h>

#include "backends/cpu/huge_pages.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/conv_element.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/kernels/elementwise_types.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "ir/op_table.h"

namespace rlx::cpu {
namespace {

using namespace conv_element;

struct ConvCfg {
  DType type = DType::F32;
  int64_t n = 0, c = 0, h = 0, w = 0;          // input
  int64_t cout = 0, kh = 0, kw = 0, group = 1;  // weight [cout, c/group, kh, kw]
  int64_t oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, dh = 1, dw = 1;
  bool pointwise = false;  // 1x1, stride 1, no padding: the image is B as is
  bool subsample = false;  // f32 1x1, no padding, stride above 1: a pointwise conv of the subsampled image
  bool direct = false;  // the direct kernel, not the GEMM (see build_conv)
  bool depthwise_rows = false;  // direct, f32, one input channel per output, width stride 1 or 2: see conv_depthwise_rows
  bool transposed = false;  // the product as C^T = cols^T W^T (see conv_gemm_transposed)
  bool in_place = false;    // B read from the input rows in place (see conv_in_place)
  bool phases = false;      // im2col packed from the image's phase planes (see pack_phase_im2col)
  bool phases_direct = false;  // constant weights: the output positions read from padded phase planes (conv_phases_direct)
  // Phase planes: row r holds output row r + dy0 (oy + dy of a tap); in conv_phases_direct's
  // padded planes, phase_w columns, column u output column u + dx0 (ox + dx).
  int64_t dy0 = 0, phase_rows = 0, dx0 = 0, phase_w = 0;
  std::vector<int64_t> phase_off;  // conv_phases_direct: tap k's offset into the padded planes (build time)
  bool has_bias = false;
  // fused_conv2d's epilogue (f32, f16, bf16: applied in f32 before the output's rounding):
  // out = act(conv + bias + residual).
  bool has_residual = false;
  Activation act = Activation::None;
  float alpha = 0;
  bool has_epilogue() const { return has_residual || act != Activation::None; }
  std::vector<int64_t> kx_bounds;  // per kx: [lo, hi) of output columns reading inside the image
  int64_t kx_interior[2] = {0, 0};  // columns inside every kx's [lo, hi)
  int n_in = 2;  // node inputs (the output pointer follows them)
  // A constant weight matrix of a conv with few output columns, packed once in the GEMM's
  // A layout (shared by runs and clones): with P = oh*ow small, packing the weights on every
  // call costs about as much as the product (ResNet-50's 7x7 and 14x14 layers).
  // With `transposed`, the same matrix transposed, packed as the GEMM's B operand.
  struct PackedWeights {
    std::once_flag once;
    PackedFloats data;
  };
  std::shared_ptr<PackedWeights> packed;
  // The packed copy, made by pack(dst) into `floats` floats on first use.
  template <class Pack>
  const float* packed_once(int64_t floats, Pack&& pack) const {
    std::call_once(packed->once, [&] {
      packed->data.resize(size_t(floats));
      pack(packed->data.data());
    });
    return packed->data.data();
  }
  // 3x3 stride-1 convs with constant weights: the Winograd plan and its transformed weights
  // (conv_winograd.h), made at build time; the original weights are then not read.
  std::shared_ptr<const WinogradConv> winograd;
  const IsaKernels* kernels = nullptr;
  const RowKernels* rows = nullptr;  // conv_row
  // Half types: the ISA's vector conversions (the elementwise Cast's), for im2col runs and
  // epilogue rows.
  ew::ConvertFn to_f32 = nullptr, from_f32 = nullptr;
};

// ---------------------------------------------------------------- im2col packing

struct Im2colCtx {
  const ConvCfg* cfg;
  const void* x;  // image of this (n, group): [c/group, h, w]
};

// Short copies and fills with baseline SSE moves: library calls cost more than the copy
// for segments of a few dozen floats, so GCC must not turn these loops back into them
// (the packer carries the same attribute so the helpers still inline into it).
#if defined(__GNUC__) && !defined(__clang__)
#define RLX_NO_LIBCALL __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define RLX_NO_LIBCALL  // clang does not turn such loops into calls, and has no such attribute
#endif
RLX_NO_LIBCALL inline void copy_floats(float* __restrict d, const float* __restrict s, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(d + i, _mm_loadu_ps(s + i));
  for (; i < n; ++i) d[i] = s[i];
}
// d[t] = s[2t] for t < n, the even lanes of pairs of loads; reads s[0 .. 2n - 2] only.
// Inline for im2col's pieces of a few dozen floats, where RowKernels::copy_even's call and
// masked tail cost more than they save (a stride-2 3x3 at 28x28 outputs 1.29 -> 1.31 ms).
RLX_NO_LIBCALL inline void copy_even_floats(float* __restrict d, const float* __restrict s, int64_t n) {
  int64_t t = 0;
  // The loads of a group reach s[2t + 7]: inside [0, 2n - 2] while t + 4 < n.
  for (; t + 4 < n; t += 4)
    _mm_storeu_ps(d + t, _mm_shuffle_ps(_mm_loadu_ps(s + 2 * t), _mm_loadu_ps(s + 2 * t + 4), _MM_SHUFFLE(2, 0, 2, 0)));
  for (; t < n; ++t) d[t] = s[2 * t];
}
RLX_NO_LIBCALL inline void zero_floats(float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(d + i, _mm_setzero_ps());
  for (; i < n; ++i) d[i] = 0.0f;
}

// Row k = (ci, ky, kx) of the im2col matrix, stepped along one row at a time (no divisions
// per row: with rows of a few dozen floats, they cost as much as the copies).
struct TapCursor {
  int64_t ci, ky, kx;
  void next(const ConvCfg& c) {
    if (++kx < c.kw) return;
    kx = 0;
    if (++ky < c.kh) return;
    ky = 0;
    ++ci;
  }
};

// Writes rows [k0, k0+kc) x columns [j0, j0+n) of the im2col matrix (row k = (ci, ky, kx),
// column j = (oy, ox)) in GEMM panel layout: panel q (columns q*width..) at
// dst + q*width*kc, kc rows of `width` floats, zero past n. Each row is written straight
// into its panels, one run per output row split at panel edges (each element is read and
// written once; a line buffer copied into the panels afterwards doubled the writes, and
// packing was a fifth of ResNet-50's time).
template <class T>
RLX_NO_LIBCALL void pack_im2col(const void* vctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int64_t width,
                                float* dst) {
  const Im2colCtx& ctx = *static_cast<const Im2colCtx*>(vctx);
  const ConvCfg& c = *ctx.cfg;
  const T* x = static_cast<const T*>(ctx.x);
  const int64_t taps = c.kh * c.kw;
  const int64_t panels = (n + width - 1) / width, panel_stride = width * kc;
  float strided[64];  // one panel piece of a strided row, gathered first
  // Row k stepped along with r, and the first column's output position: no divisions per row.
  TapCursor tap{k0 / taps, (k0 % taps) / c.kw, k0 % c.kw};
  const int64_t oy_first = j0 / c.ow, ox_first = j0 % c.ow;
  for (int64_t r = 0; r < kc; ++r) {
    if (r > 0) tap.next(c);
    const int64_t ci = tap.ci, ky = tap.ky, kx = tap.kx;
    const T* plane = x + ci * c.h * c.w;
    float* drow = dst + r * width;  // row r of panel 0
    // Columns whose input x lies in [0, w): ox in [ox_lo, ox_hi) (ConvCfg::kx_bounds).
    const int64_t off = kx * c.dw - c.pl;
    const int64_t ox_lo = c.kx_bounds[size_t(2 * kx)], ox_hi = c.kx_bounds[size_t(2 * kx + 1)];
    // The next len columns of this row (the columns are written in order: a cursor at panel q,
    // column o, with no division per piece): zeros (src == nullptr) or input elements
    // src[t * step].
    int64_t q = 0, o = 0;
    auto put = [&](const T* src, int64_t step, int64_t len) {
      while (len > 0) {
        const int64_t cnt = std::min(len, width - o);
        float* d = drow + q * panel_stride + o;
        if (!src) {
          zero_floats(d, cnt);
        } else if (step == 1) {
          if constexpr (std::is_same_v<T, float>) copy_floats(d, src, cnt);
          else c.to_f32(src, d, cnt);  // half types: the vector conversions (exact, as load() is)
        } else if (std::is_same_v<T, float> && step == 2) {  // stride 2: even lanes of two loads
          copy_even_floats(d, reinterpret_cast<const float*>(src), cnt);
        } else {
          for (int64_t t = 0; t < cnt; ++t) strided[t] = load(src + t * step);
          copy_floats(d, strided, cnt);
        }
        o += cnt;
        if (o == width) {
          o = 0;
          ++q;
        }
        len -= cnt;
        if (src) src += cnt * step;
      }
    };
    int64_t oy = oy_first, ox0 = ox_first;
    for (int64_t jj = 0; jj < n;) {
      const int64_t cnt = std::min(c.ow - ox0, n - jj);
      const int64_t iy = oy * c.sh - c.pt + ky * c.dh;
      if (iy < 0 || iy >= c.h) {
        put(nullptr, 1, cnt);
      } else {
        const T* row = plane + iy * c.w;
        const int64_t a = std::clamp(ox_lo - ox0, int64_t(0), cnt), b = std::clamp(ox_hi - ox0, a, cnt);
        put(nullptr, 1, a);
        put(row + (ox0 + a) * c.sw + off, c.sw, b - a);
        put(nullptr, 1, cnt - b);
      }
      jj += cnt;
      ox0 = 0;
      ++oy;
    }
    put(nullptr, 1, panels * width - n);  // the last panel's columns past n
  }
}

GemmPackB im2col_for(DType t) {
  switch (t) {
    case DType::F16: return pack_im2col<F16>;
    case DType::BF16: return pack_im2col<BF16>;
    default: return pack_im2col<float>;
  }
}

// Stride 2 both ways without dilation (f32; ResNet's stride-2 3x3 convs): tap (ky, kx) of output
// (oy, ox) reads input (2 (oy + dy) + py, 2 (ox + dx) + px), with qy = ky - pt = 2 dy + py
// (py in {0, 1}) and likewise qx = kx - pl. So the image is split once into its four phase
// planes (py, px), each `phase_rows` rows of exactly ow columns (row r: output row r + dy0;
// zeros where the input position is outside the image), and im2col row (ci, ky, kx) over
// output columns j = oy * ow + ox is one contiguous run of its plane, starting at row
// dy - dy0, column dx: a panel's row is one copy. Only where ox + dx leaves [0, ow) does the
// run read a neighbouring row (or a margin): those |dx| columns per output row are rewritten
// from the image (or zero). pack_im2col wrote each output row as up to three pieces split at
// panel edges, and the pieces' bookkeeping cost more than their copies (a fifth of a
// stride-2 3x3 conv's time). The same values in the same places: the same bits.
struct PhaseCtx {
  const ConvCfg* cfg;
  const float* x;       // image of this (n, group): [c/group, h, w]
  const float* planes;  // plane (ci, py, px) at planes + ((ci * 2 + py) * 2 + px) * plane
  int64_t plane;        // phase_rows * ow
};

// The phase planes of channels [0, nch) of image xg into `planes`, pw columns each, column u
// holding output column u + col0 of the plane's phase (zero outside the image): pw = ow and
// col0 = 0 for the packer (margin floats before and after), conv_phases_direct's padded ones.
void build_phase_planes(const ConvCfg& c, ThreadPool* pool, const float* xg, int64_t nch, float* planes, int64_t pw,
                        int64_t col0) {
  const int64_t plane = c.phase_rows * pw;
  const bool split = pool && pool->size() > 1 && nch * 4 * plane >= 65536;
  for_each_index(split ? pool : nullptr, nch * 4, [&](int64_t t) {
    const int64_t ci = t / 4, py = (t / 2) % 2, px = t % 2;
    float* d = planes + t * plane;
    // Column u reads input column 2 (u + col0) + px: inside for u in [u0, u1).
    const int64_t u0 = std::clamp<int64_t>(-col0, 0, pw);
    const int64_t u1 = std::clamp<int64_t>((c.w - px + 1) / 2 - col0, u0, pw);
    for (int64_t r = 0; r < c.phase_rows; ++r, d += pw) {
      const int64_t iy = 2 * (r + c.dy0) + py;
      if (iy < 0 || iy >= c.h) {
        zero_floats(d, pw);
        continue;
      }
      zero_floats(d, u0);
      copy_even_floats(d + u0, xg + (ci * c.h + iy) * c.w + 2 * (u0 + col0) + px, u1 - u0);
      zero_floats(d + u1, pw - u1);
    }
  });
}

RLX_NO_LIBCALL void pack_phase_im2col(const void* vctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int64_t width,
                                      float* dst) {
  const PhaseCtx& ctx = *static_cast<const PhaseCtx*>(vctx);
  const ConvCfg& c = *ctx.cfg;
  const int64_t taps = c.kh * c.kw, ow = c.ow;
  const int64_t panels = (n + width - 1) / width, panel_stride = width * kc;
  TapCursor tap{k0 / taps, (k0 % taps) / c.kw, k0 % c.kw};
  for (int64_t r = 0; r < kc; ++r) {
    if (r > 0) tap.next(c);
    const int64_t ci = tap.ci, ky = tap.ky, kx = tap.kx;
    const int64_t qy = ky - c.pt, qx = kx - c.pl, dy = floor_half(qy), dx = floor_half(qx);
    const int64_t py = qy - 2 * dy, px = qx - 2 * dx;
    const float* src = ctx.planes + ((ci * 2 + py) * 2 + px) * ctx.plane + (dy - c.dy0) * ow + dx + j0;
    float* drow = dst + r * width;
    for (int64_t q = 0; q < panels; ++q) {
      const int64_t cnt = std::min(width, n - q * width);
      copy_floats(drow + q * panel_stride, src + q * width, cnt);
      if (cnt < width) zero_floats(drow + q * panel_stride + cnt, width - cnt);
    }
    if (dx == 0) continue;
    // Output columns whose ox + dx leaves [0, ow): the image's value there, or zero. Stepped a
    // row at a time without divisions (one per element was a fifth of the packer's time).
    const int64_t e0 = dx < 0 ? 0 : ow - dx, e1 = dx < 0 ? std::min(ow, -dx) : ow;
    const float* plane = ctx.x + ci * c.h * c.w;
    const int64_t oy0 = j0 / ow, jr = j0 - oy0 * ow;  // j0's output row and column
    for (int64_t ox = std::max<int64_t>(e0, 0); ox < e1; ++ox) {
      const int64_t ix = 2 * ox + qx;
      const bool col_in = ix >= 0 && ix < c.w;
      int64_t oy = oy0 + (ox < jr ? 1 : 0), jj = oy * ow + ox - j0;  // the first j >= j0 in column ox
      int64_t q = jj / width, r = jj - q * width;
      for (; jj < n; jj += ow, ++oy) {
        const int64_t iy = 2 * oy + qy;
        drow[q * panel_stride + r] = col_in && iy >= 0 && iy < c.h ? plane[iy * c.w + ix] : 0.0f;
        for (r += ow; r >= width; r -= width) ++q;
      }
    }
  }
}

// Stride 2 both ways with constant weights (f32, one group; ResNet-50's stride-2 3x3 convs): the
// product transposed, C^T [positions, cout] = cols^T x W^T, with the positions as the
// microkernel's rows read where they lie: the image split once into padded phase planes
// (phase_w columns; column u is output column u + dx0, zero outside the image), output row oy's
// positions ox0 .. ox0 + rows - 1 read tap (ci, ky, kx) as one run of rows floats at a fixed
// offset per tap (ukr_arows), and the weights, packed once as B panels of nr output channels,
// are the vectors. Nothing is packed per call; packing the im2col panels (pack_phase_im2col)
// was a sixth of these convs' time, and the untransposed product read in place needed the
// positions as vectors, whose runs cross rows (ukr_off over phase planes: slower than packing).
// Tasks are (channel panel, group of output rows); each walks the K blocks outside and its row
// tiles inside, with its C^T in a buffer, then writes it back transposed and runs the
// epilogue. The K blocks and each element's FMA chain are the packed paths': the same bits.
void conv_phases_direct(const ConvCfg& cfg, ThreadPool* pool, const float* xg, const float* bp, const float* bias,
                        const float* rg, float* og) {
  const IsaKernels& K = *cfg.kernels;
  const int nr = K.nr;
  const int64_t taps = cfg.kh * cfg.kw, kg = cfg.c * taps, mg = cfg.cout, p = cfg.oh * cfg.ow, ow = cfg.ow;
  const int64_t pw = cfg.phase_w, plane = cfg.phase_rows * pw;
  const int64_t panels = (mg + nr - 1) / nr, npad = panels * nr;
  thread_local std::vector<float> planes;
  planes.resize(size_t(cfg.c * 4 * plane));
  build_phase_planes(cfg, pool, xg, cfg.c, planes.data(), pw, cfg.dx0);
  // Row tiles of equal width: 28 positions as 14 + 14 (AVX-512) or 5 + 5 + 6 + 6 + 6 (AVX2).
  const int64_t nt = (ow + K.arows_max - 1) / K.arows_max;
  const int64_t threads = pool ? pool->size() : 1;
  const int64_t rgroups = std::clamp<int64_t>((4 * threads + panels - 1) / panels, 1, cfg.oh);
  const float* pl = planes.data();
  const int64_t* offs = cfg.phase_off.data();
  for_each_index(pool, panels * rgroups, [&](int64_t task) {
    const int64_t q = task / rgroups, gi = task % rgroups;
    const int64_t oy0 = gi * cfg.oh / rgroups, oy1 = (gi + 1) * cfg.oh / rgroups;
    const int64_t co0 = q * nr, ncols = std::min<int64_t>(nr, mg - co0);
    thread_local std::vector<float> cbuf;  // C^T of the task: position (oy - oy0) * ow + ox, nr channels each
    cbuf.resize(size_t((oy1 - oy0) * ow * nr));
    for (int64_t pc = 0; pc < kg; pc += K.kc) {
      const int64_t kc = std::min(K.kc, kg - pc);
      const float* b = bp + pc * npad + q * nr * kc;
      for (int64_t oy = oy0; oy < oy1; ++oy)
        for (int64_t t = 0; t < nt; ++t) {
          const int64_t ox0 = t * ow / nt, rows = (t + 1) * ow / nt - ox0;
          K.ukr_arows[rows](kc, pl + oy * pw + ox0, offs + pc, b, cbuf.data() + ((oy - oy0) * ow + ox0) * nr, nr,
                            pc > 0);
        }
    }
    // Back transposed (rows of the output are channels), then bias, residual and activation.
    float* o = og + co0 * p + oy0 * ow;
    const int64_t n = (oy1 - oy0) * ow;
    for (int64_t i0 = 0; i0 < n; i0 += 16) {  // 16 positions at a time: their nr channels stay in L1
      const int64_t i1 = std::min(n, i0 + 16);
      for (int64_t j = 0; j < ncols; ++j)
        for (int64_t i = i0; i < i1; ++i) o[j * p + i] = cbuf[size_t(i * nr + j)];
    }
    if (bias || rg || cfg.act != Activation::None)
      cfg.rows->tile_epilogue(o, p, ncols, n, bias ? bias + co0 : nullptr, rg ? rg + co0 * p + oy0 * ow : nullptr, p,
                              cfg.act, cfg.alpha);
  });
}

// ---------------------------------------------------------------- GEMM conv

struct ConvTile {
  const ConvCfg* cfg;
  const void* bias;      // [cout] or nullptr
  int64_t co0;           // first output channel of this group
  void* out;             // typed output plane block when C is an F32 workspace
  const void* residual = nullptr;  // fused_conv2d: this group's residual planes (C's layout, cfg.type)
};

// fused_conv2d's epilogue on n f32 outputs (after the bias): + residual (n elements of cfg.type
// at res + off), then the activation.
inline void conv_post(const ConvCfg& cfg, float* y, const void* res, int64_t off, int64_t n) {
  if (res) {
    if (cfg.type == DType::F32) {
      cfg.rows->accumulate(y, static_cast<const float*>(res) + off, n);
    } else {  // half: widened a piece at a time
      float tmp[256];
      for (int64_t i = 0; i < n; i += 256) {
        const int64_t k = std::min<int64_t>(256, n - i);
        cfg.to_f32(static_cast<const uint16_t*>(res) + off + i, tmp, k);
        cfg.rows->accumulate(y + i, tmp, k);
      }
    }
  }
  if (cfg.act != Activation::None) cfg.rows->activate(y, n, cfg.act, cfg.alpha);
}

void conv_epilogue(const void* vctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t m, int64_t n) {
  const ConvTile& t = *static_cast<const ConvTile*>(vctx);
  const ConvCfg& cfg = *t.cfg;
  if (cfg.type == DType::F32 && !t.out) {  // the tile in one call (a K = 64 conv's tile costs about as much)
    if (t.bias || t.residual || cfg.act != Activation::None)
      cfg.rows->tile_epilogue(c, ldc, m, n, t.bias ? static_cast<const float*>(t.bias) + t.co0 + i0 : nullptr,
                              t.residual ? static_cast<const float*>(t.residual) + i0 * ldc + j0 : nullptr, ldc,
                              cfg.act, cfg.alpha);
    return;
  }
  for (int64_t r = 0; r < m; ++r) {
    float* row = c + r * ldc;
    if (t.bias) cfg.rows->add(row, n, load_as_f32(t.bias, cfg.type, t.co0 + i0 + r));
    if (cfg.has_epilogue()) conv_post(cfg, row, t.residual, (i0 + r) * ldc + j0, n);
    if (!t.out) continue;
    if (cfg.from_f32)  // half types: a row at a time, rounded as store_from_f32 rounds
      cfg.from_f32(row, static_cast<uint16_t*>(t.out) + (i0 + r) * ldc + j0, n);
    else
      for (int64_t j = 0; j < n; ++j) store_from_f32(t.out, cfg.type, (i0 + r) * ldc + j0 + j, row[j]);
  }
}

thread_local std::vector<float> tl_conv_out;
thread_local std::vector<float> tl_conv_cols;

// The im2col matrix transposed, [p, kg]: row j the receptive field of output j (zeros in the
// padding), for convs with at most kDotCols outputs per image. sgemm then takes its dot
// path (K-contiguous operands) instead of packing panels of nr columns of which all but a
// few would be zero (Silero VAD's convs have 1 to 3 outputs over K of 129 to 387).
constexpr int64_t kDotCols = 4;

const float* im2col_rows(const ConvCfg& cfg, const float* xg, ThreadPool* pool = nullptr) {
  const int64_t cg = cfg.c / cfg.group, kg = cg * cfg.kh * cfg.kw, p = cfg.oh * cfg.ow;
  if (tl_conv_cols.size() < size_t(p * kg)) tl_conv_cols.resize(size_t(p * kg));
  float* cols = tl_conv_cols.data();
  // Rows over the pool when there is enough to copy (ResNet-50's 49 x 4608): each row is a
  // receptive field, written once, so the split does not change a value.
  const bool split = pool && pool->size() > 1 && p * kg >= 65536;
  for_each_index(split ? pool : nullptr, p, [&](int64_t j) {
    float* d = cols + j * kg;
    const int64_t oy = j / cfg.ow, ox = j % cfg.ow;
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t ky = 0; ky < cfg.kh; ++ky) {
        const int64_t iy = oy * cfg.sh - cfg.pt + ky * cfg.dh;
        if (iy < 0 || iy >= cfg.h) {
          for (int64_t kx = 0; kx < cfg.kw; ++kx) *d++ = 0.0f;
          continue;
        }
        const float* row = xg + (ci * cfg.h + iy) * cfg.w;
        for (int64_t kx = 0; kx < cfg.kw; ++kx) {
          const int64_t ix = ox * cfg.sw - cfg.pl + kx * cfg.dw;
          *d++ = ix >= 0 && ix < cfg.w ? row[ix] : 0.0f;
        }
      }
  });
  return cols;
}

void conv_in_place(const ConvCfg& cfg, ThreadPool* pool, const float* x, const float* w, const float* bias,
                   const float* res, float* out, int64_t img, int64_t g);
// A 1x1 conv without padding reads input (oy * sh, ox * sw) for output (oy, ox): with a stride
// above 1 it is a pointwise conv of that subsample, copied once (nch planes of oh x ow) instead
// of gathered into im2col panels or rows (ResNet's strided 1x1 shortcuts). The same values in
// the same K order: the same bits.
const float* subsampled(const ConvCfg& cfg, ThreadPool* pool, const float* x, int64_t nch) {
  thread_local std::vector<float> sub;
  const int64_t p = cfg.oh * cfg.ow;
  sub.resize(size_t(nch * p));
  float* d = sub.data();
  const bool split = pool && pool->size() > 1 && nch * p >= 65536;
  for_each_index(split ? pool : nullptr, nch, [&](int64_t ci) {
    for (int64_t oy = 0; oy < cfg.oh; ++oy) {
      const float* row = x + (ci * cfg.h + oy * cfg.sh) * cfg.w;
      float* o = d + ci * p + oy * cfg.ow;
      if (cfg.sw == 1) copy_floats(o, row, cfg.ow);
      else if (cfg.sw == 2) cfg.rows->copy_even(o, row, cfg.ow);
      else
        for (int64_t ox = 0; ox < cfg.ow; ++ox) o[ox] = row[ox * cfg.sw];
    }
  });
  return d;
}

void conv_gemm_one(const ConvCfg& cfg, ThreadPool* pool, const void* x, const void* w, const void* bias,
                   const void* res, void* out, int64_t img, int64_t g) {
  if (cfg.in_place)
    return conv_in_place(cfg, pool, static_cast<const float*>(x), static_cast<const float*>(w),
                         static_cast<const float*>(bias), static_cast<const float*>(res), static_cast<float*>(out),
                         img, g);
  const size_t esz = dtype_size(cfg.type);
  const int64_t cg = cfg.c / cfg.group, mg = cfg.cout / cfg.group, kg = cg * cfg.kh * cfg.kw;
  const int64_t p = cfg.oh * cfg.ow;
  const void* xg = static_cast<const uint8_t*>(x) + (img * cfg.c + g * cg) * cfg.h * cfg.w * esz;
  void* og = static_cast<uint8_t*>(out) + (img * cfg.cout + g * mg) * p * esz;
  SgemmProblem pr;
  pr.m = mg;
  pr.n = p;
  pr.k = kg;
  pr.a = {static_cast<const uint8_t*>(w) + g * mg * kg * esz, cfg.type, kg, 1};
  if (cfg.packed)  // group 1 (build_conv_info): one matrix
    pr.a_packed = cfg.packed_once(packed_a_floats(*cfg.kernels, mg, kg),
                                  [&](float* d) { pack_a_full(*cfg.kernels, pr.a, mg, kg, d); });
  Im2colCtx ictx{&cfg, xg};
  PhaseCtx pctx{};
  if (cfg.type == DType::F32 && p <= kDotCols) {  // (build_conv_info packs A only for 5+ outputs)
    pr.b = {im2col_rows(cfg, static_cast<const float*>(xg)), DType::F32, 1, kg};
  } else if (cfg.pointwise) {
    pr.b = {xg, cfg.type, p, 1};
  } else if (cfg.subsample) {
    pr.b = {subsampled(cfg, pool, static_cast<const float*>(xg), cg), DType::F32, p, 1};
  } else if (cfg.phases) {
    const int64_t plane = cfg.phase_rows * cfg.ow, margin = 64;  // margin >= |dx| + 1 of every tap
    thread_local std::vector<float> planes;
    planes.resize(size_t(cg * 4 * plane + 2 * margin));
    std::fill(planes.begin(), planes.begin() + margin, 0.0f);
    std::fill(planes.end() - margin, planes.end(), 0.0f);
    build_phase_planes(cfg, pool, static_cast<const float*>(xg), cg, planes.data() + margin, cfg.ow, 0);
    pctx = {&cfg, static_cast<const float*>(xg), planes.data() + margin, plane};
    pr.pack_b = pack_phase_im2col;
    pr.pack_b_ctx = &pctx;
  } else {
    pr.pack_b = im2col_for(cfg.type);
    pr.pack_b_ctx = &ictx;
  }
  ConvTile tile{&cfg, bias, g * mg, nullptr,
                res ? static_cast<const uint8_t*>(res) + (img * cfg.cout + g * mg) * p * esz : nullptr};
  if (cfg.type == DType::F32) {
    pr.c = static_cast<float*>(og);
  } else {
    if (tl_conv_out.size() < size_t(mg * p)) tl_conv_out.resize(size_t(mg * p));
    pr.c = tl_conv_out.data();
    tile.out = og;
  }
  pr.ldc = p;
  if (!tile.out && (cfg.act == Activation::None || cfg.act == Activation::Relu)) {
    // f32 with bias, residual and ReLU only: applied in the microkernel's registers (the
    // steps of conv_epilogue's tile_epilogue, the same bits) instead of a pass over the
    // stored tile, which cost half as much as the products of a K = 64 conv.
    pr.row_epilogue = {bias ? static_cast<const float*>(bias) + g * mg : nullptr,
                       static_cast<const float*>(tile.residual), p, cfg.act == Activation::Relu};
  } else if (bias || tile.out || cfg.has_epilogue()) {
    pr.epilogue = conv_epilogue;
    pr.epilogue_ctx = &tile;
  }
  sgemm(pr, pool, *cfg.kernels);
}

// Few output positions and many channels (ResNet-50's 7x7 layers: 49 positions, 512 to 2048
// channels): the product transposed, C^T [p, mg] = cols^T [p, kg] x W^T [kg, mg], so the
// positions fill the microkernel's mr-row tiles and the channels its nr-wide panels (the
// other way round 49 columns took two 32-wide panels, one of them half empty, and the weights
// were re-read per K block as the A operand of every panel). The weights are the streamed B
// operand, packed once when constant; each finished tile is written back transposed into
// the output with the bias added. Every element sums the same products in the same K order
// as the untransposed product, so the bits are the same.
struct TransposedTile {
  const ConvCfg* cfg;
  const float* bias;  // [cout] or nullptr
  int64_t p;
  float* out;  // [cout, p] of this image
  const float* residual;  // fused_conv2d: [cout, p] of this image, or nullptr
};

// The tile is copied back transposed, then the bias, residual and activation run over the
// output block in one RowKernels::tile_epilogue call (rows: its n channels; one conv_post per
// channel row of a dozen positions cost more calls than arithmetic); the same steps in the
// same order per element.
void conv_transposed_epilogue(const void* vctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t m, int64_t n) {
  const TransposedTile& t = *static_cast<const TransposedTile*>(vctx);
  float* o = t.out + j0 * t.p + i0;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) o[j * t.p + i] = c[i * ldc + j];
  const ConvCfg& cfg = *t.cfg;
  if (t.bias || t.residual || cfg.act != Activation::None)
    cfg.rows->tile_epilogue(o, t.p, n, m, t.bias ? t.bias + j0 : nullptr, t.residual ? t.residual + j0 * t.p + i0 : nullptr,
                            t.p, cfg.act, cfg.alpha);
}

void conv_gemm_transposed(const ConvCfg& cfg, ThreadPool* pool, const float* x, const float* w, const float* bias,
                          const float* res, float* out, int64_t img) {
  const int64_t mg = cfg.cout, kg = cfg.c * cfg.kh * cfg.kw, p = cfg.oh * cfg.ow;
  const float* xg = x + img * cfg.c * cfg.h * cfg.w;
  SgemmProblem pr;
  pr.m = p;
  pr.n = mg;
  pr.k = kg;
  if (cfg.pointwise) pr.a = {xg, DType::F32, 1, p};  // element (j, k) at x[k * p + j]
  else if (cfg.subsample) pr.a = {subsampled(cfg, pool, xg, cfg.c), DType::F32, 1, p};
  else pr.a = {im2col_rows(cfg, xg, pool), DType::F32, kg, 1};
  pr.b = {w, DType::F32, 1, kg};  // element (k, co) at w[co * kg + k]
  if (cfg.packed)
    pr.b_packed = cfg.packed_once(packed_b_floats(*cfg.kernels, kg, mg),
                                  [&](float* d) { pack_b_full(*cfg.kernels, pr.b, kg, mg, d); });
  if (tl_conv_out.size() < size_t(mg * p)) tl_conv_out.resize(size_t(mg * p));
  pr.c = tl_conv_out.data();
  pr.ldc = mg;
  TransposedTile tile{&cfg, bias, p, out + img * cfg.cout * p, res ? res + img * cfg.cout * p : nullptr};
  pr.epilogue = conv_transposed_epilogue;
  pr.epilogue_ctx = &tile;
  sgemm(pr, pool, *cfg.kernels);
}

// Width stride 1 or 2 and output rows of at least kInPlaceMinCols columns: the microkernel
// reads its B rows from the input instead of im2col panels. For a group of output rows and a
// K block, the input rows those taps read (each channel's kh-row window, zero rows above and
// below the image) are copied once into a zero-padded row buffer, and tile (oy, ox0) of nr
// columns reads B row k = (ci, ky, kx) at a fixed offset from its column (ukr_off). With
// width stride sw each buffered row is stored as sw phases (phase q holds padded columns q,
// q + sw, q + 2 sw, ...), so a tap's columns ox*sw + kx*dw are again one contiguous run: that
// of phase (kx*dw) mod sw from (kx*dw)/sw on. Packing wrote K x N floats per product; the
// buffer is about K/kw x (N/ow) x (sw*ow + kw - 1) of them (ResNet-50's 7x7 stride-2 stem:
// 10K floats per 4 output rows instead of 66K). The K blocks, the microkernel's arithmetic
// and the zeros of the padding are the packed path's: the same bits.
constexpr int64_t kInPlaceMinCols = 48;

void conv_in_place(const ConvCfg& cfg, ThreadPool* pool, const float* x, const float* w, const float* bias,
                   const float* res, float* out, int64_t img, int64_t g) {
  const IsaKernels& K = *cfg.kernels;
  const int mr = K.mr, nr = K.nr;
  const int64_t cg = cfg.c / cfg.group, mg = cfg.cout / cfg.group, taps = cfg.kh * cfg.kw, kg = cg * taps;
  const int64_t p = cfg.oh * cfg.ow, mpad = (mg + mr - 1) / mr * mr;
  const float* xg = x + (img * cfg.c + g * cg) * cfg.h * cfg.w;
  float* og = out + (img * cfg.cout + g * mg) * p;
  const GemmOperand wa{w + g * mg * kg, DType::F32, kg, 1};
  const float* ap = nullptr;
  if (cfg.packed) {  // group 1 (build_conv_info): one matrix
    ap = cfg.packed_once(packed_a_floats(K, mg, kg), [&](float* d) { pack_a_full(K, wa, mg, kg, d); });
  } else {
    thread_local std::vector<float> packed_w;
    packed_w.resize(size_t(packed_a_floats(K, mg, kg)));
    pack_a_full(K, wa, mg, kg, packed_w.data());
    ap = packed_w.data();
  }
  const int64_t tiles = (cfg.ow + nr - 1) / nr, sw = cfg.sw;
  // Phase q's column v holds padded column u = v*sw + q, i.e. input column u - pl; a row is
  // sw phases of wpp floats.
  const int64_t wpp = tiles * nr + (cfg.kw - 1) * cfg.dw / sw, wp = sw * wpp;
  const int64_t threads = pool ? pool->size() : 1;
  const int64_t rows_per = std::clamp<int64_t>(cfg.oh / (4 * threads), 1, 4);
  const int64_t groups = (cfg.oh + rows_per - 1) / rows_per;
  const float* rg = res ? res + (img * cfg.cout + g * mg) * p : nullptr;  // this group's residual planes
  ConvTile tile{&cfg, bias, g * mg, nullptr, rg};
  // Bias, residual and ReLU of the last K block in the microkernel's registers where the tile is
  // full or half width (ukr_off_epi: the steps of tile_epilogue in its order, the same bits);
  // a pass of tile_epilogue over each stored tile took about a seventh of the 7x7 stem's time.
  const bool reg_epi = (cfg.act == Activation::None || cfg.act == Activation::Relu) &&
                       (bias || rg || cfg.act == Activation::Relu);
  for_each_index(pool, groups, [&](int64_t gi) {
    thread_local std::vector<float> rowbuf;
    thread_local std::vector<int64_t> off;
    const int64_t oy0 = gi * rows_per, nrows = std::min(rows_per, cfg.oh - oy0);
    const int64_t rows_in = (nrows - 1) * cfg.sh + (cfg.kh - 1) * cfg.dh + 1, iy0 = oy0 * cfg.sh - cfg.pt;
    // Per phase, the columns [v0, v1) inside the image.
    int64_t v0[2], v1[2];
    for (int64_t q = 0; q < sw; ++q) {
      v0[q] = std::min(wpp, std::max<int64_t>(0, (cfg.pl - q + sw - 1) / sw));
      const int64_t last = cfg.w - 1 + cfg.pl - q;  // the last padded column inside, of this phase
      v1[q] = last < 0 ? v0[q] : std::clamp<int64_t>(last / sw + 1, v0[q], wpp);
    }
    for (int64_t pc = 0; pc < kg; pc += K.kc) {
      const int64_t kc = std::min(K.kc, kg - pc), ci0 = pc / taps, nch = (pc + kc - 1) / taps + 1 - ci0;
      rowbuf.resize(size_t(nch * rows_in * wp));
      off.resize(size_t(kc));
      for (int64_t cl = 0; cl < nch; ++cl)
        for (int64_t r = 0; r < rows_in; ++r) {
          float* d = rowbuf.data() + (cl * rows_in + r) * wp;
          const int64_t iy = iy0 + r;
          if (iy < 0 || iy >= cfg.h) {
            zero_floats(d, wp);
            continue;
          }
          const float* row = xg + ((ci0 + cl) * cfg.h + iy) * cfg.w;
          for (int64_t q = 0; q < sw; ++q, d += wpp) {
            const float* src = row + v0[q] * sw + q - cfg.pl;  // input column of v0 (inside when v1 > v0)
            zero_floats(d, v0[q]);
            if (sw == 1) copy_floats(d + v0[q], src, v1[q] - v0[q]);
            else cfg.rows->copy_even(d + v0[q], src, v1[q] - v0[q]);
            zero_floats(d + v1[q], wpp - v1[q]);
          }
        }
      for (int64_t kk = 0; kk < kc; ++kk) {
        const int64_t k = pc + kk, ci = k / taps, ky = (k % taps) / cfg.kw, kx = k % cfg.kw;
        off[size_t(kk)] = ((ci - ci0) * rows_in + ky * cfg.dh) * wp + (kx * cfg.dw) % sw * wpp + kx * cfg.dw / sw;
      }
      const bool acc = pc > 0, last = pc + kc == kg;
      // Row panels outside, as in sgemm's block_tiles: the A panel stays in L1, C is written a
      // dozen channel rows at a time.
      for (int64_t ir = 0; ir < mg; ir += mr) {
        const int64_t rows = std::min<int64_t>(mr, mg - ir);
        const float* a = ap + pc * mpad + ir * kc;
        for (int64_t r = 0; r < nrows; ++r) {
          const float* brow = rowbuf.data() + r * cfg.sh * wp;
          const int64_t oy = oy0 + r;
          for (int64_t t = 0; t < tiles; ++t) {
            const int64_t ox0 = t * nr, ncols = std::min<int64_t>(nr, cfg.ow - ox0);
            float* cp = og + ir * p + oy * cfg.ow + ox0;
            const GemmOffsetEpiKernel epi = !last || !reg_epi ? nullptr
                                            : ncols == nr     ? K.ukr_off_epi[rows]
                                            : ncols == nr / 2 ? K.ukr_off_half_epi[rows]
                                                              : nullptr;
            if (epi) {
              const GemmRowEpilogue e{bias ? bias + g * mg + ir : nullptr,
                                      rg ? rg + ir * p + oy * cfg.ow + ox0 : nullptr, p, cfg.act == Activation::Relu};
              epi(kc, a, brow + ox0, off.data(), cp, p, acc, e);
              continue;
            }
            gemm_tile_off(K, rows, ncols, kc, a, brow + ox0, off.data(), cp, p, acc);
            if (last && (bias || cfg.has_epilogue())) conv_epilogue(&tile, cp, p, ir, oy * cfg.ow + ox0, rows, ncols);
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------- direct kernel

// One output plane (img, co), row by row: each output row accumulates kh*kw shifted input
// rows per input channel of the group; with stride 1 (f32) the taps of a row are summed
// in registers by the ISA's conv_row.
// `bounds` holds, per kx, the output columns whose input column is inside the image.
template <class T>
void conv_direct_plane(const ConvCfg& cfg, const T* x, const T* w, const T* bias, const void* res, T* out,
                       int64_t img, int64_t co, AccOf<T>* rowbuf, const int64_t* bounds) {
  using Acc = AccOf<T>;
  const int64_t cg = cfg.c / cfg.group, mg = cfg.cout / cfg.group, g = co / mg;
  T* o = out + (img * cfg.cout + co) * cfg.oh * cfg.ow;
  const Acc bv = bias ? Acc(load(bias + co)) : Acc(0);
  constexpr int64_t kMaxTaps = 64;
  const float* tap_src[kMaxTaps];
  float tap_w[kMaxTaps];
  int64_t tap_lo[kMaxTaps], tap_hi[kMaxTaps];
  for (int64_t oy = 0; oy < cfg.oh; ++oy) {
    // f32 accumulates straight in the output row; other types in a wider row buffer.
    Acc* acc = rowbuf;
    if constexpr (std::is_same_v<T, Acc>) acc = o + oy * cfg.ow;
    std::fill(acc, acc + cfg.ow, bv);
    int64_t taps = 0;
    for (int64_t cl = 0; cl < cg; ++cl) {
      const T* plane = x + (img * cfg.c + g * cg + cl) * cfg.h * cfg.w;
      const T* wk = w + (co * cg + cl) * cfg.kh * cfg.kw;
      for (int64_t ky = 0; ky < cfg.kh; ++ky) {
        const int64_t iy = oy * cfg.sh - cfg.pt + ky * cfg.dh;
        if (iy < 0 || iy >= cfg.h) continue;
        const T* row = plane + iy * cfg.w;
        for (int64_t kx = 0; kx < cfg.kw; ++kx) {
          const Acc wv = Acc(load(wk + ky * cfg.kw + kx));
          const int64_t off = kx * cfg.dw - cfg.pl, lo = bounds[2 * kx], hi = bounds[2 * kx + 1];
          if constexpr (std::is_same_v<T, float>) {
            if (cfg.sw == 1) {  // batched: all taps of the row in one register pass
              tap_src[taps] = row + off;
              tap_w[taps] = wv;
              tap_lo[taps] = lo;
              tap_hi[taps] = hi;
              if (++taps == kMaxTaps) {
                cfg.rows->conv_row(acc, taps, tap_src, tap_w, tap_lo, tap_hi, cfg.kx_interior[0], cfg.kx_interior[1]);
                taps = 0;
              }
              continue;
            }
          }
          for (int64_t ox = lo; ox < hi; ++ox) acc[ox] += wv * Acc(load(row + ox * cfg.sw + off));
        }
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      if (taps) cfg.rows->conv_row(acc, taps, tap_src, tap_w, tap_lo, tap_hi, cfg.kx_interior[0], cfg.kx_interior[1]);
    }
    if constexpr (std::is_same_v<Acc, float>)  // fused_conv2d (never f64: supports_fused_conv)
      if (cfg.has_epilogue()) conv_post(cfg, acc, res, ((img * cfg.cout + co) * cfg.oh + oy) * cfg.ow, cfg.ow);
    if constexpr (!std::is_same_v<T, Acc>)
      for (int64_t ox = 0; ox < cfg.ow; ++ox) store(o + oy * cfg.ow + ox, acc[ox]);
  }
}

// Depthwise f32 (one input channel per output) at width stride 1 or 2: RowKernels::dw_rows
// computes up to kDwRows output rows a call straight from the input rows (masked loads only in
// the chunks at the map's edges; a row outside the map reads a row of zeros), instead of one row
// at a time over a zero-bordered copy of the plane, and at width stride 2 instead of scalar
// loops. Per element the taps in (ky, kx) order from the bias, a tap outside the map adding
// w * 0. PP-OCRv4 det 320x320 on one thread, in the model: its 14 depthwise convs 2.77 -> 1.09
// ms (ONNX Runtime's, over 16-channel blocks: 0.48); the model 9.55 -> 7.87 ms, rec 9.56 -> 8.29,
// cls 0.415 -> 0.393 (alternated).
void conv_depthwise_rows(const ConvCfg& cfg, const float* x, const float* w, const float* bias, const void* res,
                         float* out, int64_t img, int64_t co) {
  const int64_t mg = cfg.cout / cfg.group, ci = co / mg;
  const float* plane = x + (img * cfg.c + ci) * cfg.h * cfg.w;
  float* o = out + (img * cfg.cout + co) * cfg.oh * cfg.ow;
  const float* wk = w + co * cfg.kh * cfg.kw;
  const float bv = bias ? bias[co] : 0.0f;
  thread_local std::vector<const float*> src;
  thread_local std::vector<float> zeros;  // the row a tap outside the map reads
  src.resize(size_t((kDwRows - 1) * cfg.sh + (cfg.kh - 1) * cfg.dh + 1));
  if (zeros.size() < size_t(cfg.w)) zeros.assign(size_t(cfg.w), 0.0f);
  for (int64_t oy0 = 0; oy0 < cfg.oh; oy0 += kDwRows) {
    const int64_t rows = std::min(kDwRows, cfg.oh - oy0);
    const int64_t n_in = (rows - 1) * cfg.sh + (cfg.kh - 1) * cfg.dh + 1, iy0 = oy0 * cfg.sh - cfg.pt;
    for (int64_t i = 0; i < n_in; ++i) {
      const int64_t iy = iy0 + i;
      src[size_t(i)] = iy < 0 || iy >= cfg.h ? zeros.data() : plane + iy * cfg.w;
    }
    cfg.rows->dw_rows(o + oy0 * cfg.ow, cfg.ow, rows, src.data(), cfg.sh, cfg.dh, wk, cfg.kh, cfg.kw, cfg.sw, cfg.dw,
                      cfg.pl, cfg.w, cfg.ow, bv);
    if (cfg.has_epilogue())
      for (int64_t r = oy0; r < oy0 + rows; ++r)
        conv_post(cfg, o + r * cfg.ow, res, ((img * cfg.cout + co) * cfg.oh + r) * cfg.ow, cfg.ow);
  }
}

template <class T>
void conv_direct(const ConvCfg& cfg, ThreadPool* pool, const void* x, const void* w, const void* bias,
                 const void* res, void* out, int64_t images) {
  for_each_index(pool, images * cfg.cout, [&](int64_t idx) {
    if constexpr (std::is_same_v<T, float>) {
      if (cfg.depthwise_rows)
        return conv_depthwise_rows(cfg, static_cast<const float*>(x), static_cast<const float*>(w),
                                   static_cast<const float*>(bias), res, static_cast<float*>(out), idx / cfg.cout,
                                   idx % cfg.cout);
    }
    thread_local std::vector<AccOf<T>> rowbuf;
    if (rowbuf.size() < size_t(cfg.ow)) rowbuf.resize(size_t(cfg.ow));
    conv_direct_plane<T>(cfg, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), res,
                         static_cast<T*>(out), idx / cfg.cout, idx % cfg.cout, rowbuf.data(), cfg.kx_bounds.data());
  });
}

void run_conv(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const ConvCfg& cfg = *static_cast<const ConvCfg*>(vcfg);
  const void *x = bufs[0], *w = bufs[1], *bias = cfg.has_bias ? bufs[2] : nullptr;
  const void* res = cfg.has_residual ? bufs[3] : nullptr;
  void* out = bufs[cfg.n_in];
  const int64_t images = cfg.n;
  if (images == 0 || cfg.cout == 0 || cfg.oh * cfg.ow == 0) return;
  if (cfg.type == DType::F64) return conv_direct<double>(cfg, ctx.pool, x, w, bias, res, out, images);
  if (cfg.winograd)
    return run_winograd(*cfg.winograd, ctx.pool, static_cast<const float*>(x), static_cast<const float*>(bias),
                        WinogradEpilogue{static_cast<const float*>(res), cfg.act, cfg.alpha}, static_cast<float*>(out),
                        images);
  if (cfg.direct) {
    switch (cfg.type) {
      case DType::F16: return conv_direct<F16>(cfg, ctx.pool, x, w, bias, res, out, images);
      case DType::BF16: return conv_direct<BF16>(cfg, ctx.pool, x, w, bias, res, out, images);
      default: return conv_direct<float>(cfg, ctx.pool, x, w, bias, res, out, images);
    }
  }
  if (cfg.phases_direct) {
    const float* bp = cfg.packed_once(packed_b_floats(*cfg.kernels, cfg.c * cfg.kh * cfg.kw, cfg.cout), [&](float* d) {
      pack_b_full(*cfg.kernels, GemmOperand{w, DType::F32, 1, cfg.c * cfg.kh * cfg.kw}, cfg.c * cfg.kh * cfg.kw,
                  cfg.cout, d);
    });
    const int64_t plane = cfg.c * cfg.h * cfg.w, oplane = cfg.cout * cfg.oh * cfg.ow;
    for (int64_t i = 0; i < images; ++i)
      conv_phases_direct(cfg, ctx.pool, static_cast<const float*>(x) + i * plane, bp, static_cast<const float*>(bias),
                         res ? static_cast<const float*>(res) + i * oplane : nullptr, static_cast<float*>(out) + i * oplane);
    return;
  }
  if (cfg.transposed) {
    for (int64_t i = 0; i < images; ++i)
      conv_gemm_transposed(cfg, ctx.pool, static_cast<const float*>(x), static_cast<const float*>(w),
                           static_cast<const float*>(bias), static_cast<const float*>(res), static_cast<float*>(out), i);
    return;
  }
  const int64_t gemms = images * cfg.group;
  const int64_t threads = ctx.pool ? ctx.pool->size() : 1;
  const double flops = double(cfg.cout / cfg.group) * double(cfg.oh * cfg.ow) *
                       double(cfg.c / cfg.group * cfg.kh * cfg.kw);
  // Many small GEMMs (grouped convs, batches of small images): one per task; otherwise
  // one parallel GEMM at a time. The arithmetic per element is the same either way.
  if (gemms > 1 && threads > 1 && (gemms >= 2 * threads || flops < 96.0 * 96.0 * 96.0)) {
    for_each_index(ctx.pool, gemms, [&](int64_t i) {
      conv_gemm_one(cfg, nullptr, x, w, bias, res, out, i / cfg.group, i % cfg.group);
    });
    return;
  }
  for (int64_t i = 0; i < gemms; ++i) conv_gemm_one(cfg, ctx.pool, x, w, bias, res, out, i / cfg.group, i % cfg.group);
}

// The direct kernel where the GEMM would mostly pack: one input channel per output channel
// (depthwise), except for an ungrouped conv with long or strided windows (e.g. an STFT as a
// conv: 1 channel, 256 taps, stride 128, where the taps are a GEMM's K and the direct kernel
// would walk them one scalar at a time); and at most 4 output channels per group with unit
// stride (e.g. the 1-channel head of a ConvTranspose over a 321x321 map: the GEMM would pack
// the whole im2col matrix to make one row of C). cg / og: input / output channels per group,
// sw: the width stride. build_conv's choice, and conv_prefers_f32's.
bool takes_direct_kernel(int64_t cg, int64_t og, int64_t group, int64_t sw, int64_t taps, DType t) {
  return (cg == 1 && (group > 1 || (sw == 1 && taps <= 64))) || (og <= 4 && sw == 1 && t == DType::F32);
}

// Channels-last (nhwc) convolutions and pools take their decomposition (the NCHW kernels
// between transposes): the CPU kernels are NCHW.
bool supports_conv(const Node& node, const std::vector<const Shape*>& in) {
  if (ir::is_channels_last(node)) return false;
  if (!in[0] || !in[1] || !conv_float_type(in[0]->dtype()) || in[1]->dtype() != in[0]->dtype()) return false;
  return in.size() < 3 || !in[2] || in[2]->dtype() == in[0]->dtype();
}

// f16 / bf16 convs run in f32 between casts (legalize, BackendClaims::prefers_f32) except
// where the direct kernel takes them (takes_direct_kernel: depthwise ones), so that they
// take the f32 kernels (Winograd for 3x3 stride 1, the packed GEMM paths) with the weights
// widened once at build time (the constant-fold after legalize). The half GEMM path widens
// its operands while packing, on every call, and has no Winograd: ISNet medium (an f16 graph,
// 1x3x1024x1024), one thread, 1,950 -> 1,200 ms. The value is the same either way: the f32
// result rounded once to the output's type.
bool conv_prefers_f32(const Node& node, const std::vector<const Shape*>& in) {
  if (!in[0] || (in[0]->dtype() != DType::F16 && in[0]->dtype() != DType::BF16) || !in[1]) return false;
  const ConvAttrs a = node.kind == OpKind::FusedConv2d ? node.attr<FusedConvAttrs>().conv() : node.attr<ConvAttrs>();
  const Shape& w = *in[1];
  if (w.rank() != 4 || !w.is_static() || a.strides.size() != 2 || a.group < 1) return false;  // build_conv reports it
  const std::vector<int64_t> wd = w.static_dims();
  return !takes_direct_kernel(wd[1], wd[0] / a.group, a.group, a.strides[1], wd[2] * wd[3], in[0]->dtype());
}

// The epilogue runs on f32 rows (f16 / bf16 outputs before their rounding); f64 takes the
// decomposition.
bool supports_fused_conv(const Node& node, const std::vector<const Shape*>& in) {
  if (!supports_conv(node, in) || in[0]->dtype() == DType::F64) return false;
  return in.size() < 4 || !in[3] || in[3]->dtype() == in[0]->dtype();
}

KernelCall build_conv(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const bool fused = node.kind == OpKind::FusedConv2d;
  const ConvAttrs a = fused ? node.attr<FusedConvAttrs>().conv() : node.attr<ConvAttrs>();
  const std::vector<int64_t> xd = in[0]->static_dims(), wd = in[1]->static_dims(), od = out[0].static_dims();
  if (xd.size() != 4 || wd.size() != 4 || od.size() != 4 || a.strides.size() != 2 || a.pads.size() != 4 ||
      a.dilations.size() != 2 || a.group < 1)
    fail(ErrorCategory::Shape, "node '", node.name, "' (conv2d): malformed shapes or attributes");
  ConvCfg c;
  c.type = in[0]->dtype();
  c.n = xd[0], c.c = xd[1], c.h = xd[2], c.w = xd[3];
  c.cout = wd[0], c.kh = wd[2], c.kw = wd[3], c.group = a.group;
  c.oh = od[2], c.ow = od[3];
  c.sh = a.strides[0], c.sw = a.strides[1];
  c.pt = a.pads[0], c.pl = a.pads[1];
  c.dh = a.dilations[0], c.dw = a.dilations[1];
  if (c.c % c.group != 0 || c.cout % c.group != 0 || wd[1] != c.c / c.group)
    fail(ErrorCategory::Shape, "node '", node.name, "' (conv2d): channels do not match group ", c.group);
  c.pointwise = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && a.pads == std::vector<int64_t>{0, 0, 0, 0} &&
                c.oh == c.h && c.ow == c.w;
  const int64_t cg = c.c / c.group;
  c.direct = takes_direct_kernel(cg, c.cout / c.group, c.group, c.sw, c.kh * c.kw, c.type);
  for (int64_t kx = 0; kx < c.kw; ++kx) {
    const int64_t off = kx * c.dw - c.pl;
    const int64_t lo = std::min(c.ow, std::max<int64_t>(0, (-off + c.sw - 1) / c.sw));
    c.kx_bounds.push_back(lo);
    c.kx_bounds.push_back(std::max(lo, std::min(c.ow, (c.w - off + c.sw - 1) / c.sw)));
  }
  c.kx_interior[0] = 0;
  c.kx_interior[1] = c.ow;
  for (int64_t kx = 0; kx < c.kw; ++kx) {
    c.kx_interior[0] = std::max(c.kx_interior[0], c.kx_bounds[size_t(2 * kx)]);
    c.kx_interior[1] = std::min(c.kx_interior[1], c.kx_bounds[size_t(2 * kx + 1)]);
  }
  c.kx_interior[1] = std::max(c.kx_interior[0], c.kx_interior[1]);
  c.depthwise_rows = c.direct && cg == 1 && c.type == DType::F32 && (c.sw == 1 || c.sw == 2) && c.kw <= kDwMaxKw;
  c.n_in = int(in.size());
  c.has_bias = in.size() > 2 && in[2];
  c.has_residual = fused && in.size() > 3 && in[3];
  if (fused) {
    c.act = node.attr<FusedConvAttrs>().activation;
    c.alpha = float(node.attr<FusedConvAttrs>().alpha);
  }
  c.kernels = &isa_kernels(detect_isa());
  if (c.type == DType::F16 || c.type == DType::BF16) {
    c.to_f32 = ew::convert_fn(c.type, DType::F32, detect_isa());
    c.from_f32 = ew::convert_fn(DType::F32, c.type, detect_isa());
  }
  c.rows = &row_kernels(detect_isa());
  // The transposed product where the positions fit one M block of the GEMM (its strips path:
  // no fork per K block) and there are more channels than positions: ResNet-50's 7x7 layers.
  const int64_t p = c.oh * c.ow;
  c.transposed = !c.direct && c.group == 1 && c.type == DType::F32 && p > kDotCols && p <= c.kernels->mc &&
                 c.cout >= 2 * p;
  c.subsample = !c.direct && !c.pointwise && c.kh == 1 && c.kw == 1 && a.pads == std::vector<int64_t>{0, 0, 0, 0} &&
                c.type == DType::F32 && p > kDotCols;
  c.in_place = !c.direct && !c.transposed && !c.pointwise && !c.subsample && c.type == DType::F32 &&
               (c.sw == 1 || c.sw == 2) && c.ow >= kInPlaceMinCols && p > kDotCols;
  {
    const char* env = std::getenv("RLX_CPU_CONV_PHASES");
    int64_t dx_max = 0, dx_lo = 0, dx_hi = 0, dy_lo = 0, dy_hi = 0;
    for (int64_t kx = 0; kx < c.kw; ++kx) {
      dx_max = std::max(dx_max, std::abs(floor_half(kx - c.pl)));
      dx_lo = std::min(dx_lo, floor_half(kx - c.pl));
      dx_hi = std::max(dx_hi, floor_half(kx - c.pl));
    }
    for (int64_t ky = 0; ky < c.kh; ++ky) {
      dy_lo = std::min(dy_lo, floor_half(ky - c.pt));
      dy_hi = std::max(dy_hi, floor_half(ky - c.pt));
    }
    c.phases = !(env && std::string(env) == "0") && !c.direct && !c.in_place && !c.pointwise && !c.subsample &&
               !c.transposed && c.type == DType::F32 && c.sh == 2 && c.sw == 2 && c.dh == 1 && c.dw == 1 &&
               p > kDotCols && dx_max < 63;
    c.dy0 = dy_lo;
    c.phase_rows = c.oh + dy_hi - dy_lo;
    c.dx0 = dx_lo;
    c.phase_w = c.ow + dx_hi - dx_lo;
  }
  return make_call(run_conv, std::move(c));
}

// build_conv, with constant weights: Winograd where plan_winograd takes the conv (3x3,
// stride 1, f32, one group; the weights are absorbed into its transformed copy), otherwise a
// packed copy of the weights where packing dominates (see ConvCfg::packed): the GEMM path, one group, f32, 5 to 1024 output columns, or any number
// with the input rows read in place (conv_in_place packs A itself otherwise, on every call);
// at most 4 take sgemm's dot kernel, which reads A as is.
KernelCall build_conv_info(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                           const BuildInfo& info) {
  KernelCall call = build_conv(node, in, out);
  const auto& c = *static_cast<const ConvCfg*>(call.cfg.get());
  if (c.direct || c.group != 1 || c.type != DType::F32 || info.const_inputs.size() < 2 || !info.const_inputs[1])
    return call;
  ConvCfg with = c;
  const Blob* wv = info.const_values.size() > 1 ? info.const_values[1] : nullptr;
  WinogradConv plan;
  if (wv && c.kh == 3 && c.kw == 3 && c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 &&
      int64_t(wv->size()) == c.cout * c.c * 9 * 4 &&
      plan_winograd(c.c, c.h, c.w, c.cout, c.oh, c.ow, c.pt, c.pl, detect_isa(), plan)) {
    transform_winograd_weights(plan, wv->as<float>());
    with.winograd = std::make_shared<const WinogradConv>(std::move(plan));
    KernelCall wcall = make_call(run_conv, std::move(with));
    wcall.absorbed = {1};
    return wcall;
  }
  // The convs the phase packer takes (stride 2 both ways under kInPlaceMinCols columns, not
  // transposed): the positions read from phase planes (conv_phases_direct) where the ISA has the
  // kernel; RLX_CPU_CONV_DIRECT=0 keeps the packer (RLX_CPU_CONV_PHASES=0 the plain im2col one).
  // Not where the product is transposed already (7x7 outputs: 49 positions, whose weights stream from memory
  // through the packed path's prefetching kernels; ResNet-50's layer4 stride-2 conv 1.26 ms
  // there against 1.35 direct, one thread).
  const char* no_direct = std::getenv("RLX_CPU_CONV_DIRECT");
  if (c.phases && c.kernels->ukr_arows[1] && !(no_direct && std::string(no_direct) == "0")) {
    with.phases_direct = true;
    with.phases = false;
    with.packed = std::make_shared<ConvCfg::PackedWeights>();
    // Tap k = (ci, ky, kx) reads its padded phase plane at a fixed offset from the position.
    const int64_t plane = c.phase_rows * c.phase_w;
    with.phase_off.resize(size_t(c.c * c.kh * c.kw));
    TapCursor tap{0, 0, 0};
    for (size_t k = 0; k < with.phase_off.size(); ++k) {
      if (k > 0) tap.next(c);
      const int64_t qy = tap.ky - c.pt, qx = tap.kx - c.pl, dy = floor_half(qy), dx = floor_half(qx);
      with.phase_off[k] = ((tap.ci * 2 + (qy - 2 * dy)) * 2 + (qx - 2 * dx)) * plane + (dy - c.dy0) * c.phase_w +
                          (dx - c.dx0);
    }
    return make_call(run_conv, std::move(with));
  }
  if ((c.oh * c.ow > 1024 && !c.in_place) || c.oh * c.ow <= 4) return call;
  with.packed = std::make_shared<ConvCfg::PackedWeights>();
  return make_call(run_conv, std::move(with));
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add(OpKind::Conv2d, build_conv, supports_conv);
  r.add_build_info(OpKind::Conv2d, build_conv_info);
  r.add_prefers_f32(OpKind::Conv2d, conv_prefers_f32);
  r.add(OpKind::FusedConv2d, build_conv, supports_fused_conv);
  r.add_build_info(OpKind::FusedConv2d, build_conv_info);
  r.add_prefers_f32(OpKind::FusedConv2d, conv_prefers_f32);
}

}  // namespace rlx::cpu
