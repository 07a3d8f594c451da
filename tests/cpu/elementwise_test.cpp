// Unary elementwise ops, cast, identity, supports() and ISA/thread determinism:
// every op vs a plain double-precision reference for each accepted dtype.
#include <functional>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "ew_test_util.h"

namespace rlx::test::ew {
namespace {

constexpr DType kFloats[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
constexpr double kSqrt1_2 = 0.70710678118654752440;

struct UnaryCase {
  OpKind kind;
  double lo, hi;
  std::function<double(double)> ref;
  double alpha = 0, beta = 0;
  double tol_scale = 1;
};

double softplus_ref(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

std::vector<UnaryCase> float_cases() {
  const double a = 0.2, b = 0.5;
  return {
      {OpKind::Exp, -87, 88, [](double x) { return std::exp(x); }},
      {OpKind::Log, 1e-3, 1e3, [](double x) { return std::log(x); }},
      {OpKind::Sqrt, 0, 1e4, [](double x) { return std::sqrt(x); }},
      {OpKind::Rsqrt, 1e-3, 1e4, [](double x) { return 1 / std::sqrt(x); }},
      {OpKind::Reciprocal, 0.01, 100, [](double x) { return 1 / x; }},
      {OpKind::Sin, -10, 10, [](double x) { return std::sin(x); }},
      {OpKind::Cos, -10, 10, [](double x) { return std::cos(x); }},
      {OpKind::Tan, -1.4, 1.4, [](double x) { return std::tan(x); }},
      {OpKind::Asin, -1, 1, [](double x) { return std::asin(x); }},
      {OpKind::Acos, -1, 1, [](double x) { return std::acos(x); }},
      {OpKind::Atan, -20, 20, [](double x) { return std::atan(x); }},
      {OpKind::Sinh, -10, 10, [](double x) { return std::sinh(x); }},
      {OpKind::Cosh, -10, 10, [](double x) { return std::cosh(x); }},
      {OpKind::Asinh, -50, 50, [](double x) { return std::asinh(x); }},
      {OpKind::Acosh, 1, 50, [](double x) { return std::acosh(x); }},
      {OpKind::Atanh, -0.99, 0.99, [](double x) { return std::atanh(x); }},
      {OpKind::Tanh, -12, 12, [](double x) { return std::tanh(x); }},
      {OpKind::Tanh, -0.7, 0.7, [](double x) { return std::tanh(x); }},
      {OpKind::Sigmoid, -80, 40, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {OpKind::Gelu, -13, 8, [](double x) { return 0.5 * x * std::erfc(-x * kSqrt1_2); }},
      {OpKind::Gelu, -6, 6,
       // 0.5 x (1 + tanh(u)) without the cancellation of 1 + tanh(u) for x << 0
       [](double x) { return x / (1 + std::exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x))); },
       1, 0, 4},
      {OpKind::Silu, -80, 40, [](double x) { return x / (1 + std::exp(-x)); }},
      {OpKind::Softplus, -30, 30, softplus_ref},
      {OpKind::Softsign, -10, 10, [](double x) { return x / (1 + std::fabs(x)); }},
      {OpKind::Mish, -10, 10, [](double x) { return x * std::tanh(softplus_ref(x)); }},
      {OpKind::HardSwish, -5, 5, [](double x) { return x * clamp01(x / 6 + 0.5); }},
      {OpKind::HardSigmoid, -5, 5, [=](double x) { return clamp01(a * x + b); }, a, b},
      {OpKind::LeakyRelu, -5, 5, [](double x) { return x < 0 ? 0.1 * x : x; }, 0.1},
      {OpKind::Elu, -5, 5, [](double x) { return x < 0 ? 1.5 * std::expm1(x) : x; }, 1.5},
      {OpKind::Selu, -5, 5, [](double x) { return x <= 0 ? 1.05 * 1.67 * std::expm1(x) : 1.05 * x; },
       1.67, 1.05},
      {OpKind::Celu, -5, 5,
       [](double x) { return x > 0 ? x : 0.5 * std::expm1(x / 0.5); }, 0.5},
      {OpKind::ThresholdedRelu, -3, 3, [](double x) { return x > 1 ? x : 0; }, 1},
      {OpKind::Erf, -5, 5, [](double x) { return std::erf(x); }},
      {OpKind::Erf, -0.9, 0.9, [](double x) { return std::erf(x); }},
      {OpKind::Floor, -10, 10, [](double x) { return std::floor(x); }},
      {OpKind::Ceil, -10, 10, [](double x) { return std::ceil(x); }},
      {OpKind::Relu, -10, 10, [](double x) { return x < 0 ? 0 : x; }},
      {OpKind::Abs, -10, 10, [](double x) { return std::fabs(x); }},
      {OpKind::Neg, -10, 10, [](double x) { return -x; }},
      {OpKind::Sign, -3, 3, [](double x) { return std::isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0; }},
      {OpKind::Clip, -10, 10, [](double x) { return x < -1.5 ? -1.5 : x > 2.5 ? 2.5 : x; }, -1.5, 2.5},
  };
}

// Shape with a tail that is not a multiple of any vector width.
const std::vector<int64_t> kDims = {3, 337};

TEST(ElementwiseUnary, FloatOpsMatchReference) {
  uint32_t seed = 1;
  for (const auto& c : float_cases()) {
    for (DType t : kFloats) {
      Tensor x = random_tensor(t, kDims, c.lo, c.hi, seed++);
      auto r = run_op(c.kind, {x}, scalar_attrs(c.kind, c.alpha, c.beta));
      std::vector<double> in(size_t(numel_of(kDims))), ref(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        in[i] = get(t, x.bytes.data(), int64_t(i));
        ref[i] = round_to(t, c.ref(in[i]));
      }
      expect_all_close(t, r.bytes, ref, float_tol(t, c.tol_scale),
                       std::string(op_name(c.kind)) + " " + std::string(dtype_name(t)), &in);
    }
  }
}

TEST(ElementwiseUnary, SpecialValues) {
  const double inf = INFINITY, nan = NAN;
  const std::vector<double> v = {0.0, -0.0, inf, -inf, nan, 1e-40, -1e-40, 88.8, -104, 1e30, -1e30};
  for (const auto& c : float_cases()) {
    for (DType t : {DType::F32, DType::F64}) {
      Tensor x = from_values(t, {int64_t(v.size())}, v);
      auto r = run_op(c.kind, {x}, scalar_attrs(c.kind, c.alpha, c.beta));
      for (size_t i = 0; i < v.size(); ++i) {
        const double in = get(t, x.bytes.data(), int64_t(i));
        const double want = round_to(t, c.ref(in));
        const double got = get(t, r.bytes.data(), int64_t(i));
        // inf*0 forms (silu/gelu/mish at -inf) may legitimately give NaN or 0.
        if (std::isinf(in) && (std::isnan(want) || std::isnan(got))) continue;
        EXPECT_TRUE(close(got, want, float_tol(t, c.tol_scale)))
            << op_name(c.kind) << " " << dtype_name(t) << " (" << in << "): got " << got << " want " << want;
      }
    }
  }
}

TEST(ElementwiseUnary, RoundHalfToEven) {
  const std::vector<double> v = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6, 1e7 + 0.5};
  for (DType t : kFloats) {
    auto r = run_op(OpKind::Round, {from_values(t, {int64_t(v.size())}, v)}, scalar_attrs(OpKind::Round));
    const std::vector<double> want = {0, 2, 2, -0.0, -2, -2, 2, 3, -3, 1e7};
    for (size_t i = 0; i + 1 < v.size(); ++i)
      EXPECT_EQ(get(t, r.bytes.data(), int64_t(i)), want[i]) << dtype_name(t) << " " << v[i];
  }
}

TEST(ElementwiseUnary, IntegerOps) {
  for (DType t : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U32}) {
    const bool u = !is_signed(t);
    Tensor x = random_tensor(t, {1000}, u ? 0 : -100, 100, 7);
    // Extremes: abs/neg of the minimum wrap.
    const double mn = t == DType::I8 ? -128 : t == DType::I16 ? -32768 : t == DType::I32 ? -2147483648.0 : 0;
    put(t, x.bytes.data(), 0, mn);
    for (OpKind k : {OpKind::Abs, OpKind::Neg, OpKind::Relu, OpKind::Sign, OpKind::Clip, OpKind::BitwiseNot}) {
      auto r = run_op(k, {x}, scalar_attrs(k, -7.5, 20.2));
      for (int64_t i = 0; i < 1000; ++i) {
        const int64_t v = geti(t, x.bytes.data(), i);
        int64_t want = 0;
        switch (k) {
          case OpKind::Abs: want = v < 0 ? -v : v; break;
          case OpKind::Neg: want = -v; break;
          case OpKind::Relu: want = v < 0 ? 0 : v; break;
          case OpKind::Sign: want = v > 0 ? 1 : v < 0 ? -1 : 0; break;
          case OpKind::Clip: want = std::min<int64_t>(20, std::max<int64_t>(u ? 0 : -7, v)); break;
          default: want = ~v; break;
        }
        // Wrap the reference to the dtype like a C cast to the storage type.
        Tensor w = from_values(DType::I64, {1}, {0});
        std::memcpy(w.bytes.data(), &want, 8);
        Tensor wt{Shape({1}, t), std::vector<uint8_t>(dtype_size(t))};
        std::memcpy(wt.bytes.data(), w.bytes.data(), dtype_size(t));  // little-endian truncation
        ASSERT_EQ(geti(t, r.bytes.data(), i), geti(t, wt.bytes.data(), 0))
            << op_name(k) << " " << dtype_name(t) << " of " << v;
      }
    }
  }
}

TEST(ElementwiseUnary, PredicatesAndNot) {
  const std::vector<double> v = {0, 1, -1, INFINITY, -INFINITY, NAN, 3.5};
  for (DType t : kFloats) {
    Tensor x = from_values(t, {7}, v);
    auto isnan_r = run_op(OpKind::IsNaN, {x}, scalar_attrs(OpKind::IsNaN));
    auto both = run_op(OpKind::IsInf, {x}, scalar_attrs(OpKind::IsInf, 1, 1));
    auto neg = run_op(OpKind::IsInf, {x}, scalar_attrs(OpKind::IsInf, 1, 0));
    auto pos = run_op(OpKind::IsInf, {x}, scalar_attrs(OpKind::IsInf, 0, 1));
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_EQ(isnan_r.bytes[i], std::isnan(v[i]) ? 1 : 0);
      EXPECT_EQ(both.bytes[i], std::isinf(v[i]) ? 1 : 0);
      EXPECT_EQ(neg.bytes[i], v[i] == -INFINITY ? 1 : 0);
      EXPECT_EQ(pos.bytes[i], v[i] == INFINITY ? 1 : 0);
    }
  }
  Tensor b = from_values(DType::Bool, {4}, {0, 1, 1, 0});
  auto r = run_op(OpKind::Not, {b}, scalar_attrs(OpKind::Not));
  EXPECT_EQ(r.bytes, (std::vector<uint8_t>{1, 0, 0, 1}));
  r = run_op(OpKind::BitwiseNot, {b}, scalar_attrs(OpKind::BitwiseNot));
  EXPECT_EQ(r.bytes, (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(ElementwiseUnary, ComplexNegAndIdentity) {
  for (DType t : {DType::C64, DType::C128}) {
    Tensor x = random_tensor(t, {33}, -5, 5, 3);
    auto n = run_op(OpKind::Neg, {x}, scalar_attrs(OpKind::Neg));
    auto id = run_op(OpKind::Identity, {x}, scalar_attrs(OpKind::Identity));
    EXPECT_EQ(id.bytes, x.bytes);
    for (int64_t i = 0; i < 33; ++i) EXPECT_EQ(getc(t, n.bytes.data(), i), -getc(t, x.bytes.data(), i));
  }
}

// Cast reference: float->int truncates (NaN -> 0, saturate to int64, then wrap);
// ->bool is != 0; complex->real keeps the real part.
std::complex<double> cast_ref(DType from, DType to, const uint8_t* p, int64_t i, int64_t* as_int) {
  const std::complex<double> c = getc(from, p, i);
  if (to == DType::Bool) { *as_int = c != 0.0 ? 1 : 0; return double(*as_int); }
  if (is_integer(to)) {
    int64_t v;
    if (is_integer(from) || from == DType::Bool) v = geti(from, p, i);
    else if (std::isnan(c.real())) v = 0;
    else v = int64_t(std::trunc(c.real()));
    const int bits = int(dtype_size(to)) * 8;
    uint64_t m = bits == 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
    uint64_t w = uint64_t(v) & m;
    if (is_signed(to) && bits < 64 && (w >> (bits - 1))) v = int64_t(w) - (int64_t(1) << bits);
    else v = int64_t(w);
    *as_int = v;
    return double(v);
  }
  if (is_complex(to)) {
    std::complex<double> v = is_complex(from) ? c : std::complex<double>(c.real(), 0);
    return to == DType::C64 ? std::complex<double>(round_f32(v.real()), round_f32(v.imag())) : v;
  }
  return round_to(to, c.real());
}

TEST(ElementwiseCast, AllPairs) {
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::I16, DType::I32,
                       DType::I64, DType::U8, DType::U32, DType::Bool, DType::C64, DType::C128};
  for (DType from : all) {
    const bool u = from == DType::U8 || from == DType::U32;
    Tensor x = random_tensor(from, {101}, u ? 0 : -120, 120, 11);
    if (is_float(from)) put(from, x.bytes.data(), 0, -3.75), put(from, x.bytes.data(), 1, 2.5);
    for (DType to : all) {
      Attrs a = default_attrs(OpKind::Cast);
      std::get<CastAttrs>(a).to = to;
      auto r = run_op(OpKind::Cast, {x}, a);
      for (int64_t i = 0; i < 101; ++i) {
        int64_t want_i = 0;
        auto want = cast_ref(from, to, x.bytes.data(), i, &want_i);
        if (is_integer(to) || to == DType::Bool) {
          ASSERT_EQ(geti(to, r.bytes.data(), i), want_i) << dtype_name(from) << "->" << dtype_name(to) << " [" << i << "]";
        } else {
          auto got = getc(to, r.bytes.data(), i);
          ASSERT_TRUE(close(got.real(), want.real(), float_tol(to)) && close(got.imag(), want.imag(), float_tol(to)))
              << dtype_name(from) << "->" << dtype_name(to) << " [" << i << "] got " << got << " want " << want;
        }
      }
    }
  }
}

TEST(ElementwiseCast, FloatToIntEdgeCases) {
  Tensor x = from_values(DType::F32, {6}, {NAN, -1.0, 300.0, -2.9, 2.9, 1e30});
  Attrs a = default_attrs(OpKind::Cast);
  std::get<CastAttrs>(a).to = DType::U8;
  auto r = run_op(OpKind::Cast, {x}, a);
  EXPECT_EQ(r.bytes, (std::vector<uint8_t>{0, 255, 44, 254, 2, 255}));
  std::get<CastAttrs>(a).to = DType::Bool;
  r = run_op(OpKind::Cast, {x}, a);
  EXPECT_EQ(r.bytes, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));
}

// Every f16 / bf16 bit pattern widens exactly, and f32 values narrow with round to
// nearest even, identically on the vector and scalar paths (checked against dtype.h).
TEST(ElementwiseCast, HalfConversionsExhaustive) {
  for (DType h : {DType::F16, DType::BF16}) {
    Tensor all{Shape({65536}, h), std::vector<uint8_t>(65536 * 2)};
    for (uint32_t i = 0; i < 65536; ++i) std::memcpy(all.bytes.data() + 2 * i, &i, 2);
    Attrs to32 = default_attrs(OpKind::Cast), to16 = default_attrs(OpKind::Cast);
    std::get<CastAttrs>(to32).to = DType::F32;
    std::get<CastAttrs>(to16).to = h;
    // Random f32 bit patterns plus exact halfway cases between neighbouring halves.
    std::vector<float> f(200000);
    std::mt19937 rng(5);
    for (size_t i = 0; i < f.size(); ++i) {
      uint32_t bits = rng();
      if (i % 2) bits = (bits & 0xffffe000u) | 0x1000u;  // f16 halfway
      if (i % 3 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // bf16 halfway
      std::memcpy(&f[i], &bits, 4);
    }
    Tensor narrow{Shape({int64_t(f.size())}, DType::F32), to_bytes(f)};
    for (const char* isa : {"native", "scalar"}) {
      auto wide = with_isa(isa, [&] { return run_op(OpKind::Cast, {all}, to32, 2); });
      auto wf = from_bytes<float>(wide.bytes);
      for (uint32_t i = 0; i < 65536; ++i) {
        const float want = h == DType::F16 ? f16_to_f32(uint16_t(i)) : bf16_to_f32(uint16_t(i));
        if (std::isnan(want)) ASSERT_TRUE(std::isnan(wf[i])) << isa << " " << i;
        else ASSERT_EQ(std::memcmp(&wf[i], &want, 4), 0) << isa << " " << dtype_name(h) << " bits " << i;
      }
      auto nb = with_isa(isa, [&] { return run_op(OpKind::Cast, {narrow}, to16, 2); });
      auto nh = from_bytes<uint16_t>(nb.bytes);
      for (size_t i = 0; i < f.size(); ++i) {
        const uint16_t want = h == DType::F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
        if (std::isnan(f[i])) {
          const float back = h == DType::F16 ? f16_to_f32(nh[i]) : bf16_to_f32(nh[i]);
          ASSERT_TRUE(std::isnan(back)) << isa << " " << i;
        } else {
          ASSERT_EQ(nh[i], want) << isa << " " << dtype_name(h) << " of " << f[i];
        }
      }
    }
  }
}

TEST(ElementwiseKernels, SupportsReportsUnsupportedCombinations) {
  const auto& reg = cpu::kernel_registry();
  Node n;
  n.kind = OpKind::Exp;
  n.name = "bad_exp";
  n.attrs = NoAttrs{};
  Shape i32({4}, DType::I32);
  n.outputs = {i32};
  EXPECT_FALSE(reg.supports(n, {&i32}));
  try {
    reg.find(OpKind::Exp)->build(n, {&i32}, n.outputs);
    FAIL() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    EXPECT_NE(std::string(e.what()).find("bad_exp"), std::string::npos) << e.what();
  }
  Shape f32({4}, DType::F32);
  n.outputs = {f32};
  EXPECT_TRUE(reg.supports(n, {&f32}));
}

TEST(ElementwiseKernels, ThreadsAndIsaAgree) {
  const std::vector<int64_t> dims = {5, 40011};
  const OpKind kinds[] = {OpKind::Exp, OpKind::Tanh, OpKind::Sigmoid, OpKind::Gelu, OpKind::Silu,
                          OpKind::Erf, OpKind::Relu, OpKind::Sqrt, OpKind::Log};
  for (OpKind k : kinds) {
    Tensor x = random_tensor(DType::F32, dims, k == OpKind::Sqrt || k == OpKind::Log ? 0.01 : -9, 9, 5);
    auto one = run_op(k, {x}, scalar_attrs(k));
    auto two = run_op(k, {x}, scalar_attrs(k), 2);
    auto three = run_op(k, {x}, scalar_attrs(k), 3);
    EXPECT_EQ(one.bytes, two.bytes) << op_name(k);
    EXPECT_EQ(one.bytes, three.bytes) << op_name(k);
    auto scalar = with_isa("scalar", [&] { return run_op(k, {x}, scalar_attrs(k), 2); });
    std::vector<double> ref(size_t(numel_of(dims)));
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = get(DType::F32, scalar.bytes.data(), int64_t(i));
    expect_all_close(DType::F32, one.bytes, ref, float_tol(DType::F32), std::string("isa ") + std::string(op_name(k)));
    if (cpu::detect_isa() == cpu::Isa::Avx512) {
      auto avx2 = with_isa("avx2", [&] { return run_op(k, {x}, scalar_attrs(k)); });
      expect_all_close(DType::F32, avx2.bytes, ref, float_tol(DType::F32), std::string("avx2 ") + std::string(op_name(k)));
    }
  }
}

// Vector math over the whole float range (log-spaced magnitudes, both signs).
TEST(ElementwiseKernels, VectorMathSweep) {
  std::vector<double> v;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(1, 2);
  for (int e = -149; e <= 127; ++e)
    for (int k = 0; k < 8; ++k) {
      const double x = std::ldexp(u(rng), e);
      v.push_back(x);
      v.push_back(-x);
    }
  v.push_back(3.4028234663852886e38);
  Tensor x = from_values(DType::F32, {int64_t(v.size())}, v);
  const std::pair<OpKind, double (*)(double)> cases[] = {
      {OpKind::Exp, [](double a) { return std::exp(a); }},
      {OpKind::Log, [](double a) { return std::log(a); }},
      {OpKind::Tanh, [](double a) { return std::tanh(a); }},
      {OpKind::Erf, [](double a) { return std::erf(a); }},
      {OpKind::Sigmoid, [](double a) { return 1 / (1 + std::exp(-a)); }},
      {OpKind::Silu, [](double a) { return a / (1 + std::exp(-a)); }},
      {OpKind::Gelu, [](double a) { return 0.5 * a * std::erfc(-a * kSqrt1_2); }},
  };
  for (const char* isa : {"native", "avx2", "scalar"}) {
    for (auto [k, f] : cases) {
      auto r = with_isa(isa, [&, k = k] { return run_op(k, {x}, scalar_attrs(k)); });
      std::vector<double> in(v.size()), ref(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        in[i] = get(DType::F32, x.bytes.data(), int64_t(i));
        ref[i] = round_to(DType::F32, f(in[i]));
      }
      // Subnormal results carry fewer significant bits: absolute floor at 2^-140.
      expect_all_close(DType::F32, r.bytes, ref, {3e-6, 7.2e-43}, std::string(isa) + " " + std::string(op_name(k)), &in);
    }
  }
}

TEST(ElementwiseKernels, ActiveExtentLeavesTrailingRowsUntouched) {
  Tensor x = random_tensor(DType::F32, {8, 100}, -3, 3, 9);
  auto full = run_op(OpKind::Exp, {x}, scalar_attrs(OpKind::Exp));
  auto part = run_op(OpKind::Exp, {x}, scalar_attrs(OpKind::Exp), 2, 3, 8);
  EXPECT_TRUE(std::equal(part.bytes.begin(), part.bytes.begin() + 300 * 4, full.bytes.begin()));
  EXPECT_TRUE(std::all_of(part.bytes.begin() + 300 * 4, part.bytes.end(), [](uint8_t b) { return b == 0; }));
}

TEST(Isa, OverrideForcesLowerLevel) {
  // The hardware level, whatever RLX_ISA the suite itself runs under.
  const cpu::Isa native = with_isa("native", [] { return cpu::detect_isa(); });
  EXPECT_EQ(with_isa("scalar", [] { return cpu::detect_isa(); }), cpu::Isa::Scalar);
  EXPECT_EQ(with_isa("avx2", [] { return cpu::detect_isa(); }), std::min(native, cpu::Isa::Avx2));
  EXPECT_EQ(with_isa("avx512", [] { return cpu::detect_isa(); }), native);
  EXPECT_THROW(with_isa("sse9", [] { return cpu::detect_isa(); }), Error);
  EXPECT_EQ(cpu::isa_name(cpu::Isa::Avx2), "avx2");
}

}  // namespace
}  // namespace rlx::test::ew

namespace rlx::test::ew {
namespace {

// f32 <-> int32 / int8 / uint8 casts and Round: the vector converters (AVX2, AVX-512) give
// the scalar path's bits on blocks mixing ordinary values, ties, NaN, infinities and values
// past int32 (those blocks take the scalar conversion), at every length around the vector
// width.
TEST(ElementwiseCast, IntegerConvertersAndRoundMatchScalarOnEveryIsa) {
  const double special[] = {NAN, INFINITY, -INFINITY, 2147483648.0, -2147483648.0, 2147483520.0, -2147483520.0,
                            1e12, -1e12, 255.5, 256.0, -128.5, -0.0, 0.5, 1.5, 2.5, -2.5, 127.49};
  for (int64_t n : {7, 8, 9, 16, 37, 64}) {
    for (bool with_special : {false, true}) {
      Tensor x = random_tensor(DType::F32, {n}, -300, 300, uint32_t(n));
      if (with_special)
        for (int64_t i = 0; i < n; i += 3) put(DType::F32, x.bytes.data(), i, special[size_t(i / 3) % std::size(special)]);
      auto ops = [&](const char* isa) {
        return with_isa(isa, [&] {
          std::vector<std::vector<uint8_t>> r;
          for (DType to : {DType::I32, DType::I8, DType::U8}) {
            Attrs a = default_attrs(OpKind::Cast);
            std::get<CastAttrs>(a).to = to;
            OpResult y = run_op(OpKind::Cast, {x}, a);
            r.push_back(y.bytes);
            Attrs back = default_attrs(OpKind::Cast);
            std::get<CastAttrs>(back).to = DType::F32;
            r.push_back(run_op(OpKind::Cast, {Tensor{y.shape, y.bytes}}, back).bytes);
          }
          r.push_back(run_op(OpKind::Round, {x}, default_attrs(OpKind::Round)).bytes);
          return r;
        });
      };
      const auto want = ops("scalar");
      for (const char* isa : {"avx2", "native"}) EXPECT_EQ(ops(isa), want) << isa << " n=" << n << " special=" << with_special;
    }
  }
}

}  // namespace
}  // namespace rlx::test::ew
