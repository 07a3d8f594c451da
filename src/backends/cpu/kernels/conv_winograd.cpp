// Winograd F(m x m, 3 x 3) convolution: the plan, the weight transform and the run (see
// conv_winograd.h for the method and the operand layouts).
#include "backends/cpu/kernels/conv_winograd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/thread_pool.h"

namespace rlx::cpu {

const WinogradKernels* winograd_kernels(Isa isa) {
  if (isa == Isa::Avx512)
    if (const WinogradKernels* t = winograd_kernels_avx512()) return t;
  if (isa == Isa::Avx512 || isa == Isa::Avx2) return winograd_kernels_avx2();
  return nullptr;
}

namespace {

// Tiles per GEMM block: all of them up to 96 (the products' rows; each block streams all of U,
// so small maps stay one block: ResNet-50's 7x7 layer in two blocks took 2.0 ms instead of
// 1.4), and on larger maps blocks whose V fits 128 KiB, so that V and the products' M (as
// large for as many output channels) stay in L2 together while the products and the output
// transform read them. With 512 KiB ResNet-50's 56x56 layers (64 channels: blocks of 48
// tiles, not 12) took 0.68-0.72 ms against 0.58-0.60 on one thread, 0.35-0.39 against
// 0.31-0.34 on two (alternated); PP-OCRv4 det 640 within the noise (50.4 / 49.4 ms).
constexpr int64_t kMaxBlockTiles = 96, kBlockVBytes = 128 << 10;

int alpha(int m) { return m + 2; }


template <int M>
void transform_pair(const float* g, double* u) {  // u[xi] = (G g G^T)[xi] for one 3x3 kernel
  using Mx = WinogradMatrices<M>;
  constexpr int A = Mx::A;
  double gg[A][3];  // G g
  for (int i = 0; i < A; ++i)
    for (int b = 0; b < 3; ++b) {
      double s = 0;
      for (int a = 0; a < 3; ++a) s += Mx::G[i][a] * double(g[a * 3 + b]);
      gg[i][b] = s;
    }
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < A; ++j) {
      double s = 0;
      for (int b = 0; b < 3; ++b) s += gg[i][b] * Mx::G[j][b];
      u[i * A + j] = s;
    }
}

}  // namespace

bool plan_winograd(int64_t c, int64_t h, int64_t w, int64_t cout, int64_t oh, int64_t ow, int64_t pt, int64_t pl,
                   Isa isa, WinogradConv& plan) {
  const char* env = std::getenv("RLX_CPU_WINOGRAD");
  const std::string mode = env ? env : "";
  if (mode == "0") return false;
  const WinogradKernels* kernels = winograd_kernels(isa);
  if (!kernels) return false;
  const IsaKernels& gemm = isa_kernels(isa);
  // Few channels: the transforms, not the products, would be the work.
  if (c < 16 || cout < 16 || oh < 2 || ow < 2) return false;
  // Few output channels save little arithmetic per transformed input value, and an input
  // larger than the caches streams itself and its transformed copy (2.25x its size for F(4x4))
  // through memory: PP-OCRv4 det's 96 -> 24 convs at 160x160 (a 9.8 MB input) took 7.0-9.2 ms
  // with F(4x4) against 5.8 as a GEMM over the input rows in place (one thread); at 80x80 (2.4
  // MB) F(4x4) still won, 1.70 against 1.86 ms.
  if (mode.empty() && cout <= 32 && c * h * w * int64_t(sizeof(float)) > (int64_t(4) << 20)) return false;
  WinogradConv p;
  // F(4x4) where the maps are large: 36 products per 16 outputs against F(2x2)'s 16 per 4
  // (56x56 and 28x28 maps 2.2x and 1.7x faster, rlx_conv2d_const in bench/micro). On smaller
  // maps where at least 9 of its tiles cover the map with little waste: its products at most
  // 0.6 of F(2x2)'s (one thread, square maps, 64 / 128 / 256 channels, ms: 12x12 0.030 / 0.083
  // / 0.285 against 0.031 / 0.101 / 0.354, 16x16 0.051 / 0.157 / 0.497 against 0.058 / 0.189
  // / 0.657, 20x20 0.078 / 0.224 / 0.734 against 0.091 / 0.298 / 1.047). Not where its tiles
  // are few (7x7 and 8x8: 4 tiles, rows too few for the GEMMs; 7x7x512 1.07 against 0.66 ms)
  // or overhang the map (10x10, 14x14: 0.81 and 0.73 of F(2x2)'s products, within 5 % of it).
  const auto products = [&](int64_t m) { return ((oh + m - 1) / m) * ((ow + m - 1) / m) * (m + 2) * (m + 2); };
  const bool f4 = oh * ow >= 24 * 24 || (((oh + 3) / 4) * ((ow + 3) / 4) >= 9 && 5 * products(4) <= 3 * products(2));
  p.m = mode == "4" ? 4 : mode == "2" ? 2 : f4 ? 4 : 2;
  p.c = c, p.h = h, p.w = w, p.cout = cout, p.oh = oh, p.ow = ow, p.pt = pt, p.pl = pl;
  p.th = (oh + p.m - 1) / p.m;
  p.tw = (ow + p.m - 1) / p.m;
  p.tiles = p.th * p.tw;
  if (p.tiles < 4) return false;
  const int64_t mr = gemm.mr, nr = gemm.nr;
  const int64_t a = alpha(p.m);
  const int64_t max_tiles =
      p.tiles <= kMaxBlockTiles ? kMaxBlockTiles
                                : std::clamp<int64_t>(kBlockVBytes / (a * a * c * 4) / mr * mr, mr, kMaxBlockTiles);
  const int64_t nb = (p.tiles + max_tiles - 1) / max_tiles;
  const int64_t block = ((p.tiles + nb - 1) / nb + mr - 1) / mr * mr;
  p.blocks = (p.tiles + block - 1) / block;
  // Output channels per task: four panels, or two where there are few blocks (one block of
  // 128 channels was one task: nothing for a second thread).
  p.chunk = std::min((cout + nr - 1) / nr * nr, (p.blocks < 4 ? 2 : 4) * nr);
  p.chunks = (cout + p.chunk - 1) / p.chunk;
  p.gemm = &gemm;
  p.kernels = kernels;
  plan = std::move(p);
  return true;
}

void transform_winograd_weights(WinogradConv& p, const float* w) {
  const int a = alpha(p.m), points = a * a;
  // Every point's Cin x Cout matrix, then each chunk of its columns packed as sgemm's B.
  std::vector<float> full(size_t(points * p.c * p.cout));
  std::vector<double> u(static_cast<size_t>(points));
  for (int64_t co = 0; co < p.cout; ++co)
    for (int64_t ci = 0; ci < p.c; ++ci) {
      const float* g = w + (co * p.c + ci) * 9;
      if (p.m == 2) transform_pair<2>(g, u.data());
      else transform_pair<4>(g, u.data());
      for (int xi = 0; xi < points; ++xi) full[size_t((xi * p.c + ci) * p.cout + co)] = float(u[size_t(xi)]);
    }
  p.u_stride = packed_b_floats(*p.gemm, p.c, p.chunk);
  auto packed = std::make_shared<PackedFloats>(size_t(points * p.chunks * p.u_stride));
  for (int xi = 0; xi < points; ++xi)
    for (int64_t q = 0; q < p.chunks; ++q) {
      const int64_t n = std::min(p.chunk, p.cout - q * p.chunk);
      const GemmOperand b{full.data() + (xi * p.c) * p.cout + q * p.chunk, DType::F32, p.cout, 1};
      pack_b_full(*p.gemm, b, p.c, n, packed->data() + (q * points + xi) * p.u_stride);
    }
  p.u = std::move(packed);
}

void run_winograd(const WinogradConv& p, ThreadPool* pool, const float* x, const float* bias,
                  const WinogradEpilogue& epi, float* out, int64_t images) {
  const IsaKernels& K = *p.gemm;
  const int a = alpha(p.m), points = a * a, mr = K.mr;
  const int64_t kc_max = K.kc, plane = p.oh * p.ow;
  const int64_t threads = pool ? pool->size() : 1;
  // The plan's blocks (runs of whole mr-tile panels: block b holds panels [b * np / nb, (b + 1) *
  // np / nb)), or, where it has fewer than two a thread and U is at most three times V (output
  // channels at most three times the padded tiles), one a thread (tiles [b * tiles / nb, (b + 1)
  // * tiles / nb): 49 as 24 + 25): each task then transforms
  // the V it multiplies, and reads all of U, where the split by output channels below reads
  // half of U and the whole V, half of it written by the other thread. A line from the other
  // core's cache costs several from L3 (75-120 ns a round trip on this VM, 350-1200 when its
  // vCPUs sit apart); U streams from L3 or memory. ResNet-50 two threads, per node: 28x28 (128
  // channels, U 2.4 MB, V 1.1 MB) 0.36 -> 0.29-0.32 ms each; 14x14 (256, U 4.2 MB, V 1.0 MB)
  // 0.39 -> 0.40 and 7x7 (512: U 17 MB) 0.43 -> 0.67, so those keep the channel split.
  // Every element's arithmetic is the same either way: the same bits.
  const int64_t np = (p.tiles + mr - 1) / mr;
  const bool by_tiles = threads > 1 && p.blocks < 2 * threads && np >= threads && p.cout <= 3 * np * mr;
  const int64_t nb = by_tiles ? threads : p.blocks;
  const int64_t block = (by_tiles ? ((p.tiles + nb - 1) / nb + mr - 1) / mr : (np + nb - 1) / nb) * mr;  // the most tiles a block holds
  auto block_t0 = [&](int64_t b) { return by_tiles ? b * p.tiles / nb : std::min(p.tiles, b * np / nb * mr); };
  auto block_rows = [&](int64_t b) { return block_t0(b + 1) - block_t0(b); };
  // The tiles of each of a block's ceil(rows / mr) panels: mr, unless that leaves a last panel
  // of under 4 tiles, whose products are chains of dependent FMAs (under 8 accumulators for 2
  // pipes of 4 cycles' latency: one tile is a third of a full panel's time for a twelfth of
  // its work); then equal heights, 49 as 10 + 10 + 10 + 10 + 9, 25 as 9 + 9 + 7. Not for a last
  // panel of 4 or more (ResNet-50's 7x7 maps, 16 tiles: 8 + 8 was 7 % slower than 12 + 4, their
  // U streaming from memory). ResNet-50 per node, alternated: one thread 14x14 F(2x2) 0.515 ->
  // 0.505 ms; two threads 28x28 F(4x4) 0.224 -> 0.212, 14x14 0.280 -> 0.274. A row's FMAs are
  // the same in any panel: the same bits.
  auto block_panel_rows = [&](int64_t b) {
    const int64_t rows = block_rows(b), panels = (rows + mr - 1) / mr, last = rows - (panels - 1) * mr;
    return panels > 0 && last < 4 ? (rows + panels - 1) / panels : int64_t(mr);
  };
  // V of a block: its points one after another, each in sgemm's packed A layout for the
  // block's rows (K blocks of kc, mr-row panels).
  const int64_t block_floats = block * p.c;  // one point of one block
  const auto input = p.kernels->input[p.m == 4];
  const auto output = p.kernels->output[p.m == 4];
  // Input transform of panel pb of block b, channels [c0, c1), into that block's V at vb.
  auto transform_panel = [&](const float* xi, int64_t b, int64_t pb, int64_t c0, int64_t c1, float* vb) {
    const int64_t rows_b = block_rows(b), mt = block_panel_rows(b);
    const int64_t t0 = block_t0(b) + pb * mt;
    const int64_t mpad = (rows_b + mr - 1) / mr * mr;
    if (pb * mr >= mpad) return;  // a panel past the block's end
    const int lanes = int(std::clamp<int64_t>(rows_b - pb * mt, 0, mt));
    int64_t y0[16], x0[16];  // each lane's patch origin
    for (int l = 0; l < lanes; ++l) {
      y0[l] = ((t0 + l) / p.tw) * p.m - p.pt;
      x0[l] = ((t0 + l) % p.tw) * p.m - p.pl;
    }
    for (int64_t ci = c0; ci < c1;) {  // channels of one K block at a time (mr floats apart there)
      const int64_t pc = ci / kc_max * kc_max, kc = std::min(kc_max, p.c - pc), ce = std::min(c1, pc + kc);
      float* d = vb + pc * mpad + pb * mr * kc + (ci - pc) * mr;
      input(xi + ci * p.h * p.w, p.h, p.w, ce - ci, y0, x0, lanes, mr, d, block_floats);
      ci = ce;
    }
  };
  // M[xi] = V[xi] U[xi] for block b and output-channel chunk q, then the output transform.
  auto multiply_and_output = [&](int64_t b, int64_t q, const float* vb, float* oi, const float* ri) {
    const int64_t rows_b = block_rows(b), t0 = block_t0(b);
    const int64_t n = std::min(p.chunk, p.cout - q * p.chunk);
    thread_local std::vector<float> tl_m;
    const size_t m_floats = size_t(points * block * p.chunk);
    if (tl_m.size() < m_floats) tl_m.resize(m_floats);
    float* mbuf = tl_m.data();
    const int64_t xi_stride = block * p.chunk;
    for (int xi = 0; xi < points; ++xi) {
      SgemmProblem pr;
      pr.m = rows_b;
      pr.n = n;
      pr.k = p.c;
      pr.a_packed = vb + xi * block_floats;
      pr.a_panel_rows = block_panel_rows(b);
      pr.b_packed = p.u->data() + (q * points + xi) * p.u_stride;
      pr.c = mbuf + xi * xi_stride;
      pr.ldc = p.chunk;
      sgemm(pr, nullptr, K);
    }
    const float* bq = bias ? bias + q * p.chunk : nullptr;
    float* oq = oi + q * p.chunk * plane;
    const float* rq = ri ? ri + q * p.chunk * plane : nullptr;
    for (int64_t r = 0; r < rows_b; ++r) {
      const int64_t t = t0 + r, ty = t / p.tw, tx = t % p.tw;
      const int rows = int(std::min<int64_t>(p.m, p.oh - ty * p.m));
      const int cols = int(std::min<int64_t>(p.m, p.ow - tx * p.m));
      const int64_t at = ty * p.m * p.ow + tx * p.m;
      output(mbuf + r * p.chunk, xi_stride, n, bq, rq ? rq + at : nullptr, epi.act, epi.alpha, oq + at, plane, p.ow,
             rows, cols);
    }
  };
  const int64_t panels_per_block = block / mr;
  for (int64_t img = 0; img < images; ++img) {
    const float* xi = x + img * p.c * p.h * p.w;
    float* oi = out + img * p.cout * plane;
    const float* ri = epi.residual ? epi.residual + img * p.cout * plane : nullptr;
    if (nb >= 2 * threads || by_tiles) {
      // Many blocks (large maps): each task takes a block through all three steps, its V in a
      // buffer of its own that stays in cache (the V of a whole 80x80 map was 5.5 MB, written
      // to memory and read back).
      for_each_index(pool, nb, [&](int64_t b) {
        thread_local std::vector<float> tl_vb;
        if (tl_vb.size() < size_t(points * block_floats)) tl_vb.resize(size_t(points * block_floats));
        for (int64_t pb = 0; pb < panels_per_block; ++pb) transform_panel(xi, b, pb, 0, p.c, tl_vb.data());
        for (int64_t q = 0; q < p.chunks; ++q) multiply_and_output(b, q, tl_vb.data(), oi, ri);
      });
      continue;
    }
    // Few blocks: the input transform over (panel, channel group) tasks for the whole map first,
    // then the products over (block, chunk) tasks, so that every thread has work in both.
    thread_local std::vector<float> tl_v;
    const size_t v_floats = size_t(nb * points * block_floats);
    if (tl_v.size() < v_floats) tl_v.resize(v_floats);
    float* vbuf = tl_v.data();
    const int64_t cgroups = std::clamp<int64_t>(p.c / 32, 1, 8);
    for_each_index(pool, nb * panels_per_block * cgroups, [&](int64_t task) {
      const int64_t pan = task / cgroups, cg = task % cgroups;
      const int64_t b = pan / panels_per_block;
      transform_panel(xi, b, pan % panels_per_block, cg * p.c / cgroups, (cg + 1) * p.c / cgroups,
                      vbuf + b * points * block_floats);
    });
    for_each_index(pool, nb * p.chunks, [&](int64_t task) {
      const int64_t b = task / p.chunks;
      multiply_and_output(b, task % p.chunks, vbuf + b * points * block_floats, oi, ri);
    });
  }
}

}  // namespace rlx::cpu
