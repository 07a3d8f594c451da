// fuse-elementwise: golden before/after plus the report text.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(FuseElementwise, ChainBecomesOneProgram) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = input "y" : f32[3]
  %2 = constant {value=0x00000040} name="two" : f32[]
  %3 = mul(%0, %2) name="m" : f32[2,3]
  %4 = add(%3, %1) name="a" : f32[2,3]
  %5 = relu(%4) name="r" : f32[2,3]
  outputs(%5 as "out")
}
)");
  std::string report;
  expect_graph(fuse_elementwise(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = input "y" : f32[3]
  %2 = constant {value=0x00000040} name="two" : f32[]
  %3 = fused_elementwise(%0, %2, %1) {program=[mul(0,1):f32, add(3,2):f32, relu(4):f32]} name="r" : f32[2,3]
  outputs(%3 as "out")
}
)");
  EXPECT_EQ(report, "fuse-elementwise: node 'r' = fused_elementwise of 3 ops [mul 'm', add 'a', relu 'r'], inputs 3\n");
}

TEST(FuseElementwise, TreeWithSharedInputIsDeduplicated) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = exp(%0) name="e" : f32[4]
  %2 = neg(%0) name="n" : f32[4]
  %3 = mul(%1, %2) name="p" : f32[4]
  %4 = add(%3, %3) name="twice" : f32[4]
  outputs(%4)
}
)");
  std::string report;
  expect_graph(fuse_elementwise(g, &report), R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = fused_elementwise(%0) {program=[exp(0):f32, neg(0):f32, mul(1,2):f32, add(3,3):f32]} name="twice" : f32[4]
  outputs(%1)
}
)");
  EXPECT_EQ(report, "fuse-elementwise: node 'twice' = fused_elementwise of 4 ops [exp 'e', neg 'n', mul 'p', add 'twice'], inputs 1\n");
}

TEST(FuseElementwise, SharedIntermediateAndSingleOpsStay) {
  // t feeds two separate consumers: it cannot join either; each consumer alone is one op.
  const char* text = R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = exp(%0) name="t" : f32[4]
  %2 = relu(%1) name="a" : f32[4]
  %3 = neg(%1) name="b" : f32[4]
  %4 = matmul(%2, %3) name="dot" : f32[]
  %5 = sqrt(%4) name="s" : f32[]
  outputs(%5, %2)
}
)";
  std::string report;
  expect_graph(fuse_elementwise(parse(text), &report), text);
  // The report names the cut and its reason.
  EXPECT_EQ(report, "fuse-elementwise: not fused: exp 't' into neg 'b': second user relu 'a'\n");
}

TEST(FuseElementwise, SmallerIntermediateStaysAnInput) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = input "b" : f32[3]
  %2 = exp(%1) name="eb" : f32[3]
  %3 = add(%0, %2) name="t" : f32[2,3]
  %4 = relu(%3) name="u" : f32[2,3]
  outputs(%4)
}
)");
  std::string report;
  expect_graph(fuse_elementwise(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = input "b" : f32[3]
  %2 = exp(%1) name="eb" : f32[3]
  %3 = fused_elementwise(%0, %2) {program=[add(0,1):f32, relu(2):f32]} name="u" : f32[2,3]
  outputs(%3)
}
)");
}

TEST(FuseElementwise, MixedDtypesCompareWhereCast) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = constant {value=0x00000000} name="zero" : f32[]
  %2 = gt(%0, %1) name="pos" : bool[4]
  %3 = where(%2, %0, %1) name="relu_like" : f32[4]
  %4 = cast(%3) {to=f16} name="half" : f16[4]
  outputs(%4)
}
)");
  std::string report;
  expect_graph(fuse_elementwise(g, &report), R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = constant {value=0x00000000} name="zero" : f32[]
  %2 = fused_elementwise(%0, %1) {program=[gt(0,1):bool, where(2,0,1):f32, cast(3):f16]} name="half" : f16[4]
  outputs(%2)
}
)");
}

TEST(FuseElementwise, ScalarAttributesTravelIntoTheProgram) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = leaky_relu(%0) {alpha=0.5} name="l" : f32[4]
  %2 = clip(%1) {min=-1, max=2} name="c" : f32[4]
  outputs(%2)
}
)");
  Graph out = fuse_elementwise(g, nullptr);
  ASSERT_EQ(out.nodes().size(), 2u);
  const Node& f = out.node(1);
  ASSERT_EQ(f.kind, OpKind::FusedElementwise);
  const auto& prog = f.attr<FusedElementwiseAttrs>().program;
  ASSERT_EQ(prog.size(), 2u);
  EXPECT_EQ(prog[0].kind, OpKind::LeakyRelu);
  EXPECT_EQ(prog[0].alpha, 0.5);
  EXPECT_EQ(prog[1].kind, OpKind::Clip);
  EXPECT_EQ(prog[1].alpha, -1);
  EXPECT_EQ(prog[1].beta, 2);
  EXPECT_EQ(prog[1].args, std::vector<int32_t>{1});
  EXPECT_NO_THROW(verify_graph(out));
}

}  // namespace
}  // namespace rlx::opt::test
