// dce: golden before/after.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(Dce, RemovesDeadChainsKeepsLeaves) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = input "unused" : f32[4]
  %2 = param "w" : f32[2,3]
  %3 = constant {value=0x0000803f} : f32[]
  %4 = exp(%0) name="dead_exp" : f32[2,3]
  %5 = mul(%4, %3) name="dead_mul" : f32[2,3]
  %6 = add(%0, %2) name="sum" : f32[2,3]
  %7 = relu(%6) : f32[2,3]
  outputs(%7)
}
)");
  expect_graph(dce(g), R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = input "unused" : f32[4]
  %2 = param "w" : f32[2,3]
  %3 = add(%0, %2) name="sum" : f32[2,3]
  %4 = relu(%3) : f32[2,3]
  outputs(%4 as "relu_7")
}
)");
}

TEST(Dce, KeepsEverythingLive) {
  const char* text = R"(
graph main {
  %0 = input "x" : f32[4]
  %1:2 = split(%0) {sizes=[1,3]} : f32[1], f32[3]
  %2 = neg(%1.1) : f32[3]
  outputs(%1.0, %2)
}
)";
  expect_graph(dce(parse(text)), text);
}

TEST(Dce, MultiOutputNodeStaysWhenOneOutputIsUsed) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1:2 = split(%0) {sizes=[2,2]} name="s" : f32[2], f32[2]
  %2 = neg(%1.0) name="dead" : f32[2]
  outputs(%1.1 as "y")
}
)");
  expect_graph(dce(g), R"(
graph main {
  %0 = input "x" : f32[4]
  %1:2 = split(%0) {sizes=[2,2]} name="s" : f32[2], f32[2]
  outputs(%1.1 as "y")
}
)");
}

}  // namespace
}  // namespace rlx::opt::test
