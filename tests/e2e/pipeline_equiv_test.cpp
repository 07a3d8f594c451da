// Pipeline on/off equivalence: the same graph compiled with every optional pass on and
// with fuse-elementwise, fuse-matmul-epilogue, constant-fold, cse and simplify off gives
// the same outputs: bit-identical where the math is the same (elementwise chains: the
// fused kernel promises the unfused ops' results), within 1e-6 of the tensor's scale
// where a fused kernel may order float operations differently.
#include <set>

#include "e2e_models.h"
#include "e2e_ref.h"

namespace rlx::e2e {
namespace {

struct OnOff {
  std::vector<T> on, off;
  std::set<OpKind> on_kinds;  // op kinds of the graph compiled with the passes on
};

OnOff run_on_off(const Graph& g, const Feeds& in, const Feeds& params) {
  OnOff r;
  CompiledGraph on = compile_e2e(g, default_options());
  CompiledGraph off = compile_e2e(g, passes_off(default_options()));
  set_params(on, params);
  set_params(off, params);
  r.on = run_net(on, in);
  r.off = run_net(off, in);
  for (const Node& n : on.graph().nodes()) r.on_kinds.insert(n.kind);
  return r;
}

// A random chain of bounded elementwise ops over inputs x[5,37], y[37], z[5,1], with
// scalar constants (constant-fold), repeated subexpressions (cse) and x*1, x+0,
// reshape pairs (simplify).
Graph random_chain(uint32_t seed, int length) {
  Rng rng(seed);
  Graph g("chain" + std::to_string(seed));
  std::vector<Value> vals{g.input("x", Shape({5, 37}, DType::F32)), g.input("y", Shape({37}, DType::F32)),
                          g.input("z", Shape({5, 1}, DType::F32))};
  auto pick = [&] { return vals[size_t(rng.integer(0, int64_t(vals.size()) - 1))]; };
  auto k = [&](double v) { return g.scalar(v, DType::F32); };
  for (int i = 0; i < length; ++i) {
    Value a = pick(), b = pick(), r;
    switch (rng.integer(0, 15)) {
      case 0: r = g.tanh(a); break;
      case 1: r = g.sigmoid(a); break;
      case 2: r = g.relu(g.sub(a, b)); break;
      case 3: r = g.mul(a, g.add(k(0.25), k(0.5))); break;  // folds to a * 0.75
      case 4: r = g.add(g.mul(a, k(1)), g.add(b, k(0))); break;
      case 5: r = g.max(a, b); break;
      case 6: r = g.min(g.sin(a), b); break;
      case 7: r = g.gelu(a, rng.integer(0, 1) == 1); break;
      case 8: r = g.silu(a); break;
      case 9: r = g.leaky_relu(g.add(a, b), 0.1); break;
      case 10: r = g.clip(g.mul(a, b), -0.8, 0.9); break;
      case 11: r = g.add(g.tanh(a), g.tanh(a)); break;  // cse
      case 12: r = g.exp(g.tanh(a)); break;
      case 13: r = g.div(a, g.add(g.abs(b), k(1))); break;
      case 14: {
        const auto d = g.type(a).static_dims();
        const int64_t n = numel_of(d);
        r = g.neg(g.reshape(g.reshape(a, {n}), d));
        break;
      }
      default: r = g.sub(g.mul(a, b), g.erf(b)); break;
    }
    vals.push_back(r);
  }
  // Outputs: the last value, one intermediate (a fused chain's inner result that is
  // also needed outside), and an input-only expression.
  g.set_outputs({vals.back(), vals[vals.size() / 2 + 1], g.add(vals[0], vals[1])});
  return g;
}

TEST(PipelineOnOff, RandomElementwiseChainsBitIdentical) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Graph g = random_chain(seed, 14);
    OnOff r = run_on_off(g, random_inputs(g, seed + 100, -2, 2), {});
    EXPECT_TRUE(r.on_kinds.count(OpKind::FusedElementwise)) << "nothing was fused";
    for (size_t o = 0; o < r.on.size(); ++o)
      expect_bitwise_equal(r.on[o], r.off[o], "chain output " + std::to_string(o));
  }
}

TEST(PipelineOnOff, MatmulBiasGelu) {
  Graph g("mm_bias_gelu");
  Value x = g.input("x", Shape({13, 37}, DType::F32));
  auto w = [&](int i) { return g.param("w" + std::to_string(i), Shape({37, 29}, DType::F32)); };
  Value b = g.param("b", Shape({29}, DType::F32));
  g.set_outputs({g.gelu(g.add(g.matmul(x, w(0)), b)), g.relu(g.add(b, g.matmul(x, w(1)))),
                 g.gelu(g.matmul(x, w(2)), true), g.silu(g.add(g.matmul(x, w(3)), b))});
  OnOff r = run_on_off(g, random_inputs(g, 1, -2, 2), random_params(g, 2));
  EXPECT_TRUE(r.on_kinds.count(OpKind::FusedMatMul)) << "no epilogue was fused";
  for (size_t o = 0; o < r.on.size(); ++o)
    EXPECT_LE(max_rel_diff(r.on[o], r.off[o]), 1e-6) << "output " << o;
}

TEST(PipelineOnOff, TransformerEncoderLayer) {
  Graph g = small_encoder(1);
  OnOff r = run_on_off(g, random_inputs(g, 3), random_params(g, 4));
  for (size_t o = 0; o < r.on.size(); ++o)
    EXPECT_LE(max_rel_diff(r.on[o], r.off[o]), 1e-6) << "output " << o;
}

TEST(PipelineOnOff, DecoderBlock) {
  Graph g = decoder_block();
  OnOff r = run_on_off(g, decoder_inputs(5), random_params(g, 6));
  for (size_t o = 0; o < r.on.size(); ++o)
    EXPECT_LE(max_rel_diff(r.on[o], r.off[o]), 1e-6) << "output " << o;
}

}  // namespace
}  // namespace rlx::e2e
