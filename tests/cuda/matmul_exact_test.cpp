// Matrix products of the types cuBLASLt has none for (matmul_exact.cu): the integers give
// the CPU's bytes, wrapping in the element type (int8 sums of seven products up to 100 x
// 100 overflow on purpose), and f64 the CPU's values up to the order of its sums (one f32
// ulp after the cast back). Plain,
// batched with broadcasting on both sides, and a batch of A against one B. Skips without a
// usable CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

struct Case {
  std::vector<int64_t> a, b;
};
const std::vector<Case> kCases = {{{5, 7}, {7, 3}}, {{2, 1, 4, 6}, {3, 6, 5}}, {{3, 4, 6}, {6, 2}}, {{4, 1, 2, 3}, {2, 3, 9}}};

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// a [c.a] . b [c.b] in type t, the product cast back to f32 (exact for the integer results
// here: |v| < 2^24).
Graph product(const Case& c, DType t) {
  Graph g("exact_matmul");
  Value a = g.cast(g.input("a", Shape(c.a, DType::F32)), t);
  Value b = g.cast(g.input("b", Shape(c.b, DType::F32)), t);
  g.set_outputs({g.cast(g.matmul(a, b), DType::F32)}, {"y"});
  return g;
}

TEST(CudaExactMatMul, IntegersGiveTheCpuBytesAndF64ItsValues) {
  REQUIRE_CUDA();
  for (DType t : {DType::F64, DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64}) {
    for (size_t ci = 0; ci < kCases.size(); ++ci) {
      const Case& c = kCases[ci];
      SCOPED_TRACE(std::string(dtype_name(t)) + " case " + std::to_string(ci));
      std::map<std::string, std::vector<float>> feeds;
      const bool small = t == DType::I8 || t == DType::U8;
      for (const char* name : {"a", "b"}) {
        std::vector<float> v(size_t(numel(name[0] == 'a' ? c.a : c.b)));
        for (size_t i = 0; i < v.size(); ++i) {
          const int k = int(i * 37 % 201) - 100;  // -100 .. 100
          // u32: 0 .. 16,000,000 (exact in f32), whose products wrap modulo 2^32.
          v[i] = t == DType::F64   ? float(k) / 7.0f
                 : t == DType::U32 ? float((k + 100) * 80000)
                 : small           ? float(t == DType::U8 ? k + 100 : k)
                                   : float(k * 3);
        }
        feeds[name] = std::move(v);
      }
      const auto want = Session(Device::Cpu).compile(product(c, t)).run(feeds);
      const auto got = Session(Device::Cuda).compile(product(c, t)).run(feeds);
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].size(), want[0].size());
      if (t != DType::F64) {
        EXPECT_EQ(got[0], want[0]);
        continue;
      }
      // The two f64 sums (another order of at most 9 terms) differ by far less than half an
      // f32 ulp of the result, so after the cast to f32 they are equal or neighbours: one ulp,
      // at most 2^-23 of the larger magnitude (1e-12 absolute for a result that cancels to
      // near zero, where an f32 ulp is smaller than the f64 sums' difference).
      for (size_t i = 0; i < want[0].size(); ++i)
        EXPECT_NEAR(got[0][i], want[0][i], std::ldexp(1.0, -23) * std::max(std::fabs(want[0][i]), std::fabs(got[0][i])) + 1e-12)
            << "element " << i;
    }
  }
}

}  // namespace
}  // namespace rlx
