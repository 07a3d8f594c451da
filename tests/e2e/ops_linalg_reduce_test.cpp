// End-to-end cases of matmul, fused_matmul, reductions, arg-reductions, topk, softmax
// and the norms.
#include <cmath>

#include "op_cases.h"

namespace rlx::e2e {
namespace {

using Outs = std::vector<Value>;
using Ins = const std::vector<Value>&;

T act(const T& x, Activation a, double alpha) {
  return ref::map(x, [=](double v) {
    switch (a) {
      case Activation::None: return v;
      case Activation::Relu: return v < 0 ? 0.0 : v;
      case Activation::Gelu: return ref::gelu(v);
      case Activation::GeluTanh: return ref::gelu_tanh(v);
      case Activation::Silu: return v / (1 + std::exp(-v));
      case Activation::Sigmoid: return 1 / (1 + std::exp(-v));
      case Activation::Tanh: return std::tanh(v);
      case Activation::LeakyRelu: return v < 0 ? alpha * v : v;
    }
    return v;
  }, x.dtype);
}

OpCase fused_matmul_case(Activation a, double alpha, bool bias) {
  std::string name = "fused_matmul_" + std::string(enum_name(a)) + (bias ? "_bias" : "");
  return {name, [=] {
            Rng rng(100 + uint32_t(a));
            T x = rng.tensor({2, 13, 19}), w = rng.tensor({19, 21}), b = rng.tensor({21});
            T want = ref::matmul(x, w);
            if (bias) want = ref::binary(want, b, std::plus<double>(), DType::F32);
            want = act(want, a, alpha);
            std::vector<T> ins{x, w};
            if (bias) ins.push_back(b);
            check_op(name, ins, [&](Graph& g, Ins in) {
              return Outs{g.fused_matmul(in[0], in[1], bias ? in[2] : Value{}, a, alpha)};
            }, {want}, 2e-5, 2e-6);
          }};
}

OpCase reduce_case(OpKind k, ref::Red r, std::vector<int64_t> axes, bool keep, double lo, double hi) {
  std::string name = std::string(op_name(k)) + "_axes" + std::to_string(axes.size()) + (keep ? "_keep" : "");
  return {name, [=] {
            Rng rng(200 + uint32_t(k) + uint32_t(axes.size()) * 13);
            T x = rng.tensor({3, 5, 17}, lo, hi);
            check_op(name, {x}, [&](Graph& g, Ins in) {
              return Outs{g.add1(k, {in[0]}, ReduceAttrs{axes, keep})};
            }, {ref::reduce(x, axes, keep, r)}, 2e-5, 1e-6);
          }};
}

OpCase norm_case(bool rms, int axis, bool scale, bool bias) {
  std::string name = std::string(rms ? "rms_norm" : "layer_norm") + "_axis" + std::to_string(axis) +
                     (scale ? "_scale" : "") + (bias ? "_bias" : "");
  return {name, [=] {
            Rng rng(300 + uint32_t(axis) * 3 + rms);
            T x = rng.tensor({3, 5, 43}, -2, 3);
            std::vector<int64_t> pd(x.dims.begin() + (axis < 0 ? x.rank() + axis : axis), x.dims.end());
            T s = rng.tensor(pd, 0.5, 1.5), b = rng.tensor(pd, -1, 1);
            std::vector<T> ins{x};
            if (scale) ins.push_back(s);
            if (bias) ins.push_back(b);
            const double eps = 1e-5;
            const int ax = axis < 0 ? x.rank() + axis : axis;
            T want = ref::norm(x, scale ? &s : nullptr, bias ? &b : nullptr, ax, eps, rms);
            check_op(name, ins, [&](Graph& g, Ins in) {
              Value sv = scale ? in[1] : Value{};
              Value bv = bias ? in[scale ? 2 : 1] : Value{};
              std::vector<Value> args{in[0], sv};
              if (!rms) args.push_back(bv);
              while (!args.back().valid()) args.pop_back();
              return Outs{g.add1(rms ? OpKind::RmsNorm : OpKind::LayerNorm, args, NormAttrs{axis, eps})};
            }, {want}, 2e-5, 2e-6);
          }};
}

const bool kLinalg = register_cases({
    {OpKind::MatMul, {"matmul_batch_broadcast", [] {
       Rng rng(1);
       T a = rng.tensor({2, 1, 5, 37}), b = rng.tensor({3, 37, 11});
       check_op("matmul_batch_broadcast", {a, b}, [](Graph& g, Ins in) { return Outs{g.matmul(in[0], in[1])}; },
                {ref::matmul(a, b)}, 2e-5, 2e-6);
     }}},
    {OpKind::MatMul, {"matmul_vector_and_large", [] {
       Rng rng(2);
       T v = rng.tensor({67}), m = rng.tensor({67, 45}), a = rng.tensor({71, 67});
       check_op("matmul_vector_and_large", {v, m, a}, [](Graph& g, Ins in) {
         return Outs{g.matmul(in[0], in[1]), g.matmul(in[2], in[1]), g.matmul(g.transpose(in[1], {1, 0}), in[0])};
       }, {ref::matmul(v, m), ref::matmul(a, m), ref::matmul(ref::transpose(m, {1, 0}), v)}, 2e-5, 2e-6);
     }}},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::None, 0, true)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::Relu, 0, false)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::Gelu, 0, true)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::GeluTanh, 0, true)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::Silu, 0, true)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::Sigmoid, 0, true)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::Tanh, 0, true)},
    {OpKind::FusedMatMul, fused_matmul_case(Activation::LeakyRelu, 0.15, true)},
});

const bool kReduce = register_cases({
    {OpKind::ReduceSum, reduce_case(OpKind::ReduceSum, ref::Red::Sum, {0, 2}, false, -1, 1)},
    {OpKind::ReduceSum, reduce_case(OpKind::ReduceSum, ref::Red::Sum, {}, true, -1, 1)},
    {OpKind::ReduceMean, reduce_case(OpKind::ReduceMean, ref::Red::Mean, {1}, true, -1, 1)},
    {OpKind::ReduceMean, reduce_case(OpKind::ReduceMean, ref::Red::Mean, {-1}, false, -1, 1)},
    {OpKind::ReduceMax, reduce_case(OpKind::ReduceMax, ref::Red::Max, {0}, false, -5, 5)},
    {OpKind::ReduceMax, reduce_case(OpKind::ReduceMax, ref::Red::Max, {1, 2}, true, -5, 5)},
    {OpKind::ReduceMin, reduce_case(OpKind::ReduceMin, ref::Red::Min, {2}, true, -5, 5)},
    {OpKind::ReduceProd, reduce_case(OpKind::ReduceProd, ref::Red::Prod, {1}, false, 0.8, 1.25)},
    {OpKind::ArgMax, {"argmax_ties_first_and_last", [] {
       // Small integers so that ties occur.
       Rng rng(3);
       T x = rng.tensor({4, 9, 6}, -3, 3, DType::I32);
       for (double& v : x.v) v = double(int(v));
       x.dtype = DType::F32;
       check_op("argmax_ties", {x}, [](Graph& g, Ins in) {
         return Outs{g.argmax(in[0], 1, true, false), g.argmax(in[0], -1, false, true)};
       }, {ref::arg_reduce(x, 1, true, true, false), ref::arg_reduce(x, 2, false, true, true)});
     }}},
    {OpKind::ArgMin, {"argmin_ties_first_and_last", [] {
       Rng rng(4);
       T x = rng.tensor({4, 9, 6}, -3, 3, DType::I32);
       for (double& v : x.v) v = double(int(v));
       x.dtype = DType::F32;
       check_op("argmin_ties", {x}, [](Graph& g, Ins in) {
         return Outs{g.argmin(in[0], 0, false, false), g.argmin(in[0], 2, true, true)};
       }, {ref::arg_reduce(x, 0, false, false, false), ref::arg_reduce(x, 2, true, false, true)});
     }}},
    {OpKind::TopK, {"topk_largest_last_axis", [] {
       T x = Rng(5).tensor({4, 3, 29}, -5, 5);
       auto [v, i] = ref::topk(x, 5, 2, true);
       check_op("topk_largest", {x}, [](Graph& g, Ins in) {
         auto [tv, ti] = g.topk(in[0], 5, -1, true, true);
         return Outs{tv, ti};
       }, {v, i});
     }}},
    {OpKind::TopK, {"topk_smallest_middle_axis", [] {
       T x = Rng(6).tensor({4, 29, 3}, -5, 5);
       auto [v, i] = ref::topk(x, 7, 1, false);
       check_op("topk_smallest", {x}, [](Graph& g, Ins in) {
         auto [tv, ti] = g.topk(in[0], 7, 1, false, true);
         return Outs{tv, ti};
       }, {v, i});
     }}},
});

const bool kNorm = register_cases({
    {OpKind::Softmax, {"softmax_last_and_middle_axis", [] {
       T x = Rng(7).tensor({3, 11, 37}, -6, 6);
       check_op("softmax", {x}, [](Graph& g, Ins in) { return Outs{g.softmax(in[0], -1), g.softmax(in[0], 1)}; },
                {ref::softmax(x, 2, false), ref::softmax(x, 1, false)}, 2e-5, 1e-7);
     }}},
    {OpKind::Softmax, {"softmax_with_neg_inf", [] {
       T x = Rng(8).tensor({5, 17}, -6, 6);
       for (size_t i = 0; i < x.v.size(); i += 4) x.v[i] = -INFINITY;
       check_op("softmax_neg_inf", {x}, [](Graph& g, Ins in) { return Outs{g.softmax(in[0], -1)}; },
                {ref::softmax(x, 1, false)}, 2e-5, 1e-7);
     }}},
    {OpKind::LogSoftmax, {"log_softmax_last_and_first_axis", [] {
       T x = Rng(9).tensor({3, 11, 37}, -6, 6);
       check_op("log_softmax", {x}, [](Graph& g, Ins in) {
         return Outs{g.log_softmax(in[0], -1), g.log_softmax(in[0], 0)};
       }, {ref::softmax(x, 2, true), ref::softmax(x, 0, true)}, 2e-5, 2e-6);
     }}},
    {OpKind::LayerNorm, norm_case(false, -1, true, true)},
    {OpKind::LayerNorm, norm_case(false, 1, true, false)},
    {OpKind::LayerNorm, norm_case(false, -1, false, false)},
    {OpKind::RmsNorm, norm_case(true, -1, true, false)},
    {OpKind::RmsNorm, norm_case(true, 1, false, false)},
});

}  // namespace
}  // namespace rlx::e2e
