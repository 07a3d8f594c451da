// fuse-conv-epilogue: golden before/after plus the report text.
#include "opt/passes.h"
#include "opt/pipeline.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(FuseConvEpilogue, ResidualAddAndActivation) {
  // A ResNet block's tail (conv, + skip, relu), a conv with only an activation, and one
  // without a bias whose residual is added on the left.
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[1,4,6,6]
  %1 = param "w" : f32[4,4,3,3]
  %2 = param "b" : f32[4]
  %3 = conv2d(%0, %1, %2) {pads=[1, 1, 1, 1]} name="c1" : f32[1,4,6,6]
  %4 = add(%3, %0) name="sum" : f32[1,4,6,6]
  %5 = relu(%4) name="out1" : f32[1,4,6,6]
  %6 = conv2d(%0, %1, %2) {pads=[1, 1, 1, 1]} name="c2" : f32[1,4,6,6]
  %7 = leaky_relu(%6) {alpha=0.125} name="out2" : f32[1,4,6,6]
  %8 = conv2d(%0, %1) {pads=[1, 1, 1, 1]} name="c3" : f32[1,4,6,6]
  %9 = add(%0, %8) name="out3" : f32[1,4,6,6]
  outputs(%5, %7, %9)
}
)");
  std::string report;
  expect_graph(fuse_conv_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[1,4,6,6]
  %1 = param "w" : f32[4,4,3,3]
  %2 = param "b" : f32[4]
  %3 = fused_conv2d(%0, %1, %2, %0) {pads=[1, 1, 1, 1], activation=relu} name="out1" : f32[1,4,6,6]
  %4 = fused_conv2d(%0, %1, %2) {pads=[1, 1, 1, 1], activation=leaky_relu, alpha=0.125} name="out2" : f32[1,4,6,6]
  %5 = fused_conv2d(%0, %1, _, %0) {pads=[1, 1, 1, 1]} name="out3" : f32[1,4,6,6]
  outputs(%3, %4, %5)
}
)");
  EXPECT_EQ(report,
            "fuse-conv-epilogue: node 'out1' = fused_conv2d of [conv2d 'c1', add 'sum' (residual), relu 'out1' "
            "(activation)], activation relu\n"
            "fuse-conv-epilogue: node 'out2' = fused_conv2d of [conv2d 'c2', leaky_relu 'out2' (activation)], "
            "activation leaky_relu\n"
            "fuse-conv-epilogue: node 'out3' = fused_conv2d of [conv2d 'c3', add 'out3' (residual)], activation none\n");
}

TEST(FuseConvEpilogue, TwoConvsIntoOneAddAndSharedOutputsStay) {
  // The add of two convs (a ResNet downsample block) is absorbed once: the first conv takes
  // it, the second stays a conv and is the residual. c3's output is also a graph output:
  // nothing fuses there. A broadcast operand is not a residual.
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[1,4,6,6]
  %1 = param "w" : f32[4,4,1,1]
  %2 = param "s" : f32[1,4,1,1]
  %3 = conv2d(%0, %1) name="a" : f32[1,4,6,6]
  %4 = conv2d(%0, %1) name="b" : f32[1,4,6,6]
  %5 = add(%3, %4) name="sum" : f32[1,4,6,6]
  %6 = relu(%5) name="out1" : f32[1,4,6,6]
  %7 = conv2d(%0, %1) name="c3" : f32[1,4,6,6]
  %8 = relu(%7) name="out2" : f32[1,4,6,6]
  %9 = conv2d(%0, %1) name="c4" : f32[1,4,6,6]
  %10 = add(%9, %2) name="out3" : f32[1,4,6,6]
  outputs(%6, %8, %7, %10)
}
)");
  std::string report;
  expect_graph(fuse_conv_epilogue(g, &report), R"(
graph main {
  %0 = input "x" : f32[1,4,6,6]
  %1 = param "w" : f32[4,4,1,1]
  %2 = param "s" : f32[1,4,1,1]
  %3 = conv2d(%0, %1) name="b" : f32[1,4,6,6]
  %4 = fused_conv2d(%0, %1, _, %3) {activation=relu} name="out1" : f32[1,4,6,6]
  %5 = conv2d(%0, %1) name="c3" : f32[1,4,6,6]
  %6 = relu(%5) name="out2" : f32[1,4,6,6]
  %7 = conv2d(%0, %1) name="c4" : f32[1,4,6,6]
  %8 = add(%7, %2) name="out3" : f32[1,4,6,6]
  outputs(%4, %6, %5, %8)
}
)");
  EXPECT_EQ(report,
            "fuse-conv-epilogue: not fused: add 'sum' after conv2d 'b': already the epilogue of another conv\n"
            "fuse-conv-epilogue: not fused: relu 'out2' after conv2d 'c3': the conv's output has 2 readers\n"
            "fuse-conv-epilogue: not fused: add 'out3' after conv2d 'c4': the other operand f32[1,4,1,1] is not of "
            "the conv's output type f32[1,4,6,6]\n"
            "fuse-conv-epilogue: node 'out1' = fused_conv2d of [conv2d 'a', add 'sum' (residual), relu 'out1' "
            "(activation)], activation relu\n");
}

// A backend that does not run fused_conv2d (for this type) keeps the nodes apart, so that
// fuse-elementwise can still make one program of the add and the activation.
TEST(FuseConvEpilogue, OnlyWhatTheBackendClaims) {
  const char* text = R"(
graph main {
  %0 = input "x" : f32[1,4,6,6]
  %1 = param "w" : f32[4,4,1,1]
  %2 = conv2d(%0, %1) name="c" : f32[1,4,6,6]
  %3 = relu(%2) name="out" : f32[1,4,6,6]
  outputs(%3)
}
)";
  Graph g = parse(text);
  BackendClaims claims{"test", [](const Node& n, const std::vector<const Shape*>&) {
                         return n.kind != OpKind::FusedConv2d;
                       }};
  std::string report;
  expect_graph(fuse_conv_epilogue(g, &report, &claims), text);
  EXPECT_EQ(report,
            "fuse-conv-epilogue: not fused: conv2d 'c': the test backend does not run fused_conv2d of "
            "f32[1,4,6,6]\n");
}

}  // namespace
}  // namespace rlx::opt::test
