// compile_pipeline: the passes in order with their log lines, option switches, the
// reports, and the final graph (golden) for f32 and f16.
#include <cstring>
#include <set>

#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

const char* kModel = R"(
graph main {
  symbols(batch)
  %0 = input "x" : f32[batch,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = constant {value=0x0000803f} name="one" : f32[]
  %4 = constant {value=0x0000803f} name="one_again" : f32[]
  %5 = add(%3, %4) name="two" : f32[]
  %6 = matmul(%0, %1) name="mm" : f32[batch,3]
  %7 = add(%6, %2) name="biased" : f32[batch,3]
  %8 = relu(%7) name="act" : f32[batch,3]
  %9 = mul(%8, %3) name="times_one" : f32[batch,3]
  %10 = mul(%9, %5) name="times_two" : f32[batch,3]
  %11 = exp(%10) name="e1" : f32[batch,3]
  %12 = exp(%10) name="e2" : f32[batch,3]
  %13 = sub(%11, %12) name="zeroish" : f32[batch,3]
  %14 = tanh(%13) name="t" : f32[batch,3]
  %15 = layer_norm(%14) name="ln" : f32[batch,3]
  %16 = neg(%0) name="dead" : f32[batch,4]
  outputs(%15 as "y")
}
)";

PipelineContext context() {
  PipelineContext ctx;
  std::set<OpKind> kinds{OpKind::FusedMatMul, OpKind::FusedElementwise, OpKind::ReduceMean, OpKind::Sub,
                         OpKind::Mul,         OpKind::Add,              OpKind::Rsqrt,      OpKind::Cast,
                         OpKind::MatMul,      OpKind::Tanh,             OpKind::Exp,        OpKind::Relu};
  ctx.claims = {"fake", [kinds](const Node& n, const std::vector<const Shape*>&) { return kinds.count(n.kind) > 0; }};
  // Scalar f32 add only: enough for "two" = one + one.
  ctx.evaluate = [](const Node& n, const std::vector<Shape>& t, const std::vector<Blob>& v) {
    if (n.kind != OpKind::Add || t[0].rank() != 0 || t[1].rank() != 0) fail(ErrorCategory::Unsupported, "test");
    float a, b;
    std::memcpy(&a, v[0].data(), 4);
    std::memcpy(&b, v[1].data(), 4);
    float c = a + b;
    std::vector<uint8_t> out(4);
    std::memcpy(out.data(), &c, 4);
    return std::vector<Blob>{Blob(std::move(out))};
  };
  ctx.options.dim_bindings = {{"batch", 2}};
  ctx.options.verify_each_pass = true;
  return ctx;
}

std::string without_last_line(const std::string& log, std::string* last) {
  size_t end = log.size() - 1;  // the log ends with '\n'
  size_t cut = log.rfind('\n', end - 1);
  *last = log.substr(cut + 1);
  return log.substr(0, cut + 1);
}

TEST(Pipeline, AllPassesF32) {
  Plan plan = compile_pipeline(parse(kModel), context());
  expect_graph(plan.graph, R"(
graph main {
  symbols(batch)
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = constant {value=0x00000040} name="two" : f32[]
  %4 = fused_matmul(%0, %1, %2) {activation=relu} name="act" : f32[2,3]
  %5 = fused_elementwise(%4, %3) {program=[mul(0,1):f32, exp(2):f32, sub(3,3):f32, tanh(4):f32]} name="t" : f32[2,3]
  %6 = reduce_mean(%5) {axes=[1]} name="ln/reduce_mean" : f32[2,1]
  %7 = sub(%5, %6) name="ln/sub" : f32[2,3]
  %8 = mul(%7, %7) name="ln/mul" : f32[2,3]
  %9 = reduce_mean(%8) {axes=[1]} name="ln/reduce_mean_9" : f32[2,1]
  %10 = constant {value=0xacc52737} : f32[]
  %11 = add(%9, %10) name="ln/add" : f32[2,1]
  %12 = rsqrt(%11) name="ln/rsqrt" : f32[2,1]
  %13 = mul(%7, %12) name="ln" : f32[2,3]
  outputs(%13 as "y")
}
)");
  std::string last;
  EXPECT_EQ(without_last_line(plan.pass_log, &last),
            "bind-dims: 17 -> 17 nodes\n"
            "dce: 17 -> 16 nodes\n"
            "fold-conv-affine: 16 -> 16 nodes\n"
            "constant-fold: 16 -> 15 nodes\n"
            "cse: 15 -> 14 nodes\n"
            "simplify: 14 -> 12 nodes\n"
            "fuse-norms: 12 -> 12 nodes\n"
            "fuse-gelu: 12 -> 12 nodes\n"
            "fuse-attention: 12 -> 12 nodes\n"
            "fuse-matmul-epilogue: 12 -> 10 nodes\n"
            "fuse-conv-epilogue: 10 -> 10 nodes\n"
            "channels-last: 10 -> 10 nodes\n"
            "fuse-elementwise: 10 -> 7 nodes\n"
            "legalize: 7 -> 14 nodes\n"
            "constant-fold: 14 -> 14 nodes\n"
            "dce: 14 -> 14 nodes\n");
  EXPECT_EQ(last.rfind("plan-memory: arena ", 0), 0u) << last;
  EXPECT_EQ(plan.fusion_report,
            "fuse-matmul-epilogue: node 'act' = fused_matmul of [matmul 'mm', add 'biased' (bias), relu 'act' "
            "(activation)], activation relu\n"
            "fuse-elementwise: node 't' = fused_elementwise of 4 ops [mul 'times_two', exp 'e1', sub 'zeroish', "
            "tanh 't'], inputs 2\n");
  EXPECT_EQ(plan.dispatch_report,
            "dispatch (backend 'fake'): 2 native, 0 native in f32, 1 decomposed, 0 unsupported\n"
            "  fused_elementwise: native 1\n"
            "  fused_matmul: native 1\n"
            "  layer_norm: decomposed 1 (into rsqrt, add, sub, mul, reduce_mean)\n");
  // The memory plan covers the final graph.
  EXPECT_EQ(plan.memory.loc.size(), plan.graph.nodes().size());
  EXPECT_GT(plan.memory.arena_bytes, 0);
}

TEST(Pipeline, F16KeepsTheDecomposedNormInF32) {
  PipelineContext ctx = context();
  ctx.options.precision = Precision::F16;
  Plan plan = compile_pipeline(parse(kModel), ctx);
  expect_graph(plan.graph, R"(
graph main {
  symbols(batch)
  %0 = input "x" : f32[2,4]
  %1 = param "w" : f32[4,3]
  %2 = param "b" : f32[3]
  %3 = cast(%0) {to=f16} name="x/f16" : f16[2,4]
  %4 = cast(%1) {to=f16} name="w/f16" : f16[4,3]
  %5 = cast(%2) {to=f16} name="b/f16" : f16[3]
  %6 = fused_matmul(%3, %4, %5) {activation=relu} name="act" : f16[2,3]
  %7 = constant {value=0x0040} name="two/f16" : f16[]
  %8 = fused_elementwise(%6, %7) {program=[mul(0,1):f16, exp(2):f16, sub(3,3):f16, tanh(4):f16]} name="t" : f16[2,3]
  %9 = cast(%8) name="t/f32" : f32[2,3]
  %10 = reduce_mean(%9) {axes=[1]} name="ln/reduce_mean" : f32[2,1]
  %11 = sub(%9, %10) name="ln/sub" : f32[2,3]
  %12 = mul(%11, %11) name="ln/mul" : f32[2,3]
  %13 = reduce_mean(%12) {axes=[1]} name="ln/reduce_mean_13" : f32[2,1]
  %14 = constant {value=0xacc52737} : f32[]
  %15 = add(%13, %14) name="ln/add" : f32[2,1]
  %16 = rsqrt(%15) name="ln/rsqrt" : f32[2,1]
  %17 = mul(%11, %16) name="ln" : f32[2,3]
  outputs(%17 as "y")
}
)");
  EXPECT_NE(plan.pass_log.find("fuse-elementwise: 10 -> 7 nodes\nprecision: 7 -> 11 nodes\nlegalize: 11 -> 18 nodes\n"),
            std::string::npos)
      << plan.pass_log;
}

TEST(Pipeline, SwitchesTurnPassesOff) {
  PipelineContext ctx = context();
  ctx.options.constant_fold = false;
  ctx.options.cse = false;
  ctx.options.simplify = false;
  ctx.options.fuse_elementwise = false;
  ctx.options.fuse_matmul_epilogue = false;
  ctx.options.fuse_norms = false;
  ctx.options.fuse_gelu = false;
  ctx.options.fuse_attention = false;
  ctx.options.channels_last = false;
  ctx.claims.supports = nullptr;  // everything native
  Plan plan = compile_pipeline(parse(kModel), ctx);
  std::string last;
  EXPECT_EQ(without_last_line(plan.pass_log, &last),
            "bind-dims: 17 -> 17 nodes\n"
            "dce: 17 -> 16 nodes\n"
            "legalize: 16 -> 16 nodes\n"
            "dce: 16 -> 16 nodes\n");
  EXPECT_EQ(plan.fusion_report, "");
  for (const Node& n : plan.graph.nodes()) EXPECT_TRUE(n.outputs[0].is_static()) << n.name;
}

TEST(Pipeline, NoEvaluatorSkipsConstantFold) {
  PipelineContext ctx = context();
  ctx.evaluate = nullptr;
  Plan plan = compile_pipeline(parse(kModel), ctx);
  EXPECT_EQ(plan.pass_log.find("constant-fold"), std::string::npos) << plan.pass_log;
}

TEST(Pipeline, UnsupportedNodesFailTheCompile) {
  PipelineContext ctx = context();
  ctx.claims.supports = [](const Node& n, const std::vector<const Shape*>&) {
    return n.kind != OpKind::Tanh && n.kind != OpKind::Sigmoid && n.kind != OpKind::Exp;
  };
  ctx.options.fuse_elementwise = false;
  try {
    compile_pipeline(parse(kModel), ctx);
    FAIL() << "expected Error(Unsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    std::string msg = e.what();
    // One error for both (e2 was merged into e1 by cse); tanh -> sigmoid -> exp.
    EXPECT_NE(msg.find("cannot run 2 nodes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\n  exp 'e1' (inputs f32[2,3])\n"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\n  tanh 't' (inputs f32[2,3]): needs exp"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace rlx::opt::test
