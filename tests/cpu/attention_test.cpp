// attention / rotary kernels through the registry, against a plain double softmax:
// causal with Sk > Sq, GQA, broadcast masks (including fully masked rows), explicit
// scale, Dv != D, several key/query blocks, every float dtype, 1 vs 2 threads
// bit-identical, RLX_ISA=scalar vs native.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct AttnCase {
  int64_t b, hq, hkv, sq, sk, d, dv;
  bool causal = false;
  double scale = 0;
  std::vector<int64_t> mask_dims;  // empty: no mask
  DType t = DType::F32;
  float masked_fraction = 0;       // share of mask entries set to -inf
  float ramp = 0;                  // adds ramp * key index to the mask (later blocks win)
  bool bshd = false;               // q, k, v and the output [B,S,H,D] (the node's bshd)
};

// [b, n1, n2, d] -> [b, n2, n1, d]: heads-first <-> heads-inner.
template <class T>
std::vector<T> swap_heads(const std::vector<T>& x, int64_t b, int64_t n1, int64_t n2, int64_t d) {
  std::vector<T> y(x.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t p = 0; p < n1; ++p)
      for (int64_t r = 0; r < n2; ++r)
        for (int64_t t = 0; t < d; ++t)
          y[size_t(((i * n2 + r) * n1 + p) * d + t)] = x[size_t(((i * n1 + p) * n2 + r) * d + t)];
  return y;
}

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

std::vector<double> ref_attention(const AttnCase& c, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<double>& mask) {
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(double(c.d));
  std::vector<int64_t> md = c.mask_dims;
  md.insert(md.begin(), 4 - md.size(), 1);
  std::vector<double> out(size_t(c.b * c.hq * c.sq * c.dv), 0.0);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t hk = h / (c.hq / c.hkv);
      for (int64_t i = 0; i < c.sq; ++i) {
        std::vector<double> s(size_t(c.sk), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.sk; ++j) {
          if (c.causal && j > i + (c.sk - c.sq)) continue;
          double dot = 0;
          for (int64_t t = 0; t < c.d; ++t)
            dot += q[size_t(((b * c.hq + h) * c.sq + i) * c.d + t)] * k[size_t(((b * c.hkv + hk) * c.sk + j) * c.d + t)];
          dot *= scale;
          if (!c.mask_dims.empty()) {
            const int64_t idx[4] = {b, h, i, j};
            int64_t off = 0;
            for (int d = 0; d < 4; ++d) off = off * md[size_t(d)] + (md[size_t(d)] == 1 ? 0 : idx[d]);
            dot += mask[size_t(off)];
          }
          s[size_t(j)] = dot;
          mx = std::max(mx, dot);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;  // no visible key: zeros
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < c.sk; ++j)
          for (int64_t t = 0; t < c.dv; ++t)
            out[size_t(((b * c.hq + h) * c.sq + i) * c.dv + t)] +=
                s[size_t(j)] / sum * v[size_t(((b * c.hkv + hk) * c.sk + j) * c.dv + t)];
      }
    }
  return out;
}

std::vector<uint8_t> run_attention(const AttnCase& c, const std::vector<std::vector<uint8_t>>& in, int threads) {
  Graph g;
  auto dims = [&](int64_t h, int64_t s, int64_t d) {
    return c.bshd ? std::vector<int64_t>{c.b, s, h, d} : std::vector<int64_t>{c.b, h, s, d};
  };
  auto q = g.input("q", Shape(dims(c.hq, c.sq, c.d), c.t));
  auto k = g.input("k", Shape(dims(c.hkv, c.sk, c.d), c.t));
  auto v = g.input("v", Shape(dims(c.hkv, c.sk, c.dv), c.t));
  std::vector<Value> ins{q, k, v};
  if (!c.mask_dims.empty()) ins.push_back(g.input("m", Shape(c.mask_dims, c.t)));
  AttentionAttrs a;
  a.causal = c.causal;
  a.scale = c.scale;
  a.bshd = c.bshd;
  auto y = g.add1(OpKind::Attention, ins, a);
  return run_kernel(g, y.node, in, threads)[0];
}

void check_attention_isa(const AttnCase& c);

// Every check runs once per kernel table this machine has.
void check_attention(const AttnCase& c) {
  for (const char* isa : isa_levels_here()) {
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    check_attention_isa(c);
  }
}

void check_attention_isa(const AttnCase& c) {
  SCOPED_TRACE(::testing::Message() << "B" << c.b << " Hq" << c.hq << " Hkv" << c.hkv << " Sq" << c.sq << " Sk" << c.sk
                                    << " D" << c.d << " Dv" << c.dv << " causal=" << c.causal << " scale=" << c.scale
                                    << " mask=" << c.mask_dims.size() << "d " << dtype_name(c.t));
  const auto fq = random_floats(size_t(c.b * c.hq * c.sq * c.d), 1, -2, 2);
  const auto fk = random_floats(size_t(c.b * c.hkv * c.sk * c.d), 2, -2, 2);
  const auto fv = random_floats(size_t(c.b * c.hkv * c.sk * c.dv), 3);
  std::vector<float> fm = random_floats(size_t(numel(c.mask_dims)), 4, -3, 1);
  const auto sel = random_floats(fm.size(), 5, 0, 1);
  for (size_t i = 0; i < fm.size(); ++i)
    if (sel[i] < c.masked_fraction) fm[i] = -std::numeric_limits<float>::infinity();
    else if (c.ramp != 0) fm[i] += c.ramp * float(int64_t(i) % c.mask_dims.back());
  // bshd: the same heads-first data laid out [B,S,H,D] going in, the output swapped back.
  auto layout = [&](const std::vector<float>& x, int64_t h, int64_t s, int64_t d) {
    return c.bshd ? swap_heads(x, c.b, h, s, d) : x;
  };
  std::vector<std::vector<uint8_t>> in{float_bytes(layout(fq, c.hq, c.sq, c.d), c.t),
                                       float_bytes(layout(fk, c.hkv, c.sk, c.d), c.t),
                                       float_bytes(layout(fv, c.hkv, c.sk, c.dv), c.t)};
  if (!c.mask_dims.empty()) in.push_back(float_bytes(fm, c.t));
  const auto want = ref_attention(c, rounded(fq, c.t), rounded(fk, c.t), rounded(fv, c.t), rounded(fm, c.t));
  const auto out = run_attention(c, in, 1);
  const double eps = c.t == DType::F16 ? 3e-3 : c.t == DType::BF16 ? 2e-2 : c.t == DType::F64 ? 1e-12 : 2e-5;
  std::vector<double> got = bytes_to_doubles(out, c.t);
  if (c.bshd) got = swap_heads(got, c.b, c.sq, c.hq, c.dv);
  EXPECT_TRUE(all_close(got, want, eps, eps));
  EXPECT_EQ(out, run_attention(c, in, 2)) << "1 and 2 threads differ";
}

TEST(Attention, Plain) {
  check_attention({1, 2, 2, 5, 5, 8, 8});
  check_attention({1, 2, 2, 9, 0, 8, 8});  // no keys: zeros
  check_attention({2, 3, 3, 9, 13, 33, 12, false, 0.3});
}

TEST(Attention, CausalAlignedToTheEnd) {
  check_attention({1, 2, 2, 37, 37, 16, 16, true});
  check_attention({1, 2, 2, 7, 300, 33, 20, true});   // Sk > Sq, two key blocks
  check_attention({2, 1, 1, 1, 100, 64, 64, true});   // decoding step
  check_attention({1, 1, 1, 130, 130, 8, 8, true});   // three query blocks
}

TEST(Attention, GroupedQueryHeads) {
  check_attention({1, 8, 2, 70, 70, 16, 16});
  check_attention({2, 6, 3, 4, 40, 24, 10, true});
  check_attention({1, 4, 1, 1, 513, 64, 64});
  check_attention({2, 8, 4, 50, 600, 32, 32, true});  // many K/V packing tasks across threads
  check_attention({1, 4, 2, 50, 600, 32, 80, true});  // causal cut inside a packed block, V wider than a panel
}

TEST(Attention, BroadcastMasks) {
  check_attention({2, 2, 2, 6, 9, 8, 8, false, 0, {6, 9}});
  check_attention({2, 3, 3, 5, 300, 8, 8, false, 0, {2, 1, 1, 300}, DType::F32, 0.3f});  // padding mask
  check_attention({1, 4, 2, 7, 7, 8, 8, true, 0, {1, 4, 7, 7}});
  check_attention({2, 2, 2, 3, 4, 8, 8, false, 0, {1}});
  // Scores grow with the key index, so every row's running max moves in each key block
  // and the partial output must be rescaled.
  check_attention({1, 2, 2, 9, 700, 8, 8, false, 0, {1, 700}, DType::F32, 0.0f, 0.02f});
}

// The heads-inner layout (bshd): every operand read and the output written through row
// strides of H * D; the heads-first cases' bound and thread-count identity.
TEST(Attention, HeadsInPlace) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    AttnCase c{2, 4, 2, 9, 20, 16, 8, true, 0, {}, t};
    c.bshd = true;
    check_attention(c);
    c = {2, 3, 3, 70, 300, 24, 40, false, 0.3, {2, 1, 1, 300}, t, 0.2f};  // padding mask, two key blocks
    c.bshd = true;
    check_attention(c);
  }
}

TEST(Attention, FullyMaskedRowsGiveZeros) {
  // Every key of some rows is -inf: those rows are zeros, the rest are normal.
  check_attention({1, 2, 2, 8, 5, 8, 8, false, 0, {1, 1, 8, 5}, DType::F32, 0.8f});
}

TEST(Attention, OtherFloatTypes) {
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    check_attention({1, 4, 2, 9, 20, 16, 8, true, 0, {}, t});
    check_attention({1, 2, 2, 3, 6, 8, 8, false, 0.5, {3, 6}, t, 0.2f});
  }
}

// The chain an exporter writes (keys split into heads and transposed in one step, scores
// divided by a constant, an additive padding mask, softmax, the second product), compiled with
// fuse-attention on and off: both within the kernel tests' f32 bound (2e-5, inputs in [-2, 2])
// of the double reference, and on, the chain is one attention node.
TEST(Attention, FusedFromTheExportedChain) {
  const AttnCase c{2, 3, 3, 7, 7, 8, 8, false, 1.0 / 3.0, {2, 1, 1, 7}};
  const auto fq = random_floats(size_t(c.b * c.hq * c.sq * c.d), 11, -2, 2);
  const auto fk = random_floats(size_t(c.b * c.hkv * c.sk * c.d), 12, -2, 2);  // [b, h, s, d]
  const auto fv = random_floats(size_t(c.b * c.hkv * c.sk * c.dv), 13);
  std::vector<float> fm = random_floats(size_t(c.b * c.sk), 14, -3, 1);
  fm[5] = fm[6] = fm[12] = -10000.0f;  // padding
  std::vector<float> keys(fk.size());  // [b, s, h, d], as the heads split leaves them
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hkv; ++h)
      for (int64_t j = 0; j < c.sk; ++j)
        for (int64_t t = 0; t < c.d; ++t)
          keys[size_t(((b * c.sk + j) * c.hkv + h) * c.d + t)] = fk[size_t(((b * c.hkv + h) * c.sk + j) * c.d + t)];
  const auto want = ref_attention(c, rounded(fq, DType::F32), rounded(fk, DType::F32), rounded(fv, DType::F32),
                                  rounded(fm, DType::F32));
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    Graph g("attention_chain");
    Value q = g.input("q", Shape({c.b, c.hq, c.sq, c.d}, DType::F32));
    Value k = g.input("keys", Shape({c.b, c.sk, c.hkv, c.d}, DType::F32));
    Value v = g.input("v", Shape({c.b, c.hkv, c.sk, c.dv}, DType::F32));
    Value m = g.input("m", Shape({c.b, 1, 1, c.sk}, DType::F32));
    Value s = g.div(g.matmul(q, g.transpose(k, {0, 2, 3, 1})), g.constant_f32({}, {3.0f}));
    g.set_outputs({g.matmul(g.softmax(g.add(s, m), -1), v)}, {"y"});
    CompileOptions o;
    o.threads = 1;
    o.fuse_attention = fuse;
    CompiledGraph net = Session(Device::Cpu, o).compile(std::move(g));
    EXPECT_EQ(net.report().fusion.find("= attention of [transpose") != std::string::npos, fuse) << net.report().fusion;
    const std::vector<float> got = net.run(std::map<std::string, std::vector<float>>{
        {"q", fq}, {"keys", keys}, {"v", fv}, {"m", fm}})[0];
    EXPECT_TRUE(all_close(std::vector<double>(got.begin(), got.end()), want, 2e-5, 2e-5));
  }
}

// The encoder's whole chain: q, k and v split into heads from [B,S,H,D] projections by
// transposes, the result merged back by one. Fused, the chain is one attention{bshd} over the
// projections (its four transposes absorbed) when the output's one reader is the merge, and
// the heads-first attention (q's and v's transposes kept) when it is not; unfused and fused
// alike within the f32 bound above of the double reference.
TEST(Attention, HeadsReadInPlaceFromTheExportedChain) {
  const AttnCase c{2, 3, 3, 7, 7, 8, 8, false, 1.0 / 3.0, {2, 1, 1, 7}};
  const auto fq = random_floats(size_t(c.b * c.hq * c.sq * c.d), 21, -2, 2);  // [b, h, s, d]
  const auto fk = random_floats(size_t(c.b * c.hkv * c.sk * c.d), 22, -2, 2);
  const auto fv = random_floats(size_t(c.b * c.hkv * c.sk * c.dv), 23);
  std::vector<float> fm = random_floats(size_t(c.b * c.sk), 24, -3, 1);
  fm[2] = fm[9] = -10000.0f;  // padding
  const auto want = ref_attention(c, rounded(fq, DType::F32), rounded(fk, DType::F32), rounded(fv, DType::F32),
                                  rounded(fm, DType::F32));
  const std::vector<int64_t> swap{0, 2, 1, 3};
  for (bool merged : {true, false})
    for (bool fuse : {false, true}) {
      SCOPED_TRACE(std::string(fuse ? "fused" : "unfused") + (merged ? ", heads merged" : ", heads-first output"));
      Graph g("encoder_attention");
      Value q = g.input("q", Shape({c.b, c.sq, c.hq, c.d}, DType::F32));
      Value k = g.input("k", Shape({c.b, c.sk, c.hkv, c.d}, DType::F32));
      Value v = g.input("v", Shape({c.b, c.sk, c.hkv, c.dv}, DType::F32));
      Value m = g.input("m", Shape({c.b, 1, 1, c.sk}, DType::F32));
      Value s = g.div(g.matmul(g.transpose(q, swap), g.transpose(k, {0, 2, 3, 1})), g.constant_f32({}, {3.0f}));
      Value y = g.matmul(g.softmax(g.add(s, m), -1), g.transpose(v, swap));
      g.set_outputs({merged ? g.transpose(y, swap) : y}, {"y"});
      CompileOptions o;
      o.threads = 1;
      o.fuse_attention = fuse;
      CompiledGraph net = Session(Device::Cpu, o).compile(std::move(g));
      const std::string& rep = net.report().fusion;
      EXPECT_EQ(rep.find("heads in place (bshd)") != std::string::npos, fuse && merged) << rep;
      EXPECT_EQ(rep.find("= attention of [") != std::string::npos, fuse) << rep;
      std::vector<float> got = net.run(std::map<std::string, std::vector<float>>{
          {"q", swap_heads(fq, c.b, c.hq, c.sq, c.d)},
          {"k", swap_heads(fk, c.b, c.hkv, c.sk, c.d)},
          {"v", swap_heads(fv, c.b, c.hkv, c.sk, c.dv)},
          {"m", fm}})[0];
      if (merged) got = swap_heads(got, c.b, c.sq, c.hq, c.dv);
      EXPECT_TRUE(all_close(std::vector<double>(got.begin(), got.end()), want, 2e-5, 2e-5));
    }
}

TEST(Attention, ScalarIsaMatchesNative) {
  const AttnCase c{1, 4, 2, 33, 300, 32, 32, true};
  const auto fq = random_floats(size_t(4 * 33 * 32), 6), fk = random_floats(size_t(2 * 300 * 32), 7),
             fv = random_floats(size_t(2 * 300 * 32), 8);
  const std::vector<std::vector<uint8_t>> in{float_bytes(fq, DType::F32), float_bytes(fk, DType::F32),
                                             float_bytes(fv, DType::F32)};
  const auto native = bytes_to_doubles(run_attention(c, in, 2), DType::F32);
  IsaOverride isa("scalar");
  const auto scalar = bytes_to_doubles(run_attention(c, in, 2), DType::F32);
  EXPECT_TRUE(all_close(scalar, native, 2e-5, 2e-5));
}

// ---------------------------------------------------------------- rotary

void check_rotary(int64_t b, int64_t h, int64_t s, int64_t d, int64_t half, bool interleaved, DType t) {
  SCOPED_TRACE(::testing::Message() << "x=[" << b << "," << h << "," << s << "," << d << "] R=" << 2 * half
                                    << " interleaved=" << interleaved << " " << dtype_name(t));
  Graph g;
  auto x = g.input("x", Shape({b, h, s, d}, t));
  auto c = g.input("cos", Shape({s, half}, t));
  auto sn = g.input("sin", Shape({s, half}, t));
  auto y = g.rotary(x, c, sn, interleaved);
  const auto fx = random_floats(size_t(b * h * s * d), 1), fc = random_floats(size_t(s * half), 2),
             fs = random_floats(size_t(s * half), 3);
  const auto rx = rounded(fx, t), rc = rounded(fc, t), rs = rounded(fs, t);
  std::vector<double> want = rx;
  for (int64_t r = 0; r < b * h * s; ++r) {
    const int64_t pos = r % s;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
      const double x0 = rx[size_t(r * d + i0)], x1 = rx[size_t(r * d + i1)];
      const double co = rc[size_t(pos * half + i)], si = rs[size_t(pos * half + i)];
      want[size_t(r * d + i0)] = x0 * co - x1 * si;
      want[size_t(r * d + i1)] = x1 * co + x0 * si;
    }
  }
  const std::vector<std::vector<uint8_t>> in{float_bytes(fx, t), float_bytes(fc, t), float_bytes(fs, t)};
  const auto out = run_kernel(g, y.node, in, 1)[0];
  const double eps = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1.6e-2 : t == DType::F64 ? 1e-14 : 1e-6;
  EXPECT_TRUE(all_close(bytes_to_doubles(out, t), want, eps, eps));
  EXPECT_EQ(out, run_kernel(g, y.node, in, 2)[0]);
}

TEST(Rotary, BothFormsPartialWidth) {
  for (bool inter : {false, true}) {
    check_rotary(2, 3, 5, 10, 3, inter, DType::F32);   // R = 6 < D = 10
    check_rotary(1, 4, 33, 64, 32, inter, DType::F32);  // full width
    check_rotary(1, 64, 40, 16, 8, inter, DType::F32);  // enough rows to go parallel
    for (DType t : {DType::F16, DType::BF16, DType::F64}) check_rotary(1, 2, 7, 8, 2, inter, t);
  }
}

}  // namespace
}  // namespace rlx::test
