// Data movement on CUDA gives the CPU's bytes: transposes, slices and concats in 1-, 2- and
// 4-byte types, with the innermost run contiguous (copied 16, 8 or 4 bytes per thread by
// strided_copy's widening) or not (true transposes through 32 x 32 shared-memory tiles, or
// element by element when a dim is short), aligned or offset by an element. Movement is exact, so
// the comparison is equality. And the contiguous elementwise paths (unary and binary kernels and
// generated fused programs 16 bytes at a time, with tails): add, sub, mul and div round once
// per op on both backends, so they too must give the CPU's bytes. Skips without a usable
// CUDA device.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

// The graph's outputs o0, o1, ...: each of `outs` brought back to f32 (exactly) for comparison.
void set_f32_outputs(Graph& g, std::vector<Value> outs) {
  std::vector<std::string> names;
  for (Value& v : outs) {
    v = g.cast(v, DType::F32);
    names.push_back("o" + std::to_string(names.size()));
  }
  g.set_outputs(outs, names);
}

// x f32[2, 5, 3, w], y [2, 5, 3, 4], z [2, 9, 3, w], m [40, 70] (values k/8 for small integers k:
// exact in f16; k in i8), moved in `t`
// and brought back to f32 for comparison.
Graph movements(int64_t w, DType t) {
  Graph g("movement");
  Value x = g.input("x", Shape({2, 5, 3, w}, DType::F32));
  Value y = g.input("y", Shape({2, 5, 3, 4}, DType::F32));
  Value z = g.input("z", Shape({2, 9, 3, w}, DType::F32));
  Value m = g.input("m", Shape({40, 70}, DType::F32));
  Value xt = g.cast(x, t), yt = g.cast(y, t), zt = g.cast(z, t), mt = g.cast(m, t);
  std::vector<Value> outs = {
      g.transpose(xt, {0, 2, 1, 3}),                 // heads: the inner run contiguous
      g.transpose(xt, {0, 3, 2, 1}),                 // the inner dim moves: element by element
      g.slice(xt, {1}, {w - 1}, {3}),                // rows offset by one element
      g.slice(xt, {0, 0}, {1, w}, {0, 3}),           // whole rows, first batch
      g.concat({xt, yt}, 3),                         // rows of w and 4 into rows of w + 4
      g.transpose(g.slice(xt, {1}, {4}, {1}), {1, 0, 2, 3}),
      g.transpose(zt, {0, 2, 3, 1}),                 // K heads: a true transpose (32 x 32 tiles when w >= 8)
      g.transpose(mt, {1, 0}),                       // a 2-D transpose with partial edge tiles
  };
  set_f32_outputs(g, std::move(outs));
  return g;
}

TEST(CudaMovement, CopiesGiveTheCpuBytesInEveryWidth) {
  REQUIRE_CUDA();
  for (DType t : {DType::F32, DType::F16, DType::I8}) {
    for (int64_t w : {64, 8, 6, 7, 2}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " w " + std::to_string(w));
      std::map<std::string, std::vector<float>> feeds;
      for (const char* name : {"x", "y", "z", "m"}) {
        const int64_t count = name[0] == 'x' ? 2 * 5 * 3 * w : name[0] == 'y' ? 2 * 5 * 3 * 4
                              : name[0] == 'z' ? 2 * 9 * 3 * w : 40 * 70;
        std::vector<float> v(static_cast<size_t>(count));
        for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 7 % 29) - 14) / (t == DType::I8 ? 1.0f : 8.0f);
        feeds[name] = std::move(v);
      }
      const std::vector<std::vector<float>> want = Session(Device::Cpu).compile(movements(w, t)).run(feeds);
      const std::vector<std::vector<float>> got = Session(Device::Cuda).compile(movements(w, t)).run(feeds);
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) EXPECT_EQ(got[o], want[o]) << "output " << o;
    }
  }
}

// a + b, a - b, a * b, a / b (each a binary kernel), relu(a), |a|, -b (unary kernels) and ((a + b) * a - b) / 4 (a fused
// program) over n elements in t; inputs are k/8 for small integers k.
Graph arithmetic(int64_t n, DType t, bool fuse) {
  Graph g(fuse ? "fused" : "binary");
  Value a = g.cast(g.input("a", Shape({n}, DType::F32)), t);
  Value b = g.cast(g.input("b", Shape({n}, DType::F32)), t);
  std::vector<Value> outs;
  if (fuse) {
    Value four = g.cast(g.constant_f32({1}, {4.0f}), t);
    outs = {g.div(g.sub(g.mul(g.add(a, b), a), b), four)};
  } else {
    outs = {g.add(a, b), g.sub(a, b), g.mul(a, b), g.div(a, b), g.relu(a), g.abs(a), g.neg(b)};
  }
  set_f32_outputs(g, std::move(outs));
  return g;
}

TEST(CudaElementwise, ContiguousArithmeticGivesTheCpuBytes) {
  REQUIRE_CUDA();
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t n : {int64_t(1000003), int64_t(64), int64_t(7)})
      for (bool fuse : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " n " + std::to_string(n) + (fuse ? " fused" : " binary"));
        std::map<std::string, std::vector<float>> feeds;
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (size_t i = 0; i < a.size(); ++i) {
          a[i] = float(int(i * 7 % 29) - 14) / 8.0f;
          b[i] = float(int(i * 11 % 23) + 1) / 8.0f;  // never 0
        }
        feeds["a"] = a;
        feeds["b"] = b;
        CompileOptions o;
        o.fuse_elementwise = fuse;
        const auto want = Session(Device::Cpu, o).compile(arithmetic(n, t, fuse)).run(feeds);
        const auto got = Session(Device::Cuda, o).compile(arithmetic(n, t, fuse)).run(feeds);
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got[k], want[k]) << "output " << k;
      }
}

}  // namespace
}  // namespace rlx
