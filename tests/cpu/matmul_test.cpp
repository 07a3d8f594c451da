// matmul / fused_matmul kernels through the registry: numpy semantics (1-D operands,
// batch broadcasting), every dtype, bias broadcasting and activations, active extent,
// 1 vs 2 threads bit-identical, RLX_ISA=scalar vs native, all against double loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct Ref {
  std::vector<int64_t> dims;
  std::vector<double> val, scale;  // scale: sum of |products| (f32 rounding grows with it)
};

// numpy matmul in double.
Ref ref_matmul(std::vector<int64_t> ad, const std::vector<double>& a, std::vector<int64_t> bd,
               const std::vector<double>& b) {
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  const size_t r = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), r - ab.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  std::vector<int64_t> ob(r);
  int64_t batches = 1;
  for (size_t i = 0; i < r; ++i) batches *= (ob[i] = std::max(ab[i], bb[i]));
  Ref out;
  out.dims = ob;
  if (!a1) out.dims.push_back(m);
  if (!b1) out.dims.push_back(n);
  out.val.assign(size_t(batches * m * n), 0);
  out.scale.assign(out.val.size(), 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rem = bi, ao = 0, bo = 0, as = 1, bs = 1;
    for (size_t d = r; d-- > 0;) {
      const int64_t idx = rem % ob[d];
      rem /= ob[d];
      ao += (ab[d] == 1 ? 0 : idx) * as;
      bo += (bb[d] == 1 ? 0 : idx) * bs;
      as *= ab[d];
      bs *= bb[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, abs = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const double t = a[size_t((ao * m + i) * k + kk)] * b[size_t((bo * k + kk) * n + j)];
          s += t;
          abs += std::fabs(t);
        }
        out.val[size_t((bi * m + i) * n + j)] = s;
        out.scale[size_t((bi * m + i) * n + j)] = abs;
      }
  }
  return out;
}

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

struct Run {
  std::vector<uint8_t> out;
  std::vector<int64_t> dims;
};

Run run_matmul(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd, DType t, const std::vector<uint8_t>& a,
               const std::vector<uint8_t>& b, int threads = 1) {
  Graph g;
  auto va = g.input("a", Shape(ad, t));
  auto vb = g.input("b", Shape(bd, t));
  auto y = g.matmul(va, vb);
  Run r;
  r.out = run_kernel(g, y.node, {a, b}, threads)[0];
  r.dims = g.type(y).static_dims();
  return r;
}

void check_float_matmul_isa(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd, DType t);

// Every check runs once per kernel table this machine has.
void check_float_matmul(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd, DType t) {
  for (const char* isa : isa_levels_here()) {
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    check_float_matmul_isa(ad, bd, t);
  }
}

void check_float_matmul_isa(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd, DType t) {
  SCOPED_TRACE(::testing::Message() << "a=" << Shape(ad, t).str() << " b=" << Shape(bd, t).str());
  const auto fa = random_floats(size_t(numel(ad)), 1), fb = random_floats(size_t(numel(bd)), 2);
  const Ref ref = ref_matmul(ad, rounded(fa, t), bd, rounded(fb, t));
  const Run r1 = run_matmul(ad, bd, t, float_bytes(fa, t), float_bytes(fb, t), 1);
  EXPECT_EQ(r1.dims, ref.dims);
  const double out_eps = t == DType::F16 ? 1e-3 : t == DType::BF16 ? 8e-3 : 0;
  const double acc_eps = t == DType::F64 ? 1e-13 : 3e-6;
  std::vector<double> scale = ref.scale;
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = scale[i] * acc_eps / (out_eps + acc_eps) + std::fabs(ref.val[i]);
  EXPECT_TRUE(all_close(bytes_to_doubles(r1.out, t), ref.val, 1e-6, out_eps + acc_eps, &scale));
  const Run r2 = run_matmul(ad, bd, t, float_bytes(fa, t), float_bytes(fb, t), 2);
  EXPECT_EQ(r1.out, r2.out) << "1 and 2 threads differ";
}

TEST(Matmul, OddSizes2D) {
  for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {1, 7, 33}, {7, 33, 129}, {129, 7, 33}, {33, 129, 7}, {4, 1000, 17}, {200, 3, 90}, {130, 150, 300}})
    check_float_matmul({m, k}, {k, n}, DType::F32);
  check_float_matmul({3, 0}, {0, 5}, DType::F32);  // empty contraction: zeros
  check_float_matmul({3, 0}, {0, 5}, DType::F16);
  check_float_matmul({0, 4}, {4, 5}, DType::F32);
}

TEST(Matmul, OneDimensionalOperands) {
  check_float_matmul({33}, {33, 7}, DType::F32);
  check_float_matmul({7, 33}, {33}, DType::F32);
  check_float_matmul({129}, {129}, DType::F32);
  check_float_matmul({17}, {3, 17, 5}, DType::F32);
  check_float_matmul({2, 5, 17}, {17}, DType::F32);
}

TEST(Matmul, BatchBroadcasting) {
  check_float_matmul({2, 1, 5, 7}, {3, 7, 9}, DType::F32);
  check_float_matmul({6, 33}, {4, 33, 19}, DType::F32);
  check_float_matmul({4, 9, 33}, {33, 19}, DType::F32);  // folded into one GEMM
  check_float_matmul({3, 1, 70, 40}, {1, 2, 40, 50}, DType::F32);
  check_float_matmul({12, 64, 64}, {12, 64, 64}, DType::F32);
}

TEST(Matmul, HalfAndDoubleTypes) {
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    check_float_matmul({7, 33}, {33, 20}, t);
    check_float_matmul({2, 3, 130}, {130, 70}, t);
    check_float_matmul({5}, {2, 5, 9}, t);
  }
}

template <class T>
void check_int_matmul(DType t, int64_t lo, int64_t hi) {
  const std::vector<int64_t> ad{2, 9, 13}, bd{13, 6};
  std::vector<T> a(size_t(numel(ad))), b(size_t(numel(bd)));
  const auto ra = random_floats(a.size(), 3), rb = random_floats(b.size(), 4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(lo + int64_t((ra[i] + 1) * 0.5 * double(hi - lo)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(lo + int64_t((rb[i] + 1) * 0.5 * double(hi - lo)));
  const Run r = run_matmul(ad, bd, t, to_bytes(a), to_bytes(b));
  const std::vector<T> got = from_bytes<T>(r.out);
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t i = 0; i < 9; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        T s = 0;  // wrapping arithmetic in T, like numpy
        for (int64_t k = 0; k < 13; ++k)
          s = T(uint64_t(s) + uint64_t(a[size_t((bi * 9 + i) * 13 + k)]) * uint64_t(b[size_t(k * 6 + j)]));
        ASSERT_EQ(got[size_t((bi * 9 + i) * 6 + j)], s) << dtype_name(t) << " at " << bi << "," << i << "," << j;
      }
}

TEST(Matmul, IntegerTypesWrapLikeNumpy) {
  check_int_matmul<int8_t>(DType::I8, -128, 127);
  check_int_matmul<uint8_t>(DType::U8, 0, 255);
  check_int_matmul<int16_t>(DType::I16, -30000, 30000);
  check_int_matmul<int32_t>(DType::I32, -100000, 100000);
  check_int_matmul<uint32_t>(DType::U32, 0, 4000000000);
  check_int_matmul<int64_t>(DType::I64, -(int64_t(1) << 40), int64_t(1) << 40);
}

double act_ref(double x, Activation a, double alpha) {
  switch (a) {
    case Activation::None: return x;
    case Activation::Relu: return x < 0 ? 0 : x;
    case Activation::LeakyRelu: return x < 0 ? alpha * x : x;
    case Activation::Sigmoid: return 1 / (1 + std::exp(-x));
    case Activation::Silu: return x / (1 + std::exp(-x));
    case Activation::Tanh: return std::tanh(x);
    case Activation::Gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::GeluTanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return x;
}

void check_fused_isa(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd,
                     const std::vector<int64_t>* bias_dims, Activation act, DType t, int threads);

void check_fused(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd, const std::vector<int64_t>* bias_dims,
                 Activation act, DType t, int threads = 1) {
  for (const char* isa : isa_levels_here()) {
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    check_fused_isa(ad, bd, bias_dims, act, t, threads);
  }
}

void check_fused_isa(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd,
                     const std::vector<int64_t>* bias_dims, Activation act, DType t, int threads) {
  SCOPED_TRACE(::testing::Message() << "a=" << Shape(ad, t).str() << " b=" << Shape(bd, t).str() << " act="
                                    << enum_name(act) << " bias=" << (bias_dims ? Shape(*bias_dims, t).str() : "none"));
  const double alpha = act == Activation::LeakyRelu ? 0.1 : 0.0;
  Graph g;
  auto va = g.input("a", Shape(ad, t));
  auto vb = g.input("b", Shape(bd, t));
  Value vbias;
  if (bias_dims) vbias = g.input("bias", Shape(*bias_dims, t));
  auto y = g.fused_matmul(va, vb, vbias, act, alpha);
  const auto fa = random_floats(size_t(numel(ad)), 5, -2, 2), fb = random_floats(size_t(numel(bd)), 6);
  std::vector<std::vector<uint8_t>> inputs{float_bytes(fa, t), float_bytes(fb, t)};
  Ref ref = ref_matmul(ad, rounded(fa, t), bd, rounded(fb, t));
  if (bias_dims) {
    const auto fbias = random_floats(size_t(numel(*bias_dims)), 7);
    inputs.push_back(float_bytes(fbias, t));
    const auto rb = rounded(fbias, t);
    // Broadcast the bias (right-aligned) over the output.
    std::vector<int64_t> bdims = *bias_dims;
    bdims.insert(bdims.begin(), ref.dims.size() - bdims.size(), 1);
    for (int64_t o = 0; o < int64_t(ref.val.size()); ++o) {
      int64_t rem = o, off = 0, st = 1;
      for (size_t d = ref.dims.size(); d-- > 0;) {
        const int64_t idx = rem % ref.dims[d];
        rem /= ref.dims[d];
        off += (bdims[d] == 1 ? 0 : idx) * st;
        st *= bdims[d];
      }
      ref.val[size_t(o)] += rb[size_t(off)];
    }
  }
  std::vector<double> want(ref.val.size()), scale(ref.val.size());
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = act_ref(ref.val[i], act, alpha);
    scale[i] = ref.scale[i] + std::fabs(want[i]) + 1;
  }
  const auto out = run_kernel(g, y.node, inputs, threads)[0];
  const double eps = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1e-2 : 4e-6;
  EXPECT_TRUE(all_close(bytes_to_doubles(out, t), want, 2e-6, eps, &scale));
  if (threads == 1) {
    EXPECT_EQ(out, run_kernel(g, y.node, inputs, 2)[0]) << "1 and 2 threads differ";
  }
}

TEST(FusedMatmul, ActivationsWithRowBias) {
  const std::vector<int64_t> bias{37};
  for (Activation act : {Activation::None, Activation::Relu, Activation::LeakyRelu, Activation::Sigmoid,
                         Activation::Silu, Activation::Tanh, Activation::Gelu, Activation::GeluTanh}) {
    check_fused({19, 45}, {45, 37}, &bias, act, DType::F32);
    check_fused({2, 45}, {45, 37}, &bias, act, DType::F32);  // small-M path epilogue
  }
}

TEST(FusedMatmul, BiasBroadcastShapes) {
  const std::vector<int64_t> full{3, 5, 7}, rows{5, 1}, scalar{}, batch_rows{3, 1, 7}, mn{5, 7};
  check_fused({3, 5, 11}, {11, 7}, &full, Activation::Relu, DType::F32);      // folded, per-batch bias
  check_fused({3, 5, 11}, {11, 7}, &rows, Activation::None, DType::F32);
  check_fused({3, 5, 11}, {3, 11, 7}, &batch_rows, Activation::Silu, DType::F32);
  check_fused({3, 5, 11}, {11, 7}, &scalar, Activation::Gelu, DType::F32);
  check_fused({3, 5, 11}, {11, 7}, &mn, Activation::Tanh, DType::F32);
  check_fused({150, 40}, {40, 3}, nullptr, Activation::Sigmoid, DType::F32);  // N small: transposed dot path
}

// An encoder's residual add after a projection (x W + r, then layer_norm) fuses into the
// product as its full-shape bias: the same bits as the add on its own (the epilogue adds r to
// the finished f32 sum, as the add kernel does), at 1 and 2 threads, with the weights constant.
TEST(FusedMatmul, ResidualAddendGivesTheAddsBits) {
  const int64_t b = 2, s = 37, k = 48, n = 40;
  const auto fx = random_floats(size_t(b * s * k), 21, -2, 2), fr = random_floats(size_t(b * s * n), 22, -2, 2);
  const auto fw = random_floats(size_t(k * n), 23);
  for (int threads : {1, 2}) {
    std::vector<float> want;
    for (bool fuse : {false, true}) {
      Graph g("residual");
      Value x = g.input("x", Shape({b, s, k}, DType::F32));
      Value r = g.input("r", Shape({b, s, n}, DType::F32));
      Value y = g.add(r, g.matmul(x, g.constant_f32({k, n}, fw)));
      g.set_outputs({g.layer_norm(y, Value(), Value())}, {"y"});
      CompileOptions o;
      o.threads = threads;
      o.fuse_matmul_epilogue = fuse;
      CompiledGraph net = Session(Device::Cpu, o).compile(std::move(g));
      EXPECT_EQ(net.report().fusion.find("(addend)") != std::string::npos, fuse) << net.report().fusion;
      const auto got = net.run(std::map<std::string, std::vector<float>>{{"x", fx}, {"r", fr}})[0];
      if (!fuse) want = got;
      else EXPECT_EQ(got, want) << threads << " threads";
    }
  }
}

// The erf GELU as PyTorch exports it, after a projection: fuse-gelu makes it one gelu, which
// fuse-matmul-epilogue takes as the product's activation; the result is within the fused
// kernel's bound (as check_fused_isa: 2e-6 relative, 4e-6 of S + |y| + 1) of the double
// reference.
TEST(FusedMatmul, ExportedGeluBecomesTheEpilogue) {
  const int64_t m = 37, k = 48, n = 40;
  const auto fx = random_floats(size_t(m * k), 31, -2, 2), fw = random_floats(size_t(k * n), 32);
  Graph g("gelu_chain");
  Value x = g.input("x", Shape({m, k}, DType::F32));
  Value h = g.matmul(x, g.constant_f32({k, n}, fw));
  Value e = g.erf(g.div(h, g.constant_f32({}, {1.4142135f})));
  g.set_outputs({g.mul(g.mul(h, g.add(e, g.constant_f32({}, {1.0f}))), g.constant_f32({}, {0.5f}))}, {"y"});
  CompiledGraph net = Session(Device::Cpu).compile(std::move(g));
  EXPECT_NE(net.report().fusion.find("= gelu of 5 ops"), std::string::npos) << net.report().fusion;
  EXPECT_NE(net.report().fusion.find("(activation)], activation gelu"), std::string::npos) << net.report().fusion;
  const auto got = net.run(std::map<std::string, std::vector<float>>{{"x", fx}})[0];
  Ref ref = ref_matmul({m, k}, rounded(fx, DType::F32), {k, n}, rounded(fw, DType::F32));
  std::vector<double> want(ref.val.size()), scale(ref.val.size());
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = act_ref(ref.val[i], Activation::Gelu, 0);
    scale[i] = ref.scale[i] + std::fabs(want[i]) + 1;
  }
  EXPECT_TRUE(all_close(std::vector<double>(got.begin(), got.end()), want, 2e-6, 4e-6, &scale));
}

TEST(FusedMatmul, OtherTypes) {
  const std::vector<int64_t> bias{21};
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    check_fused({9, 30}, {30, 21}, &bias, Activation::GeluTanh, t);
    check_fused({140, 30}, {30, 21}, &bias, Activation::Relu, t);
  }
  std::vector<int32_t> a{1, 2, 3, 4}, b{5, 6, 7, 8}, bias_i{100, -100};
  Graph g;
  auto va = g.input("a", Shape({2, 2}, DType::I32));
  auto vb = g.input("b", Shape({2, 2}, DType::I32));
  auto vc = g.input("c", Shape({2}, DType::I32));
  auto y = g.fused_matmul(va, vb, vc, Activation::None);
  const auto out = from_bytes<int32_t>(run_kernel(g, y.node, {to_bytes(a), to_bytes(b), to_bytes(bias_i)})[0]);
  EXPECT_EQ(out, (std::vector<int32_t>{119, -78, 143, -50}));
}

TEST(Matmul, ActiveExtentComputesOnlyLeadingRows) {
  struct C {
    std::vector<int64_t> ad, bd;
  };
  for (const C& c : {C{{10, 33}, {33, 20}}, C{{10, 3, 33}, {33, 20}}, C{{10, 3, 33}, {10, 33, 20}}}) {
    SCOPED_TRACE(Shape(c.ad, DType::F32).str());
    Graph g;
    auto va = g.input("a", Shape(c.ad, DType::F32));
    auto vb = g.input("b", Shape(c.bd, DType::F32));
    auto y = g.matmul(va, vb);
    const auto fa = random_floats(size_t(numel(c.ad)), 8), fb = random_floats(size_t(numel(c.bd)), 9);
    const auto full = run_kernel(g, y.node, {float_bytes(fa, DType::F32), float_bytes(fb, DType::F32)}, 2);
    const auto part = run_kernel(g, y.node, {float_bytes(fa, DType::F32), float_bytes(fb, DType::F32)}, 2, 4, 10);
    const size_t per_lead = full[0].size() / 10, active = 4 * per_lead;
    EXPECT_TRUE(std::equal(full[0].begin(), full[0].begin() + active, part[0].begin()));
    EXPECT_TRUE(std::all_of(part[0].begin() + active, part[0].end(), [](uint8_t x) { return x == 0; }))
        << "rows past the active extent must be left untouched";
  }
}

TEST(Matmul, ScalarIsaMatchesNative) {
  const std::vector<int64_t> ad{3, 37, 70}, bd{70, 45};
  const auto fa = random_floats(size_t(numel(ad)), 10), fb = random_floats(size_t(numel(bd)), 11);
  const auto a = float_bytes(fa, DType::F32), b = float_bytes(fb, DType::F32);
  const auto native = bytes_to_doubles(run_matmul(ad, bd, DType::F32, a, b).out, DType::F32);
  std::vector<double> scalar;
  {
    IsaOverride isa("scalar");
    scalar = bytes_to_doubles(run_matmul(ad, bd, DType::F32, a, b).out, DType::F32);
  }
  const Ref ref = ref_matmul(ad, rounded(fa, DType::F32), bd, rounded(fb, DType::F32));
  EXPECT_TRUE(all_close(scalar, native, 1e-6, 4e-6, &ref.scale));
  EXPECT_TRUE(all_close(scalar, ref.val, 1e-6, 4e-6, &ref.scale));
}

}  // namespace
}  // namespace rlx::test

#include "rlx/compiled_graph.h"

namespace rlx {
namespace {

// A constant f32 B is packed once at build (MatmulCfg::b_packed) and the constant released
// (KernelCall::absorbed): results must be the bytes of the same product with B as a param
// (packed on every call), on every run, in a clone, at any thread count; the constant's
// bytes must be freed when the matmul is their only reader, and kept when anything else
// reads them.
TEST(MatmulPrepack, ConstantWeightsGiveTheParamPathsBytesAndAreReleased) {
  struct Case {
    std::vector<int64_t> adims;
    int64_t k, n;
    bool fused;
  };
  // strips (M <= mc) over two K blocks with a padded last panel; the blocked path (M > mc);
  // a batch folded into M; the fused epilogue (bias + relu).
  for (const Case& c : {Case{{20, 300}, 300, 280, false}, Case{{150, 64}, 64, 96, false},
                        Case{{3, 20, 50}, 50, 64, false}, Case{{33, 70}, 70, 250, true}}) {
    SCOPED_TRACE(c.adims[0] * 1000 + c.k);
    int64_t arows = 1;
    for (int64_t d : c.adims) arows *= d;
    std::vector<float> av(static_cast<size_t>(arows)), bv(static_cast<size_t>(c.k * c.n)), biasv(static_cast<size_t>(c.n));
    for (size_t i = 0; i < av.size(); ++i) av[i] = float(int(i * 7 % 13) - 6) / 8.0f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(int(i * 5 % 11) - 5) / 4.0f;
    for (size_t i = 0; i < biasv.size(); ++i) biasv[i] = float(int(i % 5) - 2);
    // extra_reader: B is also a graph output (another reader of its bytes).
    auto graph = [&](bool constant, bool extra_reader, Blob::Weak* weak) {
      Graph g("prepack");
      Value a = g.input("a", Shape(c.adims, DType::F32));
      Value b = constant ? g.constant_f32({c.k, c.n}, bv) : g.param("b", Shape({c.k, c.n}, DType::F32));
      if (weak) *weak = g.node(b.node).attr<ConstantAttrs>().value.weak();
      Value y = c.fused ? g.fused_matmul(a, b, g.constant_f32({c.n}, biasv), Activation::Relu) : g.matmul(a, b);
      if (extra_reader) g.set_outputs({y, b}, {"y", "b"});
      else g.set_outputs({y}, {"y"});
      return g;
    };
    std::vector<std::vector<float>> want;
    {
      CompiledGraph ref = Session(Device::Cpu).compile(graph(false, false, nullptr));
      ref.set_param("b", bv);
      want = ref.run({{"a", av}});
    }
    for (int threads : {1, 2}) {
      CompileOptions o;
      o.threads = threads;
      Blob::Weak weak;
      CompiledGraph net = Session(Device::Cpu, o).compile(graph(true, false, &weak));
      EXPECT_TRUE(weak.lock().empty()) << "the packed constant's bytes are still held";
      EXPECT_EQ(net.run({{"a", av}}), want) << threads << " threads, first run";
      EXPECT_EQ(net.run({{"a", av}}), want) << threads << " threads, second run";
      CompiledGraph copy = net.clone();
      EXPECT_EQ(copy.run({{"a", av}}), want) << threads << " threads, clone";

      CompiledGraph kept = Session(Device::Cpu, o).compile(graph(true, true, &weak));
      EXPECT_FALSE(weak.lock().empty()) << "a constant with another reader was released";
      const std::vector<std::vector<float>> got = kept.run({{"a", av}});
      ASSERT_EQ(got.size(), 2u);
      EXPECT_EQ(got[0], want[0]);
      EXPECT_EQ(got[1], bv);
    }
  }
}

}  // namespace
}  // namespace rlx
