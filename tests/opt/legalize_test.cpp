// legalize: with fake backend claims (a set of kinds, optionally a dtype rule), check
// the decomposed structure (golden), the f32 wrapping of half nodes, the one error that
// lists every unsupported node, and the dispatch report. Whether decompositions compute
// the same numbers is checked by the runtime's conformance tests.
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "ir/op_table.h"

#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

using K = OpKind;
using Rule = std::function<bool(const Node&, const std::vector<const Shape*>&)>;

BackendClaims claims(std::set<K> kinds, Rule extra = nullptr) {
  return {"fake", [kinds, extra](const Node& n, const std::vector<const Shape*>& t) {
            return kinds.count(n.kind) > 0 && (!extra || extra(n, t));
          }};
}

const std::set<K> kPrimitives{K::Add,     K::Sub,     K::Mul,       K::Div,     K::Rsqrt,  K::ReduceMean,
                              K::ReduceMax, K::ReduceSum, K::Exp,     K::Log,     K::MatMul, K::Transpose,
                              K::Reshape, K::Expand,  K::Softmax,   K::Slice,   K::Concat, K::Cast,
                              K::Erf,     K::Max,     K::Min,       K::Where,   K::Greater};

TEST(Legalize, AllClaimedIsUnchanged) {
  const char* text = R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = matmul(%0, %1) name="mm" : f32[2,3]
  %3 = exp(%2) : f32[2,3]
  %4 = exp(%3) : f32[2,3]
  outputs(%4)
}
)";
  std::string report;
  expect_graph(legalize(parse(text), claims({K::MatMul, K::Exp}), &report), text);
  EXPECT_EQ(report,
            "dispatch (backend 'fake'): 3 native, 0 native in f32, 0 decomposed, 0 unsupported\n"
            "  exp: native 2\n"
            "  matmul: native 1\n");
}

TEST(Legalize, EmptyClaimsSupportEverything) {
  const char* text = R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = layer_norm(%0) : f32[2,4]
  outputs(%1)
}
)";
  expect_graph(legalize(parse(text), BackendClaims{"any", nullptr}, nullptr), text);
}

TEST(Legalize, NormsDecompose) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "g" : f32[4]
  %2 = param "b" : f32[4]
  %3 = layer_norm(%0, %1, %2) {epsilon=0.001} name="ln" : f32[2,4]
  %4 = rms_norm(%0, %1) name="rms" : f32[2,4]
  outputs(%3, %4)
}
)");
  std::string report;
  expect_graph(legalize(g, claims(kPrimitives), &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "g" : f32[4]
  %2 = param "b" : f32[4]
  %3 = reduce_mean(%0) {axes=[1]} name="ln/reduce_mean" : f32[2,1]
  %4 = sub(%0, %3) name="ln/sub" : f32[2,4]
  %5 = mul(%4, %4) name="ln/mul" : f32[2,4]
  %6 = reduce_mean(%5) {axes=[1]} name="ln/reduce_mean_6" : f32[2,1]
  %7 = constant {value=0x6f12833a} : f32[]
  %8 = add(%6, %7) name="ln/add" : f32[2,1]
  %9 = rsqrt(%8) name="ln/rsqrt" : f32[2,1]
  %10 = mul(%4, %9) name="ln/mul_10" : f32[2,4]
  %11 = mul(%10, %1) name="ln/mul_11" : f32[2,4]
  %12 = add(%11, %2) name="ln" : f32[2,4]
  %13 = mul(%0, %0) name="rms/mul" : f32[2,4]
  %14 = reduce_mean(%13) {axes=[1]} name="rms/reduce_mean" : f32[2,1]
  %15 = constant {value=0xacc52737} : f32[]
  %16 = add(%14, %15) name="rms/add" : f32[2,1]
  %17 = rsqrt(%16) name="rms/rsqrt" : f32[2,1]
  %18 = mul(%0, %17) name="rms/mul_18" : f32[2,4]
  %19 = mul(%18, %1) name="rms" : f32[2,4]
  outputs(%12, %19)
}
)");
  EXPECT_EQ(report,
            "dispatch (backend 'fake'): 0 native, 0 native in f32, 2 decomposed, 0 unsupported\n"
            "  layer_norm: decomposed 1 (into rsqrt, add, sub, mul, reduce_mean)\n"
            "  rms_norm: decomposed 1 (into rsqrt, add, mul, reduce_mean)\n");
}

// A half exp and add, and the exp wrapped in f32 casts (the two tests below).
const char* const kHalfExpAdd = R"(
graph main {
  %0 = input "x" : f16[2,4]
  %1 = exp(%0) name="e" : f16[2,4]
  %2 = add(%1, %0) name="s" : f16[2,4]
  outputs(%2)
}
)";
const char* const kExpInF32 = R"(
graph main {
  %0 = input "x" : f16[2,4]
  %1 = cast(%0) name="e/to_f32" : f32[2,4]
  %2 = exp(%1) name="e/f32" : f32[2,4]
  %3 = cast(%2) {to=f16} name="e" : f16[2,4]
  %4 = add(%3, %0) name="s" : f16[2,4]
  outputs(%4)
}
)";
const char* const kExpInF32Report =
    "dispatch (backend 'fake'): 1 native, 1 native in f32, 0 decomposed, 0 unsupported\n"
    "  exp: native in f32 1\n"
    "  add: native 1\n";

TEST(Legalize, HalfNodeRunsInF32BetweenCasts) {
  Graph g = parse(kHalfExpAdd);
  Rule f32_exp_only = [](const Node& n, const std::vector<const Shape*>& t) {
    return n.kind != K::Exp || t[0]->dtype() == DType::F32;
  };
  std::string report;
  expect_graph(legalize(g, claims({K::Exp, K::Add, K::Cast}, f32_exp_only), &report), kExpInF32);
  EXPECT_EQ(report, kExpInF32Report);
}

// A half node the backend claims but prefers in f32 (BackendClaims::prefers_f32) is wrapped
// as one it lacks; where the f32 form is not claimed it stays native.
TEST(Legalize, HalfNodePreferredInF32RunsInF32WhereClaimed) {
  Graph g = parse(kHalfExpAdd);
  BackendClaims c = claims({K::Exp, K::Add, K::Cast});
  c.prefers_f32 = [](const Node& n, const std::vector<const Shape*>&) { return n.kind == K::Exp; };
  std::string report;
  expect_graph(legalize(g, c, &report), kExpInF32);
  EXPECT_EQ(report, kExpInF32Report);
  // The f32 exp not claimed: the preference cannot be met and the half exp stays.
  BackendClaims half_exp = claims({K::Exp, K::Add, K::Cast}, [](const Node& n, const std::vector<const Shape*>& t) {
    return n.kind != K::Exp || t[0]->dtype() == DType::F16;
  });
  half_exp.prefers_f32 = c.prefers_f32;
  expect_graph(legalize(g, half_exp, nullptr), kHalfExpAdd);
}

TEST(Legalize, GroupedCausalAttentionDecomposes) {
  Graph g = parse(R"(
graph main {
  %0 = input "q" : f32[1,4,2,8]
  %1 = input "k" : f32[1,2,3,8]
  %2 = input "v" : f32[1,2,3,8]
  %3 = attention(%0, %1, %2) {causal=true} name="attn" : f32[1,4,2,8]
  outputs(%3)
}
)");
  // Scale 1/sqrt(8); causal mask row 0 sees keys 0..1, row 1 sees 0..2 (last query
  // aligned with the last key).
  std::string mask = hex_f32({0, 0, -std::numeric_limits<float>::infinity(), 0, 0, 0});
  std::string report;
  expect_graph(legalize(g, claims(kPrimitives), &report), R"(
graph main {
  %0 = input "q" : f32[1,4,2,8]
  %1 = input "k" : f32[1,2,3,8]
  %2 = input "v" : f32[1,2,3,8]
  %3 = reshape(%1) {shape=[1,2,1,3,8]} name="attn/reshape" : f32[1,2,1,3,8]
  %4 = expand(%3) {shape=[1,2,2,3,8]} name="attn/expand" : f32[1,2,2,3,8]
  %5 = reshape(%4) {shape=[1,4,3,8]} name="attn/reshape_5" : f32[1,4,3,8]
  %6 = reshape(%2) {shape=[1,2,1,3,8]} name="attn/reshape_6" : f32[1,2,1,3,8]
  %7 = expand(%6) {shape=[1,2,2,3,8]} name="attn/expand_7" : f32[1,2,2,3,8]
  %8 = reshape(%7) {shape=[1,4,3,8]} name="attn/reshape_8" : f32[1,4,3,8]
  %9 = transpose(%5) {perm=[0,1,3,2]} name="attn/transpose" : f32[1,4,8,3]
  %10 = matmul(%0, %9) name="attn/matmul" : f32[1,4,2,3]
  %11 = constant {value=)" + hex_f32({0.35355339f}) + R"(} : f32[]
  %12 = mul(%10, %11) name="attn/mul" : f32[1,4,2,3]
  %13 = constant {value=)" + mask + R"(} name="attn/causal_mask" : f32[2,3]
  %14 = add(%12, %13) name="attn/add" : f32[1,4,2,3]
  %15 = softmax(%14) name="attn/softmax" : f32[1,4,2,3]
  %16 = matmul(%15, %8) name="attn" : f32[1,4,2,8]
  outputs(%16)
}
)");
  EXPECT_EQ(report,
            "dispatch (backend 'fake'): 0 native, 0 native in f32, 1 decomposed, 0 unsupported\n"
            "  attention: decomposed 1 (into add, mul, matmul, softmax, reshape, transpose, expand)\n");
}

TEST(Legalize, RotaryHalvesAndInterleavedDecompose) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[1,2,3,8]
  %1 = input "c" : f32[3,2]
  %2 = input "s" : f32[3,2]
  %3 = rotary(%0, %1, %2) name="rope" : f32[1,2,3,8]
  %4 = rotary(%0, %1, %2) {interleaved=true} name="ropei" : f32[1,2,3,8]
  outputs(%3, %4)
}
)");
  expect_graph(legalize(g, claims(kPrimitives), nullptr), R"(
graph main {
  %0 = input "x" : f32[1,2,3,8]
  %1 = input "c" : f32[3,2]
  %2 = input "s" : f32[3,2]
  %3 = slice(%0) {starts=[0], ends=[2], axes=[3]} name="rope/slice" : f32[1,2,3,2]
  %4 = slice(%0) {starts=[2], ends=[4], axes=[3]} name="rope/slice_4" : f32[1,2,3,2]
  %5 = mul(%3, %1) name="rope/mul" : f32[1,2,3,2]
  %6 = mul(%4, %2) name="rope/mul_6" : f32[1,2,3,2]
  %7 = sub(%5, %6) name="rope/sub" : f32[1,2,3,2]
  %8 = mul(%4, %1) name="rope/mul_8" : f32[1,2,3,2]
  %9 = mul(%3, %2) name="rope/mul_9" : f32[1,2,3,2]
  %10 = add(%8, %9) name="rope/add" : f32[1,2,3,2]
  %11 = slice(%0) {starts=[4], ends=[8], axes=[3]} name="rope/slice_11" : f32[1,2,3,4]
  %12 = concat(%7, %10, %11) {axis=3} name="rope" : f32[1,2,3,8]
  %13 = slice(%0) {starts=[0], ends=[4], axes=[3], steps=[2]} name="ropei/slice" : f32[1,2,3,2]
  %14 = slice(%0) {starts=[1], ends=[4], axes=[3], steps=[2]} name="ropei/slice_14" : f32[1,2,3,2]
  %15 = mul(%13, %1) name="ropei/mul" : f32[1,2,3,2]
  %16 = mul(%14, %2) name="ropei/mul_16" : f32[1,2,3,2]
  %17 = sub(%15, %16) name="ropei/sub" : f32[1,2,3,2]
  %18 = mul(%14, %1) name="ropei/mul_18" : f32[1,2,3,2]
  %19 = mul(%13, %2) name="ropei/mul_19" : f32[1,2,3,2]
  %20 = add(%18, %19) name="ropei/add" : f32[1,2,3,2]
  %21 = reshape(%17) {shape=[1,2,3,2,1]} name="ropei/reshape" : f32[1,2,3,2,1]
  %22 = reshape(%20) {shape=[1,2,3,2,1]} name="ropei/reshape_22" : f32[1,2,3,2,1]
  %23 = concat(%21, %22) name="ropei/concat" : f32[1,2,3,2,2]
  %24 = reshape(%23) {shape=[1,2,3,4]} name="ropei/reshape_24" : f32[1,2,3,4]
  %25 = slice(%0) {starts=[4], ends=[8], axes=[3]} name="ropei/slice_25" : f32[1,2,3,4]
  %26 = concat(%24, %25) {axis=3} name="ropei" : f32[1,2,3,8]
  outputs(%12, %26)
}
)");
}

TEST(Legalize, FusedOpsUnfuseAndNestedDecompositionsAreLegalizedToo) {
  // fused_matmul -> matmul + add + gelu, and gelu (not claimed) -> erf form.
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = fused_matmul(%0, %1, %2) {activation=gelu} name="fm" : f32[2,3]
  %4 = fused_elementwise(%3) {program=[exp(0):f32, log(1):f32]} name="fe" : f32[2,3]
  outputs(%4)
}
)");
  std::string report;
  expect_graph(legalize(g, claims(kPrimitives), &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = matmul(%0, %1) name="fm/matmul" : f32[2,3]
  %4 = add(%3, %2) name="fm/add" : f32[2,3]
  %5 = constant {value=0xf304353f} : f32[]
  %6 = mul(%4, %5) name="fm/mul" : f32[2,3]
  %7 = erf(%6) name="fm/erf" : f32[2,3]
  %8 = constant {value=0x0000003f} : f32[]
  %9 = mul(%4, %8) name="fm/mul_9" : f32[2,3]
  %10 = constant {value=0x0000803f} : f32[]
  %11 = add(%7, %10) name="fm/add_11" : f32[2,3]
  %12 = mul(%9, %11) name="fm" : f32[2,3]
  %13 = exp(%12) name="fe/exp" : f32[2,3]
  %14 = log(%13) name="fe" : f32[2,3]
  outputs(%14)
}
)");
  EXPECT_EQ(report,
            "dispatch (backend 'fake'): 0 native, 0 native in f32, 2 decomposed, 0 unsupported\n"
            "  fused_elementwise: decomposed 1 (into exp, log)\n"
            "  fused_matmul: decomposed 1 (into erf, add, mul, matmul)\n");
}

TEST(Legalize, ActivationDecompositionsTypeCheck) {
  // Every activation rule yields the node's own type (legalize checks it) on f32 and f16.
  for (const char* dt : {"f32", "f16"}) {
    std::string t = std::string(dt) + "[2,3]";
    std::string text = "graph main {\n  %0 = input \"x\" : " + t + "\n";
    const char* ops[] = {"sigmoid", "tanh", "silu", "gelu", "gelu {tanh_approx=true}", "softplus", "softsign", "mish",
                         "hard_sigmoid {alpha=0.2, beta=0.5}", "hard_swish", "leaky_relu {alpha=0.1}",
                         "elu {alpha=1}", "selu {alpha=1.67, beta=1.05}", "celu {alpha=1}",
                         "thresholded_relu {alpha=1}", "clip {min=-1, max=1}", "relu", "neg", "reciprocal",
                         "rsqrt", "identity", "log_softmax {axis=1}", "softmax {axis=0}"};
    int id = 1;
    std::string outs;
    for (const char* op : ops) {
      std::string name(op), attrs;
      if (auto sp = name.find(' '); sp != std::string::npos) {
        attrs = name.substr(sp);
        name = name.substr(0, sp);
      }
      text += "  %" + std::to_string(id) + " = " + name + "(%0)" + attrs + " : " + t + "\n";
      outs += (outs.empty() ? "%" : ", %") + std::to_string(id);
      ++id;
    }
    text += "  outputs(" + outs + ")\n}\n";
    Graph g = parse(text);
    std::string report;
    std::set<K> prims = kPrimitives;
    prims.insert(K::Abs);
    Graph out = legalize(g, claims(prims, [](const Node& n, const std::vector<const Shape*>&) {
                           return n.kind != K::Softmax;  // force the softmax rule too
                         }),
                         &report);
    EXPECT_NO_THROW(verify_graph(out)) << dt;
    for (const Node& n : out.nodes())
      EXPECT_TRUE(ir::has_trait(n.kind, ir::kLeaf) || (prims.count(n.kind) && n.kind != K::Softmax))
          << dt << " " << op_name(n.kind);
    ASSERT_EQ(out.outputs().size(), g.outputs().size());
    for (size_t i = 0; i < g.outputs().size(); ++i)
      EXPECT_EQ(out.type(out.outputs()[i].value), g.type(g.outputs()[i].value)) << dt << " output " << i;
    EXPECT_EQ(report.find("unsupported 1"), std::string::npos) << report;
  }
}

TEST(Legalize, OneErrorListsEveryUnsupportedNode) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[1,1,4,4]
  %1 = param "w" : f32[1,1,3,3]
  %2 = conv2d(%0, %1) name="cv" : f32[1,1,2,2]
  %3:2 = topk(%2) {k=1} name="tk" : f32[1,1,2,1], i64[1,1,2,1]
  %4 = input "q" : f32[1,1,2,4]
  %5 = attention(%4, %4, %4) name="attn" : f32[1,1,2,4]
  %6 = mish(%4) name="m" : f32[1,1,2,4]
  %7 = exp(%6) name="fine" : f32[1,1,2,4]
  outputs(%3.0, %5, %7)
}
)");
  std::string report;
  try {
    legalize(g, claims({K::Add, K::Mul, K::MatMul, K::Transpose, K::Exp, K::Log, K::Max, K::Abs, K::Neg, K::Div}),
             &report);
    FAIL() << "expected Error(Unsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    EXPECT_EQ(std::string(e.what()),
              "legalize: backend 'fake' cannot run 4 nodes of graph 'main':\n"
              "  conv2d 'cv' (inputs f32[1,1,4,4], f32[1,1,3,3])\n"
              "  topk 'tk' (inputs f32[1,1,2,2])\n"
              "  attention 'attn' (inputs f32[1,1,2,4], f32[1,1,2,4], f32[1,1,2,4]): needs reduce_max "
              "'attn/softmax/reduce_max' (f32[1,1,2,2]); needs sub 'attn/softmax/sub' (f32[1,1,2,2], f32[1,1,2,1]); "
              "needs reduce_sum 'attn/softmax/reduce_sum' (f32[1,1,2,2])\n"
              "  mish 'm' (inputs f32[1,1,2,4]): needs sub 'm/tanh' (f32[1,1,2,4], f32[])");
  }
  // The report is filled even when legalize throws.
  EXPECT_EQ(report,
            "dispatch (backend 'fake'): 1 native, 0 native in f32, 0 decomposed, 4 unsupported\n"
            "  exp: native 1\n"
            "  mish: unsupported 1\n"
            "  topk: unsupported 1\n"
            "  conv2d: unsupported 1\n"
            "  attention: unsupported 1\n");
}

// A whole model on a backend that claims none of it: the error names the first 16 nodes and
// counts the rest by kind, one screen instead of a line per node.
TEST(Legalize, ManyUnsupportedNodesAreCountedPastTheFirst) {
  Graph g;
  Value x = g.input("x", Shape({4}, DType::F32));
  for (int i = 0; i < 20; ++i) x = g.exp(x);
  for (int i = 0; i < 5; ++i) x = g.neg(x);
  g.set_outputs({x});
  try {
    legalize(g, claims({K::Add}), nullptr);
    FAIL() << "expected Error(Unsupported)";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    EXPECT_NE(m.find("cannot run 25 nodes of graph"), std::string::npos) << m;
    EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 17) << m;
    EXPECT_NE(m.find("\n  ... and 9 more: exp x4, neg x5"), std::string::npos) << m;
  }
}

TEST(Legalize, SymbolicAttentionCannotDecomposeAndSaysWhy) {
  Graph g = parse(R"(
graph main {
  symbols(seq)
  %0 = input "q" : f32[1,2,seq,4]
  %1 = input "k" : f32[1,1,seq,4]
  %2 = attention(%0, %1, %1) name="attn" : f32[1,2,seq,4]
  outputs(%2)
}
)");
  try {
    legalize(g, claims(kPrimitives), nullptr);
    FAIL() << "expected Error(Unsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    std::string msg = e.what();
    EXPECT_NE(msg.find("attention 'attn' (inputs f32[1,2,seq,4], f32[1,1,seq,4], f32[1,1,seq,4])"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("needs static shapes"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace rlx::opt::test
