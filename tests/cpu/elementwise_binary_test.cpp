// Binary, compare, logical and where ops: every accepted dtype vs a plain reference,
// numpy broadcasting cases, and 1/2-thread and scalar-ISA agreement.
#include "ew_test_util.h"

namespace rlx::test::ew {
namespace {

const DType kReal[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I16,
                       DType::I32, DType::I64, DType::U8, DType::U32};

// Wraps an int64 to dtype t (two's complement truncation).
int64_t wrap(DType t, int64_t v) {
  const int bits = int(dtype_size(t)) * 8;
  if (bits == 64) return v;
  const uint64_t w = uint64_t(v) & ((uint64_t(1) << bits) - 1);
  if (is_signed(t) && (w >> (bits - 1))) return int64_t(w) - (int64_t(1) << bits);
  return int64_t(w);
}

// Integer reference on exact int64 values (mod: fmod = sign of dividend).
int64_t int_ref(OpKind k, DType t, int64_t a, int64_t b, bool fmod) {
  switch (k) {
    case OpKind::Add: return wrap(t, int64_t(uint64_t(a) + uint64_t(b)));
    case OpKind::Sub: return wrap(t, int64_t(uint64_t(a) - uint64_t(b)));
    case OpKind::Mul: return wrap(t, int64_t(uint64_t(a) * uint64_t(b)));
    case OpKind::Div: return b == 0 ? 0 : wrap(t, b == -1 ? int64_t(0 - uint64_t(a)) : a / b);
    case OpKind::Max: return std::max(a, b);
    case OpKind::Min: return std::min(a, b);
    case OpKind::Mod: {
      if (b == 0) return 0;
      if (b == -1) return 0;
      int64_t r = a % b;
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case OpKind::BitwiseAnd: return a & b;
    case OpKind::BitwiseOr: return a | b;
    case OpKind::BitwiseXor: return a ^ b;
    case OpKind::Pow: {
      if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
      int64_t r = 1;
      for (int64_t i = 0; i < b; ++i) r = int64_t(uint64_t(r) * uint64_t(a));
      return wrap(t, r);
    }
    default: return 0;
  }
}

double float_ref(OpKind k, double a, double b, bool fmod) {
  switch (k) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div: return a / b;
    case OpKind::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case OpKind::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case OpKind::Pow: return std::pow(a, b);
    case OpKind::Mod: {
      double r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    default: return 0;
  }
}

// Reads element `flat` of an input broadcast to `out` (numpy rules).
int64_t bcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t flat) {
  int64_t idx = 0, stride = 1;
  for (int a = int(out.size()) - 1, b = int(in.size()) - 1; a >= 0; --a, --b) {
    const int64_t coord = flat % out[size_t(a)];
    flat /= out[size_t(a)];
    if (b >= 0) {
      if (in[size_t(b)] != 1) idx += coord * stride;
      stride *= in[size_t(b)];
    }
  }
  return idx;
}

struct ShapePair {
  std::vector<int64_t> a, b;
};
const std::vector<ShapePair> kShapes = {
    {{2, 3, 37}, {2, 3, 37}}, {{2, 3, 37}, {37}}, {{2, 1, 37}, {1, 3, 1}}, {{7, 1}, {1, 19}},
    {{}, {45}}, {{45}, {}}, {{1}, {1}}, {{4, 5, 6, 7}, {5, 1, 7}}, {{0, 3}, {3}}, {{3, 1, 2}, {3, 4, 1}},
};

void check_binary(OpKind k, DType t, const ShapePair& sp, uint32_t seed, double alpha = 0) {
  const bool u = !is_signed(t);
  double lo = u ? 0 : -50, hi = 50;
  if (k == OpKind::Pow) lo = is_integer(t) ? (u ? 0 : -3) : 0.1, hi = is_integer(t) ? 3 : 4;
  Tensor a = random_tensor(t, sp.a, lo, hi, seed);
  Tensor b = random_tensor(t, sp.b, k == OpKind::Pow ? (is_integer(t) ? 0 : -2) : lo, hi, seed + 1);
  auto r = run_op(k, {a, b}, scalar_attrs(k, alpha));
  ASSERT_EQ(r.shape.dtype(), t);
  const auto od = r.shape.static_dims();
  const int64_t n = numel_of(od);
  const std::string what = std::string(op_name(k)) + " " + std::string(dtype_name(t)) + " " + a.shape.str() +
                           " " + b.shape.str();
  if (is_integer(t)) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t x = geti(t, a.bytes.data(), bcast_index(sp.a, od, i));
      const int64_t y = geti(t, b.bytes.data(), bcast_index(sp.b, od, i));
      ASSERT_EQ(geti(t, r.bytes.data(), i), wrap(t, int_ref(k, t, x, y, alpha == 1)))
          << what << " [" << i << "] " << x << ", " << y;
    }
    return;
  }
  std::vector<double> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = get(t, a.bytes.data(), bcast_index(sp.a, od, i));
    const double y = get(t, b.bytes.data(), bcast_index(sp.b, od, i));
    double v = float_ref(k, x, y, alpha == 1);
    if (t == DType::F32 && k != OpKind::Pow && k != OpKind::Mod) v = double(float(v));
    ref[size_t(i)] = round_to(t, v);
  }
  expect_all_close(t, r.bytes, ref, float_tol(t), what);
}

TEST(ElementwiseBinary, ArithmeticAllDtypesAndBroadcasts) {
  uint32_t seed = 100;
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min,
                   OpKind::Mod, OpKind::Pow})
    for (DType t : kReal)
      for (const auto& sp : kShapes) {
        check_binary(k, t, sp, seed += 2);
        if (k == OpKind::Mod) check_binary(k, t, sp, seed += 2, 1);
      }
}

TEST(ElementwiseBinary, BitwiseOnIntegers) {
  uint32_t seed = 300;
  for (OpKind k : {OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor})
    for (DType t : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U32})
      for (const auto& sp : kShapes) check_binary(k, t, sp, seed += 2);
}

TEST(ElementwiseBinary, IntegerDivisionEdgeCases) {
  Tensor a = from_values(DType::I32, {6}, {7, -7, 7, -7, -2147483648.0, 5});
  Tensor b = from_values(DType::I32, {6}, {2, 2, -2, -2, -1, 0});
  auto d = run_op(OpKind::Div, {a, b}, scalar_attrs(OpKind::Div));
  auto fl = run_op(OpKind::Mod, {a, b}, scalar_attrs(OpKind::Mod, 0));
  auto fm = run_op(OpKind::Mod, {a, b}, scalar_attrs(OpKind::Mod, 1));
  const std::vector<int64_t> want_d = {3, -3, -3, 3, -2147483648LL, 0}, want_floor = {1, 1, -1, -1, 0, 0},
                             want_fmod = {1, -1, 1, -1, 0, 0};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(geti(DType::I32, d.bytes.data(), i), want_d[size_t(i)]) << i;
    EXPECT_EQ(geti(DType::I32, fl.bytes.data(), i), want_floor[size_t(i)]) << i;
    EXPECT_EQ(geti(DType::I32, fm.bytes.data(), i), want_fmod[size_t(i)]) << i;
  }
}

TEST(ElementwiseBinary, MixedDtypesPromote) {
  // i32 + f32 -> f32; pow(f32, i64) keeps f32; pow(i64, f32) truncates.
  Tensor a = from_values(DType::I32, {4}, {1, -2, 3, 40});
  Tensor b = from_values(DType::F32, {4}, {0.5, 0.25, -1, 2});
  auto r = run_op(OpKind::Add, {a, b}, scalar_attrs(OpKind::Add));
  ASSERT_EQ(r.shape.dtype(), DType::F32);
  EXPECT_EQ(from_bytes<float>(r.bytes), (std::vector<float>{1.5f, -1.75f, 2, 42}));
  Tensor e = from_values(DType::I64, {4}, {2, 3, 0, -1});
  r = run_op(OpKind::Pow, {b, e}, scalar_attrs(OpKind::Pow));
  EXPECT_EQ(from_bytes<float>(r.bytes), (std::vector<float>{0.25f, 0.015625f, 1, 0.5f}));
  Tensor base = from_values(DType::I64, {3}, {2, 9, 5});
  Tensor fe = from_values(DType::F32, {3}, {0.5, 0.5, 2});
  r = run_op(OpKind::Pow, {base, fe}, scalar_attrs(OpKind::Pow));
  EXPECT_EQ(from_bytes<int64_t>(r.bytes), (std::vector<int64_t>{1, 3, 25}));
}

TEST(ElementwiseBinary, Complex) {
  for (DType t : {DType::C64, DType::C128}) {
    Tensor a = random_tensor(t, {3, 17}, -4, 4, 21), b = random_tensor(t, {17}, 0.5, 4, 22);
    for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Equal, OpKind::NotEqual}) {
      auto r = run_op(k, {a, b}, scalar_attrs(k));
      for (int64_t i = 0; i < 51; ++i) {
        const auto x = getc(t, a.bytes.data(), i), y = getc(t, b.bytes.data(), i % 17);
        if (k == OpKind::Equal || k == OpKind::NotEqual) {
          EXPECT_EQ(r.bytes[size_t(i)], (x == y) == (k == OpKind::Equal) ? 1 : 0);
          continue;
        }
        const auto want = k == OpKind::Add ? x + y : k == OpKind::Sub ? x - y : k == OpKind::Mul ? x * y : x / y;
        const auto got = getc(t, r.bytes.data(), i);
        EXPECT_NEAR(got.real(), want.real(), 1e-5 * (1 + std::abs(want))) << op_name(k);
        EXPECT_NEAR(got.imag(), want.imag(), 1e-5 * (1 + std::abs(want))) << op_name(k);
      }
    }
    auto eq_self = run_op(OpKind::Equal, {a, a}, scalar_attrs(OpKind::Equal));
    EXPECT_TRUE(std::all_of(eq_self.bytes.begin(), eq_self.bytes.end(), [](uint8_t v) { return v == 1; }));
  }
}

TEST(ElementwiseCompare, AllRealDtypes) {
  uint32_t seed = 500;
  for (DType t : kReal) {
    for (const auto& sp : kShapes) {
      Tensor a = random_tensor(t, sp.a, is_signed(t) ? -5 : 0, 5, seed++);
      Tensor b = random_tensor(t, sp.b, is_signed(t) ? -5 : 0, 5, seed++);
      for (OpKind k : {OpKind::Equal, OpKind::NotEqual, OpKind::Less, OpKind::LessEqual, OpKind::Greater,
                       OpKind::GreaterEqual}) {
        auto r = run_op(k, {a, b}, scalar_attrs(k));
        ASSERT_EQ(r.shape.dtype(), DType::Bool);
        const auto od = r.shape.static_dims();
        for (int64_t i = 0; i < numel_of(od); ++i) {
          const double x = get(t, a.bytes.data(), bcast_index(sp.a, od, i));
          const double y = get(t, b.bytes.data(), bcast_index(sp.b, od, i));
          const bool want = k == OpKind::Equal ? x == y : k == OpKind::NotEqual ? x != y : k == OpKind::Less ? x < y
                          : k == OpKind::LessEqual ? x <= y : k == OpKind::Greater ? x > y : x >= y;
          ASSERT_EQ(r.bytes[size_t(i)], want ? 1 : 0) << op_name(k) << " " << dtype_name(t) << " " << x << " " << y;
        }
      }
    }
  }
  Tensor n = from_values(DType::F32, {2}, {NAN, 1});
  auto r = run_op(OpKind::NotEqual, {n, n}, scalar_attrs(OpKind::NotEqual));
  EXPECT_EQ(r.bytes, (std::vector<uint8_t>{1, 0}));
}

TEST(ElementwiseLogical, BoolOps) {
  Tensor a = from_values(DType::Bool, {4, 1}, {0, 1, 1, 0});
  Tensor b = from_values(DType::Bool, {1, 2}, {0, 1});
  for (OpKind k : {OpKind::And, OpKind::Or, OpKind::Xor, OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor}) {
    auto r = run_op(k, {a, b}, scalar_attrs(k));
    for (int i = 0; i < 8; ++i) {
      const bool x = a.bytes[size_t(i / 2)], y = b.bytes[size_t(i % 2)];
      const bool want = (k == OpKind::And || k == OpKind::BitwiseAnd) ? (x && y)
                      : (k == OpKind::Or || k == OpKind::BitwiseOr) ? (x || y) : (x != y);
      EXPECT_EQ(r.bytes[size_t(i)], want ? 1 : 0) << op_name(k) << " " << i;
    }
  }
}

TEST(ElementwiseWhere, DtypesAndBroadcast) {
  for (DType t : {DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool, DType::C128, DType::F64}) {
    Tensor c = random_tensor(DType::Bool, {3, 1, 5}, 0, 9, 31);
    Tensor a = random_tensor(t, {4, 5}, 0, 9, 32);
    Tensor b = random_tensor(t, {}, 0, 9, 33);
    auto r = run_op(OpKind::Where, {c, a, b}, scalar_attrs(OpKind::Where));
    const std::vector<int64_t> od = {3, 4, 5};
    ASSERT_EQ(r.shape.static_dims(), od);
    const size_t e = dtype_size(t);
    for (int64_t i = 0; i < 60; ++i) {
      const bool cond = c.bytes[size_t(bcast_index({3, 1, 5}, od, i))];
      const uint8_t* want = cond ? a.bytes.data() + bcast_index({4, 5}, od, i) * int64_t(e) : b.bytes.data();
      EXPECT_EQ(std::memcmp(r.bytes.data() + i * int64_t(e), want, e), 0) << dtype_name(t) << " " << i;
    }
  }
}

TEST(ElementwiseBinary, ThreadsAndIsaAgree) {
  const std::vector<int64_t> da = {3, 70001}, db = {70001};
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min, OpKind::Pow}) {
    Tensor a = random_tensor(DType::F32, da, 0.1, 9, 41), b = random_tensor(DType::F32, db, -3, 3, 42);
    put(DType::F32, a.bytes.data(), 5, NAN);
    put(DType::F32, b.bytes.data(), 9, NAN);
    for (bool swap : {false, true}) {
      std::vector<Tensor> ins = swap ? std::vector<Tensor>{b, a} : std::vector<Tensor>{a, b};
      auto one = run_op(k, ins, scalar_attrs(k));
      auto two = run_op(k, ins, scalar_attrs(k), 2);
      EXPECT_EQ(one.bytes, two.bytes) << op_name(k);
      auto sc = with_isa("scalar", [&] { return run_op(k, ins, scalar_attrs(k)); });
      EXPECT_EQ(one.bytes, sc.bytes) << op_name(k) << " (vector and scalar must agree bit for bit)";
    }
    // scalar operand on either side
    Tensor s = from_values(DType::F32, {}, {1.75});
    for (bool swap : {false, true}) {
      std::vector<Tensor> ins = swap ? std::vector<Tensor>{s, a} : std::vector<Tensor>{a, s};
      auto v = run_op(k, ins, scalar_attrs(k));
      auto sc = with_isa("scalar", [&] { return run_op(k, ins, scalar_attrs(k)); });
      EXPECT_EQ(v.bytes, sc.bytes) << op_name(k) << " scalar operand";
    }
  }
}

}  // namespace
}  // namespace rlx::test::ew
