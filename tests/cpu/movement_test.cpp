// Data movement kernels against reference index mappings: for each output element the
// reference names its source element (or the pad fill); outputs must match byte for byte.
#include <algorithm>
#include <functional>

#include "cpu/reduce_movement_test_util.h"

namespace rlx::test::reduce_movement {
namespace {

// One dtype per element size: 1, 2, 4, 8, 16 bytes (and bool).
const DType kSizes[] = {DType::U8, DType::F16, DType::F32, DType::I64, DType::C128, DType::Bool};

using SourceFn = std::function<int64_t(const std::vector<int64_t>& out_idx)>;  // -1: fill

std::vector<uint8_t> expected(const std::vector<uint8_t>& in, size_t es, const std::vector<int64_t>& od,
                              const SourceFn& src, const std::vector<uint8_t>& fill = {}) {
  const int64_t n = numel_of(od);
  std::vector<uint8_t> out(size_t(n) * es);
  for (int64_t f = 0; f < n; ++f) {
    const int64_t s = src(unflatten(f, od));
    if (s < 0) std::memcpy(out.data() + f * es, fill.data(), es);
    else std::memcpy(out.data() + f * es, in.data() + s * es, es);
  }
  return out;
}

int64_t flat(const std::vector<int64_t>& idx, const std::vector<int64_t>& d) {
  const auto s = strides_of(d);
  int64_t f = 0;
  for (size_t i = 0; i < d.size(); ++i) f += idx[i] * s[i];
  return f;
}

std::vector<uint8_t> input_bytes(DType t, int64_t n, uint32_t seed) {
  if (t == DType::Bool) return encode(t, random_values(t, n, seed, 0, 1));
  return random_bytes(size_t(n) * dtype_size(t), seed);
}

// ---- transpose
TEST(TransposeKernel, AllPermsRank3And4) {
  uint32_t seed = 1;
  for (DType t : kSizes)
    for (const auto& d : std::vector<std::vector<int64_t>>{{2, 3, 4}, {5, 1, 7}, {3, 4, 5, 6}, {1, 6, 1, 5}}) {
      std::vector<int64_t> perm(d.size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
      do {
        Graph g;
        Value x = g.input("x", Shape(d, t));
        Value y = g.transpose(x, perm);
        const auto od = g.type(y).static_dims();
        auto in = input_bytes(t, numel_of(d), seed++);
        auto want = expected(in, dtype_size(t), od, [&](const std::vector<int64_t>& o) {
          std::vector<int64_t> i(d.size());
          for (size_t k = 0; k < d.size(); ++k) i[size_t(perm[k])] = o[k];
          return flat(i, d);
        });
        ASSERT_EQ(run2(g, y, {in})[0], want) << dtype_name(t) << " " << g.type(x).str() << " -> " << g.type(y).str();
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
}

TEST(TransposeKernel, Large2DBatchedAndDefaultPerm) {
  uint32_t seed = 99;
  struct C { std::vector<int64_t> d, perm; };
  for (DType t : {DType::U8, DType::F32, DType::C128})
    for (const C& c : {C{{67, 131}, {1, 0}}, C{{5, 33, 70}, {0, 2, 1}}, C{{4, 40, 3, 50}, {0, 3, 2, 1}},
                       C{{3, 4, 5}, {}}, C{{64, 8, 96}, {1, 0, 2}}, C{{6, 300, 2}, {2, 1, 0}},
                       // a few rows interleaved into each output row (ConvTranspose k == s heads)
                       C{{3, 2, 2, 40, 70}, {0, 3, 1, 4, 2}}, C{{7, 3, 90}, {0, 2, 1}}, C{{5, 4, 70}, {0, 2, 1}}}) {
      Graph g;
      Value x = g.input("x", Shape(c.d, t));
      Value y = g.transpose(x, c.perm);
      std::vector<int64_t> perm = c.perm;
      if (perm.empty())
        for (int i = int(c.d.size()) - 1; i >= 0; --i) perm.push_back(i);
      auto in = input_bytes(t, numel_of(c.d), seed++);
      auto want = expected(in, dtype_size(t), g.type(y).static_dims(), [&](const std::vector<int64_t>& o) {
        std::vector<int64_t> i(c.d.size());
        for (size_t k = 0; k < c.d.size(); ++k) i[size_t(perm[k])] = o[k];
        return flat(i, c.d);
      });
      ASSERT_EQ(run2(g, y, {in})[0], want) << dtype_name(t) << " " << g.type(x).str();
    }
}

TEST(TransposeKernel, Rank6ShuffledPerms) {
  const std::vector<int64_t> d = {2, 3, 2, 1, 3, 2};
  std::vector<int64_t> perm = {0, 1, 2, 3, 4, 5};
  std::mt19937 rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(perm.begin(), perm.end(), rng);
    for (DType t : {DType::U8, DType::F64}) {
      Graph g;
      Value x = g.input("x", Shape(d, t));
      Value y = g.transpose(x, perm);
      auto in = input_bytes(t, numel_of(d), uint32_t(trial));
      auto want = expected(in, dtype_size(t), g.type(y).static_dims(), [&](const std::vector<int64_t>& o) {
        std::vector<int64_t> i(d.size());
        for (size_t k = 0; k < d.size(); ++k) i[size_t(perm[k])] = o[k];
        return flat(i, d);
      });
      ASSERT_EQ(run2(g, y, {in})[0], want) << dtype_name(t) << " trial " << trial;
    }
  }
}

TEST(TransposeKernel, ExtentWithLeadingAxisKept) {
  Graph g;
  Value x = g.input("x", Shape({6, 5, 7}, DType::F32));
  Value y = g.transpose(x, {0, 2, 1});
  auto in = input_bytes(DType::F32, 210, 5);
  auto want = expected(in, 4, {6, 7, 5}, [&](const std::vector<int64_t>& o) { return flat({o[0], o[2], o[1]}, {6, 5, 7}); });
  auto got = run2(g, y, {in}, 4, 6)[0];
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i < 4 * 35 * 4 ? want[i] : 0) << i;
}

TEST(TransposeKernel, ZeroSizeDims) {
  // Every position of the zero dim, with perms that would pick the row and plane modes.
  for (const auto& d : std::vector<std::vector<int64_t>>{{0, 3, 4}, {2, 0, 4}, {2, 3, 0}, {3, 1, 0}, {0}})
    for (const auto& perm : std::vector<std::vector<int64_t>>{{0, 2, 1}, {1, 0, 2}, {2, 1, 0}, {0}}) {
      if (perm.size() != d.size()) continue;
      Graph g;
      Value x = g.input("x", Shape(d, DType::F32));
      Value y = g.transpose(x, perm);
      auto out = run2(g, y, {{}});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(out[0].empty()) << g.type(x).str() << " -> " << g.type(y).str();
    }
}

// ---- slice
TEST(SliceKernel, StepsNegativeStepsAndClamping) {
  struct C { std::vector<int64_t> d, starts, ends, axes, steps; };
  const int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  const std::vector<C> cases = {
      {{10}, {2}, {8}, {}, {}},
      {{10}, {-3}, {kMax}, {}, {}},
      {{10}, {9}, {kMin}, {}, {-1}},
      {{10}, {8}, {1}, {}, {-3}},
      {{10}, {-100}, {100}, {}, {4}},
      {{4, 6, 5}, {1, 0}, {3, 6}, {0, 2}, {1, 2}},
      {{4, 6, 5}, {-1, 5}, {kMin, 0}, {0, 1}, {-2, -2}},
      {{4, 6, 5}, {2}, {3}, {1}, {}},
      {{4, 6, 5}, {0, 0, 4}, {4, 6, kMin}, {}, {1, 1, -1}},
      {{3, 8}, {5}, {5}, {1}, {}},  // empty
      {{2, 3, 4, 5}, {1, 2}, {3, 5}, {-1, -3}, {1, 1}},
      {{7, 9}, {6, 0}, {0, 9}, {0, 1}, {-1, kMax}},
  };
  uint32_t seed = 10;
  for (DType t : kSizes)
    for (const C& c : cases) {
      Graph g;
      Value x = g.input("x", Shape(c.d, t));
      Value y = g.slice(x, c.starts, c.ends, c.axes, c.steps);
      const auto od = g.type(y).static_dims();
      // Per-axis start and step from ONNX rules.
      std::vector<int64_t> start(c.d.size(), 0), step(c.d.size(), 1);
      for (size_t i = 0; i < c.starts.size(); ++i) {
        int64_t ax = c.axes.empty() ? int64_t(i) : c.axes[i];
        if (ax < 0) ax += int64_t(c.d.size());
        const int64_t n = c.d[size_t(ax)], st = c.steps.empty() ? 1 : c.steps[i];
        int64_t s = c.starts[i] < 0 ? c.starts[i] + n : c.starts[i];
        s = st > 0 ? std::clamp<int64_t>(s, 0, n) : std::clamp<int64_t>(s, 0, n - 1);
        start[size_t(ax)] = s;
        step[size_t(ax)] = st;
      }
      auto in = input_bytes(t, numel_of(c.d), seed++);
      auto want = expected(in, dtype_size(t), od, [&](const std::vector<int64_t>& o) {
        std::vector<int64_t> i(c.d.size());
        for (size_t k = 0; k < c.d.size(); ++k) i[k] = start[k] + o[k] * step[k];
        return flat(i, c.d);
      });
      ASSERT_EQ(run2(g, y, {in})[0], want) << dtype_name(t) << " " << g.type(x).str() << " -> " << g.type(y).str();
    }
}

// ---- concat / split
TEST(ConcatSplitKernel, AxesAndDtypes) {
  uint32_t seed = 30;
  for (DType t : kSizes)
    for (int axis : {0, 1, 2, -1}) {
      const std::vector<std::vector<int64_t>> shapes = [&] {
        std::vector<std::vector<int64_t>> s;
        const int a = axis < 0 ? axis + 3 : axis;
        for (int64_t len : {2, 0, 5, 1}) {
          std::vector<int64_t> d = {3, 4, 6};
          d[size_t(a)] = len;
          s.push_back(d);
        }
        return s;
      }();
      Graph g;
      std::vector<Value> xs;
      std::vector<std::vector<uint8_t>> ins;
      for (size_t i = 0; i < shapes.size(); ++i) {
        xs.push_back(g.input("x" + std::to_string(i), Shape(shapes[i], t)));
        ins.push_back(input_bytes(t, numel_of(shapes[i]), seed++));
      }
      Value y = g.concat(xs, axis);
      const auto od = g.type(y).static_dims();
      const int a = axis < 0 ? axis + 3 : axis;
      // Expected: walk the output, find which input holds the index along the axis.
      const size_t es = dtype_size(t);
      std::vector<uint8_t> want(size_t(numel_of(od)) * es);
      for (int64_t f = 0; f < numel_of(od); ++f) {
        auto o = unflatten(f, od);
        int64_t k = o[size_t(a)];
        size_t p = 0;
        while (k >= shapes[p][size_t(a)]) k -= shapes[p++][size_t(a)];
        o[size_t(a)] = k;
        std::memcpy(want.data() + f * es, ins[p].data() + flat(o, shapes[p]) * es, es);
      }
      auto got = run2(g, y, ins)[0];
      ASSERT_EQ(got, want) << "concat " << dtype_name(t) << " axis " << axis;

      // Split the result back into the parts.
      Graph g2;
      Value whole = g2.input("w", Shape(od, t));
      std::vector<int64_t> sizes;
      for (const auto& s : shapes) sizes.push_back(s[size_t(a)]);
      auto parts = g2.split(whole, axis, sizes);
      auto outs = run2(g2, parts[0], {got});
      ASSERT_EQ(outs.size(), ins.size());
      for (size_t i = 0; i < ins.size(); ++i) ASSERT_EQ(outs[i], ins[i]) << "split part " << i << " axis " << axis;
    }
}

TEST(ConcatSplitKernel, ExtentOnInnerAxis) {
  Graph g;
  Value a = g.input("a", Shape({5, 2}, DType::I32)), b = g.input("b", Shape({5, 3}, DType::I32));
  Value y = g.concat({a, b}, 1);
  std::vector<int32_t> av(10), bv(15);
  for (int i = 0; i < 10; ++i) av[size_t(i)] = i + 1;
  for (int i = 0; i < 15; ++i) bv[size_t(i)] = 100 + i;
  auto got = from_bytes<int32_t>(run2(g, y, {to_bytes(av), to_bytes(bv)}, 2, 5)[0]);
  const std::vector<int32_t> want = {1, 2, 100, 101, 102, 3, 4, 103, 104, 105};
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i < 10 ? want[i] : 0) << i;
}

// ---- gather
TEST(GatherKernel, AxesNegativeIndicesIndexTypes) {
  uint32_t seed = 50;
  for (DType t : kSizes)
    for (DType it : {DType::I64, DType::I32})
      for (int axis : {0, 1, -1})
        for (const auto& idx_dims : std::vector<std::vector<int64_t>>{{}, {4}, {2, 3}}) {
          const std::vector<int64_t> d = {5, 4, 3};
          const int a = axis < 0 ? axis + 3 : axis;
          Graph g;
          Value x = g.input("x", Shape(d, t));
          Value i = g.input("i", Shape(idx_dims, it));
          Value y = g.gather(x, i, axis);
          const int64_t n = d[size_t(a)], ni = numel_of(idx_dims);
          std::vector<double> iv;
          for (int64_t k = 0; k < ni; ++k) iv.push_back(double((k * 7 + int64_t(seed)) % (2 * n) - n));
          auto in = input_bytes(t, numel_of(d), seed++);
          const auto od = g.type(y).static_dims();
          const int r = int(idx_dims.size());
          auto want = expected(in, dtype_size(t), od, [&](const std::vector<int64_t>& o) {
            std::vector<int64_t> src(o.begin(), o.begin() + a);
            std::vector<int64_t> io(o.begin() + a, o.begin() + a + r);
            int64_t v = int64_t(iv[size_t(flat(io, idx_dims))]);
            src.push_back(v < 0 ? v + n : v);
            src.insert(src.end(), o.begin() + a + r, o.end());
            return flat(src, d);
          });
          ASSERT_EQ(run2(g, y, {in, encode(it, iv)})[0], want) << dtype_name(t) << " axis " << axis;
        }
}

TEST(GatherKernel, OutOfRangeIndexThrowsNamingTheNode) {
  Graph g;
  Value x = g.input("x", Shape({4, 2}, DType::F32));
  Value i = g.input("i", Shape({3}, DType::I64));
  Value y = g.add1(OpKind::Gather, {x, i}, AxisAttrs{0}, "my_gather");
  std::vector<float> xv(8, 1.0f);
  for (int64_t bad : {4, -5, 1000}) {
    std::vector<int64_t> iv = {0, bad, 1};
    try {
      run_kernel(g, y.node, {to_bytes(xv), to_bytes(iv)}, 2);
      ADD_FAILURE() << "index " << bad << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("my_gather"), std::string::npos) << e.what();
    }
  }
  std::vector<int64_t> ok = {-4, 3, -1};
  auto got = from_bytes<float>(run_kernel(g, y.node, {to_bytes(xv), to_bytes(ok)}, 2)[0]);
  EXPECT_EQ(got.size(), 6u);
}

// ---- expand / tile
TEST(ExpandTileKernel, BroadcastAndRepeat) {
  uint32_t seed = 70;
  struct E { std::vector<int64_t> d, target; };
  for (DType t : kSizes) {
    for (const E& c : {E{{3, 1}, {2, 3, 4}}, E{{1}, {5}}, E{{4, 1, 6}, {4, 5, 6}}, E{{2, 3}, {2, 3}},
                       E{{5, 1}, {1, 7}}, E{{1, 1, 3}, {3, 2, 1}}, E{{64, 1}, {64, 200}},
                       // A trailing 1 to 2 (a nearest 2x upsample's width; 4-byte types by pairs of
                       // unpacks): row counts with and without a tail of the unpack's four.
                       E{{2, 3, 7, 1}, {2, 3, 7, 2}}, E{{96, 5, 1}, {96, 5, 2}}, E{{1, 3, 1}, {1, 3, 2}}}) {
      Graph g;
      Value x = g.input("x", Shape(c.d, t));
      Value y = g.expand(x, c.target);
      const auto od = g.type(y).static_dims();
      auto in = input_bytes(t, numel_of(c.d), seed++);
      auto want = expected(in, dtype_size(t), od, [&](const std::vector<int64_t>& o) {
        std::vector<int64_t> i(c.d.size());
        const size_t off = od.size() - c.d.size();
        for (size_t k = 0; k < c.d.size(); ++k) i[k] = c.d[k] == 1 ? 0 : o[k + off];
        return flat(i, c.d);
      });
      ASSERT_EQ(run2(g, y, {in})[0], want) << "expand " << dtype_name(t) << " " << g.type(x).str();
    }
    for (const E& c : {E{{2, 3}, {2, 3}}, E{{3}, {4}}, E{{2, 1, 3}, {1, 4, 2}}, E{{2, 3}, {0, 1}}, E{{5, 40}, {3, 2}}}) {
      Graph g;
      Value x = g.input("x", Shape(c.d, t));
      Value y = g.tile(x, c.target);
      const auto od = g.type(y).static_dims();
      auto in = input_bytes(t, numel_of(c.d), seed++);
      auto want = expected(in, dtype_size(t), od, [&](const std::vector<int64_t>& o) {
        std::vector<int64_t> i(c.d.size());
        for (size_t k = 0; k < c.d.size(); ++k) i[k] = o[k] % c.d[k];
        return flat(i, c.d);
      });
      ASSERT_EQ(run2(g, y, {in})[0], want) << "tile " << dtype_name(t) << " " << g.type(x).str();
    }
  }
}

// ---- pad
int64_t ref_pad_src(int64_t i, int64_t n, PadMode m) {
  if (i >= 0 && i < n) return i;
  if (m == PadMode::Constant) return -1;
  if (m == PadMode::Edge) return i < 0 ? 0 : n - 1;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;  // mirror without repeating the edge
  return i;
}

TEST(PadKernel, ModesNegativePadsAndFill) {
  uint32_t seed = 90;
  struct C { std::vector<int64_t> d, pads; };
  const std::vector<C> cases = {
      {{5}, {2, 3}},          {{4, 6}, {1, 2, 3, 0}},   {{4, 6}, {0, 0, 0, 0}},  {{4, 6}, {-1, 2, 1, -3}},
      {{3, 4, 5}, {0, 1, 2, 0, 3, 1}}, {{2, 3, 4}, {1, 0, 0, 1, 0, 0}}, {{6, 7}, {0, -2, 0, -2}},
      {{3, 40}, {0, 3, 0, 2}},
  };
  for (PadMode m : {PadMode::Constant, PadMode::Reflect, PadMode::Edge})
    for (DType t : {DType::F32, DType::F16, DType::I64, DType::U8, DType::C128})
      for (const C& c : cases) {
        bool reflect_ok = true;
        const size_t r = c.d.size();
        for (size_t k = 0; k < r; ++k)
          if (c.pads[k] >= c.d[k] || c.pads[k + r] >= c.d[k]) reflect_ok = false;
        if (m == PadMode::Reflect && !reflect_ok) continue;
        Graph g;
        Value x = g.input("x", Shape(c.d, t));
        Value y = g.pad(x, c.pads, m, 2.5);
        const auto od = g.type(y).static_dims();
        auto in = encode(t, random_values(t, numel_of(c.d), seed++, 0, 100));
        const auto fill = encode(t, is_complex(t) ? std::vector<double>{2.5, 0.0} : std::vector<double>{2.5});
        auto want = expected(in, dtype_size(t), od, [&](const std::vector<int64_t>& o) -> int64_t {
          std::vector<int64_t> i(r);
          for (size_t k = 0; k < r; ++k) {
            i[k] = ref_pad_src(o[k] - c.pads[k], c.d[k], m);
            if (i[k] < 0) return -1;
          }
          return flat(i, c.d);
        }, fill);
        ASSERT_EQ(run2(g, y, {in})[0], want) << "pad mode " << int(m) << " " << dtype_name(t) << " " << g.type(x).str();
      }
}

TEST(PadKernel, FillValueOutOfRangeUsesCastSemantics) {
  // Truncate toward zero, NaN -> 0, saturate to int64, then wrap to the type (as Cast does).
  struct C { DType t; double v; std::vector<uint8_t> want; };
  const std::vector<C> cases = {
      {DType::U8, 300.0, {44}},         {DType::U8, -1.0, {255}},       {DType::U8, NAN, {0}},
      {DType::I8, 1e30, {0xff}},        {DType::I8, -2.9, {0xfe}},      {DType::I32, -1e30, {0, 0, 0, 0}},
      {DType::U32, 4294967296.5, {0, 0, 0, 0}}, {DType::I16, INFINITY, {0xff, 0xff}},
      {DType::Bool, NAN, {1}},
  };
  for (const C& c : cases) {
    Graph g;
    Value x = g.input("x", Shape({1}, c.t));
    Value y = g.pad(x, {1, 0}, PadMode::Constant, c.v);
    const auto in = std::vector<uint8_t>(dtype_size(c.t), 0);
    const auto got = run2(g, y, {in})[0];
    ASSERT_EQ(got.size(), 2 * dtype_size(c.t));
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + dtype_size(c.t)), c.want)
        << dtype_name(c.t) << " fill " << c.v;
  }
}

// ---- reshape / identity copies
TEST(CopyKernel, ReshapeAndIdentityCopyBytes) {
  Graph g;
  Value x = g.input("x", Shape({6, 40, 50}, DType::F16));
  Value r = g.reshape(x, {6, 2000});
  Value i = g.identity(x);
  auto in = random_bytes(6 * 40 * 50 * 2, 3);
  EXPECT_EQ(run2(g, r, {in})[0], in);
  EXPECT_EQ(run2(g, i, {in})[0], in);
  auto part = run2(g, i, {in}, 2, 6)[0];
  for (size_t k = 0; k < part.size(); ++k) ASSERT_EQ(part[k], k < 2 * 4000 ? in[k] : 0) << k;
}

}  // namespace
}  // namespace rlx::test::reduce_movement
