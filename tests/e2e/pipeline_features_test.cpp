// Compile-pipeline features end to end: symbolic dims bound at compile time, constant
// subgraphs folded through every op family, cast chains rewritten by simplify, and the
// precision policies on a CNN. Each is checked against a reference or against the same
// graph compiled with the optional passes off.
#include <set>

#include "e2e_models.h"
#include "e2e_ref.h"

namespace rlx::e2e {
namespace {

// x[b, s, 16] -> layer_norm -> matmul w[16, 8] + bias -> softmax; y = reduce_mean over s.
Graph symbolic_graph() {
  Graph g("symbolic");
  Dim b = g.sym("b"), s = g.sym("s");
  Value x = g.input("x", Shape(std::vector<Dim>{b, s, Dim(16)}, DType::F32));
  Value ln = g.layer_norm(x, g.param("g", Shape({16}, DType::F32)), g.param("beta", Shape({16}, DType::F32)));
  Value h = g.add(g.matmul(ln, g.param("w", Shape({16, 8}, DType::F32))), g.param("bias", Shape({8}, DType::F32)));
  Value p = g.softmax(h, -1);
  g.set_outputs({p, g.reduce_mean(p, {1}, false)}, {"p", "m"});
  return g;
}

TEST(PipelineFeatures, SymbolicDimsBoundAtCompile) {
  const Graph g = symbolic_graph();
  for (auto [b, s] : {std::pair<int64_t, int64_t>{2, 5}, {3, 1}, {1, 17}}) {
    SCOPED_TRACE("b=" + std::to_string(b) + " s=" + std::to_string(s));
    CompileOptions o = default_options();
    o.dim_bindings = {{"b", b}, {"s", s}};
    CompiledGraph net = compile_e2e(g, o);
    EXPECT_EQ(net.input_type("x").static_dims(), (std::vector<int64_t>{b, s, 16}));
    Rng rng(uint32_t(b * 10 + s));
    T gam = rng.tensor({16}, 0.5, 1.5), beta = rng.tensor({16}), w = rng.tensor({16, 8}), bias = rng.tensor({8});
    T x = rng.tensor({b, s, 16}, -2, 2);
    set_params(net, {{"g", gam}, {"beta", beta}, {"w", w}, {"bias", bias}});
    std::vector<T> got = run_net(net, {{"x", x}});
    T p = ref::softmax(ref::binary(ref::matmul(ref::norm(x, &gam, &beta, 2, 1e-5, false), w), bias,
                                   std::plus<double>(), DType::F32), 2, false);
    expect_close(got[0], p, 2e-5, 1e-6, "p");
    expect_close(got[1], ref::reduce(p, {1}, false, ref::Red::Mean), 2e-5, 1e-6, "m");
  }
  CompileOptions missing = default_options();
  missing.dim_bindings = {{"b", 2}};
  EXPECT_THROW(compile_e2e(g, missing), Error) << "an unbound symbol must be an error";
}

// Constants flow through transpose, reshape, concat, slice, matmul, softmax, conv,
// pooling, reductions, topk and gather before meeting the input; with constant-fold on,
// none of those nodes is left, and the results equal the unfolded compile bit for bit (on
// the CPU, which folds with its own kernels; within f32 rounding on a device backend).
TEST(PipelineFeatures, ConstantSubgraphsFoldThroughEveryFamily) {
  Rng rng(7);
  auto cst = [&](Graph& g, std::vector<int64_t> d, const std::string& name) {
    T t = rng.tensor(d, -1, 1);
    return g.constant_f32(d, std::vector<float>(t.v.begin(), t.v.end()), name);
  };
  Graph g("folding");
  Value x = g.input("x", Shape({6, 8}, DType::F32));
  Value a = cst(g, {8, 6}, "a"), b = cst(g, {6, 8}, "b");
  Value m = g.softmax(g.matmul(g.transpose(a, {1, 0}), g.reshape(b, {8, 6})), -1);      // [6,6]
  Value c = g.concat({m, g.slice(b, {0}, {2}, {1})}, 1);                                // [6,8]
  Value img = g.reshape(cst(g, {2, 3, 4, 4}, "img"), {2, 3, 4, 4});
  Value conv = g.conv2d(img, cst(g, {4, 3, 3, 3}, "k"), cst(g, {4}, "kb"), {1, 1}, {1, 1, 1, 1});
  Value pooled = g.reshape(g.max_pool2d(conv, {2, 2}, {2, 2}), {2, 16});                // [2,16]
  Value red = g.reshape(g.reduce_sum(pooled, {0}, true), {2, 8});                        // [2,8]
  auto [tv, ti] = g.topk(g.layer_norm(c, Value{}, Value{}), 8, 1);                      // [6,8]
  Value gathered = g.gather(red, g.constant_i64({6}, {0, 1, 1, 0, 1, 0}), 0);            // [6,8]
  Value y = g.add(g.mul(x, tv), g.add(gathered, g.cast(ti, DType::F32)));
  g.set_outputs({y, g.mul(x, g.exp(g.scalar(0.5, DType::F32)))});

  CompiledGraph on = compile_e2e(g, default_options());
  CompiledGraph off = compile_e2e(g, passes_off(default_options()));
  std::set<OpKind> left;
  for (const Node& n : on.graph().nodes()) left.insert(n.kind);
  for (OpKind k : {OpKind::MatMul, OpKind::Softmax, OpKind::Conv2d, OpKind::MaxPool2d, OpKind::TopK,
                   OpKind::Gather, OpKind::LayerNorm, OpKind::ReduceSum, OpKind::Transpose, OpKind::Exp})
    EXPECT_FALSE(left.count(k)) << op_name(k) << " on constants should have been folded";
  Feeds in = random_inputs(g, 8);
  std::vector<T> a1 = run_net(on, in), a2 = run_net(off, in);
  for (size_t o = 0; o < a1.size(); ++o) {
    const std::string what = "folded vs unfolded " + std::to_string(o);
    if (e2e_device() == Device::Cpu) {
      expect_bitwise_equal(a1[o], a2[o], what);
    } else {
      // A device backend folds with the CPU's kernels at compile time and runs the unfolded
      // graph with its own (cuBLAS, cuDNN), whose sums go in another order. The longest sum
      // is the convolution's 27 terms: at most 27 x 2^-24 = 1.6e-6 relative apart, which the
      // softmax and layer norm after it can grow by their condition (~10): within the
      // suite's f32 tolerance (2e-5 relative, rtol_of), 1e-6 absolute for outputs near zero
      // (the layer norm's are O(1)). The top-k indices need the same order, which holds
      // here: the values differ only in their last bits, far from any tie.
      expect_close(a1[o], a2[o], rtol_of(DType::F32), 1e-6, what);
    }
  }
}

// cast(cast(x: a -> b) -> c): simplify merges the pair when a -> b is lossless; the
// result must equal the two casts run one after the other.
TEST(PipelineFeatures, CastChainsSimplifyToTheSameValues) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8,
                         DType::I16, DType::I32, DType::I64, DType::Bool};
  Rng rng(9);
  for (DType a : types) {
    Graph g(std::string("casts_from_") + std::string(dtype_name(a)));
    Value x = g.input("x", Shape({40}, a));
    std::vector<Value> outs;
    for (DType b : types)
      for (DType c : types) outs.push_back(g.cast(g.cast(x, b), c));
    g.set_outputs(outs);
    // Negative, fractional and > 127 values (within the source type's range).
    T xv({40}, a);
    for (size_t i = 0; i < xv.v.size(); ++i) {
      double v = double(int64_t(i) - 20) * (is_float(a) ? 0.75 : 1.0) * (i % 3 == 0 ? 6.0 : 1.0);
      if (a == DType::U8) v = double(i * 6 + 3);
      xv.v[i] = round_to(v, a);
    }
    CompiledGraph on = compile_e2e(g, default_options());
    CompiledGraph off = compile_e2e(g, passes_off(default_options()));
    std::vector<T> r1 = run_net(on, {{"x", xv}}), r2 = run_net(off, {{"x", xv}});
    size_t k = 0;
    for (DType b : types)
      for (DType c : types) {
        expect_bitwise_equal(r1[k], r2[k], std::string(dtype_name(a)) + " -> " + std::string(dtype_name(b)) + " -> " +
                                               std::string(dtype_name(c)));
        ++k;
      }
  }
}

TEST(PipelineFeatures, PrecisionPoliciesOnCnn) {
  Graph g = small_cnn();
  Feeds in = random_inputs(g, 10), params = random_params(g, 11);
  CompiledGraph ref = compile_e2e(g, default_options());
  set_params(ref, params);
  const std::vector<T> want = run_net(ref, in);
  for (auto [p, dt] : {std::pair{Precision::F16, DType::F16}, std::pair{Precision::BF16, DType::BF16}}) {
    CompileOptions o = default_options();
    o.precision = p;
    CompiledGraph net = compile_e2e(g, o);
    // The policy rounds the convs' operands to the low type; a backend may then run a conv
    // itself in f32 between casts (the CPU does: conv_prefers_f32).
    int low_convs = 0;
    const Graph& cg = net.graph();
    for (const Node& n : cg.nodes())
      if (n.kind == OpKind::Conv2d || n.kind == OpKind::FusedConv2d) {
        const Node& src = cg.node(n.inputs[0].node);
        low_convs += n.outputs[0].dtype() == dt || (src.kind == OpKind::Cast && cg.type(src.inputs[0]).dtype() == dt);
      }
    EXPECT_GT(low_convs, 0) << dtype_name(dt);
    set_params(net, params);
    const std::vector<T> got = run_net(net, in);
    EXPECT_LE(max_rel_diff(got[0], want[0]), 1e-2) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace rlx::e2e
