// reduce_* / argmax / argmin / topk kernels against plain reference code.
#include <algorithm>
#include <numeric>

#include "cpu/reduce_movement_test_util.h"

namespace rlx::test::reduce_movement {
namespace {

enum class R { Sum, Mean, Max, Min, Prod };

// Wraps an int64 result into integer dtype t like the kernel's store does.
double wrap_to(DType t, int64_t r) {
  switch (t) {
    case DType::I8: return int8_t(r);
    case DType::I16: return int16_t(r);
    case DType::I32: return int32_t(r);
    case DType::U8: return uint8_t(r);
    case DType::U32: return uint32_t(r);
    default: return double(r);
  }
}

struct RefOut {
  std::vector<double> val, mag;  // mag: the same reduction of |x| (sum-like ops)
};

RefOut ref_reduce(R op, DType t, const std::vector<double>& x, const std::vector<int64_t>& d,
                  std::vector<int64_t> axes) {
  const int rank = int(d.size());
  std::vector<bool> red(size_t(rank), axes.empty());
  for (int64_t a : axes) red[size_t(a < 0 ? a + rank : a)] = true;
  std::vector<int64_t> od;
  int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    if (red[size_t(i)]) count *= d[size_t(i)];
    else od.push_back(d[size_t(i)]);
  }
  const auto os = strides_of(od);
  const int64_t on = numel_of(od);
  const bool integer = is_integer(t);
  std::vector<double> acc(static_cast<size_t>(on)), mag(static_cast<size_t>(on), 0.0);
  std::vector<int64_t> iacc(static_cast<size_t>(on));
  for (int64_t o = 0; o < on; ++o) {
    double init = op == R::Prod ? 1 : op == R::Max ? -INFINITY : op == R::Min ? INFINITY : 0;
    acc[size_t(o)] = init;
    iacc[size_t(o)] = op == R::Prod ? 1 : 0;
  }
  for (int64_t f = 0; f < numel_of(d); ++f) {
    const auto idx = unflatten(f, d);
    int64_t o = 0;
    for (int i = 0, k = 0; i < rank; ++i)
      if (!red[size_t(i)]) o += idx[size_t(i)] * os[size_t(k++)];
    const double v = x[size_t(f)];
    double& a = acc[size_t(o)];
    mag[size_t(o)] += std::abs(v);
    switch (op) {
      case R::Sum: case R::Mean:
        a += v;
        iacc[size_t(o)] = int64_t(uint64_t(iacc[size_t(o)]) + uint64_t(int64_t(v)));
        break;
      case R::Prod:
        a *= v;
        iacc[size_t(o)] = int64_t(uint64_t(iacc[size_t(o)]) * uint64_t(int64_t(v)));
        break;
      case R::Max: if (std::isnan(v) || v > a) a = std::isnan(a) ? a : v; break;
      case R::Min: if (std::isnan(v) || v < a) a = std::isnan(a) ? a : v; break;
    }
  }
  RefOut r;
  for (int64_t o = 0; o < on; ++o) {
    double v = acc[size_t(o)];
    if (integer && (op == R::Sum || op == R::Prod)) v = wrap_to(t, iacc[size_t(o)]);
    if (op == R::Mean) v = integer ? wrap_to(t, count ? iacc[size_t(o)] / count : 0) : v / double(count);
    r.val.push_back(v);
    r.mag.push_back(op == R::Mean ? mag[size_t(o)] / double(std::max<int64_t>(1, count))
                                  : op == R::Prod ? 0.0 : mag[size_t(o)]);
  }
  return r;
}

Value add_reduce(Graph& g, R op, Value x, std::vector<int64_t> axes, bool keep) {
  switch (op) {
    case R::Sum: return g.reduce_sum(x, axes, keep);
    case R::Mean: return g.reduce_mean(x, axes, keep);
    case R::Max: return g.reduce_max(x, axes, keep);
    case R::Min: return g.reduce_min(x, axes, keep);
    case R::Prod: return g.reduce_prod(x, axes, keep);
  }
  return {};
}

const char* name(R op) {
  static const char* n[] = {"sum", "mean", "max", "min", "prod"};
  return n[int(op)];
}

void check_reduce(R op, DType t, const std::vector<int64_t>& d, const std::vector<int64_t>& axes,
                  bool keep, uint32_t seed) {
  Graph g;
  Value x = g.input("x", Shape(d, t));
  Value y = add_reduce(g, op, x, axes, keep);
  const int64_t n = numel_of(d);
  std::vector<double> xv = op == R::Prod ? (is_float(t) || is_complex(t) ? random_values(t, n, seed, 0.8, 1.2)
                                                                         : random_values(t, n, seed, 0.6, 2.4))
                                         : random_values(t, n, seed);
  const RefOut want = ref_reduce(op, t, xv, d, axes);
  const auto out = run2(g, y, {encode(t, xv)});
  std::string what = std::string(name(op)) + " " + std::string(dtype_name(t)) + " " + g.type(x).str() +
                     " -> " + g.type(y).str();
  double rtol = default_rtol(t);
  if (op == R::Prod && is_float(t)) rtol *= 4;
  expect_close(decode(t, out[0]), want.val, rtol, 0, want.mag, what);
}

struct Case {
  std::vector<int64_t> dims, axes;
};
const std::vector<Case> kCases = {
    {{7}, {0}},           {{7}, {}},              {{2, 3, 4}, {1}},        {{2, 3, 4}, {0, 2}},
    {{2, 3, 4}, {-1}},    {{2, 3, 4}, {}},        {{5, 1, 7}, {1}},        {{5, 1, 7}, {0}},
    {{3, 4, 5, 6}, {1, 3}}, {{3, 4, 5, 6}, {0, 2}}, {{3, 4, 5, 6}, {2, 3}}, {{3, 4, 5, 6}, {-4, -3}},
    {{2, 3, 2, 3, 2}, {0, 2, 4}}, {{2, 3, 2, 3, 2}, {1, 3}}, {{1, 9, 1}, {1}}, {{13, 17}, {0}},
};

TEST(ReduceKernel, AllOpsDtypesAxes) {
  uint32_t seed = 1;
  for (R op : {R::Sum, R::Mean, R::Max, R::Min, R::Prod})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I16, DType::I32,
                    DType::I64, DType::U8, DType::U32})
      for (const Case& c : kCases)
        for (bool keep : {true, false}) check_reduce(op, t, c.dims, c.axes, keep, seed++);
}

TEST(ReduceKernel, LongRowsUseBlocksAndStayDeterministic) {
  // Rows long enough to split into blocks, all-reduce, and column mode with a long axis.
  for (R op : {R::Sum, R::Mean, R::Max})
    for (DType t : {DType::F32, DType::F16, DType::F64, DType::I32}) {
      check_reduce(op, t, {3, 50001}, {-1}, false, 7);
      check_reduce(op, t, {120, 301}, {}, true, 8);
      check_reduce(op, t, {4, 3000, 37}, {1}, false, 9);
      check_reduce(op, t, {96, 700}, {1}, true, 10);
    }
}

TEST(ReduceKernel, MaxMinPropagateNaN) {
  Graph g;
  Value x = g.input("x", Shape({2, 4}, DType::F32));
  Value mx = g.reduce_max(x, {1}, false), mn = g.reduce_min(x, {1}, false);
  const std::vector<float> v = {1, NAN, 3, 2, 5, 6, 7, -1};
  auto a = from_bytes<float>(run2(g, mx, {to_bytes(v)})[0]);
  auto b = from_bytes<float>(run2(g, mn, {to_bytes(v)})[0]);
  EXPECT_TRUE(std::isnan(a[0]));
  EXPECT_EQ(a[1], 7.0f);
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[1], -1.0f);
}

TEST(ReduceKernel, EmptyAxisGivesIdentity) {
  Graph g;
  Value x = g.input("x", Shape({3, 0}, DType::F32));
  Value s = g.reduce_sum(x, {1}, false), p = g.reduce_prod(x, {1}, false),
        m = g.reduce_mean(x, {1}, false);
  EXPECT_EQ(from_bytes<float>(run2(g, s, {{}})[0]), std::vector<float>(3, 0.0f));
  EXPECT_EQ(from_bytes<float>(run2(g, p, {{}})[0]), std::vector<float>(3, 1.0f));
  for (float v : from_bytes<float>(run2(g, m, {{}})[0])) EXPECT_TRUE(std::isnan(v));
}

TEST(ReduceKernel, ComplexSumAndMean) {
  Graph g;
  Value x = g.input("x", Shape({3, 5}, DType::C64));
  Value s = g.reduce_sum(x, {1}, false), m = g.reduce_mean(x, {0}, true);
  auto xv = random_values(DType::C64, 15, 3);
  auto ys = decode(DType::C64, run2(g, s, {encode(DType::C64, xv)})[0]);
  auto ym = decode(DType::C64, run2(g, m, {encode(DType::C64, xv)})[0]);
  for (int r = 0; r < 3; ++r)
    for (int p = 0; p < 2; ++p) {
      double want = 0;
      for (int c = 0; c < 5; ++c) want += xv[size_t((r * 5 + c) * 2 + p)];
      EXPECT_NEAR(ys[size_t(r * 2 + p)], want, 1e-5);
    }
  for (int c = 0; c < 5; ++c)
    for (int p = 0; p < 2; ++p) {
      double want = 0;
      for (int r = 0; r < 3; ++r) want += xv[size_t((r * 5 + c) * 2 + p)];
      EXPECT_NEAR(ym[size_t(c * 2 + p)], want / 3, 1e-5);
    }
}

TEST(ReduceKernel, ActiveExtentLeavesTrailingRowsUntouched) {
  Graph g;
  Value x = g.input("x", Shape({8, 6, 5}, DType::F32));
  Value y = g.reduce_sum(x, {2}, false);
  auto xv = random_values(DType::F32, 240, 4);
  auto want = ref_reduce(R::Sum, DType::F32, xv, {8, 6, 5}, {2}).val;
  auto got = decode(DType::F32, run2(g, y, {encode(DType::F32, xv)}, 3, 8)[0]);
  for (int i = 0; i < 48; ++i) {
    if (i < 18) EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-5);
    else EXPECT_EQ(got[size_t(i)], 0.0) << i;  // the harness zero-fills outputs
  }
}

// ---- argmax / argmin
std::vector<double> ref_arg(bool is_max, const std::vector<double>& x, const std::vector<int64_t>& d,
                            int axis, bool last) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= d[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t n = d[size_t(axis)];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = -1;
      for (int64_t k = 0; k < n; ++k) {
        const double v = x[size_t((o * n + k) * inner + i)];
        if (best < 0) { best = k; continue; }
        const double b = x[size_t((o * n + best) * inner + i)];
        bool take;
        if (std::isnan(b)) take = last && std::isnan(v);
        else if (std::isnan(v)) take = true;
        else take = (is_max ? v > b : v < b) || (last && v == b);
        if (take) best = k;
      }
      out.push_back(double(best));
    }
  return out;
}

TEST(ArgReduceKernel, DtypesAxesTiesAndSelectLast) {
  uint32_t seed = 100;
  const std::vector<std::vector<int64_t>> shapes = {{9}, {4, 7}, {3, 5, 4}, {2, 3, 300}, {2, 300, 3}};
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I32, DType::I64, DType::U8})
    for (const auto& d : shapes)
      for (int axis = -int(d.size()); axis < int(d.size()); ++axis)
        for (bool is_max : {true, false})
          for (bool last : {false, true})
            for (bool keep : {true, false}) {
              Graph g;
              Value x = g.input("x", Shape(d, t));
              Value y = is_max ? g.argmax(x, axis, keep, last) : g.argmin(x, axis, keep, last);
              // Few distinct values so ties are common.
              auto xv = random_values(t, numel_of(d), seed++, -2, 2);
              if (is_float(t))
                for (auto& v : xv) v = std::round(v * 2) / 2;
              const int ax = axis < 0 ? axis + int(d.size()) : axis;
              auto got = from_bytes<int64_t>(run2(g, y, {encode(t, xv)})[0]);
              auto want = ref_arg(is_max, xv, d, ax, last);
              ASSERT_EQ(got.size(), want.size());
              for (size_t i = 0; i < got.size(); ++i)
                ASSERT_EQ(double(got[i]), want[i]) << dtype_name(t) << " axis " << axis << " max " << is_max
                                                   << " last " << last << " at " << i;
            }
}

TEST(ArgReduceKernel, NaNWinsFirstOrLast) {
  Graph g;
  Value x = g.input("x", Shape({6}, DType::F32));
  Value a = g.argmax(x, 0, false, false), b = g.argmin(x, 0, false, true);
  std::vector<float> v = {1, NAN, 9, NAN, -5, 2};
  EXPECT_EQ(from_bytes<int64_t>(run2(g, a, {to_bytes(v)})[0]), std::vector<int64_t>{1});
  EXPECT_EQ(from_bytes<int64_t>(run2(g, b, {to_bytes(v)})[0]), std::vector<int64_t>{3});
}

// ---- topk
void check_topk(DType t, const std::vector<int64_t>& d, int64_t k, int axis, bool largest, uint32_t seed) {
  Graph g;
  Value x = g.input("x", Shape(d, t));
  auto [vals, idxs] = g.topk(x, k, axis, largest, true);
  auto xv = random_values(t, numel_of(d), seed, -3, 3);
  if (is_float(t))
    for (auto& v : xv) v = std::round(v * 2) / 2;  // ties
  const int ax = axis < 0 ? axis + int(d.size()) : axis;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= d[size_t(i)];
  for (size_t i = size_t(ax) + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t n = d[size_t(ax)];
  auto out = run2(g, vals, {encode(t, xv)});
  ASSERT_EQ(out.size(), 2u);
  auto gv = decode(t, out[0]);
  auto gi = from_bytes<int64_t>(out[1]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> ord(static_cast<size_t>(n));
      std::iota(ord.begin(), ord.end(), 0);
      auto at = [&](int64_t j) { return xv[size_t((o * n + j) * inner + i)]; };
      std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (int64_t j = 0; j < k; ++j) {
        const size_t p = size_t((o * k + j) * inner + i);
        ASSERT_EQ(gi[p], ord[size_t(j)]) << dtype_name(t) << " row " << o << "," << i << " rank " << j;
        ASSERT_EQ(gv[p], at(ord[size_t(j)]));
      }
    }
}

TEST(TopKKernel, LargestSmallestAxesDtypesTies) {
  uint32_t seed = 500;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    for (bool largest : {true, false}) {
      check_topk(t, {17}, 5, 0, largest, seed++);
      check_topk(t, {17}, 17, -1, largest, seed++);
      check_topk(t, {4, 33}, 1, -1, largest, seed++);
      check_topk(t, {3, 9, 5}, 4, 1, largest, seed++);
      check_topk(t, {3, 9, 5}, 2, 0, largest, seed++);
      check_topk(t, {64, 100}, 7, 1, largest, seed++);
    }
}

TEST(TopKKernel, NaNIsGreatestAndKZero) {
  Graph g;
  Value x = g.input("x", Shape({5}, DType::F32));
  auto [v1, i1] = g.topk(x, 2, 0, true, true);
  auto [v2, i2] = g.topk(x, 2, 0, false, true);
  std::vector<float> v = {3, NAN, 1, 3, -2};
  auto a = run2(g, v1, {to_bytes(v)});
  EXPECT_EQ(from_bytes<int64_t>(a[1]), (std::vector<int64_t>{1, 0}));
  auto b = run2(g, v2, {to_bytes(v)});
  EXPECT_EQ(from_bytes<int64_t>(b[1]), (std::vector<int64_t>{4, 2}));
  auto [v3, i3] = g.topk(x, 0, 0, true, true);
  auto c = run2(g, v3, {to_bytes(v)});
  EXPECT_TRUE(c[0].empty() && c[1].empty());
}

}  // namespace
}  // namespace rlx::test::reduce_movement
