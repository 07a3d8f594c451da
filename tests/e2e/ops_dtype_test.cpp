// End-to-end cases in the other dtypes: f16, bf16 and f64 compute (references on the
// rounded inputs in double, tolerance of one or two units of the output type), integer
// reductions and arg-reductions, and data movement of 1-, 2- and 8-byte and bool data.
#include <cmath>
#include <cstring>

#include "op_cases.h"

namespace rlx::e2e {
namespace {

using Outs = std::vector<Value>;
using Ins = const std::vector<Value>&;

const DType kFloats[] = {DType::F16, DType::BF16, DType::F64};

std::string tag(DType t) { return std::string(dtype_name(t)); }

// Tolerance of a result rounded once to `t` after f32 (or f64) internal compute.
double tol(DType t) {
  switch (t) {
    case DType::F16: return 1.5e-3;
    case DType::BF16: return 1e-2;
    case DType::F64: return 1e-12;
    default: return 2e-5;
  }
}

T rounded(T x) {
  for (double& v : x.v) v = round_to(v, x.dtype);
  return x;
}

std::vector<std::pair<OpKind, OpCase>> float_cases() {
  std::vector<std::pair<OpKind, OpCase>> cs;
  for (DType dt : kFloats) {
    const double r = tol(dt);
    auto unary = [&](OpKind k, double lo, double hi, std::function<double(double)> f) {
      const std::string name = std::string(op_name(k)) + "_" + tag(dt);
      cs.push_back({k, {name, [=] {
                          T x = Rng(900 + uint32_t(k)).tensor({3, 67}, lo, hi, dt);
                          check_op(name, {x}, [&](Graph& g, Ins in) { return Outs{g.add1(k, {in[0]})}; },
                                   {rounded(ref::map(x, f, dt))}, r, r * 1e-2);
                        }}});
    };
    unary(OpKind::Exp, -4, 4, [](double v) { return std::exp(v); });
    unary(OpKind::Tanh, -3, 3, [](double v) { return std::tanh(v); });
    unary(OpKind::Sigmoid, -6, 6, [](double v) { return 1 / (1 + std::exp(-v)); });
    unary(OpKind::Sqrt, 0, 9, [](double v) { return std::sqrt(v); });
    unary(OpKind::Log, 0.01, 9, [](double v) { return std::log(v); });
    unary(OpKind::Gelu, -4, 4, ref::gelu);
    unary(OpKind::Abs, -4, 4, [](double v) { return std::fabs(v); });
    auto binary = [&](OpKind k, std::function<double(double, double)> f, DType out) {
      const std::string name = std::string(op_name(k)) + "_" + tag(dt);
      cs.push_back({k, {name, [=] {
                          Rng rng(950 + uint32_t(k));
                          T a = rng.tensor({3, 1, 29}, 0.2, 3, dt), b = rng.tensor({5, 29}, 0.2, 3, dt);
                          check_op(name, {a, b}, [&](Graph& g, Ins in) { return Outs{g.add1(k, {in[0], in[1]})}; },
                                   {rounded(ref::binary(a, b, f, out))}, r, 0);
                        }}});
    };
    binary(OpKind::Add, std::plus<double>(), dt);
    binary(OpKind::Mul, std::multiplies<double>(), dt);
    binary(OpKind::Div, std::divides<double>(), dt);
    binary(OpKind::Max, [](double a, double b) { return std::max(a, b); }, dt);
    binary(OpKind::Less, [](double a, double b) { return double(a < b); }, DType::Bool);

    cs.push_back({OpKind::MatMul, {"matmul_" + tag(dt), [=] {
                    Rng rng(1001);
                    T a = rng.tensor({2, 7, 45}, -1, 1, dt), b = rng.tensor({45, 19}, -1, 1, dt);
                    check_op("matmul_" + tag(dt), {a, b}, [](Graph& g, Ins in) { return Outs{g.matmul(in[0], in[1])}; },
                             {ref::matmul(a, b)}, r, r);
                  }}});
    cs.push_back({OpKind::FusedMatMul, {"fused_matmul_gelu_" + tag(dt), [=] {
                    Rng rng(1002);
                    T a = rng.tensor({11, 33}, -1, 1, dt), b = rng.tensor({33, 9}, -1, 1, dt), c = rng.tensor({9}, -1, 1, dt);
                    T want = ref::map(ref::binary(ref::matmul(a, b), c, std::plus<double>(), dt), ref::gelu, dt);
                    check_op("fused_matmul_" + tag(dt), {a, b, c}, [](Graph& g, Ins in) {
                      return Outs{g.fused_matmul(in[0], in[1], in[2], Activation::Gelu)};
                    }, {want}, r, r);
                  }}});
    cs.push_back({OpKind::Conv2d, {"conv2d_" + tag(dt), [=] {
                    Rng rng(1003);
                    T x = rng.tensor({1, 4, 7, 9}, -1, 1, dt), w = rng.tensor({6, 2, 3, 3}, -0.5, 0.5, dt);
                    T b = rng.tensor({6}, -1, 1, dt);
                    ConvAttrs a{{1, 2}, {1, 1, 1, 1}, {1, 1}, 2};
                    check_op("conv2d_" + tag(dt), {x, w, b}, [&](Graph& g, Ins in) {
                      return Outs{g.conv2d(in[0], in[1], in[2], a.strides, a.pads, a.dilations, a.group)};
                    }, {ref::conv2d(x, w, &b, a)}, r, r);
                  }}});
    cs.push_back({OpKind::Softmax, {"softmax_" + tag(dt), [=] {
                    T x = Rng(1004).tensor({5, 3, 41}, -5, 5, dt);
                    check_op("softmax_" + tag(dt), {x}, [](Graph& g, Ins in) {
                      return Outs{g.softmax(in[0], -1), g.softmax(in[0], 1)};
                    }, {rounded(ref::softmax(x, 2, false)), rounded(ref::softmax(x, 1, false))}, r, r * 1e-2);
                  }}});
    cs.push_back({OpKind::LogSoftmax, {"log_softmax_" + tag(dt), [=] {
                    T x = Rng(1005).tensor({5, 41}, -5, 5, dt);
                    check_op("log_softmax_" + tag(dt), {x}, [](Graph& g, Ins in) { return Outs{g.log_softmax(in[0])}; },
                             {rounded(ref::softmax(x, 1, true))}, r, r * 1e-2);
                  }}});
    cs.push_back({OpKind::LayerNorm, {"layer_norm_" + tag(dt), [=] {
                    Rng rng(1006);
                    T x = rng.tensor({6, 37}, -2, 3, dt), s = rng.tensor({37}, 0.5, 1.5, dt), b = rng.tensor({37}, -1, 1, dt);
                    check_op("layer_norm_" + tag(dt), {x, s, b}, [](Graph& g, Ins in) {
                      return Outs{g.layer_norm(in[0], in[1], in[2])};
                    }, {rounded(ref::norm(x, &s, &b, 1, 1e-5, false))}, r, r);
                  }}});
    cs.push_back({OpKind::RmsNorm, {"rms_norm_" + tag(dt), [=] {
                    Rng rng(1007);
                    T x = rng.tensor({6, 37}, -2, 3, dt), s = rng.tensor({37}, 0.5, 1.5, dt);
                    check_op("rms_norm_" + tag(dt), {x, s}, [](Graph& g, Ins in) { return Outs{g.rms_norm(in[0], in[1])}; },
                             {rounded(ref::norm(x, &s, nullptr, 1, 1e-6, true))}, r, r);
                  }}});
    cs.push_back({OpKind::Attention, {"attention_gqa_causal_" + tag(dt), [=] {
                    Rng rng(1008);
                    T q = rng.tensor({1, 4, 6, 8}, -1, 1, dt), k = rng.tensor({1, 2, 9, 8}, -1, 1, dt);
                    T v = rng.tensor({1, 2, 9, 8}, -1, 1, dt), m = rng.tensor({6, 9}, -1, 0, dt);
                    check_op("attention_" + tag(dt), {q, k, v, m}, [](Graph& g, Ins in) {
                      return Outs{g.attention(in[0], in[1], in[2], in[3], true)};
                    }, {ref::attention(q, k, v, &m, true, 0)}, r, r);
                  }}});
    cs.push_back({OpKind::Rotary, {"rotary_" + tag(dt), [=] {
                    Rng rng(1009);
                    T x = rng.tensor({1, 2, 5, 12}, -1, 1, dt), c = rng.tensor({5, 4}, -1, 1, dt), s = rng.tensor({5, 4}, -1, 1, dt);
                    check_op("rotary_" + tag(dt), {x, c, s}, [](Graph& g, Ins in) {
                      return Outs{g.rotary(in[0], in[1], in[2], false), g.rotary(in[0], in[1], in[2], true)};
                    }, {rounded(ref::rotary(x, c, s, false)), rounded(ref::rotary(x, c, s, true))}, r, r * 1e-2);
                  }}});
    cs.push_back({OpKind::ReduceSum, {"reduce_sum_mean_max_" + tag(dt), [=] {
                    T x = Rng(1010).tensor({4, 9, 33}, -1, 1, dt);
                    check_op("reduce_" + tag(dt), {x}, [](Graph& g, Ins in) {
                      return Outs{g.reduce_sum(in[0], {2}, false), g.reduce_mean(in[0], {0, 1}, true),
                                  g.reduce_max(in[0], {1}, false)};
                    }, {rounded(ref::reduce(x, {2}, false, ref::Red::Sum)), rounded(ref::reduce(x, {0, 1}, true, ref::Red::Mean)),
                        ref::reduce(x, {1}, false, ref::Red::Max)}, r, r);
                  }}});
    cs.push_back({OpKind::AvgPool2d, {"pools_" + tag(dt), [=] {
                    T x = Rng(1011).tensor({1, 3, 8, 9}, -2, 2, dt);
                    PoolAttrs a;
                    a.kernel = {3, 3}, a.strides = {2, 2}, a.pads = {1, 1, 1, 1};
                    check_op("pools_" + tag(dt), {x}, [&](Graph& g, Ins in) {
                      return Outs{g.add1(OpKind::AvgPool2d, {in[0]}, a), g.add1(OpKind::MaxPool2d, {in[0]}, a)};
                    }, {rounded(ref::pool2d(x, a, false)), ref::pool2d(x, a, true)}, r, r * 1e-2);
                  }}});
    cs.push_back({OpKind::TopK, {"topk_argmax_" + tag(dt), [=] {
                    T x = Rng(1012).tensor({3, 40}, -100, 100, dt);
                    for (size_t i = 0; i < x.v.size(); ++i) x.v[i] = double(int64_t(i * 7919) % 97 - 48);  // distinct per row
                    auto [v, i] = ref::topk(x, 4, 1, false);
                    check_op("topk_" + tag(dt), {x}, [](Graph& g, Ins in) {
                      auto [tv, ti] = g.topk(in[0], 4, 1, false);
                      return Outs{tv, ti, g.argmax(in[0], 1, false)};
                    }, {v, i, ref::arg_reduce(x, 1, false, true, false)});
                  }}});
  }
  return cs;
}

const bool kFloatCases = register_cases(float_cases());

const bool kIntCases = register_cases({
    {OpKind::ReduceSum, {"reduce_int", [] {
       T x = Rng(1100).tensor({5, 7, 11}, -50, 50, DType::I32);
       T y = Rng(1101).tensor({4, 9}, -5, 5, DType::I64);
       T p = Rng(1102).tensor({3, 5}, -3, 3, DType::I32);
       T mean = ref::reduce(x, {1}, false, ref::Red::Mean);
       for (size_t i = 0; i < mean.v.size(); ++i) mean.v[i] = std::trunc(ref::reduce(x, {1}, false, ref::Red::Sum).v[i] / 7);
       mean.dtype = DType::I32;
       check_op("reduce_int", {x, y, p}, [](Graph& g, Ins in) {
         return Outs{g.reduce_sum(in[0], {0, 2}, false), g.reduce_max(in[1], {1}, true), g.reduce_min(in[0], {}, false),
                     g.reduce_prod(in[2], {1}, false), g.reduce_mean(in[0], {1}, false)};
       }, {ref::reduce(x, {0, 2}, false, ref::Red::Sum), ref::reduce(y, {1}, true, ref::Red::Max),
           ref::reduce(x, {}, false, ref::Red::Min), ref::reduce(p, {1}, false, ref::Red::Prod), mean});
     }}},
    {OpKind::ArgMin, {"argmin_i32", [] {
       T x = Rng(1103).tensor({6, 13}, -4, 4, DType::I32);
       check_op("argmin_i32", {x}, [](Graph& g, Ins in) {
         return Outs{g.argmin(in[0], 1, false, true), g.argmin(in[0], 0, true, false)};
       }, {ref::arg_reduce(x, 1, false, false, true), ref::arg_reduce(x, 0, true, false, false)});
     }}},
    {OpKind::MaxPool2d, {"max_pool_i32", [] {
       T x = Rng(1104).tensor({2, 2, 7, 6}, -100, 100, DType::I32);
       PoolAttrs a;
       a.kernel = {2, 3}, a.strides = {2, 1}, a.pads = {0, 1, 1, 1};
       check_op("max_pool_i32", {x}, [&](Graph& g, Ins in) { return Outs{g.add1(OpKind::MaxPool2d, {in[0]}, a)}; },
                {ref::pool2d(x, a, true)});
     }}},
});

// Data movement is byte movement: 1-, 2- and 8-byte elements and bool.
std::vector<std::pair<OpKind, OpCase>> movement_cases() {
  std::vector<std::pair<OpKind, OpCase>> cs;
  for (DType dt : {DType::U8, DType::Bool, DType::F16, DType::I16, DType::I64, DType::F64}) {
    const std::string s = tag(dt);
    cs.push_back({OpKind::Transpose, {"transpose_" + s, [=] {
                    T x = Rng(1200).tensor({3, 5, 7, 2}, 0, 100, dt);
                    check_op("transpose_" + s, {x}, [](Graph& g, Ins in) {
                      return Outs{g.transpose(in[0], {3, 1, 0, 2}), g.transpose(in[0], {0, 2, 1, 3})};
                    }, {ref::transpose(x, {3, 1, 0, 2}), ref::transpose(x, {0, 2, 1, 3})});
                  }}});
    cs.push_back({OpKind::Concat, {"concat_split_" + s, [=] {
                    Rng rng(1201);
                    T a = rng.tensor({3, 4, 5}, 0, 100, dt), b = rng.tensor({3, 2, 5}, 0, 100, dt);
                    T c = ref::concat({a, b}, 1);
                    check_op("concat_" + s, {a, b}, [](Graph& g, Ins in) {
                      Value c = g.concat({in[0], in[1]}, 1);
                      auto parts = g.split(c, 2, {2, 3});
                      return Outs{c, parts[1]};
                    }, {c, ref::slice(c, {0, 0, 2}, {1, 1, 1}, {3, 6, 3})});
                  }}});
    cs.push_back({OpKind::Gather, {"gather_slice_" + s, [=] {
                    T x = Rng(1202).tensor({6, 5}, 0, 100, dt);
                    T idx({4}, {5, 0, 2, 2}, DType::I64);
                    check_op("gather_" + s, {x, idx}, [](Graph& g, Ins in) {
                      return Outs{g.gather(in[0], in[1], 0), g.slice(in[0], {4, 1}, {0, 5}, {0, 1}, {-2, 2})};
                    }, {ref::gather(x, idx, 0), ref::slice(x, {4, 1}, {-2, 2}, {2, 2})});
                  }}});
    cs.push_back({OpKind::Pad, {"pad_tile_expand_" + s, [=] {
                    T x = Rng(1203).tensor({2, 1, 3}, 0, 100, dt);
                    check_op("pad_" + s, {x}, [](Graph& g, Ins in) {
                      return Outs{g.pad(in[0], {1, 0, 2, 0, 1, 1}, PadMode::Edge), g.pad(in[0], {0, 0, 1, 1, 2, 0}),
                                  g.tile(in[0], {2, 3, 1}), g.expand(in[0], {2, 4, 3})};
                    }, {ref::pad(x, {1, 0, 2, 0, 1, 1}, PadMode::Edge, 0), ref::pad(x, {0, 0, 1, 1, 2, 0}, PadMode::Constant, 0),
                        ref::tile(x, {2, 3, 1}), ref::expand(x, {2, 4, 3})});
                  }}});
    cs.push_back({OpKind::Where, {"where_" + s, [=] {
                    Rng rng(1204);
                    T c = rng.tensor({4, 1}, 0, 1, DType::Bool), a = rng.tensor({4, 6}, 0, 100, dt), b = rng.tensor({6}, 0, 100, dt);
                    check_op("where_" + s, {c, a, b}, [](Graph& g, Ins in) { return Outs{g.where(in[0], in[1], in[2])}; },
                             {ref::zip({&c, &a, &b}, [](const std::vector<double>& v) { return v[0] ? v[1] : v[2]; }, dt)});
                  }}});
  }
  return cs;
}

const bool kMovementCases = register_cases(movement_cases());

const bool kCastCases = register_cases({
    {OpKind::Cast, {"cast_between_types", [] {
       Rng rng(1300);
       T h = rng.tensor({4, 9}, -50, 50, DType::F16), i8 = rng.tensor({4, 9}, -100, 100, DType::I8);
       T u8 = rng.tensor({4, 9}, 0, 255, DType::U8), d = rng.tensor({4, 9}, -3, 3, DType::F64);
       T b = rng.tensor({4, 9}, 0, 1, DType::Bool);
       auto as = [](const T& x, DType t) { return rounded(T(x.dims, x.v, t)); };
       check_op("cast_between_types", {h, i8, u8, d, b}, [](Graph& g, Ins in) {
         return Outs{g.cast(in[0], DType::BF16), g.cast(in[1], DType::F16), g.cast(in[2], DType::I64),
                     g.cast(in[3], DType::F32), g.cast(in[4], DType::I32), g.cast(in[0], DType::I8),
                     g.cast(in[3], DType::F16)};
       }, {as(h, DType::BF16), as(i8, DType::F16), as(u8, DType::I64), as(d, DType::F32), as(b, DType::I32),
           as(h, DType::I8), as(d, DType::F16)}, 0, 0);
     }}},
    // bitcast: the bytes of each element read as another type of the same size; the
    // reference reinterprets them with memcpy (f32 <-> i32 both ways, f64 -> i64, i8 -> u8,
    // bool -> u8, f16 -> i16). Exact.
    {OpKind::BitCast, {"bitcast_same_size_types", [] {
       Rng rng(1301);
       T f = rng.tensor({3, 7}, -1000, 1000), i = rng.tensor({3, 7}, -2000000000, 2000000000, DType::I32);
       T d = rng.tensor({5}, -1e6, 1e6, DType::F64), i8 = rng.tensor({2, 3}, -128, 127, DType::I8);
       T b = rng.tensor({4}, 0, 1, DType::Bool), h = rng.tensor({6}, -30, 30, DType::F16);
       f = rounded(f);
       i = rounded(i);
       h = rounded(h);
       auto bits = [](const T& x, DType to) {
         T y(x.dims, to);
         const std::vector<uint8_t> raw = to_bytes(x);
         for (size_t k = 0; k < x.v.size(); ++k) {
           const uint8_t* p = raw.data() + k * dtype_size(to);
           switch (to) {
             case DType::I32: { int32_t v; std::memcpy(&v, p, 4); y.v[k] = v; break; }
             case DType::F32: { float v; std::memcpy(&v, p, 4); y.v[k] = v; break; }
             case DType::I64: { int64_t v; std::memcpy(&v, p, 8); y.v[k] = double(v); break; }
             case DType::U8: y.v[k] = p[0]; break;
             case DType::I16: { int16_t v; std::memcpy(&v, p, 2); y.v[k] = v; break; }
             default: break;
           }
         }
         return y;
       };
       check_op("bitcast_same_size_types", {f, i, d, i8, b, h}, [](Graph& g, Ins in) {
         return Outs{g.bitcast(in[0], DType::I32), g.bitcast(in[1], DType::F32), g.bitcast(in[2], DType::I64),
                     g.bitcast(in[3], DType::U8),  g.bitcast(in[4], DType::U8),  g.bitcast(in[5], DType::I16)};
       }, {bits(f, DType::I32), bits(i, DType::F32), bits(d, DType::I64), bits(i8, DType::U8), bits(b, DType::U8),
           bits(h, DType::I16)}, 0, 0);
     }}},
});

}  // namespace
}  // namespace rlx::e2e
