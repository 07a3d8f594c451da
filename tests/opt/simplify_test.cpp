// simplify: golden before/after, one rule family per test.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(Simplify, ArithmeticIdentities) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = constant {value=0x00000000} name="zero" : f32[]
  %2 = constant {value=0x0000803f} name="one" : f32[]
  %3 = add(%0, %1) name="a" : f32[2,3]
  %4 = add(%1, %3) name="b" : f32[2,3]
  %5 = sub(%4, %1) name="c" : f32[2,3]
  %6 = mul(%5, %2) name="d" : f32[2,3]
  %7 = mul(%2, %6) name="e" : f32[2,3]
  %8 = div(%7, %2) name="f" : f32[2,3]
  %9 = pow(%8, %2) name="g" : f32[2,3]
  %10 = exp(%9) name="out" : f32[2,3]
  outputs(%10)
}
)");
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = exp(%0) name="out" : f32[2,3]
  outputs(%1)
}
)");
}

TEST(Simplify, KeepsRulesThatWouldChangeTheType) {
  // x + zeros broadcasts x to [2,3]; x * 1.0 (f64) promotes; 0 - x is not x; 1 / x is not x.
  const char* text = R"(
graph main {
  %0 = input "x" : f32[3]
  %1 = constant {value=0x000000000000000000000000000000000000000000000000} name="zeros" : f32[2,3]
  %2 = constant {value=0x000000000000f03f} name="one64" : f64[]
  %3 = constant {value=0x0000803f} name="one" : f32[]
  %4 = constant {value=0x00000000} name="zero" : f32[]
  %5 = add(%0, %1) name="bcast" : f32[2,3]
  %6 = mul(%0, %2) name="promote" : f64[3]
  %7 = sub(%4, %0) name="rsub" : f32[3]
  %8 = div(%3, %0) name="rdiv" : f32[3]
  outputs(%5, %6, %7, %8)
}
)";
  expect_graph(simplify(parse(text)), text);
}

TEST(Simplify, TimesZeroOnlyForIntegers) {
  Graph g = parse(R"(
graph main {
  %0 = input "i" : i32[2,2]
  %1 = input "f" : f32[2,2]
  %2 = constant {value=0x00000000} name="izero" : i32[]
  %3 = constant {value=0x00000000} name="fzero" : f32[]
  %4 = mul(%0, %2) name="iz" : i32[2,2]
  %5 = mul(%3, %1) name="fz" : f32[2,2]
  outputs(%4, %5)
}
)");
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "i" : i32[2,2]
  %1 = input "f" : f32[2,2]
  %2 = constant {value=0x00000000} name="fzero" : f32[]
  %3 = constant {value=0x00000000} : i32[]
  %4 = expand(%3) {shape=[2,2]} name="iz" : i32[2,2]
  %5 = mul(%2, %1) name="fz" : f32[2,2]
  outputs(%4, %5)
}
)");
}

TEST(Simplify, DoubleNegationAndIdentity) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = input "b" : bool[4]
  %2 = neg(%0) : f32[4]
  %3 = neg(%2) : f32[4]
  %4 = identity(%3) : f32[4]
  %5 = not(%1) : bool[4]
  %6 = not(%5) : bool[4]
  %7 = neg(%4) name="single" : f32[4]
  outputs(%7, %6 as "flag")
}
)");
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = input "b" : bool[4]
  %2 = neg(%0) name="single" : f32[4]
  outputs(%2, %1 as "flag")
}
)");
}

TEST(Simplify, ReshapeChains) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3,4]
  %1 = reshape(%0) {shape=[6,4]} name="r1" : f32[6,4]
  %2 = reshape(%1) {shape=[-1]} name="r2" : f32[24]
  %3 = reshape(%2) {shape=[4,6]} name="r3" : f32[4,6]
  %4 = reshape(%0) {shape=[2,12]} name="s1" : f32[2,12]
  %5 = reshape(%4) {shape=[2,3,4]} name="s2" : f32[2,3,4]
  %6 = reshape(%5) {shape=[2,3,4]} name="same" : f32[2,3,4]
  outputs(%3, %6)
}
)");
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "x" : f32[2,3,4]
  %1 = reshape(%0) {shape=[4,6]} name="r3" : f32[4,6]
  outputs(%1, %0 as "same")
}
)");
}

TEST(Simplify, TransposeComposesAndCancels) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3,4]
  %1 = transpose(%0) {perm=[1,2,0]} name="t1" : f32[3,4,2]
  %2 = transpose(%1) {perm=[2,0,1]} name="back" : f32[2,3,4]
  %3 = transpose(%0) {perm=[1,0,2]} name="u1" : f32[3,2,4]
  %4 = transpose(%3) {perm=[0,2,1]} name="u2" : f32[3,4,2]
  %5 = transpose(%0) {perm=[0,1,2]} name="noop" : f32[2,3,4]
  %6 = exp(%5) name="e" : f32[2,3,4]
  outputs(%2, %4, %6)
}
)");
  // u2(u1(x)): dim j of the result is x's dim u1[u2[j]] = [1,2,0].
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "x" : f32[2,3,4]
  %1 = transpose(%0) {perm=[1,2,0]} name="u2" : f32[3,4,2]
  %2 = exp(%0) name="e" : f32[2,3,4]
  outputs(%0 as "back", %1, %2)
}
)");
}

TEST(Simplify, CastsToSameTypeAndLosslessRoundTrips) {
  Graph g = parse(R"(
graph main {
  %0 = input "h" : f16[4]
  %1 = input "f" : f32[4]
  %2 = cast(%0) {to=f32} name="up" : f32[4]
  %3 = cast(%2) {to=f16} name="down" : f16[4]
  %4 = cast(%1) {to=f32} name="same" : f32[4]
  %5 = cast(%1) {to=f16} name="lossy" : f16[4]
  %6 = cast(%5) {to=f32} name="lossy_back" : f32[4]
  %7 = cast(%2) {to=f64} name="wider" : f64[4]
  outputs(%3, %4, %6, %7)
}
)");
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "h" : f16[4]
  %1 = input "f" : f32[4]
  %2 = cast(%1) {to=f16} name="lossy" : f16[4]
  %3 = cast(%2) {to=f32} name="lossy_back" : f32[4]
  %4 = cast(%0) {to=f64} name="wider" : f64[4]
  outputs(%0 as "down", %1 as "same", %3, %4)
}
)");
}

TEST(Simplify, NoOpDataMovement) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = slice(%0) {starts=[0], ends=[9223372036854775807], axes=[1]} name="full" : f32[2,3]
  %2 = slice(%0) {starts=[0], ends=[2], axes=[1]} name="part" : f32[2,2]
  %3 = slice(%1) {starts=[-1], ends=[-9223372036854775807], axes=[0], steps=[-1]} name="rev" : f32[2,3]
  %4 = expand(%3) {shape=[2,3]} name="ex" : f32[2,3]
  %5 = concat(%4) {axis=0} name="cat" : f32[2,3]
  %6 = tile(%5) {repeats=[1,1]} name="tl" : f32[2,3]
  %7 = pad(%6) {pads=[0,0,0,0]} name="pd" : f32[2,3]
  %8 = expand(%7) {shape=[2,2,3]} name="grow" : f32[2,2,3]
  outputs(%2, %8)
}
)");
  expect_graph(simplify(g), R"(
graph main {
  %0 = input "x" : f32[2,3]
  %1 = slice(%0) {starts=[0], ends=[2], axes=[1]} name="part" : f32[2,2]
  %2 = slice(%0) {starts=[-1], ends=[-9223372036854775807], axes=[0], steps=[-1]} name="rev" : f32[2,3]
  %3 = expand(%2) {shape=[2,2,3]} name="grow" : f32[2,2,3]
  outputs(%1, %3)
}
)");
}

}  // namespace
}  // namespace rlx::opt::test
