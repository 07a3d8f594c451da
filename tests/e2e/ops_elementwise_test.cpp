// End-to-end cases of the elementwise ops and the leaves: one small graph per op kind,
// odd shapes (vector tails), seeded random inputs in each op's domain, std:: references.
#include <cmath>

#include "op_cases.h"

namespace rlx::e2e {
namespace {

using F1 = std::function<double(double)>;
constexpr double kPi = 3.14159265358979323846;

// A float unary op on [lo, hi) plus the specials a kernel must get right.
OpCase unary_case(OpKind k, Attrs sa, double lo, double hi, F1 f, std::vector<double> specials = {},
                  double rtol = 5e-6, double atol = 5e-7) {
  std::string name = std::string(op_name(k)) + "_f32";
  return {name, [=] {
            Rng rng(1000 + uint32_t(k));
            T x = rng.tensor({7, 129}, lo, hi);
            for (size_t i = 0; i < specials.size(); ++i) x.v[i * 13] = specials[i];
            Attrs a = default_attrs(k);
            if (a.index() == sa.index()) a = sa;  // the attributes given, when they fit the op
            check_op(name, {x}, [&](Graph& g, const std::vector<Value>& in) {
              return std::vector<Value>{g.add1(k, {in[0]}, a)};
            }, {ref::map(x, f, DType::F32)}, rtol, atol);
          }};
}

OpCase int_unary_case(OpKind k, Attrs sa, F1 f) {
  std::string name = std::string(op_name(k)) + "_i32";
  return {name, [=] {
            Rng rng(2000 + uint32_t(k));
            T x = rng.tensor({5, 23}, -50, 50, DType::I32);
            Attrs a = default_attrs(k);
            if (a.index() == sa.index()) a = sa;  // the attributes given, when they fit the op
            check_op(name, {x}, [&](Graph& g, const std::vector<Value>& in) {
              return std::vector<Value>{g.add1(k, {in[0]}, a)};
            }, {ref::map(x, f, DType::I32)});
          }};
}

using F2 = std::function<double(double, double)>;

// A binary op with numpy broadcasting: a[3,1,37] op b[4,37] -> [3,4,37].
OpCase binary_case(OpKind k, DType dt, double lo, double hi, F2 f, DType out, Attrs sa = NoAttrs{},
                   double blo = 0, double bhi = 0, const std::string& tag = "") {
  std::string name = std::string(op_name(k)) + "_" + std::string(dtype_name(dt)) + tag;
  return {name, [=] {
            Rng rng(3000 + uint32_t(k) * 7 + uint32_t(dt));
            T a = rng.tensor({3, 1, 37}, lo, hi, dt);
            T b = rng.tensor({4, 37}, blo == bhi ? lo : blo, blo == bhi ? hi : bhi, dt);
            // Some equal pairs so that ==, <=, >= and ties are exercised.
            for (int64_t j = 0; j < 37; j += 5) b.v[size_t(j)] = a.v[size_t(j)];
            Attrs at = default_attrs(k);
            if (at.index() == sa.index()) at = sa;
            check_op(name, {a, b}, [&](Graph& g, const std::vector<Value>& in) {
              return std::vector<Value>{g.add1(k, {in[0], in[1]}, at)};
            }, {ref::binary(a, b, f, out)}, 2e-6, 1e-7);
          }};
}

double floor_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double trunc_div(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }

const bool kUnary = register_cases({
    {OpKind::Abs, unary_case(OpKind::Abs, {}, -3, 3, [](double x) { return std::fabs(x); }, {-0.0, 0.0})},
    {OpKind::Abs, int_unary_case(OpKind::Abs, {}, [](double x) { return std::fabs(x); })},
    {OpKind::Neg, unary_case(OpKind::Neg, {}, -3, 3, [](double x) { return -x; })},
    {OpKind::Neg, int_unary_case(OpKind::Neg, {}, [](double x) { return -x; })},
    {OpKind::Exp, unary_case(OpKind::Exp, {}, -20, 20, [](double x) { return std::exp(x); }, {0.0, -90.0, 88.0})},
    {OpKind::Log, unary_case(OpKind::Log, {}, 1e-3, 50, [](double x) { return std::log(x); }, {1.0, 0.0})},
    {OpKind::Sqrt, unary_case(OpKind::Sqrt, {}, 0, 50, [](double x) { return std::sqrt(x); }, {0.0, 1.0})},
    {OpKind::Rsqrt, unary_case(OpKind::Rsqrt, {}, 1e-3, 50, [](double x) { return 1 / std::sqrt(x); })},
    {OpKind::Reciprocal, unary_case(OpKind::Reciprocal, {}, 0.05, 5, [](double x) { return 1 / x; }, {-2.0, 1e-3})},
    {OpKind::Sin, unary_case(OpKind::Sin, {}, -10, 10, [](double x) { return std::sin(x); }, {}, 5e-6, 1e-6)},
    {OpKind::Cos, unary_case(OpKind::Cos, {}, -10, 10, [](double x) { return std::cos(x); }, {}, 5e-6, 1e-6)},
    {OpKind::Tan, unary_case(OpKind::Tan, {}, -1.3, 1.3, [](double x) { return std::tan(x); })},
    {OpKind::Asin, unary_case(OpKind::Asin, {}, -0.99, 0.99, [](double x) { return std::asin(x); }, {1.0, -1.0})},
    {OpKind::Acos, unary_case(OpKind::Acos, {}, -0.99, 0.99, [](double x) { return std::acos(x); }, {1.0, -1.0})},
    {OpKind::Atan, unary_case(OpKind::Atan, {}, -20, 20, [](double x) { return std::atan(x); })},
    {OpKind::Sinh, unary_case(OpKind::Sinh, {}, -8, 8, [](double x) { return std::sinh(x); }, {1e-4})},
    {OpKind::Cosh, unary_case(OpKind::Cosh, {}, -8, 8, [](double x) { return std::cosh(x); })},
    {OpKind::Asinh, unary_case(OpKind::Asinh, {}, -20, 20, [](double x) { return std::asinh(x); })},
    {OpKind::Acosh, unary_case(OpKind::Acosh, {}, 1.001, 30, [](double x) { return std::acosh(x); }, {1.0})},
    {OpKind::Atanh, unary_case(OpKind::Atanh, {}, -0.99, 0.99, [](double x) { return std::atanh(x); })},
    {OpKind::Tanh, unary_case(OpKind::Tanh, {}, -6, 6, [](double x) { return std::tanh(x); }, {1e-4, 20.0})},
    {OpKind::Sigmoid,
     unary_case(OpKind::Sigmoid, {}, -12, 12, [](double x) { return 1 / (1 + std::exp(-x)); }, {-90.0, 90.0})},
    {OpKind::Relu, unary_case(OpKind::Relu, {}, -3, 3, [](double x) { return x < 0 ? 0.0 : x; })},
    {OpKind::Relu, int_unary_case(OpKind::Relu, {}, [](double x) { return x < 0 ? 0.0 : x; })},
    {OpKind::Gelu, unary_case(OpKind::Gelu, GeluAttrs{false}, -5, 5, ref::gelu, {-10.0}, 5e-6, 1e-6)},
    {OpKind::Gelu, unary_case(OpKind::Gelu, GeluAttrs{true}, -5, 5, ref::gelu_tanh, {-10.0}, 5e-6, 1e-6)},
    {OpKind::Silu, unary_case(OpKind::Silu, {}, -8, 8, [](double x) { return x / (1 + std::exp(-x)); })},
    {OpKind::Softplus,
     unary_case(OpKind::Softplus, {}, -15, 15,
                [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }, {100.0, -100.0})},
    {OpKind::Softsign, unary_case(OpKind::Softsign, {}, -5, 5, [](double x) { return x / (1 + std::fabs(x)); })},
    {OpKind::Mish, unary_case(OpKind::Mish, {}, -6, 6,
                              [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, {}, 5e-6, 1e-6)},
    {OpKind::HardSwish, unary_case(OpKind::HardSwish, {}, -5, 5,
                                   [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); })},
    {OpKind::HardSigmoid, unary_case(OpKind::HardSigmoid, ScalarAttrs{0.3, 0.4}, -5, 5,
                                     [](double x) { return std::clamp(0.3 * x + 0.4, 0.0, 1.0); })},
    {OpKind::LeakyRelu,
     unary_case(OpKind::LeakyRelu, ScalarAttrs{0.07, 0}, -3, 3, [](double x) { return x < 0 ? 0.07 * x : x; })},
    {OpKind::Elu, unary_case(OpKind::Elu, ScalarAttrs{0.7, 0}, -4, 3,
                             [](double x) { return x < 0 ? 0.7 * std::expm1(x) : x; })},
    {OpKind::Selu, unary_case(OpKind::Selu, ScalarAttrs{1.6732632, 1.0507010}, -4, 3, [](double x) {
       return x <= 0 ? 1.0507010 * 1.6732632 * std::expm1(x) : 1.0507010 * x;
     })},
    {OpKind::Celu, unary_case(OpKind::Celu, ScalarAttrs{0.8, 0}, -4, 3,
                              [](double x) { return x > 0 ? x : 0.8 * std::expm1(x / 0.8); })},
    {OpKind::ThresholdedRelu, unary_case(OpKind::ThresholdedRelu, ScalarAttrs{0.3, 0}, -2, 2,
                                         [](double x) { return x > 0.3 ? x : 0.0; })},
    {OpKind::Clip, unary_case(OpKind::Clip, ClipAttrs{-0.5, 0.7}, -2, 2,
                              [](double x) { return std::clamp(x, -0.5, 0.7); })},
    {OpKind::Clip, int_unary_case(OpKind::Clip, ClipAttrs{-7, 12}, [](double x) { return std::clamp(x, -7.0, 12.0); })},
    {OpKind::Erf, unary_case(OpKind::Erf, {}, -4, 4, [](double x) { return std::erf(x); }, {1e-5})},
    {OpKind::Floor, unary_case(OpKind::Floor, {}, -20, 20, [](double x) { return std::floor(x); }, {2.0, -3.0, -0.5})},
    {OpKind::Ceil, unary_case(OpKind::Ceil, {}, -20, 20, [](double x) { return std::ceil(x); }, {2.0, -3.0, -0.5})},
    {OpKind::Round, unary_case(OpKind::Round, {}, -20, 20, [](double x) { return std::nearbyint(x); },
                               {0.5, 1.5, 2.5, -0.5, -2.5, 3.0})},
    {OpKind::Sign, unary_case(OpKind::Sign, {}, -3, 3, [](double x) { return double((x > 0) - (x < 0)); }, {0.0})},
    {OpKind::Sign, int_unary_case(OpKind::Sign, {}, [](double x) { return double((x > 0) - (x < 0)); })},
});

// is_nan / is_inf / not / bitwise_not / cast: the input and output dtypes differ.
void check_mapped(const std::string& name, const T& x, OpKind k, Attrs a, const F1& f, DType out) {
  check_op(name, {x}, [&](Graph& g, const std::vector<Value>& in) {
    return std::vector<Value>{g.add1(k, {in[0]}, a)};
  }, {ref::map(x, f, out)});
}

T with_specials(T x) {
  const double s[] = {NAN, INFINITY, -INFINITY, 0.0, -NAN, 3.0};
  for (size_t i = 0; i < 6; ++i) x.v[i * 11] = s[i];
  return x;
}

const bool kMapped = register_cases({
    {OpKind::IsNaN, {"is_nan", [] {
       T x = with_specials(Rng(11).tensor({3, 29}, -5, 5));
       check_mapped("is_nan", x, OpKind::IsNaN, NoAttrs{}, [](double v) { return double(std::isnan(v)); }, DType::Bool);
     }}},
    {OpKind::IsInf, {"is_inf_both", [] {
       T x = with_specials(Rng(12).tensor({3, 29}, -5, 5));
       check_mapped("is_inf_both", x, OpKind::IsInf, IsInfAttrs{true, true},
                    [](double v) { return double(std::isinf(v)); }, DType::Bool);
     }}},
    {OpKind::IsInf, {"is_inf_negative_only", [] {
       T x = with_specials(Rng(13).tensor({3, 29}, -5, 5));
       check_mapped("is_inf_negative_only", x, OpKind::IsInf, IsInfAttrs{true, false},
                    [](double v) { return double(v == -INFINITY); }, DType::Bool);
     }}},
    {OpKind::Not, {"not", [] {
       T x = Rng(14).tensor({5, 19}, 0, 1, DType::Bool);
       check_mapped("not", x, OpKind::Not, NoAttrs{}, [](double v) { return double(v == 0); }, DType::Bool);
     }}},
    {OpKind::BitwiseNot, {"bitwise_not_i32", [] {
       T x = Rng(15).tensor({5, 19}, -1000, 1000, DType::I32);
       check_mapped("bitwise_not_i32", x, OpKind::BitwiseNot, NoAttrs{}, [](double v) { return double(~int32_t(v)); },
                    DType::I32);
     }}},
    {OpKind::Cast, {"cast_f32_to_i32", [] {
       T x = Rng(16).tensor({5, 19}, -100, 100);
       check_mapped("cast_f32_to_i32", x, OpKind::Cast, CastAttrs{DType::I32}, [](double v) { return std::trunc(v); },
                    DType::I32);
     }}},
    {OpKind::Cast, {"cast_f32_to_f16", [] {
       T x = Rng(17).tensor({5, 19}, -100, 100);
       check_mapped("cast_f32_to_f16", x, OpKind::Cast, CastAttrs{DType::F16},
                    [](double v) { return round_to(v, DType::F16); }, DType::F16);
     }}},
    {OpKind::Cast, {"cast_i64_to_f32", [] {
       T x = Rng(18).tensor({5, 19}, -100000, 100000, DType::I64);
       check_mapped("cast_i64_to_f32", x, OpKind::Cast, CastAttrs{DType::F32}, [](double v) { return v; }, DType::F32);
     }}},
    {OpKind::Cast, {"cast_f32_to_bool_and_back", [] {
       T x = Rng(19).tensor({5, 19}, -2, 2);
       for (size_t i = 0; i < x.v.size(); i += 3) x.v[i] = 0;
       check_op("cast_f32_to_bool_and_back", {x}, [](Graph& g, const std::vector<Value>& in) {
         Value b = g.cast(in[0], DType::Bool);
         return std::vector<Value>{b, g.cast(b, DType::F32)};
       }, {ref::map(x, [](double v) { return double(v != 0); }, DType::Bool),
           ref::map(x, [](double v) { return double(v != 0); }, DType::F32)});
     }}},
});

const bool kBinary = register_cases({
    {OpKind::Add, binary_case(OpKind::Add, DType::F32, -3, 3, std::plus<double>(), DType::F32)},
    {OpKind::Add, binary_case(OpKind::Add, DType::I32, -1000, 1000, std::plus<double>(), DType::I32)},
    {OpKind::Sub, binary_case(OpKind::Sub, DType::F32, -3, 3, std::minus<double>(), DType::F32)},
    {OpKind::Sub, binary_case(OpKind::Sub, DType::I64, -1000, 1000, std::minus<double>(), DType::I64)},
    {OpKind::Mul, binary_case(OpKind::Mul, DType::F32, -3, 3, std::multiplies<double>(), DType::F32)},
    {OpKind::Mul, binary_case(OpKind::Mul, DType::I32, -1000, 1000, std::multiplies<double>(), DType::I32)},
    {OpKind::Div, binary_case(OpKind::Div, DType::F32, 0.1, 3, std::divides<double>(), DType::F32)},
    {OpKind::Div, binary_case(OpKind::Div, DType::I32, -100, 100, trunc_div, DType::I32)},
    {OpKind::Pow, binary_case(OpKind::Pow, DType::F32, 0.1, 3, [](double a, double b) { return std::pow(a, b); },
                              DType::F32, {}, -2.5, 2.5)},
    {OpKind::Max, binary_case(OpKind::Max, DType::F32, -3, 3, [](double a, double b) { return std::max(a, b); },
                              DType::F32)},
    {OpKind::Max, binary_case(OpKind::Max, DType::I32, -99, 99, [](double a, double b) { return std::max(a, b); },
                              DType::I32)},
    {OpKind::Min, binary_case(OpKind::Min, DType::F32, -3, 3, [](double a, double b) { return std::min(a, b); },
                              DType::F32)},
    {OpKind::Mod, binary_case(OpKind::Mod, DType::F32, -10, 10, floor_mod, DType::F32, ModAttrs{false}, 0.5, 3,
                              "_floor")},
    {OpKind::Mod, binary_case(OpKind::Mod, DType::F32, -10, 10, [](double a, double b) { return std::fmod(a, b); },
                              DType::F32, ModAttrs{true}, -3, -0.5, "_fmod")},
    {OpKind::Mod, binary_case(OpKind::Mod, DType::I32, -50, 50, [](double a, double b) {
       return b == 0 ? 0.0 : floor_mod(a, b);
     }, DType::I32, ScalarAttrs{0, 0}, -9, 9, "_floor")},
    {OpKind::BitwiseAnd, binary_case(OpKind::BitwiseAnd, DType::I32, -5000, 5000,
                                     [](double a, double b) { return double(int32_t(a) & int32_t(b)); }, DType::I32)},
    {OpKind::BitwiseOr, binary_case(OpKind::BitwiseOr, DType::I32, -5000, 5000,
                                    [](double a, double b) { return double(int32_t(a) | int32_t(b)); }, DType::I32)},
    {OpKind::BitwiseXor, binary_case(OpKind::BitwiseXor, DType::I32, -5000, 5000,
                                     [](double a, double b) { return double(int32_t(a) ^ int32_t(b)); }, DType::I32)},
    {OpKind::And, binary_case(OpKind::And, DType::Bool, 0, 1, [](double a, double b) { return double(a && b); },
                              DType::Bool)},
    {OpKind::Or, binary_case(OpKind::Or, DType::Bool, 0, 1, [](double a, double b) { return double(a || b); },
                             DType::Bool)},
    {OpKind::Xor, binary_case(OpKind::Xor, DType::Bool, 0, 1, [](double a, double b) { return double((a != 0) != (b != 0)); },
                              DType::Bool)},
    {OpKind::Equal, binary_case(OpKind::Equal, DType::F32, -3, 3, [](double a, double b) { return double(a == b); },
                                DType::Bool)},
    {OpKind::NotEqual, binary_case(OpKind::NotEqual, DType::I32, -3, 3,
                                   [](double a, double b) { return double(a != b); }, DType::Bool)},
    {OpKind::Less, binary_case(OpKind::Less, DType::F32, -3, 3, [](double a, double b) { return double(a < b); },
                               DType::Bool)},
    {OpKind::LessEqual, binary_case(OpKind::LessEqual, DType::F32, -3, 3,
                                    [](double a, double b) { return double(a <= b); }, DType::Bool)},
    {OpKind::Greater, binary_case(OpKind::Greater, DType::I64, -3, 3, [](double a, double b) { return double(a > b); },
                                  DType::Bool)},
    {OpKind::GreaterEqual, binary_case(OpKind::GreaterEqual, DType::F32, -3, 3,
                                       [](double a, double b) { return double(a >= b); }, DType::Bool)},
});

const bool kOther = register_cases({
    {OpKind::Where, {"where_broadcast", [] {
       Rng rng(21);
       T c = rng.tensor({3, 1, 37}, 0, 1, DType::Bool), a = rng.tensor({4, 37}), b = rng.tensor({37});
       check_op("where_broadcast", {c, a, b}, [](Graph& g, const std::vector<Value>& in) {
         return std::vector<Value>{g.where(in[0], in[1], in[2])};
       }, {ref::zip({&c, &a, &b}, [](const std::vector<double>& v) { return v[0] ? v[1] : v[2]; }, DType::F32)});
     }}},
    {OpKind::Identity, {"identity", [] {
       T x = Rng(22).tensor({5, 7});
       check_op("identity", {x}, [](Graph& g, const std::vector<Value>& in) {
         Value i = g.identity(in[0]);
         return std::vector<Value>{i, g.exp(i)};
       }, {x, ref::map(x, [](double v) { return std::exp(v); }, DType::F32)});
     }}},
    {OpKind::FusedElementwise, {"fused_elementwise_program", [] {
       // tanh(a * b) + a, then cast to f16: inputs a[3,1,37], b[4,37].
       Rng rng(23);
       T a = rng.tensor({3, 1, 37}, -2, 2), b = rng.tensor({4, 37}, -2, 2);
       FusedElementwiseAttrs fa;
       fa.program = {FusedOp{OpKind::Mul, {0, 1}, 0, 0, DType::F32}, FusedOp{OpKind::Tanh, {2}, 0, 0, DType::F32},
                     FusedOp{OpKind::Add, {3, 0}, 0, 0, DType::F32},
                     FusedOp{OpKind::LeakyRelu, {4}, 0.25, 0, DType::F32}};
       T want = ref::binary(a, b, [](double x, double y) {
         double r = std::tanh(x * y) + x;
         return r < 0 ? 0.25 * r : r;
       }, DType::F32);
       check_op("fused_elementwise_program", {a, b}, [&](Graph& g, const std::vector<Value>& in) {
         return std::vector<Value>{g.add1(OpKind::FusedElementwise, {in[0], in[1]}, fa)};
       }, {want}, 5e-6, 5e-7);
     }}},
    {OpKind::Input, {"input_passthrough_and_used", [] {
       T x = Rng(24).tensor({3, 5});
       check_op("input_passthrough_and_used", {x}, [](Graph& g, const std::vector<Value>& in) {
         return std::vector<Value>{in[0], g.neg(in[0])};
       }, {x, ref::map(x, [](double v) { return -v; }, DType::F32)});
     }}},
    {OpKind::Param, {"param_initial_data_and_set_param", [] {
       Rng rng(25);
       T x = rng.tensor({4, 6}), w0 = rng.tensor({6}), w1 = rng.tensor({6});
       Graph g("param");
       Value xi = g.input("x", x.shape());
       Value w = g.param("w", w0.shape(), Blob(to_bytes(w0)));
       g.set_outputs({g.mul(xi, w)});
       CompiledGraph net = compile_e2e(g, default_options());
       auto mul = [&](const T& wv) {
         return ref::binary(x, wv, [](double a, double b) { return round_to(a * b, DType::F32); }, DType::F32);
       };
       expect_close(run_net(net, {{"x", x}})[0], mul(w0), 0, 0, "param initial data");
       set_params(net, {{"w", w1}});
       expect_close(run_net(net, {{"x", x}})[0], mul(w1), 0, 0, "param after set_param");
     }}},
    {OpKind::Constant, {"constant_operands", [] {
       Rng rng(26);
       T x = rng.tensor({4, 6}), c = rng.tensor({6});
       check_op("constant_operands", {x}, [&](Graph& g, const std::vector<Value>& in) {
         std::vector<float> cv(c.v.begin(), c.v.end());
         Value k = g.constant_f32({6}, cv, "k");
         return std::vector<Value>{g.add(g.mul(in[0], k), g.scalar(0.5, DType::F32)), k};
       }, {ref::map(ref::binary(x, c, std::multiplies<double>(), DType::F32), [](double v) { return v + 0.5; },
                    DType::F32), c});
     }}},
});

}  // namespace
}  // namespace rlx::e2e
