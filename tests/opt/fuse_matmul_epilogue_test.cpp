// fuse-matmul-epilogue: golden before/after plus the report text.
#include "opt/passes.h"
#include "opt/pipeline.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(FuseMatmulEpilogue, BiasAndActivation) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = matmul(%0, %1) name="mm" : f32[2,3]
  %4 = add(%3, %2) name="biased" : f32[2,3]
  %5 = relu(%4) name="act" : f32[2,3]
  outputs(%5 as "y")
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = fused_matmul(%0, %1, %2) {activation=relu} name="act" : f32[2,3]
  outputs(%3 as "y")
}
)");
  EXPECT_EQ(report, "fuse-matmul-epilogue: node 'act' = fused_matmul of [matmul 'mm', add 'biased' (bias), relu 'act' (activation)], activation relu\n");
}

TEST(FuseMatmulEpilogue, CommutedBiasRankedBiasAndActivationOnly) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[1,1,3]
  %3 = matmul(%0, %1) name="mm1" : f32[2,2,3]
  %4 = add(%2, %3) name="y1" : f32[2,2,3]
  %5 = matmul(%0, %1) name="mm2" : f32[2,2,3]
  %6 = gelu(%5) {tanh_approx=true} name="y2" : f32[2,2,3]
  %7 = matmul(%0, %1) name="mm3" : f32[2,2,3]
  %8 = leaky_relu(%7) {alpha=0.25} name="y3" : f32[2,2,3]
  outputs(%4, %6, %8)
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[1,1,3]
  %3 = fused_matmul(%0, %1, %2) name="y1" : f32[2,2,3]
  %4 = fused_matmul(%0, %1) {activation=gelu_tanh} name="y2" : f32[2,2,3]
  %5 = fused_matmul(%0, %1) {activation=leaky_relu, alpha=0.25} name="y3" : f32[2,2,3]
  outputs(%3, %4, %5)
}
)");
  EXPECT_EQ(report,
            "fuse-matmul-epilogue: node 'y1' = fused_matmul of [matmul 'mm1', add 'y1' (bias)], activation none\n"
            "fuse-matmul-epilogue: node 'y2' = fused_matmul of [matmul 'mm2', gelu 'y2' (activation)], activation gelu_tanh\n"
            "fuse-matmul-epilogue: node 'y3' = fused_matmul of [matmul 'mm3', leaky_relu 'y3' (activation)], activation leaky_relu\n");
}

TEST(FuseMatmulEpilogue, IntermediatesWithOtherUsersOrNonRowBiasStay) {
  // mm1 is also a graph output: nothing fuses. mm2's sum has two users: the bias add
  // fuses (its result is still one value) but the activations do not. mm3's bias is per
  // row ([2,1]) and mm4's is full-shape ([2,3]): neither is a row bias.
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = param "rowb" : f32[2,1]
  %4 = param "fullb" : f32[2,3]
  %5 = matmul(%0, %1) name="mm1" : f32[2,3]
  %6 = relu(%5) name="r1" : f32[2,3]
  %7 = matmul(%0, %1) name="mm2" : f32[2,3]
  %8 = add(%7, %2) name="s2" : f32[2,3]
  %9 = tanh(%8) name="t2" : f32[2,3]
  %10 = exp(%8) name="e2" : f32[2,3]
  %11 = matmul(%0, %1) name="mm3" : f32[2,3]
  %12 = add(%11, %3) name="s3" : f32[2,3]
  %13 = matmul(%0, %1) name="mm4" : f32[2,3]
  %14 = add(%13, %4) name="s4" : f32[2,3]
  %15 = sigmoid(%14) name="t4" : f32[2,3]
  outputs(%5, %6, %9, %10, %12, %15)
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = param "rowb" : f32[2,1]
  %4 = param "fullb" : f32[2,3]
  %5 = matmul(%0, %1) name="mm1" : f32[2,3]
  %6 = relu(%5) name="r1" : f32[2,3]
  %7 = fused_matmul(%0, %1, %2) name="s2" : f32[2,3]
  %8 = tanh(%7) name="t2" : f32[2,3]
  %9 = exp(%7) name="e2" : f32[2,3]
  %10 = matmul(%0, %1) name="mm3" : f32[2,3]
  %11 = add(%10, %3) name="s3" : f32[2,3]
  %12 = matmul(%0, %1) name="mm4" : f32[2,3]
  %13 = add(%12, %4) name="s4" : f32[2,3]
  %14 = sigmoid(%13) name="t4" : f32[2,3]
  outputs(%5, %6, %8, %9, %11, %14)
}
)");
  // What stayed apart is in the report with the reason, before the rewrites.
  EXPECT_EQ(report,
            "fuse-matmul-epilogue: not fused: relu 'r1' after matmul 'mm1': the product has 2 readers\n"
            "fuse-matmul-epilogue: not fused: add 's3' after matmul 'mm3': the other operand f32[2,1] is not a bias "
            "over the last dim of f32[2,3]\n"
            "fuse-matmul-epilogue: not fused: add 's4' after matmul 'mm4': the other operand f32[2,3] is not a bias "
            "over the last dim of f32[2,3]\n"
            "fuse-matmul-epilogue: node 's2' = fused_matmul of [matmul 'mm2', add 's2' (bias)], activation none\n");
  EXPECT_EQ(summarize_fusion(report),
            "fuse-matmul-epilogue: 1 rewrite; 3 not fused, e.g. relu 'r1' after matmul 'mm1': the product has "
            "2 readers\n");
}

TEST(FuseMatmulEpilogue, FusedMatmulWithoutActivationAbsorbsOne) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = fused_matmul(%0, %1, %2) name="fm" : f32[2,3]
  %4 = silu(%3) name="act" : f32[2,3]
  %5 = fused_matmul(%0, %1, %2) {activation=relu} name="done" : f32[2,3]
  %6 = sigmoid(%5) name="after" : f32[2,3]
  outputs(%4, %6)
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = fused_matmul(%0, %1, %2) {activation=silu} name="act" : f32[2,3]
  %4 = fused_matmul(%0, %1, %2) {activation=relu} name="done" : f32[2,3]
  %5 = sigmoid(%4) name="after" : f32[2,3]
  outputs(%3, %5)
}
)");
  EXPECT_EQ(report, "fuse-matmul-epilogue: node 'act' = fused_matmul of [fused_matmul 'fm', silu 'act' (activation)], activation silu\n");
}

}  // namespace
}  // namespace rlx::opt::test
