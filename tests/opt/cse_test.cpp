// cse: golden before/after.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(Cse, MergesCommutedOperandsAndCascades) {
  Graph g = parse(R"(
graph main {
  %0 = input "a" : f32[2,3]
  %1 = input "b" : f32[3]
  %2 = add(%0, %1) name="s1" : f32[2,3]
  %3 = add(%1, %0) name="s2" : f32[2,3]
  %4 = exp(%2) name="e1" : f32[2,3]
  %5 = exp(%3) name="e2" : f32[2,3]
  %6 = sub(%4, %5) name="d" : f32[2,3]
  outputs(%6, %5 as "second")
}
)");
  expect_graph(cse(g), R"(
graph main {
  %0 = input "a" : f32[2,3]
  %1 = input "b" : f32[3]
  %2 = add(%0, %1) name="s1" : f32[2,3]
  %3 = exp(%2) name="e1" : f32[2,3]
  %4 = sub(%3, %3) name="d" : f32[2,3]
  outputs(%4, %3 as "second")
}
)");
}

TEST(Cse, NonCommutativeOperandOrderMatters) {
  const char* text = R"(
graph main {
  %0 = input "a" : f32[3]
  %1 = input "b" : f32[3]
  %2 = sub(%0, %1) name="ab" : f32[3]
  %3 = sub(%1, %0) name="ba" : f32[3]
  outputs(%2, %3)
}
)";
  expect_graph(cse(parse(text)), text);
}

TEST(Cse, AttributesAndLeavesDistinguish) {
  const char* text = R"(
graph main {
  %0 = input "a" : f32[2,3]
  %1 = input "b" : f32[2,3]
  %2 = reshape(%0) {shape=[3,2]} name="r1" : f32[3,2]
  %3 = reshape(%0) {shape=[6]} name="r2" : f32[6]
  %4 = reduce_sum(%1) {axes=[0]} name="k1" : f32[1,3]
  %5 = reduce_sum(%1) {axes=[0], keepdims=false} name="k2" : f32[3]
  outputs(%2, %3, %4, %5)
}
)";
  expect_graph(cse(parse(text)), text);
}

TEST(Cse, EqualConstantsMergeDifferentOnesDoNot) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2]
  %1 = constant {value=)" + hex_f32({1, 2}) + R"(} name="c1" : f32[2]
  %2 = constant {value=)" + hex_f32({1, 2}) + R"(} name="c2" : f32[2]
  %3 = constant {value=)" + hex_f32({1, 3}) + R"(} name="c3" : f32[2]
  %4 = mul(%0, %1) name="m1" : f32[2]
  %5 = mul(%0, %2) name="m2" : f32[2]
  %6 = mul(%0, %3) name="m3" : f32[2]
  outputs(%4, %5, %6)
}
)");
  expect_graph(cse(g), R"(
graph main {
  %0 = input "x" : f32[2]
  %1 = constant {value=)" + hex_f32({1, 2}) + R"(} name="c1" : f32[2]
  %2 = constant {value=)" + hex_f32({1, 3}) + R"(} name="c3" : f32[2]
  %3 = mul(%0, %1) name="m1" : f32[2]
  %4 = mul(%0, %2) name="m3" : f32[2]
  outputs(%3, %3 as "m2", %4)
}
)");
}

TEST(Cse, MultiOutputNodesMergeAllOutputs) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1:2 = split(%0) {sizes=[1,3]} name="s1" : f32[1], f32[3]
  %2:2 = split(%0) {sizes=[1,3]} name="s2" : f32[1], f32[3]
  outputs(%1.0, %2.1)
}
)");
  expect_graph(cse(g), R"(
graph main {
  %0 = input "x" : f32[4]
  %1:2 = split(%0) {sizes=[1,3]} name="s1" : f32[1], f32[3]
  outputs(%1.0, %1.1 as "s2:1")
}
)");
}

}  // namespace
}  // namespace rlx::opt::test
