// Step fusion of the CUDA lowering (lower_pairs.cpp): the pairs of a decode step (qmatmul
// then its residual add, rms_norm then the product it feeds, the K/V cast then its cache
// write, the Q and K rotaries) run as
// one launch each and give the same bits as the two launches (RLX_CUDA_FUSE=0), so the
// comparison is exact; the fused graph has one step fewer per pair. The rotaries, the K/V
// casts and cache writes, and the attention after them are one launch. A pair whose first
// result is also a graph output still fuses where the kernel writes both (the cast), and
// does not where it would leave the result unwritten (the product). A feed-forward's norm,
// gate/up product and SwiGLU program are one launch; another program stays its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "rlx/quant.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using cuda_test::randoms;

constexpr int64_t K = 256, N = 96, H = 2, Hq = 4, C = 8, D = 32;

TypedTensor f32(std::vector<int64_t> dims, uint32_t seed) { return cuda_test::random_f32(std::move(dims), seed); }

// `rows` rows of k randoms(seed) each, in F16 row format (the qmatmul weights).
std::vector<uint8_t> f16_rows(int64_t rows, int64_t k, uint32_t seed) {
  const std::vector<float> wf = randoms(size_t(rows * k), seed);
  const int64_t rb = quant::row_bytes(quant::kF16, k);
  std::vector<uint8_t> wq(size_t(rows * rb));
  for (int64_t j = 0; j < rows; ++j) quant::quantize(quant::kF16, wf.data() + j * k, wq.data() + j * rb, k);
  return wq;
}

// x -> qmatmul(F16 W) + r; h -> rms_norm -> qmatmul(W); rows -> cast f16 -> cache_write
// at past; rotary of q and k. keep: the first product and the rounded rows are graph
// outputs too.
Graph decode_pairs(bool keep) {
  Graph g(keep ? "pairs_kept" : "pairs");
  Value x = g.input("x", Shape({1, K}, DType::F32));
  Value w = g.param("w", Shape({N, quant::row_bytes(quant::kF16, K)}, DType::U8));
  Value r = g.input("r", Shape({1, N}, DType::F32));
  Value rows = g.input("rows", Shape({1, H, 1, D}, DType::F32));
  Value cache = g.input("cache", Shape({1, H, C, D}, DType::F16));
  Value past = g.input("past", Shape({1}, DType::I64));
  Value q = g.input("q", Shape({1, Hq, 1, D}, DType::F32));
  Value k = g.input("k", Shape({1, H, 1, D}, DType::F32));
  Value cs = g.input("cos", Shape({1, D / 2}, DType::F32)), sn = g.input("sin", Shape({1, D / 2}, DType::F32));
  Value h = g.input("h", Shape({1, K}, DType::F32));
  Value scale = g.param("scale", Shape({K}, DType::F32));
  Value p = g.qmatmul(x, w, quant::kF16, K);
  Value y = g.add(p, r);
  Value z = g.qmatmul(g.rms_norm(h, scale, -1, 1e-5), w, quant::kF16, K);
  Value rounded = g.cast(rows, DType::F16);
  Value written = g.cache_write(cache, rounded, past);
  std::vector<Value> outs{y, z, written, g.rotary(q, cs, sn, false), g.rotary(k, cs, sn, false)};
  if (keep) {
    outs.push_back(p);
    outs.push_back(rounded);
  }
  g.set_outputs(outs);
  return g;
}

struct Ran {
  int steps = 0;
  std::vector<TypedTensor> out;
};

Ran run(const Graph& g, bool fuse) {
  if (!fuse) setenv("RLX_CUDA_FUSE", "0", 1);
  CompiledGraph net = Session(Device::Cuda).compile(g);
  unsetenv("RLX_CUDA_FUSE");
  const std::vector<uint8_t> wq = f16_rows(N, K, 3);
  net.set_param_typed("w", wq.data(), wq.size(), DType::U8);
  net.set_param("scale", randoms(size_t(K), 9));
  TypedTensor cache{DType::F16, {1, H, C, D}, std::vector<uint8_t>(size_t(H * C * D) * 2)};
  for (size_t i = 0; i < cache.bytes.size() / 2; ++i) {
    const uint16_t h = f32_to_f16(float(i % 97) / 97.0f - 0.5f);
    std::memcpy(cache.bytes.data() + 2 * i, &h, 2);
  }
  TypedTensor past{DType::I64, {1}, std::vector<uint8_t>(8)};
  const int64_t at = 5;
  std::memcpy(past.bytes.data(), &at, 8);
  TypedTensor cs = f32({1, D / 2}, 7), sn = f32({1, D / 2}, 8);
  Ran r;
  r.steps = net.report().num_thunks;
  r.out = net.run_typed({{"x", f32({1, K}, 1)}, {"r", f32({1, N}, 2)}, {"h", f32({1, K}, 10)}, {"rows", f32({1, H, 1, D}, 4)},
                         {"cache", cache}, {"past", past}, {"q", f32({1, Hq, 1, D}, 5)}, {"k", f32({1, H, 1, D}, 6)},
                         {"cos", cs}, {"sin", sn}});
  return r;
}

TEST(CudaStepFusion, DecodePairsGiveTheSameBitsInFewerSteps) {
  REQUIRE_CUDA();
  for (bool keep : {false, true}) {
    const Graph g = decode_pairs(keep);
    const Ran fused = run(g, true), plain = run(g, false);
    ASSERT_EQ(fused.out.size(), plain.out.size());
    for (size_t o = 0; o < fused.out.size(); ++o)
      EXPECT_EQ(fused.out[o].bytes, plain.out[o].bytes) << (keep ? "kept" : "plain") << " output " << o;
    // Four pairs fuse; with the product kept as an output, qmatmul + add does not.
    EXPECT_EQ(plain.steps - fused.steps, keep ? 3 : 4) << "steps fused " << fused.steps << ", unfused " << plain.steps;
  }
}

// A decode step's rotaries and cache writes: q, k rotated; k's rows cast and written into
// the K cache, v's into the V cache; attention over both. keep: the rotated K and the
// rounded K rows are graph outputs too (then written, not only passed in registers, and the
// attention is not fused with them). c: the cache's rows, t: the step's new rows (queries),
// d: the head dim, hq query heads over H KV heads.
struct KvCase {
  bool keep = false;
  int64_t c = C, t = 1, d = D, hq = Hq;
  bool interleaved = false;
  std::string str() const {
    return std::string(keep ? "kept" : "plain") + " c=" + std::to_string(c) + " t=" + std::to_string(t) +
           " d=" + std::to_string(d) + " hq=" + std::to_string(hq) + (interleaved ? " interleaved" : "");
  }
};

Graph kv_window(const KvCase& k_) {
  const int64_t t = k_.t, d = k_.d, c = k_.c, hq = k_.hq;
  Graph g(k_.keep ? "kv_kept" : "kv");
  Value q = g.input("q", Shape({1, hq, t, d}, DType::F32));
  Value k = g.input("k", Shape({1, H, t, d}, DType::F32));
  Value v = g.input("v", Shape({1, H, t, d}, DType::F32));
  Value kc = g.input("kc", Shape({1, H, c, d}, DType::F16)), vc = g.input("vc", Shape({1, H, c, d}, DType::F16));
  Value past = g.input("past", Shape({1}, DType::I64));
  Value cs = g.input("cos", Shape({t, d / 2}, DType::F32)), sn = g.input("sin", Shape({t, d / 2}, DType::F32));
  Value yq = g.rotary(q, cs, sn, k_.interleaved), yk = g.rotary(k, cs, sn, k_.interleaved);
  Value rk = g.cast(yk, DType::F16);
  Value wk = g.cache_write(kc, rk, past);
  Value rv = g.cast(v, DType::F16);
  Value wv = g.cache_write(vc, rv, past);
  std::vector<Value> outs{g.kv_attention(yq, wk, wv, rk, rv, past), wk, wv};
  if (k_.keep) {
    outs.push_back(yk);
    outs.push_back(rk);
  }
  g.set_outputs(outs);
  return g;
}

Ran run_kv(const Graph& g, const KvCase& k_, bool fuse, int64_t at) {
  const int64_t t = k_.t, d = k_.d, c = k_.c, hq = k_.hq;
  if (!fuse) setenv("RLX_CUDA_FUSE", "0", 1);
  CompiledGraph net = Session(Device::Cuda).compile(g);
  unsetenv("RLX_CUDA_FUSE");
  auto cache = [&](int salt) {
    TypedTensor x{DType::F16, {1, H, c, d}, std::vector<uint8_t>(size_t(H * c * d) * 2)};
    for (size_t i = 0; i < x.bytes.size() / 2; ++i) {
      const uint16_t h = f32_to_f16(float((i + size_t(salt)) % 89) / 89.0f - 0.5f);
      std::memcpy(x.bytes.data() + 2 * i, &h, 2);
    }
    return x;
  };
  TypedTensor past{DType::I64, {1}, std::vector<uint8_t>(8)};
  std::memcpy(past.bytes.data(), &at, 8);
  Ran r;
  r.steps = net.report().num_thunks;
  r.out = net.run_typed({{"q", f32({1, hq, t, d}, 21)}, {"k", f32({1, H, t, d}, 22)}, {"v", f32({1, H, t, d}, 23)},
                         {"kc", cache(1)}, {"vc", cache(2)}, {"past", past}, {"cos", f32({t, d / 2}, 24)},
                         {"sin", f32({t, d / 2}, 25)}});
  return r;
}

// The six steps (two rotaries, two casts, two cache writes) are one launch, and with the
// attention after them one launch in all: the same bits as the seven launches. The cases
// cover the attention kernel's paths: a short cache (one block per cluster attends), a long
// one (every block of the cluster, merged), two new rows, interleaved pairs, head dims of
// 64 and 128, one or two query heads per KV head.
TEST(CudaStepFusion, RotariesCacheWritesAndAttentionAreOneLaunchWithTheSameBits) {
  REQUIRE_CUDA();
  std::vector<std::pair<KvCase, int64_t>> cases;  // and the position
  cases.push_back({KvCase{}, 3});
  cases.push_back({KvCase{true}, 3});
  cases.push_back({KvCase{false, 700, 1, 64, Hq, false}, 650});
  cases.push_back({KvCase{false, 700, 2, 64, Hq, true}, 411});
  cases.push_back({KvCase{false, 40, 2, 128, H, false}, 0});
  cases.push_back({KvCase{false, 300, 1, 128, 4 * H, true}, 299});
  for (const auto& [kc, at] : cases) {
    SCOPED_TRACE(kc.str() + " past=" + std::to_string(at));
    const Graph g = kv_window(kc);
    const Ran fused = run_kv(g, kc, true, at), plain = run_kv(g, kc, false, at);
    ASSERT_EQ(fused.out.size(), plain.out.size());
    for (size_t o = 0; o < fused.out.size(); ++o) EXPECT_EQ(fused.out[o].bytes, plain.out[o].bytes) << "output " << o;
    // Seven launches become one; with the rotated K kept, the six become one.
    EXPECT_EQ(plain.steps - fused.steps, kc.keep ? 5 : 6) << "steps fused " << fused.steps << ", unfused " << plain.steps;
  }
  // A position that leaves no room for the step's rows is the cache write's error, named,
  // from either fused launch.
  for (bool keep : {false, true}) {
    const KvCase kc{keep};
    try {
      run_kv(kv_window(kc), kc, true, C);
      ADD_FAILURE() << "expected an error for a position past the cache (" << kc.str() << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cache_write"), std::string::npos) << e.what();
    }
  }
}

// The feed-forward of a decode step: rms_norm, the gate/up product split in two halves,
// silu(gate) * up (form 0; form 1: up * silu(gate), the halves swapped: [gate | up]) or
// gelu(gate) * up (form 2: not a SwiGLU). down: the down product and the residual add follow.
// k: the row's length (K; 2,400 takes the norms' block-per-row path, 1,024 and more, with
// two batches of loads per thread; 2,400 and 6,400 are longer than the part of each row
// the products fetch before their wait, 6,400 several times).
constexpr int64_t F = 160;
Graph ffn(int form, bool down, int64_t k = K) {
  Graph g("ffn_form" + std::to_string(form) + (down ? "_down" : "") + "_k" + std::to_string(k));
  Value x = g.input("x", Shape({1, k}, DType::F32));
  Value scale = g.param("scale", Shape({k}, DType::F32));
  Value wgu = g.param("wgu", Shape({2 * F, quant::row_bytes(quant::kF16, k)}, DType::U8));
  std::vector<Value> gu = g.split(g.qmatmul(g.rms_norm(x, scale, -1, 1e-5), wgu, quant::kF16, k), -1, {F, F});
  Value h = form == 0 ? g.mul(g.silu(gu[1]), gu[0]) : form == 1 ? g.mul(gu[1], g.silu(gu[0])) : g.mul(g.gelu(gu[1]), gu[0]);
  if (!down) {
    g.set_outputs({h});
    return g;
  }
  Value r = g.input("r", Shape({1, N}, DType::F32));
  Value wd = g.param("wd", Shape({N, quant::row_bytes(quant::kF16, F)}, DType::U8));
  g.set_outputs({g.add(r, g.qmatmul(h, wd, quant::kF16, F))});
  return g;
}

Ran run_ffn(const Graph& g, bool fuse, int64_t k) {
  if (!fuse) setenv("RLX_CUDA_FUSE", "0", 1);
  CompiledGraph net = Session(Device::Cuda).compile(g);
  unsetenv("RLX_CUDA_FUSE");
  const std::vector<uint8_t> wgu = f16_rows(2 * F, k, 36);
  net.set_param_typed("wgu", wgu.data(), wgu.size(), DType::U8);
  net.set_param("scale", randoms(size_t(k), 34));
  std::map<std::string, TypedTensor> in{{"x", f32({1, k}, 32)}};
  if (g.find_input("r") >= 0) {
    const std::vector<uint8_t> wd = f16_rows(N, F, 31);
    net.set_param_typed("wd", wd.data(), wd.size(), DType::U8);
    in["r"] = f32({1, N}, 33);
  }
  Ran r;
  r.steps = net.report().num_thunks;
  r.out = net.run_typed(in);
  return r;
}

TEST(CudaStepFusion, NormGateUpAndSwigluAreOneLaunchWithTheSameBits) {
  REQUIRE_CUDA();
  for (int64_t k : {K, int64_t(2400), int64_t(6400)}) {
    for (int form = 0; form < 3; ++form)
      for (bool down : {false, true}) {
        const Graph g = ffn(form, down, k);
        const Ran fused = run_ffn(g, true, k), plain = run_ffn(g, false, k);
        ASSERT_EQ(fused.out.size(), 1u);
        ASSERT_EQ(plain.out.size(), 1u);
        EXPECT_EQ(fused.out[0].bytes, plain.out[0].bytes) << g.name();
        // The SwiGLU joins the norm and the product (three steps, one launch); the GELU
        // program does not (the norm still joins the product). With the down product after it,
        // its add may join it too, as the memory plan allows.
        const int joined = form == 2 ? 1 : 2;
        if (down)
          EXPECT_GE(plain.steps - fused.steps, joined) << g.name() << ": steps fused " << fused.steps << ", unfused "
                                                       << plain.steps;
        else
          EXPECT_EQ(plain.steps - fused.steps, joined) << g.name() << ": steps fused " << fused.steps << ", unfused "
                                                       << plain.steps;
      }
  }
}

}  // namespace
}  // namespace rlx
