// precision: golden before/after for the F16/BF16 policies.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

const char* kMixed = R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,4]
  %2 = param "g" : f32[4]
  %3 = constant {value=0x0000803f} name="one" : f32[]
  %4 = matmul(%0, %1) name="mm" : f32[2,4]
  %5 = add(%4, %3) name="a" : f32[2,4]
  %6 = reshape(%5) {shape=[8]} name="flat" : f32[8]
  %7 = reshape(%6) {shape=[2,4]} name="back" : f32[2,4]
  %8 = layer_norm(%7, %2) name="ln" : f32[2,4]
  %9 = matmul(%8, %1) name="mm2" : f32[2,4]
  %10 = softmax(%9) name="sm" : f32[2,4]
  %11 = mul(%10, %5) name="m" : f32[2,4]
  %12 = argmax(%11) {axis=1} name="am" : i64[2,1]
  %13 = concat(%5, %0) {axis=0} name="cat" : f32[4,4]
  %14 = fused_elementwise(%0, %3) {program=[mul(0,1):f32, exp(2):f32]} name="fe" : f32[2,4]
  outputs(%11, %12, %13, %5 as "a_out", %14)
}
)";

TEST(Precision, F32IsUnchanged) { expect_graph(apply_precision(parse(kMixed), Precision::F32), kMixed); }

// TF32 changes no type: it is a math mode of the backends' matmuls and convolutions.
TEST(Precision, Tf32LeavesTheGraphToTheBackend) {
  expect_graph(apply_precision(parse(kMixed), Precision::TF32), kMixed);
}

TEST(Precision, F16ComputeLowReductionsAndBoundariesF32CastsShared) {
  // Compute (matmul, add, mul, fused program) runs in f16; layer_norm, softmax and
  // argmax get f32; data movement follows its input; concat with an f32 input stays f32.
  // One cast per value and type: w/f16, x/f16 and a/f32 are each reused; the constant
  // is converted at compile time. Inputs, params and outputs keep f32.
  expect_graph(apply_precision(parse(kMixed), Precision::F16), R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,4]
  %2 = param "g" : f32[4]
  %3 = cast(%0) {to=f16} name="x/f16" : f16[2,4]
  %4 = cast(%1) {to=f16} name="w/f16" : f16[4,4]
  %5 = matmul(%3, %4) name="mm" : f16[2,4]
  %6 = constant {value=0x003c} name="one/f16" : f16[]
  %7 = add(%5, %6) name="a" : f16[2,4]
  %8 = reshape(%7) {shape=[8]} name="flat" : f16[8]
  %9 = reshape(%8) {shape=[2,4]} name="back" : f16[2,4]
  %10 = cast(%9) name="back/f32" : f32[2,4]
  %11 = layer_norm(%10, %2) name="ln" : f32[2,4]
  %12 = cast(%11) {to=f16} name="ln/f16" : f16[2,4]
  %13 = matmul(%12, %4) name="mm2" : f16[2,4]
  %14 = cast(%13) name="mm2/f32" : f32[2,4]
  %15 = softmax(%14) name="sm" : f32[2,4]
  %16 = cast(%15) {to=f16} name="sm/f16" : f16[2,4]
  %17 = mul(%16, %7) name="m" : f16[2,4]
  %18 = cast(%17) name="m/f32" : f32[2,4]
  %19 = argmax(%18) {axis=1} name="am" : i64[2,1]
  %20 = cast(%7) name="a/f32" : f32[2,4]
  %21 = concat(%20, %0) {axis=0} name="cat" : f32[4,4]
  %22 = fused_elementwise(%3, %6) {program=[mul(0,1):f16, exp(2):f16]} name="fe" : f16[2,4]
  %23 = cast(%22) name="fe/f32" : f32[2,4]
  outputs(%18 as "m", %19, %21, %20 as "a_out", %23 as "fe")
}
)");
}

TEST(Precision, Bf16IntegersAndExplicitCasts) {
  // Integer arithmetic is untouched; the int->f32 cast stays and its result is cast
  // down for the compute; a user cast to bf16 of a value already in bf16 disappears.
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = input "i" : i32[4]
  %2 = add(%1, %1) name="ii" : i32[4]
  %3 = cast(%2) name="i2f" : f32[4]
  %4 = mul(%0, %3) name="p" : f32[4]
  %5 = cast(%4) {to=bf16} name="user_bf16" : bf16[4]
  %6 = exp(%4) name="e" : f32[4]
  outputs(%5, %6)
}
)");
  expect_graph(apply_precision(g, Precision::BF16), R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = input "i" : i32[4]
  %2 = add(%1, %1) name="ii" : i32[4]
  %3 = cast(%2) name="i2f" : f32[4]
  %4 = cast(%0) {to=bf16} name="x/bf16" : bf16[4]
  %5 = cast(%3) {to=bf16} name="i2f/bf16" : bf16[4]
  %6 = mul(%4, %5) name="p" : bf16[4]
  %7 = exp(%6) name="e" : bf16[4]
  %8 = cast(%7) name="e/f32" : f32[4]
  outputs(%6 as "user_bf16", %8 as "e")
}
)");
}

// Softmax and the norms take low operands where the backend claims that form; reductions
// never do. A claim that refuses leaves the f32 policy as it was.
TEST(Precision, KeptNodesGoLowWhereTheBackendClaimsIt) {
  const char* src = R"(
graph main {
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,4]
  %2 = matmul(%0, %1) name="mm" : f32[2,4]
  %3 = softmax(%2) name="sm" : f32[2,4]
  %4 = reduce_sum(%3) {axes=[1]} name="rs" : f32[2,1]
  outputs(%3, %4)
}
)";
  BackendClaims low_softmax{"test", [](const Node& n, const std::vector<const Shape*>& in) {
                              return n.kind == OpKind::Softmax || in.empty() || !in[0] || in[0]->dtype() == DType::F32;
                            }};
  Graph g = apply_precision(parse(src), Precision::F16, &low_softmax);
  int low_softmaxes = 0, f32_reductions = 0;
  for (const Node& n : g.nodes()) {
    if (n.kind == OpKind::Softmax) low_softmaxes += n.outputs[0].dtype() == DType::F16 && g.type(n.inputs[0]).dtype() == DType::F16;
    if (n.kind == OpKind::ReduceSum) f32_reductions += n.outputs[0].dtype() == DType::F32;
  }
  EXPECT_EQ(low_softmaxes, 1);
  EXPECT_EQ(f32_reductions, 1);
  BackendClaims none{"test", [](const Node&, const std::vector<const Shape*>& in) {
                       return in.empty() || !in[0] || in[0]->dtype() == DType::F32;
                     }};
  expect_graph(apply_precision(parse(src), Precision::F16, &none), print_graph(apply_precision(parse(src), Precision::F16)));
  // Claimed but preferred in f32 (the CPU's norms and softmax): the softmax stays f32, as
  // without the claim, rather than going low for legalize to wrap back in casts.
  BackendClaims prefers = low_softmax;
  prefers.prefers_f32 = [](const Node& n, const std::vector<const Shape*>&) { return n.kind == OpKind::Softmax; };
  expect_graph(apply_precision(parse(src), Precision::F16, &prefers),
               print_graph(apply_precision(parse(src), Precision::F16)));
}

}  // namespace
}  // namespace rlx::opt::test
