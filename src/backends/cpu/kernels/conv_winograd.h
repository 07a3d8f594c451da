// Winograd convolution F(m x m, 3 x 3) for f32 3x3 stride-1 convolutions (one group, constant
// weights): each m x m block of outputs ("tile") is computed from an a x a input patch
// (a = m + 2) as Y = A^T [ sum over ci of (G g G^T) .* (B^T d B) ] A, which turns the 9*m*m
// multiplies per channel pair of the direct product into a*a: 16 instead of 36 for m = 2,
// 36 instead of 144 for m = 4. The channel sums are a*a GEMMs (one per point of the a x a
// transform), run by sgemm's microkernel on operands laid out in its packed formats:
//   V[xi] (tiles x Cin) = B^T d B, written by the input transform straight into the packed A
//                         layout (mr tiles per panel, the tiles as vector lanes);
//   U[xi] (Cin x Cout)  = G g G^T, computed once in double from the constant weights and
//                         packed as B (panels of nr output channels), per chunk of channels;
//   M[xi] (tiles x Cout) = V[xi] U[xi], then the output transform (output channels as lanes)
//                         adds the bias and writes the m x m outputs of each tile.
// The transforms' matrices are Lavin & Gray's (2015). Every output element is computed by the
// same sequence of operations whatever the thread count or task split: results are
// bit-identical for any number of threads. They differ from the im2col GEMM's by rounding
// (bounded in tests/cpu/conv_winograd_test.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/huge_pages.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/gemm.h"
#include "rlx/attrs.h"

namespace rlx::cpu {

class ThreadPool;

// The transform matrices: B^T (a x a), G (a x 3), A^T (m x a), for m = 2 and m = 4.
template <int M>
struct WinogradMatrices;
template <>
struct WinogradMatrices<2> {
  static constexpr int A = 4;
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
template <>
struct WinogradMatrices<4> {
  static constexpr int A = 6;
  static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  static constexpr float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// Per-ISA transform kernels (index 0: m = 2, index 1: m = 4).
struct WinogradKernels {
  // Input transform of one panel of tiles (the lanes, lanes <= mr <= the vector width) for nch
  // channel planes x [h, w] one after another: lane l's a x a patch has its top-left element
  // at row y0[l], column x0[l] (either may lie in the padding; elements outside the plane
  // count as zero and are not read). Point xi of channel ch goes to dst[ch * mr + xi *
  // xi_stride + l] for l < mr (zero past `lanes`).
  void (*input[2])(const float* x, int64_t h, int64_t w, int64_t nch, const int64_t* y0, const int64_t* x0,
                   int lanes, int mr, float* dst, int64_t xi_stride) = {};
  // Output transform of one tile for n output channels: point xi of channel j at
  // src[xi * xi_stride + j]. Output (i, j) of the tile, for i < rows and j < cols, of
  // channel c goes to out[c * plane + i * ow + j]: act(value + bias[c] + res[c * plane +
  // i * ow + j]), without the bias or the residual where they are null.
  void (*output[2])(const float* src, int64_t xi_stride, int64_t n, const float* bias, const float* res,
                    Activation act, float alpha, float* out, int64_t plane, int64_t ow, int rows, int cols) = {};
};

// The ISA's transforms, or nullptr where there are none (the scalar level: the GEMM path runs).
const WinogradKernels* winograd_kernels(Isa isa);
const WinogradKernels* winograd_kernels_avx2();
const WinogradKernels* winograd_kernels_avx512();

// A 3x3 stride-1 conv's Winograd plan and its transformed weights, made at build time from the
// constant weights (shared by clones of the executable).
struct WinogradConv {
  int m = 2;                             // output tile size (2 or 4)
  int64_t c = 0, h = 0, w = 0;           // input channels and plane
  int64_t cout = 0, oh = 0, ow = 0;      // output channels and plane
  int64_t pt = 0, pl = 0;                // leading pads
  int64_t th = 0, tw = 0, tiles = 0;     // tiles per column, per row, in all
  int64_t blocks = 0;                    // tile blocks per image: runs of whole mr-tile panels, about equal
  int64_t chunk = 0, chunks = 0;         // output channels per GEMM task (a multiple of nr)
  const IsaKernels* gemm = nullptr;
  const WinogradKernels* kernels = nullptr;
  // U: for point xi and channel chunk q, the chunk's Cin x chunk block packed as sgemm's B at
  // u + (q * a*a + xi) * u_stride: a chunk's points one after another, so that the task that
  // multiplies a chunk reads its weights as one sequential stream.
  std::shared_ptr<const PackedFloats> u;
  int64_t u_stride = 0;
};

// The plan for a conv with these sizes, or false when Winograd does not apply or would not
// pay (sizes, the ISA, RLX_CPU_WINOGRAD=0). pads: [top, left, bottom, right].
bool plan_winograd(int64_t c, int64_t h, int64_t w, int64_t cout, int64_t oh, int64_t ow, int64_t pt, int64_t pl,
                   Isa isa, WinogradConv& plan);

// Fills plan.u from the weights w [cout, c, 3, 3] (each point computed in double, rounded once).
void transform_winograd_weights(WinogradConv& plan, const float* w);

// A fused conv's epilogue: out = act(conv + bias + residual) (residual [n, cout, oh, ow] or null).
struct WinogradEpilogue {
  const float* residual = nullptr;
  Activation act = Activation::None;
  float alpha = 0;
};

// out[n, cout, oh, ow] = conv(x, w) + bias (then the epilogue) for `images` images with the
// weights plan.u was made from (bias [cout] or nullptr).
void run_winograd(const WinogradConv& plan, ThreadPool* pool, const float* x, const float* bias,
                  const WinogradEpilogue& epi, float* out, int64_t images);

}  // namespace rlx::cpu
