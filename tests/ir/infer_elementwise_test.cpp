// Shape inference: unary, cast, binary, logical, compare, where, fused elementwise.
#include "ir/op_table.h"
#include "ir_test_util.h"

namespace rlx {
namespace {

Shape t(std::vector<int64_t> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }

TEST(InferUnary, KeepsTypeIncludingSymbols) {
  Graph g;
  Dim b = g.sym("batch");
  auto x = g.input("x", Shape(std::vector<Dim>{b, 4}, DType::F16));
  EXPECT_EQ(g.type(g.exp(x)), Shape(std::vector<Dim>{b, 4}, DType::F16));
  EXPECT_EQ(g.type(g.relu(x)), g.type(x));
  auto i = g.input("i", t({3}, DType::I32));
  EXPECT_EQ(g.type(g.neg(i)), t({3}, DType::I32));
  EXPECT_EQ(g.type(g.abs(i)), t({3}, DType::I32));
  EXPECT_EQ(g.type(g.add1(OpKind::BitwiseNot, {i})), t({3}, DType::I32));
  auto s = g.input("s", Shape::scalar(DType::F64));
  EXPECT_EQ(g.type(g.sigmoid(s)), Shape::scalar(DType::F64));
}

TEST(InferUnary, FloatOnlyOpsRejectIntegers) {
  Graph g;
  auto i = g.input("i", t({3}, DType::I32));
  EXPECT_RLX_ERROR(g.add1(OpKind::Exp, {i}, NoAttrs{}, "e"), Shape, "node 'e' (exp)", "float", "i32[3]");
  EXPECT_RLX_ERROR(g.add1(OpKind::Softmax, {i}, AxisAttrs{-1}, "sm"), Shape, "node 'sm' (softmax)", "float");
  auto c = g.input("c", t({3}, DType::C64));
  EXPECT_RLX_ERROR(g.add1(OpKind::Sqrt, {c}, NoAttrs{}, "sq"), Shape, "node 'sq'", "float");
}

TEST(InferUnary, DTypeRulesPerOp) {
  Graph g;
  auto f = g.input("f", t({2}));
  auto b = g.input("b", t({2}, DType::Bool));
  auto c = g.input("c", t({2}, DType::C64));
  EXPECT_RLX_ERROR(g.add1(OpKind::Relu, {b}, NoAttrs{}, "r"), Shape, "node 'r' (relu)", "numeric");
  EXPECT_RLX_ERROR(g.add1(OpKind::Relu, {c}, NoAttrs{}, "rc"), Shape, "node 'rc'", "complex");
  EXPECT_EQ(g.type(g.neg(c)), t({2}, DType::C64));
  EXPECT_RLX_ERROR(g.add1(OpKind::BitwiseNot, {f}, NoAttrs{}, "bn"), Shape, "node 'bn' (bitwise_not)", "integer");
  EXPECT_EQ(g.type(g.add1(OpKind::BitwiseNot, {b})), t({2}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::Gelu, {f}, ScalarAttrs{1, 0}, "ge"), Verify, "node 'ge' (gelu)", "wrong attribute struct");
  EXPECT_EQ(g.type(g.gelu(f, true)), t({2}));
}

TEST(InferUnary, SoftmaxAxisChecked) {
  Graph g;
  auto x = g.input("x", t({2, 3}));
  EXPECT_EQ(g.type(g.softmax(x, 0)), t({2, 3}));
  EXPECT_EQ(g.type(g.log_softmax(x, -2)), t({2, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Softmax, {x}, AxisAttrs{2}, "sm"), Shape, "node 'sm'", "axis 2", "rank 2");
}

TEST(InferUnaryBool, ResultIsBool) {
  Graph g;
  auto x = g.input("x", t({2, 2}, DType::BF16));
  EXPECT_EQ(g.type(g.add1(OpKind::IsNaN, {x})), t({2, 2}, DType::Bool));
  EXPECT_EQ(g.type(g.add1(OpKind::IsInf, {x}, IsInfAttrs{})), t({2, 2}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::Not, {x}, NoAttrs{}, "n"), Shape, "node 'n' (not)", "bool");
  auto b = g.input("b", t({5}, DType::Bool));
  EXPECT_EQ(g.type(g.logical_not(b)), t({5}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::IsInf, {x}, ScalarAttrs{1, 1}, "inf"), Verify, "node 'inf' (is_inf)",
                   "wrong attribute struct");
  auto i = g.input("i", t({5}, DType::I64));
  EXPECT_RLX_ERROR(g.add1(OpKind::IsNaN, {i}, NoAttrs{}, "nan"), Shape, "node 'nan' (is_nan)", "float");
}

TEST(InferCast, ChangesOnlyDType) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", Shape(std::vector<Dim>{s, 3}, DType::F32));
  EXPECT_EQ(g.type(g.cast(x, DType::I8)), Shape(std::vector<Dim>{s, 3}, DType::I8));
  EXPECT_EQ(g.type(g.cast(x, DType::C128)).dtype(), DType::C128);
}

TEST(InferBitCast, SameBytesWithTheInnermostDimRescaled) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", Shape(std::vector<Dim>{s, 3}, DType::F32));
  EXPECT_EQ(g.type(g.bitcast(x, DType::I32)), Shape(std::vector<Dim>{s, 3}, DType::I32));
  EXPECT_EQ(g.type(g.bitcast(x, DType::U32)).dtype(), DType::U32);
  // Other element sizes rescale the innermost dim: rows of 2E bytes are rows of E halves.
  auto rows = g.input("rows", Shape(std::vector<Dim>{s, 8}, DType::U8));
  EXPECT_EQ(g.type(g.bitcast(rows, DType::F16)), Shape(std::vector<Dim>{s, 4}, DType::F16));
  EXPECT_EQ(g.type(g.bitcast(rows, DType::F64)), Shape(std::vector<Dim>{s, 1}, DType::F64));
  EXPECT_EQ(g.type(g.bitcast(x, DType::I16)), Shape(std::vector<Dim>{s, 6}, DType::I16));
  auto expect_refused = [&](Value v, DType to, const char* what) {
    try {
      g.bitcast(v, to);
      FAIL() << what << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::Shape) << e.what();
      EXPECT_NE(std::string(e.what()).find("innermost dim"), std::string::npos) << e.what();
    }
  };
  expect_refused(x, DType::F64, "12 bytes a row as 8-byte elements");
  expect_refused(g.input("sym", Shape(std::vector<Dim>{3, s}, DType::U8)), DType::F16, "a symbolic innermost dim");
  expect_refused(g.input("scalar", Shape::scalar(DType::U8)), DType::F16, "a scalar of another size");
}

TEST(InferBinary, NumpyBroadcastAndPromotion) {
  Graph g;
  auto a = g.input("a", t({2, 1, 4}, DType::F16));
  auto b = g.input("b", t({3, 1}));
  EXPECT_EQ(g.type(g.add(a, b)), t({2, 3, 4}, DType::F32));
  auto i = g.input("i", t({4}, DType::I32));
  EXPECT_EQ(g.type(g.mul(i, a)), t({2, 1, 4}, DType::F16));
  auto s = g.input("s", Shape::scalar(DType::I64));
  EXPECT_EQ(g.type(g.sub(i, s)), t({4}, DType::I64));
  auto z = g.input("z", t({0, 4}));
  auto one = g.input("one", t({1, 1}));
  EXPECT_EQ(g.type(g.div(z, one)), t({0, 4}));
  auto c = g.input("c", t({2, 3}));
  auto d = g.input("d", t({4}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Add, {c, d}, NoAttrs{}, "bad_add"), Shape, "node 'bad_add' (add)", "broadcast",
                   "[2,3]", "[4]");
}

TEST(InferBinary, SymbolicBroadcast) {
  Graph g;
  Dim s = g.sym("s"), u = g.sym("u");
  auto a = g.input("a", Shape(std::vector<Dim>{s, 4}, DType::F32));
  auto b = g.input("b", t({1, 4}));
  auto c = g.input("c", Shape(std::vector<Dim>{s, 1}, DType::F32));
  EXPECT_EQ(g.type(g.add(a, b)), Shape(std::vector<Dim>{s, 4}, DType::F32));
  EXPECT_EQ(g.type(g.mul(a, c)), Shape(std::vector<Dim>{s, 4}, DType::F32));
  auto d = g.input("d", t({3, 4}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Add, {a, d}, NoAttrs{}, "sa"), Shape, "node 'sa'", "bind");
  auto e = g.input("e", Shape(std::vector<Dim>{u, 4}, DType::F32));
  EXPECT_RLX_ERROR(g.add1(OpKind::Max, {a, e}, NoAttrs{}, "su"), Shape, "node 'su' (max)", "s0", "s1");
}

TEST(InferBinary, DTypeRules) {
  Graph g;
  auto b = g.input("b", t({2}, DType::Bool));
  auto i = g.input("i", t({2}, DType::U8));
  auto f = g.input("f", t({2}));
  auto c = g.input("c", t({2}, DType::C64));
  EXPECT_RLX_ERROR(g.add1(OpKind::Add, {b, b}, NoAttrs{}, "bb"), Shape, "node 'bb'", "bool");
  EXPECT_EQ(g.type(g.add(b, f)), t({2}));  // bool promotes to the other operand
  EXPECT_EQ(g.type(g.add1(OpKind::BitwiseAnd, {i, b})), t({2}, DType::U8));
  EXPECT_RLX_ERROR(g.add1(OpKind::BitwiseOr, {i, f}, NoAttrs{}, "bo"), Shape, "node 'bo' (bitwise_or)", "integer");
  EXPECT_RLX_ERROR(g.add1(OpKind::Max, {c, f}, NoAttrs{}, "mx"), Shape, "node 'mx'", "real");
  EXPECT_EQ(g.type(g.mul(c, f)), t({2}, DType::C64));
  EXPECT_EQ(g.type(g.add1(OpKind::Mod, {f, f}, ModAttrs{true})), t({2}));
}

TEST(InferBinaryLhs, PowKeepsBaseDType) {
  Graph g;
  auto a = g.input("a", t({2, 3}, DType::F16));
  auto e = g.input("e", t({3}, DType::F32));
  EXPECT_EQ(g.type(g.pow(a, e)), t({2, 3}, DType::F16));
  auto i = g.input("i", t({1}, DType::I32));
  EXPECT_EQ(g.type(g.pow(i, e)), t({3}, DType::I32));
  auto b = g.input("b", t({1}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::Pow, {a, b}, NoAttrs{}, "p"), Shape, "node 'p' (pow)", "input 1");
}

TEST(InferLogicalCompare, BoolResults) {
  Graph g;
  auto p = g.input("p", t({2, 1}, DType::Bool));
  auto q = g.input("q", t({3}, DType::Bool));
  EXPECT_EQ(g.type(g.logical_and(p, q)), t({2, 3}, DType::Bool));
  EXPECT_EQ(g.type(g.add1(OpKind::Xor, {p, q})), t({2, 3}, DType::Bool));
  auto f = g.input("f", t({3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Or, {p, f}, NoAttrs{}, "o"), Shape, "node 'o' (or)", "bool", "f32[3]");
  auto i = g.input("i", t({2, 1}, DType::I64));
  EXPECT_EQ(g.type(g.lt(i, f)), t({2, 3}, DType::Bool));
  auto c = g.input("c", t({3}, DType::C64));
  EXPECT_EQ(g.type(g.eq(c, f)), t({3}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::Greater, {c, f}, NoAttrs{}, "gt"), Shape, "node 'gt' (gt)", "real");
}

TEST(InferWhere, BroadcastsAllThree) {
  Graph g;
  auto c = g.input("c", t({4, 1, 1}, DType::Bool));
  auto a = g.input("a", t({3, 1}));
  auto b = g.input("b", t({5}));
  EXPECT_EQ(g.type(g.where(c, a, b)), t({4, 3, 5}));
  auto f = g.input("f", t({4, 1, 1}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Where, {f, a, b}, NoAttrs{}, "w1"), Shape, "node 'w1' (where)", "condition");
  auto h = g.input("h", t({5}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::Where, {c, a, h}, NoAttrs{}, "w2"), Shape, "node 'w2'", "same dtype");
}

FusedOp fop(OpKind k, std::vector<int32_t> args, DType type = DType::F32, double alpha = 0) {
  FusedOp o;
  o.kind = k;
  o.args = std::move(args);
  o.type = type;
  o.alpha = alpha;
  return o;
}

TEST(InferFusedElementwise, FollowsTheRulesOfItsOps) {
  Graph g;
  auto a = g.input("a", t({2, 3}));
  auto b = g.input("b", t({3}));
  FusedElementwiseAttrs p;
  p.program = {fop(OpKind::Mul, {0, 1}), fop(OpKind::LeakyRelu, {2}, DType::F32, 0.1),
               fop(OpKind::Cast, {3}, DType::F16)};
  EXPECT_EQ(g.type(g.add1(OpKind::FusedElementwise, {a, b}, p)), t({2, 3}, DType::F16));
  FusedElementwiseAttrs cmp;
  cmp.program = {fop(OpKind::Greater, {0, 1}, DType::Bool), fop(OpKind::Where, {2, 0, 1})};
  EXPECT_EQ(g.type(g.add1(OpKind::FusedElementwise, {a, b}, cmp)), t({2, 3}));
}

TEST(InferFusedElementwise, RejectsBadPrograms) {
  Graph g;
  auto a = g.input("a", t({2, 3}));
  auto b = g.input("b", t({4}));
  auto run = [&](std::vector<FusedOp> prog, std::vector<Value> in) {
    FusedElementwiseAttrs p;
    p.program = std::move(prog);
    g.add1(OpKind::FusedElementwise, std::move(in), p, "fe");
  };
  EXPECT_RLX_ERROR(run({}, {a}), Shape, "node 'fe'", "empty program");
  EXPECT_RLX_ERROR(run({fop(OpKind::Relu, {0}, DType::F16)}, {a}), Shape, "program[0]", "f32", "f16");
  EXPECT_RLX_ERROR(run({fop(OpKind::Relu, {1})}, {a}), Shape, "program[0]", "operand 1");
  EXPECT_RLX_ERROR(run({fop(OpKind::Relu, {0}), fop(OpKind::Relu, {2})}, {a}), Shape, "program[1]", "operand 2");
  EXPECT_RLX_ERROR(run({fop(OpKind::MatMul, {0, 0})}, {a}), Shape, "program[0]", "matmul", "cannot appear");
  EXPECT_RLX_ERROR(run({fop(OpKind::Add, {0})}, {a}), Shape, "program[0]", "operands");
  EXPECT_RLX_ERROR(run({fop(OpKind::Relu, {0}, DType::F32, 0.5)}, {a}), Shape, "program[0]", "alpha");
  EXPECT_RLX_ERROR(run({fop(OpKind::Add, {0, 1})}, {a, b}), Shape, "fe.program[0]", "broadcast");
}

TEST(InferOutputs, ArityCheckedAgainstTheTable) {
  Node n;
  n.kind = OpKind::Add;
  n.name = "x";
  n.attrs = NoAttrs{};
  Shape s = t({1});
  EXPECT_RLX_ERROR(ir::infer_outputs(n, {&s}), Shape, "node 'x' (add)", "expects 2");
}

}  // namespace
}  // namespace rlx
