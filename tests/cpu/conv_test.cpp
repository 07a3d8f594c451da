// conv2d / max_pool2d / avg_pool2d kernels through the registry, against direct double
// loops: strides, asymmetric pads, dilation, groups, depthwise (with multiplier),
// pointwise, bias, every float dtype, ceil mode, count_include_pad, 1 vs 2 threads
// bit-identical, RLX_ISA=scalar vs native.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gemm_test_util.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct ConvCase {
  int64_t n, c, h, w, cout, kh, kw;
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0}, dil{1, 1};
  int64_t group = 1;
  bool bias = true;
  DType t = DType::F32;
};

std::vector<double> ref_conv(const ConvCase& k, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>* b, int64_t oh, int64_t ow, std::vector<double>& scale) {
  const int64_t cg = k.c / k.group, mg = k.cout / k.group;
  std::vector<double> out(size_t(k.n * k.cout * oh * ow));
  scale.assign(out.size(), 0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t co = 0; co < k.cout; ++co)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double s = b ? (*b)[size_t(co)] : 0.0, abs = std::fabs(s);
          for (int64_t cl = 0; cl < cg; ++cl)
            for (int64_t ky = 0; ky < k.kh; ++ky)
              for (int64_t kx = 0; kx < k.kw; ++kx) {
                const int64_t iy = oy * k.strides[0] - k.pads[0] + ky * k.dil[0];
                const int64_t ix = ox * k.strides[1] - k.pads[1] + kx * k.dil[1];
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                const int64_t ci = (co / mg) * cg + cl;
                const double t = w[size_t(((co * cg + cl) * k.kh + ky) * k.kw + kx)] *
                                 x[size_t(((n * k.c + ci) * k.h + iy) * k.w + ix)];
                s += t;
                abs += std::fabs(t);
              }
          const size_t o = size_t(((n * k.cout + co) * oh + oy) * ow + ox);
          out[o] = s;
          scale[o] = abs;
        }
  return out;
}

std::vector<uint8_t> run_conv(const ConvCase& k, const std::vector<std::vector<uint8_t>>& in, int threads,
                              std::vector<int64_t>* out_dims = nullptr) {
  Graph g;
  auto x = g.input("x", Shape({k.n, k.c, k.h, k.w}, k.t));
  auto w = g.input("w", Shape({k.cout, k.c / k.group, k.kh, k.kw}, k.t));
  Value b;
  if (k.bias) b = g.input("b", Shape({k.cout}, k.t));
  auto y = g.conv2d(x, w, b, k.strides, k.pads, k.dil, k.group);
  if (out_dims) *out_dims = g.type(y).static_dims();
  return run_kernel(g, y.node, in, threads)[0];
}

void check_conv_isa(const ConvCase& k);

// Every check runs once per kernel table this machine has.
void check_conv(const ConvCase& k) {
  for (const char* isa : isa_levels_here()) {
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    check_conv_isa(k);
  }
}

void check_conv_isa(const ConvCase& k) {
  SCOPED_TRACE(::testing::Message() << "x=[" << k.n << "," << k.c << "," << k.h << "," << k.w << "] cout=" << k.cout
                                    << " k=" << k.kh << "x" << k.kw << " s=" << k.strides[0] << "," << k.strides[1]
                                    << " pads=" << k.pads[0] << "," << k.pads[1] << "," << k.pads[2] << "," << k.pads[3]
                                    << " dil=" << k.dil[0] << "," << k.dil[1] << " g=" << k.group
                                    << " bias=" << k.bias << " " << dtype_name(k.t));
  const auto fx = random_floats(size_t(k.n * k.c * k.h * k.w), 1);
  const auto fw = random_floats(size_t(k.cout * (k.c / k.group) * k.kh * k.kw), 2);
  const auto fb = random_floats(size_t(k.cout), 3);
  std::vector<std::vector<uint8_t>> in{float_bytes(fx, k.t), float_bytes(fw, k.t)};
  if (k.bias) in.push_back(float_bytes(fb, k.t));
  std::vector<int64_t> od;
  const auto out1 = run_conv(k, in, 1, &od);
  const auto rb = rounded(fb, k.t);
  std::vector<double> scale;
  const auto want = ref_conv(k, rounded(fx, k.t), rounded(fw, k.t), k.bias ? &rb : nullptr, od[2], od[3], scale);
  const double out_eps = k.t == DType::F16 ? 1e-3 : k.t == DType::BF16 ? 8e-3 : 0;
  const double acc_eps = k.t == DType::F64 ? 1e-13 : 4e-6;
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = scale[i] * acc_eps / (out_eps + acc_eps) + std::fabs(want[i]);
  EXPECT_TRUE(all_close(bytes_to_doubles(out1, k.t), want, 1e-6, out_eps + acc_eps, &scale));
  EXPECT_EQ(out1, run_conv(k, in, 2)) << "1 and 2 threads differ";
}

TEST(Conv2d, BasicShapes) {
  check_conv({1, 3, 9, 9, 8, 3, 3, {1, 1}, {1, 1, 1, 1}});
  check_conv({2, 5, 7, 11, 6, 3, 3, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false});
  check_conv({1, 1, 13, 7, 4, 5, 5, {1, 1}, {2, 2, 2, 2}});
}

// Strided 1x1 convs without padding run as pointwise convs of the subsampled image
// (conv.cpp's subsampled): stride 2 both ways, strides (2, 1) and (1, 3), groups, the transposed
// product (ResNet's 7x7 shortcut, scaled down), rows of 48+ columns (which the in-place path
// took before) and a subsample large enough to be split over the pool.
TEST(Conv2d, PointwiseAndStridedOneByOne) {
  check_conv({2, 16, 5, 6, 7, 1, 1});
  check_conv({1, 16, 9, 7, 33, 1, 1, {2, 2}});
  check_conv({1, 8, 5, 5, 4, 1, 1, {1, 1}, {1, 0, 0, 1}});
  check_conv({2, 12, 9, 10, 10, 1, 1, {2, 1}, {0, 0, 0, 0}, {1, 1}, 2});
  check_conv({1, 6, 7, 17, 9, 1, 1, {1, 3}, {0, 0, 0, 0}, {1, 1}, 1, false});
  check_conv({1, 64, 13, 13, 256, 1, 1, {2, 2}});                       // 49 positions: transposed
  check_conv({1, 5, 8, 101, 6, 1, 1, {2, 2}});                          // 51 columns
  check_conv({1, 64, 60, 80, 16, 1, 1, {2, 2}});                        // 64 x 1200 subsampled values
}

TEST(Conv2d, AsymmetricPadsStridesDilation) {
  check_conv({1, 4, 12, 10, 5, 5, 3, {2, 1}, {1, 2, 0, 1}, {2, 1}});
  check_conv({2, 3, 11, 13, 4, 3, 3, {3, 2}, {3, 0, 2, 4}, {2, 3}});
  check_conv({1, 2, 6, 6, 3, 2, 2, {1, 1}, {0, 0, 0, 0}, {4, 4}});
}

TEST(Conv2d, GroupsAndDepthwise) {
  check_conv({1, 6, 8, 8, 4, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2});
  check_conv({2, 12, 7, 9, 6, 3, 3, {2, 1}, {1, 1, 0, 0}, {1, 2}, 3, false});
  check_conv({1, 8, 10, 10, 8, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 8});   // depthwise
  // Depthwise with unit width stride over a zero-bordered copy of the plane (PP-OCRv4 det's
  // 5x5 layers; a height stride with dilation and asymmetric pads).
  check_conv({1, 12, 20, 20, 12, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, 12});
  check_conv({2, 6, 11, 9, 6, 3, 3, {2, 1}, {2, 1, 0, 2}, {2, 2}, 6, false});
  check_conv({2, 4, 9, 9, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4});    // depthwise, multiplier 2
  check_conv({1, 5, 8, 9, 5, 5, 5, {1, 2}, {2, 2, 2, 2}, {2, 1}, 5, false});
  check_conv({1, 1, 9, 9, 6, 3, 3, {1, 1}, {1, 1, 1, 1}});               // one input channel
  // One input channel with a long strided window (an STFT written as a conv, as Silero VAD
  // does): the GEMM path, its taps as K.
  check_conv({1, 1, 1, 200, 10, 1, 64, {1, 32}});
  check_conv({2, 1, 3, 50, 5, 2, 40, {1, 5}, {0, 3, 1, 2}});
  // Few output channels over many input channels at unit stride: the direct kernel.
  check_conv({1, 24, 21, 21, 1, 2, 2});
  check_conv({2, 7, 9, 11, 3, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 2}});
}

// Depthwise f32 at width stride 1 or 2 (RowKernels::dw_rows, straight from the input rows, up to
// four output rows a call): rows of one to several vector chunks with masked loads at both edges
// and plain ones between, output heights not a multiple of four, every stride pair PP-OCRv4
// uses, dilation and a channel multiplier at width stride 2, no padding, a 7x7 window.
TEST(Conv2d, DepthwiseRows) {
  check_conv({1, 24, 12, 80, 24, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, 24});     // PP-OCRv4 rec's 5x5
  check_conv({1, 16, 33, 40, 16, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16});     // stride 2, odd height
  check_conv({1, 8, 13, 37, 8, 5, 5, {2, 1}, {2, 2, 2, 2}, {1, 1}, 8, false});  // height stride only
  check_conv({1, 8, 10, 70, 8, 3, 3, {1, 2}, {1, 1, 1, 1}, {1, 1}, 8});        // width stride only
  check_conv({1, 4, 9, 50, 8, 3, 3, {1, 2}, {1, 2, 0, 1}, {2, 3}, 4});         // multiplier 2, dilation
  check_conv({2, 6, 7, 130, 6, 7, 7, {1, 1}, {3, 3, 3, 3}, {1, 1}, 6});        // 7x7, clean chunks between
  check_conv({1, 4, 10, 40, 4, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, 4});        // no padding
  check_conv({1, 12, 10, 10, 12, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, 12});     // one masked vector a row
  check_conv({1, 6, 5, 3, 6, 3, 3, {1, 1}, {4, 4, 4, 4}, {1, 1}, 6});          // pads wider than the map
}

TEST(Conv2d, LargerChannelsCrossBlocks) {
  check_conv({1, 64, 14, 14, 64, 3, 3, {1, 1}, {1, 1, 1, 1}});   // k = 576 > kc
  check_conv({1, 24, 9, 9, 160, 3, 3, {1, 1}, {1, 1, 1, 1}});    // m = 160 > mc: shared packed B
  // Stride 2 over few columns (ResNet's 14x14 / 7x7 stride-2 3x3s, scaled down): on two threads
  // the whole im2col is packed once, its K blocks spread over the pool, then read by both.
  check_conv({1, 64, 14, 14, 64, 3, 3, {2, 2}, {1, 1, 1, 1}});
}

// At most four outputs per image: f32 takes sgemm's dot path over the transposed im2col
// rows (Silero VAD's shapes: a strided one-channel window, padded 1x3 rows, 1x1 outputs).
TEST(Conv2d, FewOutputsPerImage) {
  check_conv({1, 1, 1, 160, 12, 1, 64, {1, 48}});                        // 3 outputs, K 64
  check_conv({2, 9, 1, 3, 7, 1, 3, {1, 1}, {0, 1, 0, 1}});               // padded row of 3
  check_conv({1, 6, 2, 2, 5, 3, 3, {2, 2}, {1, 1, 1, 1}});               // one output
  check_conv({1, 8, 3, 3, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2});    // groups, 4 outputs
  check_conv({1, 16, 2, 2, 20, 1, 1});                                   // pointwise, 4 outputs
  check_conv({1, 4, 1, 5, 160, 1, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false});  // m > mc
}

// At most mc (144) positions and at least twice as many output channels: the product runs
// transposed (positions as the GEMM's rows, channels as its columns; conv.cpp's
// conv_gemm_transposed): 3x3 padded across K blocks, pointwise, strided over two images,
// dilated without bias.
TEST(Conv2d, FewPositionsManyChannels) {
  check_conv({1, 40, 7, 7, 128, 3, 3, {1, 1}, {1, 1, 1, 1}});            // 49 positions, K 360
  check_conv({1, 64, 5, 5, 80, 1, 1});                                   // pointwise, 25 positions
  check_conv({2, 24, 9, 9, 64, 3, 3, {2, 2}, {1, 1, 1, 1}});             // 25 positions per image
  check_conv({1, 16, 8, 8, 96, 3, 3, {1, 1}, {2, 1, 0, 2}, {2, 1}, 1, false});
  check_conv({1, 32, 12, 12, 300, 1, 1});                                // 144 positions: mc
}

// Width stride 1 or 2 and output rows of 48+ columns: B read from the input rows in place
// (conv.cpp's conv_in_place; stride 2 through rows split in even / odd phases): short last
// tiles, vertical stride with dilation and asymmetric pads, groups without bias, K across
// blocks, two images.
TEST(Conv2d, InputRowsReadInPlace) {
  check_conv({1, 3, 20, 110, 16, 7, 7, {2, 2}, {3, 3, 3, 3}});                 // a 7x7 stem, 55 columns
  check_conv({2, 6, 9, 101, 13, 3, 3, {1, 2}, {0, 0, 1, 2}});                  // left pad 0, odd width
  check_conv({1, 4, 8, 100, 9, 3, 3, {2, 2}, {1, 2, 1, 2}, {1, 2}});           // dilation 2: one phase
  check_conv({1, 40, 6, 97, 20, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false}); // K 360, 49 columns
  check_conv({1, 8, 30, 56, 12, 3, 3, {1, 1}, {1, 1, 1, 1}});                  // tiles of 32 + 24
  check_conv({2, 5, 9, 64, 7, 3, 5, {2, 1}, {2, 1, 0, 3}, {1, 2}});            // 60 columns
  check_conv({1, 8, 6, 49, 10, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}, 2, false}); // groups of 4 -> 5
  check_conv({1, 40, 10, 50, 20, 3, 3, {1, 1}, {1, 1, 1, 1}});                 // K 360
}

// Stride 2 both ways without dilation: im2col packed from the image's four phase planes
// (conv.cpp's pack_phase_im2col; edge columns rewritten from the image): right against the
// reference, and the bytes of the packer that reads the image directly
// (RLX_CPU_CONV_PHASES=0) on every kernel table and thread count. ResNet's window, odd sizes
// with a 5x5 window and asymmetric pads over two images, K across blocks without padding, a
// 7x7 window (taps two columns left of the image) in two groups without bias.
TEST(Conv2d, StrideTwoFromPhasePlanes) {
  const std::vector<ConvCase> cases{
      {1, 8, 30, 34, 16, 3, 3, {2, 2}, {1, 1, 1, 1}},
      {2, 6, 31, 29, 10, 5, 5, {2, 2}, {2, 2, 1, 2}},
      {1, 40, 26, 26, 12, 3, 3, {2, 2}, {0, 0, 0, 0}},
      {1, 8, 34, 36, 8, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, 2, false},
  };
  for (const ConvCase& k : cases) {
    check_conv(k);
    const auto fx = random_floats(size_t(k.n * k.c * k.h * k.w), 21);
    const auto fw = random_floats(size_t(k.cout * (k.c / k.group) * k.kh * k.kw), 22);
    std::vector<std::vector<uint8_t>> in{float_bytes(fx, DType::F32), float_bytes(fw, DType::F32)};
    if (k.bias) in.push_back(float_bytes(random_floats(size_t(k.cout), 23), DType::F32));
    for (const char* isa : isa_levels_here()) {
      IsaOverride o(isa);
      for (int threads : {1, 2}) {
        const auto phases = run_conv(k, in, threads);
        test::EnvOverride off("RLX_CPU_CONV_PHASES", "0");
        EXPECT_EQ(phases, run_conv(k, in, threads)) << isa << " threads " << threads << " x=[" << k.n << "," << k.c
                                                    << "," << k.h << "," << k.w << "] k=" << k.kh << "x" << k.kw;
      }
    }
  }
}

TEST(Conv2d, OtherFloatTypes) {
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    check_conv({1, 6, 7, 7, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, t});
    check_conv({1, 4, 7, 7, 4, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4, true, t});
    check_conv({1, 8, 4, 5, 3, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false, t});
  }
}

TEST(Conv2d, ScalarIsaMatchesNative) {
  const ConvCase k{1, 16, 10, 10, 20, 3, 3, {1, 1}, {1, 1, 1, 1}};
  const auto fx = random_floats(size_t(16 * 100), 4), fw = random_floats(size_t(20 * 16 * 9), 5),
             fb = random_floats(20, 6);
  const std::vector<std::vector<uint8_t>> in{float_bytes(fx, DType::F32), float_bytes(fw, DType::F32),
                                             float_bytes(fb, DType::F32)};
  const auto native = bytes_to_doubles(run_conv(k, in, 2), DType::F32);
  IsaOverride isa("scalar");
  const auto scalar = bytes_to_doubles(run_conv(k, in, 2), DType::F32);
  EXPECT_TRUE(all_close(scalar, native, 1e-5, 1e-5));
}

// ---------------------------------------------------------------- pooling

struct PoolCase {
  int64_t n, c, h, w;
  PoolAttrs a;
  DType t = DType::F32;
};

std::vector<double> ref_pool(const PoolCase& p, bool is_max, const std::vector<double>& x, int64_t oh, int64_t ow) {
  const auto& a = p.a;
  std::vector<double> out(size_t(p.n * p.c * oh * ow));
  for (int64_t pl = 0; pl < p.n * p.c; ++pl)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t valid = 0, padded = 0;
        for (int64_t ky = 0; ky < a.kernel[0]; ++ky)
          for (int64_t kx = 0; kx < a.kernel[1]; ++kx) {
            const int64_t iy = oy * a.strides[0] - a.pads[0] + ky * a.dilations[0];
            const int64_t ix = ox * a.strides[1] - a.pads[1] + kx * a.dilations[1];
            const bool in_pad = iy >= -a.pads[0] && iy < p.h + a.pads[2] && ix >= -a.pads[1] && ix < p.w + a.pads[3];
            padded += in_pad;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
            const double v = x[size_t((pl * p.h + iy) * p.w + ix)];
            mx = std::max(mx, v);
            sum += v;
            ++valid;
          }
        const int64_t cnt = a.count_include_pad ? padded : valid;
        out[size_t((pl * oh + oy) * ow + ox)] = is_max ? mx : (cnt ? sum / double(cnt) : 0.0);
      }
  return out;
}

void check_pool(const PoolCase& p) {
  SCOPED_TRACE(::testing::Message() << "x=[" << p.n << "," << p.c << "," << p.h << "," << p.w << "] k="
                                    << p.a.kernel[0] << "x" << p.a.kernel[1] << " s=" << p.a.strides[0] << ","
                                    << p.a.strides[1] << " pads=" << p.a.pads[0] << "," << p.a.pads[1] << ","
                                    << p.a.pads[2] << "," << p.a.pads[3] << " dil=" << p.a.dilations[0] << ","
                                    << p.a.dilations[1] << " ceil=" << p.a.ceil_mode
                                    << " incl=" << p.a.count_include_pad << " " << dtype_name(p.t));
  const auto fx = random_floats(size_t(p.n * p.c * p.h * p.w), 7, -3, 3);
  for (OpKind kind : {OpKind::MaxPool2d, OpKind::AvgPool2d}) {
    Graph g;
    auto x = g.input("x", Shape({p.n, p.c, p.h, p.w}, p.t));
    auto y = g.add1(kind, {x}, p.a);
    const auto od = g.type(y).static_dims();
    const auto in = float_bytes(fx, p.t);
    const auto out = run_kernel(g, y.node, {in}, 1)[0];
    const auto want = ref_pool(p, kind == OpKind::MaxPool2d, rounded(fx, p.t), od[2], od[3]);
    const double eps = p.t == DType::F16 ? 1e-3 : p.t == DType::BF16 ? 8e-3 : 1e-6;
    EXPECT_TRUE(all_close(bytes_to_doubles(out, p.t), want, 1e-6, eps)) << op_name(kind);
    EXPECT_EQ(out, run_kernel(g, y.node, {in}, 2)[0]) << "1 and 2 threads differ";
  }
}

PoolAttrs pool_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads,
                     std::vector<int64_t> dil = {1, 1}, bool ceil = false, bool incl = false) {
  PoolAttrs a;
  a.kernel = std::move(k);
  a.strides = std::move(s);
  a.pads = std::move(pads);
  a.dilations = std::move(dil);
  a.ceil_mode = ceil;
  a.count_include_pad = incl;
  return a;
}

TEST(Pool2d, CommonWindows) {
  check_pool({2, 3, 12, 12, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})});
  check_pool({1, 4, 8, 8, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0})});
  check_pool({1, 2, 7, 9, pool_attrs({3, 2}, {1, 2}, {1, 0, 1, 1}, {1, 1}, false, true)});
  // Width stride 2 in f32 max pooling reads split even / odd columns: ResNet's window, odd and
  // even widths, a tap left of the image (pad 3), a 4-wide window.
  check_pool({1, 3, 16, 34, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})});
  check_pool({1, 2, 9, 37, pool_attrs({3, 5}, {1, 2}, {0, 3, 2, 1}, {1, 1}, true)});
  check_pool({1, 2, 8, 21, pool_attrs({2, 4}, {2, 2}, {1, 2, 1, 2})});
}

TEST(Pool2d, CeilModeAndCountIncludePad) {
  for (bool incl : {false, true}) {
    check_pool({1, 2, 7, 7, pool_attrs({3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, incl)});
    check_pool({1, 3, 10, 11, pool_attrs({3, 3}, {2, 3}, {1, 1, 1, 1}, {1, 1}, true, incl)});
    check_pool({2, 1, 6, 8, pool_attrs({2, 4}, {3, 3}, {1, 2, 0, 1}, {1, 1}, true, incl)});
  }
}

TEST(Pool2d, Dilation) {
  check_pool({1, 2, 11, 12, pool_attrs({3, 3}, {1, 2}, {2, 1, 2, 1}, {2, 3})});
  check_pool({1, 2, 9, 9, pool_attrs({2, 2}, {2, 2}, {1, 1, 1, 1}, {3, 2}, true, true)});
}

TEST(Pool2d, OtherTypes) {
  for (DType t : {DType::F16, DType::BF16, DType::F64})
    check_pool({1, 3, 9, 9, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false), t});
  // Integer max pool.
  Graph g;
  auto x = g.input("x", Shape({1, 1, 3, 4}, DType::I8));
  auto y = g.max_pool2d(x, {2, 2}, {2, 2});
  const std::vector<int8_t> in{-5, 3, -128, -2, 7, -1, -3, -9, 0, 0, 0, 0};
  const auto out = from_bytes<int8_t>(run_kernel(g, y.node, {to_bytes(in)})[0]);
  EXPECT_EQ(out, (std::vector<int8_t>{7, -2}));
}

// Half pools widen each plane, pool in f32 and round back with the ISA's vector conversions
// (exact one way, nearest even the other, like the scalar ones): the same bits on every
// kernel table, the scalar one included.
TEST(Pool2d, HalfTypesGiveTheSameBitsOnEveryIsa) {
  const PoolAttrs a = pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false);
  const auto fx = random_floats(size_t(2 * 3 * 37 * 41), 11, -3, 3);
  for (DType t : {DType::F16, DType::BF16})
    for (OpKind kind : {OpKind::MaxPool2d, OpKind::AvgPool2d}) {
      Graph g;
      auto y = g.add1(kind, {g.input("x", Shape({2, 3, 37, 41}, t))}, a);
      const auto in = float_bytes(fx, t);
      std::vector<uint8_t> scalar;
      {
        IsaOverride o("scalar");
        scalar = run_kernel(g, y.node, {in}, 2)[0];
      }
      for (const char* isa : isa_levels_here()) {
        IsaOverride o(isa);
        EXPECT_EQ(run_kernel(g, y.node, {in}, 2)[0], scalar) << isa << " " << dtype_name(t) << " " << op_name(kind);
      }
    }
}

TEST(Pool2d, MaxPropagatesNaN) {
  Graph g;
  auto x = g.input("x", Shape({1, 1, 2, 2}, DType::F32));
  auto y = g.max_pool2d(x, {2, 2}, {1, 1});
  const std::vector<float> in{1.0f, std::nanf(""), 3.0f, 2.0f};
  const auto out = from_bytes<float>(run_kernel(g, y.node, {to_bytes(in)})[0]);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::isnan(out[0]));
  // Width stride 2 (the split-column path): a NaN in an even and in an odd column, each
  // reaching exactly the windows that hold it, whatever comes after it in the window.
  Graph g2;
  auto x2 = g2.input("x", Shape({1, 1, 1, 12}, DType::F32));
  auto y2 = g2.max_pool2d(x2, {1, 3}, {1, 2}, {0, 1, 0, 1});
  std::vector<float> in2(12);
  for (size_t i = 0; i < in2.size(); ++i) in2[i] = float(i);
  in2[4] = std::nanf("");  // column 4: window 2 only (columns 3-5)
  in2[9] = std::nanf("");  // column 9: windows 4 (7-9) and 5 (9-11)
  const auto out2 = from_bytes<float>(run_kernel(g2, y2.node, {to_bytes(in2)})[0]);
  ASSERT_EQ(out2.size(), 6u);
  for (size_t i = 0; i < out2.size(); ++i)
    EXPECT_EQ(std::isnan(out2[i]), i == 2 || i == 4 || i == 5) << i << ": " << out2[i];
}

// Width stride 2 in f32 max pooling folds each input row over kx first and then the rows
// (conv.cpp's max_pool_plane_s2): the result must be bit for bit pool_plane's fold over (ky, kx)
// in order, i.e. the first maximal element (so -0 and +0 as they came) and, when the window
// holds NaNs, its last one (payload included). Values drawn from a few ties, signed zeros and
// NaNs of distinct payloads, on every kernel table, 1 and 2 threads.
TEST(Pool2d, StrideTwoMaxIsTheWindowFoldBitForBit) {
  auto nan_with = [](uint32_t payload) {
    const uint32_t bits = 0x7fc00000u | (payload & 0x3fffffu);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  auto bits_of = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  struct Case {
    int64_t h, w;
    PoolAttrs a;
  };
  const std::vector<Case> cases{
      {13, 22, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {11, 27, pool_attrs({3, 5}, {1, 2}, {2, 3, 1, 2}, {2, 1})},
      {9, 20, pool_attrs({2, 3}, {3, 2}, {0, 1, 1, 1}, {1, 2}, true)},
      // Taps two columns left of the image, and an output narrower than half the width.
      {12, 24, pool_attrs({3, 5}, {2, 2}, {1, 3, 1, 0})},
      {10, 22, pool_attrs({3, 3}, {2, 2}, {0, 0, 0, 0})},
      // ResNet's 3x3 / 2 window with one column of left padding (RowKernels::max3_s2): rows of
      // several vectors with and without a tail, an odd width whose last window loses a column,
      // and one exactly two vectors wide.
      {7, 70, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {6, 67, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {5, 32, pool_attrs({3, 3}, {2, 2}, {1, 1, 0, 0})},
      // The same row step over five rows at height stride 1, and over nine (more rows than the
      // fused output row takes: a row of horizontal maxima per input row, then max_taps).
      {14, 40, pool_attrs({5, 3}, {1, 2}, {2, 1, 2, 1})},
      {12, 41, pool_attrs({9, 3}, {2, 2}, {4, 1, 4, 1})},
  };
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (const Case& k : cases) {
    const int64_t planes = 3;
    std::vector<float> x(size_t(planes * k.h * k.w));
    for (float& v : x) {
      const uint32_t r = next() >> 24;
      v = r < 60 ? 0.0f : r < 120 ? -0.0f : r < 200 ? float(int(r % 3) - 1) : r < 240 ? 2.0f : nan_with(r);
    }
    Graph g;
    auto y = g.add1(OpKind::MaxPool2d, {g.input("x", Shape({1, planes, k.h, k.w}, DType::F32))}, k.a);
    const auto od = g.type(y).static_dims();
    const int64_t oh = od[2], ow = od[3];
    std::vector<uint32_t> want(size_t(planes * oh * ow));
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float acc = -std::numeric_limits<float>::infinity();
          for (int64_t ky = 0; ky < k.a.kernel[0]; ++ky)
            for (int64_t kx = 0; kx < k.a.kernel[1]; ++kx) {
              const int64_t iy = oy * k.a.strides[0] - k.a.pads[0] + ky * k.a.dilations[0];
              const int64_t ix = ox * k.a.strides[1] - k.a.pads[1] + kx * k.a.dilations[1];
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              const float v = x[size_t((pl * k.h + iy) * k.w + ix)];
              if (v > acc || v != v) acc = v;
            }
          want[size_t((pl * oh + oy) * ow + ox)] = bits_of(acc);
        }
    for (const char* isa : isa_levels_here()) {
      IsaOverride o(isa);
      for (int threads : {1, 2}) {
        const auto out = from_bytes<float>(run_kernel(g, y.node, {to_bytes(x)}, threads)[0]);
        ASSERT_EQ(out.size(), want.size());
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_EQ(bits_of(out[i]), want[i]) << isa << " threads " << threads << " output " << i << " window "
                                              << k.a.kernel[0] << "x" << k.a.kernel[1];
      }
    }
  }
}

}  // namespace
}  // namespace rlx::test

namespace rlx {
namespace {

// Constant weights of a GEMM conv with few output columns are packed once and reused
// (ConvCfg::packed): the results must be the bytes of the same conv with the weights as a
// param (packed on every call), on every run, in a clone and at any thread count.
TEST(ConvPrepack, ConstantWeightsGiveTheParamPathsBytes) {
  // 81 positions x 24 channels (weights packed as the GEMM's A) and 49 x 200 (the transposed
  // product: weights packed as its B).
  // and 48 x 48 (the input rows read in place). Winograd off: its bits differ by design
  // (tests/cpu/conv_winograd_test.cpp).
  test::EnvOverride gemm_path("RLX_CPU_WINOGRAD", "0");
  for (auto [M, H] : {std::pair<int64_t, int64_t>{24, 9}, {200, 7}, {16, 48}}) {
  SCOPED_TRACE(M);
  const int64_t C = 40, W = H;
  std::vector<float> wv(size_t(M * C * 9)), xv(size_t(C * H * W));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i * 7 % 13) - 6) / 8.0f;
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 5 % 11) - 5) / 4.0f;
  auto graph = [&](bool constant) {
    Graph g(constant ? "conv_const" : "conv_param");
    Value x = g.input("x", Shape({1, C, H, W}, DType::F32));
    Value w = constant ? g.constant_f32({M, C, 3, 3}, wv) : g.param("w", Shape({M, C, 3, 3}, DType::F32));
    g.set_outputs({g.conv2d(x, w, Value(), {1, 1}, {1, 1, 1, 1})}, {"y"});
    return g;
  };
  std::vector<std::vector<float>> want;
  {
    CompiledGraph ref = Session(Device::Cpu).compile(graph(false));
    ref.set_param("w", wv);
    want = ref.run({{"x", xv}});
  }
  for (int threads : {1, 2}) {
    CompileOptions o;
    o.threads = threads;
    CompiledGraph net = Session(Device::Cpu, o).compile(graph(true));
    EXPECT_EQ(net.run({{"x", xv}}), want) << threads << " threads, first run";
    EXPECT_EQ(net.run({{"x", xv}}), want) << threads << " threads, second run";
    CompiledGraph copy = net.clone();
    EXPECT_EQ(copy.run({{"x", xv}}), want) << threads << " threads, clone";
  }
  }
}

// Stride-2 convs with constant weights read their output positions from padded phase planes
// (conv_phases_direct: the product transposed, nothing packed per call): the bytes of the same
// conv with the weights as a param (the phase packer's GEMM), with bias, residual and ReLU or
// leaky ReLU in the epilogue, on every ISA, at 1 and 2 threads. Output widths 9 (one row tile),
// 15 (odd: tiles 7 + 8, or 5 + 5 + 5 for AVX2's six rows), 29 and 14 (one tile of AVX-512's
// largest, 14 rows); pads 1 and, for the 5x5, 2.
TEST(ConvPrepack, StrideTwoReadFromPhasePlanesGivesTheParamPathsBytes) {
  struct Case {
    int64_t m, c, h, k, pad;
    Activation act;
  };
  for (const Case& k : {Case{24, 40, 18, 3, 1, Activation::Relu}, Case{40, 24, 29, 3, 1, Activation::LeakyRelu},
                        Case{16, 20, 57, 3, 1, Activation::None}, Case{36, 12, 30, 5, 2, Activation::Relu},
                        Case{32, 16, 28, 3, 1, Activation::Relu}}) {
    SCOPED_TRACE(::testing::Message() << "m=" << k.m << " h=" << k.h << " k=" << k.k);
    const int64_t oh = (k.h + 2 * k.pad - k.k) / 2 + 1;
    std::vector<float> wv(size_t(k.m * k.c * k.k * k.k)), xv(size_t(k.c * k.h * k.h)), bv(size_t(k.m)),
        rv(size_t(k.m * oh * oh));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i * 7 % 13) - 6) / 8.0f;
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 5 % 11) - 5) / 4.0f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(int(i * 3 % 7) - 3) / 2.0f;
    for (size_t i = 0; i < rv.size(); ++i) rv[i] = float(int(i * 11 % 17) - 8) / 4.0f;
    FusedConvAttrs a;
    a.strides = {2, 2};
    a.pads = {k.pad, k.pad, k.pad, k.pad};
    a.activation = k.act;
    a.alpha = k.act == Activation::LeakyRelu ? 0.125 : 0.0;
    auto graph = [&](bool constant) {
      Graph g(constant ? "conv_const" : "conv_param");
      Value x = g.input("x", Shape({1, k.c, k.h, k.h}, DType::F32));
      Value r = g.input("r", Shape({1, k.m, oh, oh}, DType::F32));
      Value w = constant ? g.constant_f32({k.m, k.c, k.k, k.k}, wv) : g.param("w", Shape({k.m, k.c, k.k, k.k}, DType::F32));
      Value b = constant ? g.constant_f32({k.m}, bv) : g.param("b", Shape({k.m}, DType::F32));
      g.set_outputs({g.fused_conv2d(x, w, b, r, a)}, {"y"});
      return g;
    };
    std::vector<std::vector<float>> want;
    {
      CompiledGraph ref = Session(Device::Cpu).compile(graph(false));
      ref.set_param("w", wv);
      ref.set_param("b", bv);
      want = ref.run({{"x", xv}, {"r", rv}});
    }
    for (const char* isa : test::isa_levels_here()) {
      test::IsaOverride o(isa);
      for (int threads : {1, 2}) {
        CompileOptions opts;
        opts.threads = threads;
        CompiledGraph net = Session(Device::Cpu, opts).compile(graph(true));
        EXPECT_EQ(net.run({{"x", xv}, {"r", rv}}), want) << isa << ", " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace rlx
