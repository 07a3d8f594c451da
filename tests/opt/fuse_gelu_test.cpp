// fuse-gelu: golden before/after plus the report text; and where it must not fire.
#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

// PyTorch's opset-14 nn.GELU: div by sqrt(2), erf, add 1, mul x, mul 0.5.
TEST(FuseGelu, PyTorchsExportBecomesOneOp) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,3,8]
  %1 = constant {value=0xf304b53f} : f32[]
  %2 = constant {value=0x0000803f} : f32[]
  %3 = constant {value=0x0000003f} : f32[]
  %4 = div(%0, %1) name="scaled" : f32[2,3,8]
  %5 = erf(%4) name="erf" : f32[2,3,8]
  %6 = add(%5, %2) name="plus1" : f32[2,3,8]
  %7 = mul(%0, %6) name="times_x" : f32[2,3,8]
  %8 = mul(%7, %3) name="gelu" : f32[2,3,8]
  outputs(%8 as "y")
}
)");
  std::string report;
  expect_graph(dce(fuse_gelu(g, &report)), R"(
graph main {
  %0 = input "x" : f32[2,3,8]
  %1 = gelu(%0) name="gelu" : f32[2,3,8]
  outputs(%1 as "y")
}
)");
  EXPECT_EQ(report,
            "fuse-gelu: node 'gelu' = gelu of 5 ops [div 'scaled', erf 'erf', add 'plus1', mul 'times_x', mul "
            "'gelu']\n");
}

// The other orders exporters write: x * (1/sqrt(2)) with the constant first, 1 + e, the half
// applied to (1 + e) before x; and (x * 0.5) * (1 + e).
TEST(FuseGelu, OtherOperandOrdersAndAssociations) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[4,6]
  %1 = input "z" : f32[4,6]
  %2 = constant {value=0xf304353f} : f32[]
  %3 = constant {value=0x0000803f} : f32[]
  %4 = constant {value=0x0000003f} : f32[]
  %5 = mul(%2, %0) : f32[4,6]
  %6 = erf(%5) : f32[4,6]
  %7 = add(%3, %6) : f32[4,6]
  %8 = mul(%7, %4) : f32[4,6]
  %9 = mul(%0, %8) name="a" : f32[4,6]
  %10 = mul(%1, %2) : f32[4,6]
  %11 = erf(%10) : f32[4,6]
  %12 = add(%11, %3) : f32[4,6]
  %13 = mul(%4, %1) : f32[4,6]
  %14 = mul(%13, %12) name="b" : f32[4,6]
  outputs(%9, %14)
}
)");
  std::string report;
  expect_graph(dce(fuse_gelu(g, &report)), R"(
graph main {
  %0 = input "x" : f32[4,6]
  %1 = input "z" : f32[4,6]
  %2 = gelu(%0) name="a" : f32[4,6]
  %3 = gelu(%1) name="b" : f32[4,6]
  outputs(%2, %3)
}
)");
  EXPECT_NE(report.find("node 'a' = gelu of 5 ops"), std::string::npos) << report;
  EXPECT_NE(report.find("node 'b' = gelu of 5 ops"), std::string::npos) << report;
}

// The tanh approximation as GPT-2-style code writes it: pow(x, 3) (or x * x * x), times
// 0.044715, plus x, times sqrt(2/pi), tanh, plus 1, times 0.5 * x.
TEST(FuseGelu, TanhApproximationBecomesGeluTanh) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2,8]
  %1 = input "z" : f32[2,8]
  %2 = constant {value=0x00004040} : f32[]
  %3 = constant {value=0x1327373d} : f32[]
  %4 = constant {value=0x2a424c3f} : f32[]
  %5 = constant {value=0x0000803f} : f32[]
  %6 = constant {value=0x0000003f} : f32[]
  %7 = pow(%0, %2) : f32[2,8]
  %8 = mul(%3, %7) : f32[2,8]
  %9 = add(%0, %8) : f32[2,8]
  %10 = mul(%4, %9) : f32[2,8]
  %11 = tanh(%10) : f32[2,8]
  %12 = add(%5, %11) : f32[2,8]
  %13 = mul(%6, %0) : f32[2,8]
  %14 = mul(%13, %12) name="a" : f32[2,8]
  %15 = mul(%1, %1) : f32[2,8]
  %16 = mul(%15, %1) : f32[2,8]
  %17 = mul(%16, %3) : f32[2,8]
  %18 = add(%17, %1) : f32[2,8]
  %19 = mul(%18, %4) : f32[2,8]
  %20 = tanh(%19) : f32[2,8]
  %21 = add(%20, %5) : f32[2,8]
  %22 = mul(%1, %21) : f32[2,8]
  %23 = mul(%22, %6) name="b" : f32[2,8]
  outputs(%14, %23)
}
)");
  std::string report;
  expect_graph(dce(fuse_gelu(g, &report)), R"(
graph main {
  %0 = input "x" : f32[2,8]
  %1 = input "z" : f32[2,8]
  %2 = gelu(%0) {tanh_approx=true} name="a" : f32[2,8]
  %3 = gelu(%1) {tanh_approx=true} name="b" : f32[2,8]
  outputs(%2, %3)
}
)");
  EXPECT_NE(report.find("node 'a' = gelu (tanh) of 8 ops"), std::string::npos) << report;
  EXPECT_NE(report.find("node 'b' = gelu (tanh) of 9 ops"), std::string::npos) << report;
}

// Left apart: a divisor that is not sqrt(2), an erf read twice, a half that is 0.25; each
// named in the report with the reason.
TEST(FuseGelu, NearMissesStay) {
  const char* text = R"(
graph main {
  %0 = input "x" : f32[4]
  %1 = constant {value=0x00000040} : f32[]
  %2 = constant {value=0x0000803f} : f32[]
  %3 = constant {value=0x0000003f} : f32[]
  %4 = constant {value=0xf304b53f} : f32[]
  %5 = constant {value=0x0000803e} : f32[]
  %6 = div(%0, %1) : f32[4]
  %7 = erf(%6) name="e1" : f32[4]
  %8 = add(%7, %2) : f32[4]
  %9 = mul(%0, %8) : f32[4]
  %10 = mul(%9, %3) name="y1" : f32[4]
  %11 = div(%0, %4) : f32[4]
  %12 = erf(%11) name="e2" : f32[4]
  %13 = add(%12, %2) : f32[4]
  %14 = mul(%0, %13) : f32[4]
  %15 = mul(%14, %3) name="y2" : f32[4]
  %16 = div(%0, %4) : f32[4]
  %17 = erf(%16) name="e3" : f32[4]
  %18 = add(%17, %2) : f32[4]
  %19 = mul(%0, %18) : f32[4]
  %20 = mul(%19, %5) name="y3" : f32[4]
  outputs(%10, %15, %20, %12)
}
)";
  std::string report;
  Graph g = parse(text);
  expect_graph(fuse_gelu(g, &report), text);
  EXPECT_EQ(report,
            "fuse-gelu: not fused: erf 'e1': not x * 0.5 * (1 + erf(x / sqrt(2))) with each step read only by the "
            "next\n"
            "fuse-gelu: not fused: erf 'e2': not x * 0.5 * (1 + erf(x / sqrt(2))) with each step read only by the "
            "next\n"
            "fuse-gelu: not fused: erf 'e3': not x * 0.5 * (1 + erf(x / sqrt(2))) with each step read only by the "
            "next\n");
}

}  // namespace
}  // namespace rlx::opt::test
