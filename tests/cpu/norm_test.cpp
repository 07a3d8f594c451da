// softmax / log_softmax / layer_norm / rms_norm kernels against plain reference code,
// at every ISA level the machine has (RLX_ISA caps the level the builder picks).
#include "cpu/reduce_movement_test_util.h"

namespace rlx::test::reduce_movement {
namespace {

const char* const kIsas[] = {"scalar", "avx2", "avx512"};
const DType kFloats[] = {DType::F32, DType::F64, DType::F16, DType::BF16};

void split_axis(const std::vector<int64_t>& d, int axis, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= d[size_t(i)];
  n = d[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < d.size(); ++i) inner *= d[i];
}

std::vector<double> ref_softmax(const std::vector<double>& x, const std::vector<int64_t>& d, int axis,
                                bool log) {
  int64_t outer, n, inner;
  split_axis(d, axis, outer, n, inner);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return size_t((o * n + k) * inner + i); };
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, x[at(k)]);
      for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        y[at(k)] = log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
    }
  return y;
}

void check_softmax(DType t, const std::vector<int64_t>& d, int axis, bool log, uint32_t seed,
                   double lo = -4, double hi = 4) {
  Graph g;
  Value x = g.input("x", Shape(d, t));
  Value y = log ? g.log_softmax(x, axis) : g.softmax(x, axis);
  auto xv = random_values(t, numel_of(d), seed, lo, hi);
  const int ax = axis < 0 ? axis + int(d.size()) : axis;
  auto want = ref_softmax(xv, d, ax, log);
  for (const char* isa : kIsas) {
    ScopedIsa scope(isa);
    auto got = decode(t, run2(g, y, {encode(t, xv)})[0]);
    const double rtol = t == DType::F32 ? 1e-5 : default_rtol(t);
    expect_close(got, want, rtol, log ? rtol : rtol * 0.05, {},
                 std::string(log ? "log_softmax " : "softmax ") + std::string(dtype_name(t)) + " " +
                     g.type(x).str() + " axis " + std::to_string(axis) + " isa " + isa);
  }
}

TEST(SoftmaxKernel, LastAxisRowLengthsDtypes) {
  uint32_t seed = 1;
  for (DType t : kFloats)
    for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000})
      for (bool log : {false, true}) check_softmax(t, {5, n}, -1, log, seed++);
}

TEST(SoftmaxKernel, InnerAndLeadingAxes) {
  uint32_t seed = 50;
  for (DType t : kFloats)
    for (bool log : {false, true}) {
      check_softmax(t, {3, 5, 7}, 1, log, seed++);
      check_softmax(t, {3, 5, 7}, 0, log, seed++);
      check_softmax(t, {3, 5, 7}, -3, log, seed++);
      check_softmax(t, {2, 9, 130}, 1, log, seed++);  // several column chunks
      check_softmax(t, {6}, 0, log, seed++);
    }
}

TEST(SoftmaxKernel, LargeAndMaskedValues) {
  for (bool log : {false, true}) {
    check_softmax(DType::F32, {4, 37}, -1, log, 7, -300, 300);
    Graph g;
    Value x = g.input("x", Shape({2, 19}, DType::F32));
    Value y = log ? g.log_softmax(x) : g.softmax(x);
    std::vector<float> v(38);
    for (int i = 0; i < 38; ++i) v[size_t(i)] = (i % 3 == 0) ? -INFINITY : float(i % 7) * 0.5f;
    std::vector<double> vd(v.begin(), v.end());
    auto want = ref_softmax(vd, {2, 19}, 1, log);
    for (const char* isa : kIsas) {
      ScopedIsa scope(isa);
      auto got = decode(DType::F32, run2(g, y, {to_bytes(v)})[0]);
      expect_close(got, want, 1e-5, 1e-7, {}, std::string("masked isa ") + isa);
      if (!log) {
        for (int i = 0; i < 38; i += 3) EXPECT_EQ(got[size_t(i)], 0.0) << isa << " at " << i;
      }
    }
  }
}

TEST(SoftmaxKernel, ManyRowsThreadsIdenticalAndExtent) {
  check_softmax(DType::F32, {256, 300}, -1, false, 9);
  check_softmax(DType::BF16, {64, 40, 24}, 1, true, 10);
  Graph g;
  Value x = g.input("x", Shape({8, 3, 16}, DType::F32));
  Value y = g.softmax(x, -1);
  auto xv = random_values(DType::F32, 8 * 48, 11);
  auto want = ref_softmax(xv, {8, 3, 16}, 2, false);
  auto got = decode(DType::F32, run2(g, y, {encode(DType::F32, xv)}, 5, 8)[0]);
  for (size_t i = 0; i < got.size(); ++i) {
    if (i < 5 * 48) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
    else EXPECT_EQ(got[i], 0.0) << i;
  }
}

// ---- layer_norm / rms_norm
// scale / bias of shape `pd` broadcast over the normalized dims (right-aligned).
std::vector<double> ref_norm(bool rms, const std::vector<double>& x, const std::vector<int64_t>& d, int axis,
                             const std::vector<double>* s, const std::vector<double>* b,
                             const std::vector<int64_t>& pd, double eps) {
  int64_t outer = 1, n = 1;
  for (int i = 0; i < axis; ++i) outer *= d[size_t(i)];
  for (size_t i = size_t(axis); i < d.size(); ++i) n *= d[i];
  const std::vector<int64_t> nd(d.begin() + axis, d.end());
  std::vector<int64_t> p = pd;
  while (p.size() > nd.size()) p.erase(p.begin());
  p.insert(p.begin(), nd.size() - p.size(), 1);
  const auto ps = strides_of(p);
  auto param_at = [&](int64_t j) {
    auto idx = unflatten(j, nd);
    int64_t off = 0;
    for (size_t k = 0; k < nd.size(); ++k)
      if (p[k] != 1) off += idx[k] * ps[k];
    return size_t(off);
  };
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    const double* r = x.data() + o * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += r[j];
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) var += rms ? r[j] * r[j] : (r[j] - mean) * (r[j] - mean);
    var /= double(n);
    const double inv = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) {
      double v = (rms ? r[j] : r[j] - mean) * inv;
      if (s) v *= (*s)[param_at(j)];
      if (b) v += (*b)[param_at(j)];
      y[size_t(o * n + j)] = v;
    }
  }
  return y;
}

void check_norm(bool rms, DType t, const std::vector<int64_t>& d, int axis, bool with_scale,
                bool with_bias, std::vector<int64_t> pd, uint32_t seed, double eps = 1e-5) {
  const int ax = axis < 0 ? axis + int(d.size()) : axis;
  if (pd.empty()) pd.assign(d.begin() + ax, d.end());
  Graph g;
  Value x = g.input("x", Shape(d, t));
  Value s = with_scale ? g.input("s", Shape(pd, t)) : Value{};
  Value b = with_bias ? g.input("b", Shape(pd, t)) : Value{};
  Value y = rms ? g.rms_norm(x, s, axis, eps) : g.layer_norm(x, s, b, axis, eps);
  auto xv = random_values(t, numel_of(d), seed, -2, 3);
  auto sv = random_values(t, numel_of(pd), seed + 1, 0.5, 1.5);
  auto bv = random_values(t, numel_of(pd), seed + 2, -1, 1);
  auto want = ref_norm(rms, xv, d, ax, with_scale ? &sv : nullptr, with_bias ? &bv : nullptr, pd, eps);
  std::vector<std::vector<uint8_t>> in = {encode(t, xv)};
  const Node& node = g.node(y.node);
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    if (!node.inputs[i].valid()) in.emplace_back();
    else in.push_back(encode(t, i == 1 ? sv : bv));
  }
  for (const char* isa : kIsas) {
    ScopedIsa scope(isa);
    auto got = decode(t, run2(g, y, in)[0]);
    const double rtol = t == DType::F32 ? 1e-5 : default_rtol(t);
    expect_close(got, want, rtol, rtol, {},
                 std::string(rms ? "rms_norm " : "layer_norm ") + std::string(dtype_name(t)) + " " +
                     g.type(x).str() + " axis " + std::to_string(axis) + " scale " +
                     std::to_string(with_scale) + " bias " + std::to_string(with_bias) + " isa " + isa);
  }
}

TEST(LayerNormKernel, DtypesAxesOptionalParams) {
  uint32_t seed = 200;
  for (DType t : kFloats)
    for (int64_t n : {1, 5, 8, 16, 23, 64, 129})
      for (int sb = 0; sb < 3; ++sb) check_norm(false, t, {3, n}, -1, sb >= 1, sb == 2, {}, seed += 3);
  for (DType t : kFloats) {
    check_norm(false, t, {2, 3, 4, 5}, -2, true, true, {}, seed += 3);
    check_norm(false, t, {2, 3, 4, 5}, 1, true, false, {}, seed += 3);
    check_norm(false, t, {4, 6}, 0, false, false, {}, seed += 3);
  }
}

TEST(LayerNormKernel, BroadcastScaleAndBias) {
  // Normalized dims [4, 6]: scale [6] and bias [1, 6] / [4, 1] broadcast over them.
  check_norm(false, DType::F32, {3, 4, 6}, 1, true, true, {6}, 300);
  check_norm(false, DType::F32, {3, 4, 6}, 1, true, true, {4, 1}, 301);
  check_norm(false, DType::F16, {3, 4, 6}, 1, true, true, {1, 6}, 302);
  check_norm(true, DType::F32, {3, 4, 6}, -2, true, false, {1}, 303);
}

TEST(RmsNormKernel, DtypesAxesOptionalScale) {
  uint32_t seed = 400;
  for (DType t : kFloats)
    for (int64_t n : {1, 7, 16, 17, 64, 100})
      for (bool sc : {false, true}) check_norm(true, t, {4, n}, -1, sc, false, {}, seed += 3, 1e-6);
  for (DType t : kFloats) check_norm(true, t, {2, 3, 5}, 1, true, false, {}, seed += 3);
}

TEST(LayerNormKernel, ManyRowsThreadsIdenticalAndExtent) {
  check_norm(false, DType::F32, {512, 96}, -1, true, true, {}, 500);
  check_norm(true, DType::BF16, {300, 64}, -1, true, false, {}, 501);
  Graph g;
  Value x = g.input("x", Shape({6, 2, 8}, DType::F32));
  Value y = g.rms_norm(x, Value{}, -1, 1e-6);
  auto xv = random_values(DType::F32, 96, 502);
  auto want = ref_norm(true, xv, {6, 2, 8}, 2, nullptr, nullptr, {8}, 1e-6);
  std::vector<std::vector<uint8_t>> in = {encode(DType::F32, xv)};
  for (size_t i = 1; i < g.node(y.node).inputs.size(); ++i) in.emplace_back();
  auto got = decode(DType::F32, run2(g, y, in, 2, 6)[0]);
  for (size_t i = 0; i < got.size(); ++i) {
    if (i < 32) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
    else EXPECT_EQ(got[i], 0.0) << i;
  }
}

}  // namespace
}  // namespace rlx::test::reduce_movement
