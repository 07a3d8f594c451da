// Decompositions vs native kernels: each graph is run natively through Session, and
// again after opt::legalize against the CPU claims minus the composite kinds (so
// legalize writes them in primitives), the decomposed graph compiled with the fusion
// passes off so it stays decomposed. Results agree within 1e-5 relative.
#include <set>

#include "backends/cpu/kernel.h"
#include "e2e_models.h"
#include "e2e_ref.h"
#include "opt/passes.h"

namespace rlx::e2e {
namespace {

const std::set<OpKind> kComposite{OpKind::LayerNorm, OpKind::RmsNorm,     OpKind::Attention, OpKind::Rotary,
                                  OpKind::FusedMatMul, OpKind::Softmax, OpKind::LogSoftmax};

opt::BackendClaims cpu_without(std::set<OpKind> refused) {
  return opt::BackendClaims{"cpu-minus-composites", [refused](const Node& n, const std::vector<const Shape*>& in) {
                              return !refused.count(n.kind) && cpu::kernel_registry().supports(n, in);
                            }};
}

bool has_kind(const Graph& g, const std::set<OpKind>& kinds) {
  for (const Node& n : g.nodes())
    if (kinds.count(n.kind)) return true;
  return false;
}

// Runs `g` natively and decomposed; compares every output.
void native_vs_decomposed(const Graph& g, const Feeds& in, const Feeds& params, const std::set<OpKind>& refused,
                          double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_TRUE(has_kind(g, refused)) << "the test graph should use a refused kind";
  std::string report;
  Graph d = opt::legalize(g, cpu_without(refused), &report);
  ASSERT_FALSE(has_kind(d, refused)) << report;
  EXPECT_NE(report.find("decomposed"), std::string::npos) << report;

  CompiledGraph native = compile_e2e(g, default_options());
  CompiledGraph decomposed = compile_e2e(d, passes_off(default_options()));
  EXPECT_FALSE(has_kind(decomposed.graph(), refused)) << "the decomposed graph was re-fused";
  set_params(native, params);
  set_params(decomposed, params);
  std::vector<T> a = run_net(native, in), b = run_net(decomposed, in);
  ASSERT_EQ(a.size(), b.size());
  for (size_t o = 0; o < a.size(); ++o) expect_close(b[o], a[o], rtol, atol, g.name() + " output " + std::to_string(o));
}

TEST(Decompose, LayerNormAndRmsNorm) {
  Graph g("norms");
  Value x = g.input("x", Shape({4, 5, 37}, DType::F32));
  Value s = g.param("s", Shape({37}, DType::F32)), b = g.param("b", Shape({37}, DType::F32));
  Value s2 = g.param("s2", Shape({5, 37}, DType::F32));
  g.set_outputs({g.layer_norm(x, s, b), g.add1(OpKind::LayerNorm, {x, s2}, NormAttrs{1, 1e-3}),
                 g.add1(OpKind::LayerNorm, {x}, NormAttrs{-1, 1e-5}), g.rms_norm(x, s),
                 g.add1(OpKind::RmsNorm, {x}, NormAttrs{1, 1e-4})});
  native_vs_decomposed(g, random_inputs(g, 1, -2, 3), random_params(g, 2), kComposite);
}

TEST(Decompose, SoftmaxAndLogSoftmax) {
  Graph g("softmax");
  Value x = g.input("x", Shape({3, 7, 41}, DType::F32));
  g.set_outputs({g.softmax(x, -1), g.softmax(x, 1), g.log_softmax(x, -1), g.log_softmax(x, 0)});
  native_vs_decomposed(g, random_inputs(g, 3, -8, 8), {}, kComposite);
}

TEST(Decompose, FusedMatMulEveryActivation) {
  Graph g("fused_matmul");
  Value x = g.input("x", Shape({2, 9, 23}, DType::F32));
  Value w = g.param("w", Shape({23, 17}, DType::F32)), b = g.param("b", Shape({17}, DType::F32));
  std::vector<Value> outs;
  for (Activation a : {Activation::None, Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Silu,
                       Activation::Sigmoid, Activation::Tanh, Activation::LeakyRelu})
    outs.push_back(g.fused_matmul(x, w, b, a, a == Activation::LeakyRelu ? 0.2 : 0.0));
  outs.push_back(g.fused_matmul(x, w, Value{}, Activation::Relu));
  g.set_outputs(outs);
  native_vs_decomposed(g, random_inputs(g, 4, -2, 2), random_params(g, 5), kComposite);
}

TEST(Decompose, AttentionGqaCausalMaskLongerKeys) {
  Graph g("attention");
  Value q = g.input("q", Shape({2, 6, 5, 8}, DType::F32));
  Value k = g.input("k", Shape({2, 2, 13, 8}, DType::F32));
  Value v = g.input("v", Shape({2, 2, 13, 7}, DType::F32));
  Value m = g.input("m", Shape({5, 13}, DType::F32));
  g.set_outputs({g.attention(q, k, v, {}, true), g.attention(q, k, v, m, false, 0.2), g.attention(q, k, v, m, true)});
  Feeds in = random_inputs(g, 6, -1.5, 1.5);
  for (size_t i = 0; i < in["m"].v.size(); i += 3) in["m"].v[i] = -1e4;
  native_vs_decomposed(g, in, {}, kComposite);
}

TEST(Decompose, RotaryBothLayoutsFullAndPartial) {
  Graph g("rotary");
  Value x = g.input("x", Shape({2, 3, 7, 20}, DType::F32));
  Value c = g.input("cos", Shape({7, 10}, DType::F32)), s = g.input("sin", Shape({7, 10}, DType::F32));
  Value cp = g.input("cos_p", Shape({7, 6}, DType::F32)), sp = g.input("sin_p", Shape({7, 6}, DType::F32));
  g.set_outputs({g.rotary(x, c, s, false), g.rotary(x, c, s, true), g.rotary(x, cp, sp, false),
                 g.rotary(x, cp, sp, true)});
  Feeds in = random_inputs(g, 7);
  Feeds full = rope_tables(7, 10), part = rope_tables(7, 6);
  in["cos"] = full["cos"], in["sin"] = full["sin"], in["cos_p"] = part["cos"], in["sin_p"] = part["sin"];
  native_vs_decomposed(g, in, {}, kComposite);
}

TEST(Decompose, DecoderBlockAllCompositesAtOnce) {
  Graph g = decoder_block();
  native_vs_decomposed(g, decoder_inputs(8), random_params(g, 9), kComposite);
}

TEST(Decompose, UnaryActivationRules) {
  // The activations legalize can rewrite; the rules trade a little accuracy near zero
  // (tanh = 2 sigmoid(2x) - 1), hence an absolute floor.
  const std::set<OpKind> refused{OpKind::Sigmoid, OpKind::Tanh, OpKind::Silu, OpKind::Gelu, OpKind::Softplus,
                                 OpKind::Softsign, OpKind::Mish, OpKind::HardSigmoid, OpKind::HardSwish,
                                 OpKind::LeakyRelu, OpKind::Elu, OpKind::Selu, OpKind::Celu,
                                 OpKind::ThresholdedRelu, OpKind::Clip, OpKind::Neg, OpKind::Reciprocal,
                                 OpKind::Rsqrt, OpKind::Relu};
  Graph g("unary_rules");
  Value x = g.input("x", Shape({5, 37}, DType::F32));
  Value pos = g.add(g.abs(x), g.scalar(0.1, DType::F32));
  std::vector<Value> outs;
  for (OpKind k : refused) {
    Attrs a = default_attrs(k);
    if (k == OpKind::Clip) a = ClipAttrs{-0.4, 0.6};
    if (auto* s = std::get_if<ScalarAttrs>(&a)) {
      switch (k) {
        case OpKind::Selu: *s = ScalarAttrs{1.6732632, 1.0507010}; break;
        case OpKind::HardSigmoid: *s = ScalarAttrs{0.2, 0.5}; break;
        default: *s = ScalarAttrs{0.3, 0}; break;
      }
    }
    const bool needs_pos = k == OpKind::Reciprocal || k == OpKind::Rsqrt;
    outs.push_back(g.add1(k, {needs_pos ? pos : x}, a));
  }
  outs.push_back(g.gelu(x, true));
  g.set_outputs(outs);
  native_vs_decomposed(g, random_inputs(g, 10, -4, 4), {}, refused, 1e-5, 1e-6);
}

}  // namespace
}  // namespace rlx::e2e
