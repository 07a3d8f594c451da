// fuse-norms: golden before/after plus the report text; and where it must not fire.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

// PyTorch's opset-14 LayerNorm: mean, sub, pow 2, mean, add eps, sqrt, div, mul gamma, add beta.
const char* kDecomposed = R"(
graph main {
  %0 = input "x" : f32[2,3,4]
  %1 = param "gamma" : f32[4]
  %2 = param "beta" : f32[4]
  %3 = constant {value=0x00000040} : f32[]
  %4 = constant {value=0xacc52737} : f32[]
  %5 = reduce_mean(%0) {axes=[-1]} name="mean" : f32[2,3,1]
  %6 = sub(%0, %5) name="centered" : f32[2,3,4]
  %7 = pow(%6, %3) name="square" : f32[2,3,4]
  %8 = reduce_mean(%7) {axes=[-1]} name="var" : f32[2,3,1]
  %9 = add(%8, %4) name="var_eps" : f32[2,3,1]
  %10 = sqrt(%9) name="std" : f32[2,3,1]
  %11 = div(%6, %10) name="normed" : f32[2,3,4]
  %12 = mul(%11, %1) name="scaled" : f32[2,3,4]
  %13 = add(%12, %2) name="ln" : f32[2,3,4]
  outputs(%13 as "y")
}
)";

TEST(FuseNorms, DecomposedLayerNormBecomesOneOp) {
  std::string report;
  expect_graph(dce(fuse_norms(parse(kDecomposed), &report)), R"(
graph main {
  %0 = input "x" : f32[2,3,4]
  %1 = param "gamma" : f32[4]
  %2 = param "beta" : f32[4]
  %3 = layer_norm(%0, %1, %2) {epsilon=9.999999747378752e-06} name="ln" : f32[2,3,4]
  outputs(%3 as "y")
}
)");
  EXPECT_EQ(report,
            "fuse-norms: node 'ln' = layer_norm of 9 ops [reduce_mean 'mean', sub 'centered', pow 'square', "
            "reduce_mean 'var', add 'var_eps', sqrt 'std', div 'normed', mul 'scaled', add 'ln'], eps 1e-05, "
            "scale, bias\n");
}

TEST(FuseNorms, SquareAsMulAndNoAffine) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[5,8]
  %1 = constant {value=0x6f12833a} : f32[]
  %2 = reduce_mean(%0) {axes=[1]} : f32[5,1]
  %3 = sub(%0, %2) : f32[5,8]
  %4 = mul(%3, %3) : f32[5,8]
  %5 = reduce_mean(%4) {axes=[1]} : f32[5,1]
  %6 = add(%1, %5) : f32[5,1]
  %7 = sqrt(%6) : f32[5,1]
  %8 = div(%3, %7) name="n" : f32[5,8]
  outputs(%8 as "y")
}
)");
  std::string report;
  Graph f = dce(fuse_norms(g, &report));
  ASSERT_EQ(f.nodes().size(), 2u) << report;
  EXPECT_EQ(f.nodes()[1].kind, OpKind::LayerNorm);
  EXPECT_FLOAT_EQ(float(f.nodes()[1].attr<NormAttrs>().epsilon), 0.001f);
}

// A second reader of an intermediate (here the centered values are also an output), a mean
// over another axis, or an eps that is not a constant: left as it is.
TEST(FuseNorms, LeftAloneWhenAnIntermediateIsSharedOrTheShapeDiffers) {
  auto swap = [](std::string s, const std::string& from, const std::string& to) {
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const std::string variants[] = {
      swap(kDecomposed, "outputs(%13 as \"y\")", "outputs(%13 as \"y\", %6 as \"c\")"),
      swap(kDecomposed, "%5 = reduce_mean(%0) {axes=[-1]} name=\"mean\" : f32[2,3,1]",
           "%5 = reduce_mean(%0) {axes=[1]} name=\"mean\" : f32[2,1,4]"),
      swap(kDecomposed, "%4 = constant {value=0xacc52737} : f32[]", "%4 = input \"eps\" : f32[]"),
  };
  for (const std::string& text : variants) {
    std::string report;
    Graph g = parse(text);
    EXPECT_EQ(fuse_norms(g, &report).nodes().size(), g.nodes().size()) << text;
    EXPECT_EQ(report, "");
  }
}

}  // namespace
}  // namespace rlx::opt::test
