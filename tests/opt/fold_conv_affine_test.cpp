// fold-conv-affine: a per-channel mul [+ add] after a conv of constant weights becomes
// expressions over the constants (constant-fold then evaluates them), and the numbers agree
// with the unfolded graph; a shared conv output or non-constant weights are left alone.
#include "opt/passes.h"
#include "opt_test_util.h"
#include "rlx/rlx.h"

#include <cmath>

namespace rlx::opt::test {
namespace {

const char* kConvBn = R"(
graph main {
  %0 = input "x" : f32[1,2,4,4]
  %1 = constant {value=0x0000803f000000400000404000008040000000c00000803f0000004000000040} : f32[2,1,2,2]
  %2 = constant {value=0x0000003f00004040} : f32[2,1,1]
  %3 = constant {value=0x000080bf0000803f} : f32[2,1,1]
  %4 = conv2d(%0, %1) {group=2} name="conv" : f32[1,2,3,3]
  %5 = mul(%4, %2) name="scale" : f32[1,2,3,3]
  %6 = add(%5, %3) name="shift" : f32[1,2,3,3]
  outputs(%6 as "y")
}
)";

TEST(FoldConvAffine, MulAndAddMoveIntoTheWeightsAndBias) {
  std::string report;
  Graph f = fold_conv_affine(parse(kConvBn), &report);
  EXPECT_EQ(report, "fold-conv-affine: node 'shift' = conv2d 'conv' with mul 'scale' and add 'shift' folded into its weights\n");
  int convs = 0, muls_on_activations = 0;
  for (const Node& n : f.nodes()) {
    if (n.kind == OpKind::Conv2d) {
      ++convs;
      EXPECT_EQ(n.inputs.size(), 3u);  // the shift became its bias
    }
    if (n.kind == OpKind::Mul && f.type(Value{int32_t(&n - f.nodes().data()), 0}).rank() == 4 &&
        f.type(Value{int32_t(&n - f.nodes().data()), 0}).static_dims()[2] == 3)
      ++muls_on_activations;
  }
  EXPECT_EQ(convs, 1);
  EXPECT_EQ(muls_on_activations, 0);
}

// Through the whole pipeline (constant-fold evaluates the new weights) against the graph
// compiled with constant folding off: the same numbers within f32 rounding. Each output is
// a 4-term dot (one input channel per group, 2x2 taps) scaled and shifted; both sides round
// each product, the 3 adds, the scaling (w * s on one side, dot * s on the other) and the
// shift, so each differs from the exact value by at most 6 * 2^-24 * M and the two by
// twice that, with M = 4 * max|x| * max|w| * max|s| + max|t| = 4 * 1.5 * 4 * 3 + 1 = 73.
TEST(FoldConvAffine, TheCompiledNumbersAgreeWithTheUnfoldedGraph) {
  Graph g = parse(kConvBn);
  CompileOptions off;
  off.constant_fold = false;
  CompiledGraph folded = Session(Device::Cpu).compile(g), plain = Session(Device::Cpu, off).compile(g);
  EXPECT_NE(folded.report().fusion.find("fold-conv-affine"), std::string::npos);
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) * 0.5f - 1.5f;
  const auto a = folded.run({{"x", x}})[0], b = plain.run({{"x", x}})[0];
  ASSERT_EQ(a.size(), b.size());
  const double bound = 12 * std::ldexp(1.0, -24) * 73;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], bound) << i;
}

TEST(FoldConvAffine, LeftAloneWhenTheConvOutputIsSharedOrTheWeightsAreParams) {
  std::string shared = kConvBn;
  shared.replace(shared.find("outputs(%6 as \"y\")"), 18, "outputs(%6 as \"y\", %4 as \"c\")");
  std::string param = kConvBn;
  const std::string w = "%1 = constant {value=0x0000803f000000400000404000008040000000c00000803f0000004000000040} : f32[2,1,2,2]";
  param.replace(param.find(w), w.size(), "%1 = param \"w\" : f32[2,1,2,2]");
  for (const std::string& text : {shared, param}) {
    std::string report;
    Graph g = parse(text);
    EXPECT_EQ(fold_conv_affine(g, &report).nodes().size(), g.nodes().size()) << text;
    EXPECT_EQ(report, "");
  }
}

}  // namespace
}  // namespace rlx::opt::test
