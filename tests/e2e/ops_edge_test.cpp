// End-to-end edge cases per op: rank-0 scalars, size-1 and zero-size dims, long rows
// and large tensors (the kernels' blocked and parallel paths), k = whole axis.
#include <cmath>

#include "op_cases.h"

namespace rlx::e2e {
namespace {

using Outs = std::vector<Value>;
using Ins = const std::vector<Value>&;

T scalar_t(double v, DType t = DType::F32) { return T(std::vector<int64_t>{}, {v}, t); }

const bool kScalars = register_cases({
    {OpKind::Add, {"rank0_operands", [] {
       Rng rng(1);
       T x = rng.tensor({3, 4}), s = scalar_t(0.75), u = scalar_t(-1.25);
       check_op("rank0_operands", {x, s, u}, [](Graph& g, Ins in) {
         return Outs{g.add(in[0], in[1]), g.mul(in[1], in[2]), g.exp(in[2]), g.reduce_sum(in[0], {}, false),
                     g.reshape(in[1], {1, 1}), g.where(g.lt(in[1], in[2]), in[1], in[0])};
       }, {ref::binary(x, s, std::plus<double>(), DType::F32), scalar_t(0.75 * -1.25),
           scalar_t(double(float(std::exp(-1.25)))), ref::reduce(x, {}, false, ref::Red::Sum),
           T({1, 1}, {0.75}), x}, 2e-6, 1e-6);
     }}},
    {OpKind::MatMul, {"matmul_k1_m1_n1", [] {
       Rng rng(2);
       T a = rng.tensor({9, 1}), b = rng.tensor({1, 7}), c = rng.tensor({1, 40}), d = rng.tensor({40, 1});
       check_op("matmul_k1_m1_n1", {a, b, c, d}, [](Graph& g, Ins in) {
         return Outs{g.matmul(in[0], in[1]), g.matmul(in[2], in[3]), g.matmul(in[3], in[2])};
       }, {ref::matmul(a, b), ref::matmul(c, d), ref::matmul(d, c)}, 2e-6, 1e-6);
     }}},
    {OpKind::MatMul, {"matmul_long_k_and_wide", [] {
       Rng rng(3);
       T a = rng.tensor({33, 1500}), b = rng.tensor({1500, 70}), c = rng.tensor({3, 300, 2});
       check_op("matmul_long_k", {a, b, c}, [](Graph& g, Ins in) {
         return Outs{g.matmul(in[0], in[1]), g.matmul(g.transpose(in[2], {0, 2, 1}), in[2])};
       }, {ref::matmul(a, b), ref::matmul(ref::transpose(c, {0, 2, 1}), c)}, 1e-5, 2e-5);
     }}},
    {OpKind::Softmax, {"softmax_len1_and_long_rows", [] {
       Rng rng(4);
       T one = rng.tensor({6, 1}, -3, 3), longr = rng.tensor({3, 5003}, -4, 4);
       check_op("softmax_len1_long", {one, longr}, [](Graph& g, Ins in) {
         return Outs{g.softmax(in[0], -1), g.log_softmax(in[0], -1), g.softmax(in[1], -1), g.log_softmax(in[1], 0)};
       }, {ref::softmax(one, 1, false), ref::softmax(one, 1, true), ref::softmax(longr, 1, false),
           ref::softmax(longr, 0, true)}, 2e-5, 1e-7);
     }}},
    {OpKind::LayerNorm, {"layer_norm_len1_long_constant_rows", [] {
       Rng rng(5);
       T one = rng.tensor({4, 1}), longr = rng.tensor({2, 4099}, -3, 3), flat({3, 16});
       for (size_t i = 0; i < flat.v.size(); ++i) flat.v[i] = double(i / 16) + 0.5;  // zero variance
       check_op("layer_norm_edges", {one, longr, flat}, [](Graph& g, Ins in) {
         return Outs{g.add1(OpKind::LayerNorm, {in[0]}, NormAttrs{-1, 1e-5}),
                     g.add1(OpKind::LayerNorm, {in[1]}, NormAttrs{-1, 1e-5}),
                     g.add1(OpKind::LayerNorm, {in[2]}, NormAttrs{-1, 1e-5}),
                     g.add1(OpKind::RmsNorm, {in[1]}, NormAttrs{-1, 1e-6})};
       }, {ref::norm(one, nullptr, nullptr, 1, 1e-5, false), ref::norm(longr, nullptr, nullptr, 1, 1e-5, false),
           ref::norm(flat, nullptr, nullptr, 1, 1e-5, false), ref::norm(longr, nullptr, nullptr, 1, 1e-6, true)},
           2e-5, 2e-6);
     }}},
    {OpKind::ReduceSum, {"reduce_long_row_and_tall_column", [] {
       Rng rng(6);
       T row = rng.tensor({2, 70001}), col = rng.tensor({3001, 37}), mid = rng.tensor({5, 3001, 3});
       check_op("reduce_long", {row, col, mid}, [](Graph& g, Ins in) {
         return Outs{g.reduce_sum(in[0], {1}, false), g.reduce_sum(in[1], {0}, false), g.reduce_mean(in[2], {1}, false),
                     g.reduce_max(in[0], {-1}, true), g.reduce_min(in[1], {0}, true)};
       }, {ref::reduce(row, {1}, false, ref::Red::Sum), ref::reduce(col, {0}, false, ref::Red::Sum),
           ref::reduce(mid, {1}, false, ref::Red::Mean), ref::reduce(row, {1}, true, ref::Red::Max),
           ref::reduce(col, {0}, true, ref::Red::Min)}, 1e-5, 5e-5);
     }}},
    {OpKind::ArgMax, {"argmax_long_row_nan", [] {
       T x = Rng(7).tensor({3, 9001}, -5, 5);
       x.v[9001 + 4000] = 7.0;
       x.v[2 * 9001 + 100] = NAN;  // numpy: the first NaN wins
       T want = ref::arg_reduce(x, 1, false, true, false);
       want.v[2] = 100;
       check_op("argmax_long", {x}, [](Graph& g, Ins in) { return Outs{g.argmax(in[0], 1, false)}; }, {want});
     }}},
    {OpKind::TopK, {"topk_whole_axis_and_k1", [] {
       T x = Rng(8).tensor({5, 17}, -5, 5);
       auto [v, i] = ref::topk(x, 17, 1, true);
       auto [v1, i1] = ref::topk(x, 1, 0, false);
       check_op("topk_whole_axis", {x}, [](Graph& g, Ins in) {
         auto [a, b] = g.topk(in[0], 17, 1, true);
         auto [c, d] = g.topk(in[0], 1, 0, false);
         return Outs{a, b, c, d};
       }, {v, i, v1, i1});
     }}},
    {OpKind::Relu, {"zero_size_tensors", [] {
       T z({0, 5}), x = Rng(9).tensor({4, 5});
       check_op("zero_size", {z, x}, [](Graph& g, Ins in) {
         return Outs{g.relu(in[0]), g.concat({in[0], in[1]}, 0), g.reduce_sum(in[0], {0}, false),
                     g.matmul(in[0], g.transpose(in[1], {1, 0})), g.matmul(g.transpose(in[0], {1, 0}), in[0]),
                     g.slice(in[1], {2}, {2}, {0})};
       }, {T({0, 5}), x, T({5}), T({0, 4}), T({5, 5}), T({0, 5})});
     }}},
    {OpKind::Add, {"large_elementwise_parallel", [] {
       Rng rng(10);
       T a = rng.tensor({301, 1037}, -2, 2), b = rng.tensor({1037}, -2, 2);
       check_op("large_elementwise", {a, b}, [](Graph& g, Ins in) {
         return Outs{g.add(g.mul(in[0], in[1]), g.tanh(in[0])), g.sigmoid(in[0])};
       }, {ref::zip({&a, &b}, [](const std::vector<double>& v) { return v[0] * v[1] + std::tanh(v[0]); }, DType::F32),
           ref::map(a, [](double v) { return 1 / (1 + std::exp(-v)); }, DType::F32)}, 5e-6, 5e-7);
     }}},
    {OpKind::Transpose, {"large_transpose_copy", [] {
       T x = Rng(11).tensor({3, 257, 403});
       check_op("large_transpose", {x}, [](Graph& g, Ins in) {
         return Outs{g.transpose(in[0], {0, 2, 1}), g.transpose(in[0], {2, 1, 0}), g.identity(in[0])};
       }, {ref::transpose(x, {0, 2, 1}), ref::transpose(x, {2, 1, 0}), x});
     }}},
    {OpKind::Conv2d, {"conv_large_batch_channels", [] {
       Rng rng(12);
       T x = rng.tensor({3, 16, 19, 17}), w = rng.tensor({24, 16, 3, 3}, -0.2, 0.2), b = rng.tensor({24});
       ConvAttrs a{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
       check_op("conv_large", {x, w, b}, [&](Graph& g, Ins in) {
         return Outs{g.conv2d(in[0], in[1], in[2], a.strides, a.pads)};
       }, {ref::conv2d(x, w, &b, a)}, 2e-5, 5e-6);
     }}},
    {OpKind::Max, {"nan_propagation", [] {
       T x = Rng(13).tensor({2, 9}), y = Rng(14).tensor({2, 9});
       x.v[1] = NAN, y.v[3] = NAN, x.v[10] = NAN;
       auto nmax = [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); };
       auto nmin = [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); };
       T rmax = ref::reduce(x, {1}, false, ref::Red::Max);
       rmax.v[0] = rmax.v[1] = NAN;
       check_op("nan_propagation", {x, y}, [](Graph& g, Ins in) {
         return Outs{g.max(in[0], in[1]), g.min(in[0], in[1]), g.relu(in[0]), g.reduce_max(in[0], {1}, false)};
       }, {ref::binary(x, y, nmax, DType::F32), ref::binary(x, y, nmin, DType::F32),
           ref::map(x, [](double v) { return v < 0 ? 0.0 : v; }, DType::F32), rmax});
     }}},
    {OpKind::Add, {"int_wraparound", [] {
       T a({4}, {2147483647, -2147483647 - 1.0, 65536, -7}, DType::I32);
       T b({4}, {1, -1, 65536, 2}, DType::I32);
       check_op("int_wraparound", {a, b}, [](Graph& g, Ins in) {
         return Outs{g.add(in[0], in[1]), g.sub(in[0], in[1]), g.mul(in[0], in[1]), g.div(in[0], in[1]),
                     g.mod(in[0], in[1])};
       }, {T({4}, {-2147483647 - 1.0, 2147483647, 131072, -5}, DType::I32),
           T({4}, {2147483646, -2147483647, 0, -9}, DType::I32), T({4}, {2147483647, -2147483647 - 1.0, 0, -14}, DType::I32),
           T({4}, {2147483647, -2147483647 - 1.0, 1, -3}, DType::I32), T({4}, {0, 0, 0, 1}, DType::I32)});
     }}},
});

}  // namespace
}  // namespace rlx::e2e
