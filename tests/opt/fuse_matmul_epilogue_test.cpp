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

// An encoder's residual: the add's other operand has the product's type (either operand
// order), so it becomes fused_matmul's bias input; an activation after it fuses too. A
// product that already has a row bias keeps its residual add apart (one bias input).
TEST(FuseMatmulEpilogue, ResidualAddendOfTheProductsType) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,5,4]
  %1 = input "r" : f32[2,5,3]
  %2 = param "w" : f32[4,3]
  %3 = param "b" : f32[3]
  %4 = matmul(%0, %2) name="o" : f32[2,5,3]
  %5 = add(%1, %4) name="res" : f32[2,5,3]
  %6 = matmul(%0, %2) name="down" : f32[2,5,3]
  %7 = add(%6, %1) name="res2" : f32[2,5,3]
  %8 = relu(%7) name="act" : f32[2,5,3]
  %9 = matmul(%0, %2) name="biased" : f32[2,5,3]
  %10 = add(%9, %3) name="plus_b" : f32[2,5,3]
  %11 = add(%10, %1) name="plus_r" : f32[2,5,3]
  outputs(%5, %8, %11)
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,5,4]
  %1 = input "r" : f32[2,5,3]
  %2 = param "w" : f32[4,3]
  %3 = param "b" : f32[3]
  %4 = fused_matmul(%0, %2, %1) name="res" : f32[2,5,3]
  %5 = fused_matmul(%0, %2, %1) {activation=relu} name="act" : f32[2,5,3]
  %6 = fused_matmul(%0, %2, %3) name="plus_b" : f32[2,5,3]
  %7 = add(%6, %1) name="plus_r" : f32[2,5,3]
  outputs(%4, %5, %7)
}
)");
  EXPECT_EQ(report,
            "fuse-matmul-epilogue: node 'res' = fused_matmul of [matmul 'o', add 'res' (addend)], activation none\n"
            "fuse-matmul-epilogue: node 'act' = fused_matmul of [matmul 'down', add 'res2' (addend), relu 'act' "
            "(activation)], activation relu\n"
            "fuse-matmul-epilogue: node 'plus_b' = fused_matmul of [matmul 'biased', add 'plus_b' (bias)], activation "
            "none\n");
}

// Two products summed: each is the other's full-shape addend; the first takes the add (and
// the activation after it), the second stays a matmul that feeds it.
TEST(FuseMatmulEpilogue, TwoProductsSummedFuseOnce) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = matmul(%0, %1) name="re" : f32[2,3]
  %3 = matmul(%0, %1) name="im" : f32[2,3]
  %4 = add(%2, %3) name="sum" : f32[2,3]
  %5 = relu(%4) name="act" : f32[2,3]
  outputs(%5)
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = matmul(%0, %1) name="im" : f32[2,3]
  %3 = fused_matmul(%0, %1, %2) {activation=relu} name="act" : f32[2,3]
  outputs(%3)
}
)");
  EXPECT_EQ(report, "fuse-matmul-epilogue: node 'act' = fused_matmul of [matmul 're', add 'sum' (addend), relu 'act' "
                    "(activation)], activation relu\n");
}

TEST(FuseMatmulEpilogue, IntermediatesWithOtherUsersOrNonRowBiasStay) {
  // mm1 is also a graph output: nothing fuses. mm2's sum has two users: the bias add
  // fuses (its result is still one value) but the activations do not. mm3's bias is per
  // row ([2,1]): not a row bias, and not of the product's type.
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = param "rowb" : f32[2,1]
  %4 = matmul(%0, %1) name="mm1" : f32[2,3]
  %5 = relu(%4) name="r1" : f32[2,3]
  %6 = matmul(%0, %1) name="mm2" : f32[2,3]
  %7 = add(%6, %2) name="s2" : f32[2,3]
  %8 = tanh(%7) name="t2" : f32[2,3]
  %9 = exp(%7) name="e2" : f32[2,3]
  %10 = matmul(%0, %1) name="mm3" : f32[2,3]
  %11 = add(%10, %3) name="s3" : f32[2,3]
  outputs(%4, %5, %8, %9, %11)
}
)");
  std::string report;
  expect_graph(fuse_matmul_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = param "rowb" : f32[2,1]
  %4 = matmul(%0, %1) name="mm1" : f32[2,3]
  %5 = relu(%4) name="r1" : f32[2,3]
  %6 = fused_matmul(%0, %1, %2) name="s2" : f32[2,3]
  %7 = tanh(%6) name="t2" : f32[2,3]
  %8 = exp(%6) name="e2" : f32[2,3]
  %9 = matmul(%0, %1) name="mm3" : f32[2,3]
  %10 = add(%9, %3) name="s3" : f32[2,3]
  outputs(%4, %5, %7, %8, %10)
}
)");
  // What stayed apart is in the report with the reason, before the rewrites.
  EXPECT_EQ(report,
            "fuse-matmul-epilogue: not fused: relu 'r1' after matmul 'mm1': the product has 2 readers\n"
            "fuse-matmul-epilogue: not fused: add 's3' after matmul 'mm3': the other operand f32[2,1] is neither a "
            "bias over the last dim of f32[2,3] nor of its type\n"
            "fuse-matmul-epilogue: node 's2' = fused_matmul of [matmul 'mm2', add 's2' (bias)], activation none\n");
  EXPECT_EQ(summarize_fusion(report),
            "fuse-matmul-epilogue: 1 rewrite; 2 not fused, e.g. relu 'r1' after matmul 'mm1': the product has "
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
