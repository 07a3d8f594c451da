// fused_elementwise: programs vs the same ops run one by one (must match bit for bit),
// vs plain references, across dtypes, broadcasts, threads and ISA levels.
#include "backends/cpu/kernel.h"
#include "ew_test_util.h"

namespace rlx::test::ew {
namespace {

FusedOp op(OpKind k, std::vector<int32_t> args, DType t, double alpha = 0, double beta = 0) {
  FusedOp f;
  f.kind = k;
  f.args = std::move(args);
  f.type = t;
  f.alpha = alpha;
  f.beta = beta;
  return f;
}

OpResult run_fused(const std::vector<Tensor>& ins, const std::vector<FusedOp>& program, int threads = 1) {
  Graph g("fused");
  std::vector<Value> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.input("x" + std::to_string(i), ins[i].shape));
  Value y = g.add1(OpKind::FusedElementwise, vals, FusedElementwiseAttrs{program}, "fused");
  std::vector<std::vector<uint8_t>> bytes;
  for (const auto& t : ins) bytes.push_back(t.bytes);
  return {g.type(y), run_kernel(g, y.node, bytes, threads).at(0)};
}

// The same program executed as separate elementwise nodes.
OpResult run_unfused(const std::vector<Tensor>& ins, const std::vector<FusedOp>& program) {
  std::vector<Tensor> vals = ins;
  for (const FusedOp& f : program) {
    std::vector<Tensor> operands;
    for (int32_t a : f.args) operands.push_back(vals[size_t(a)]);
    Attrs attrs = scalar_attrs(f.kind, f.alpha, f.beta);
    if (auto* c = std::get_if<CastAttrs>(&attrs)) c->to = f.type;
    auto r = run_op(f.kind, operands, attrs);
    vals.push_back(Tensor{r.shape, r.bytes});
  }
  return {vals.back().shape, vals.back().bytes};
}

void expect_matches_unfused(const std::vector<Tensor>& ins, const std::vector<FusedOp>& program,
                            const std::string& what) {
  auto fused = run_fused(ins, program);
  auto unfused = run_unfused(ins, program);
  EXPECT_EQ(fused.shape, unfused.shape) << what;
  EXPECT_EQ(fused.bytes, unfused.bytes) << what;
  auto two = run_fused(ins, program, 2);
  EXPECT_EQ(fused.bytes, two.bytes) << what << " (2 threads)";
}

TEST(FusedElementwise, GeluOfAffineMatchesReference) {
  Tensor x = random_tensor(DType::F32, {37, 129}, -4, 4, 1);
  Tensor w = random_tensor(DType::F32, {129}, -2, 2, 2);
  Tensor b = from_values(DType::F32, {}, {0.25});
  const std::vector<FusedOp> prog = {op(OpKind::Mul, {0, 1}, DType::F32), op(OpKind::Add, {3, 2}, DType::F32),
                                     op(OpKind::Gelu, {4}, DType::F32)};
  expect_matches_unfused({x, w, b}, prog, "gelu(x*w+b)");
  auto r = run_fused({x, w, b}, prog);
  std::vector<double> ref(37 * 129);
  for (int64_t i = 0; i < 37 * 129; ++i) {
    const double v = double(float(float(get(DType::F32, x.bytes.data(), i) * get(DType::F32, w.bytes.data(), i % 129)) + 0.25f));
    ref[size_t(i)] = double(float(0.5 * v * std::erfc(-v / std::sqrt(2.0))));
  }
  expect_all_close(DType::F32, r.bytes, ref, float_tol(DType::F32), "gelu(x*w+b) vs reference");
}

TEST(FusedElementwise, CompareWhereWithScalars) {
  Tensor x = random_tensor(DType::F32, {64, 33}, -3, 3, 3);
  Tensor s = from_values(DType::F32, {}, {0.1});
  Tensor z = from_values(DType::F32, {1}, {0});
  const std::vector<FusedOp> prog = {op(OpKind::Greater, {0, 2}, DType::Bool), op(OpKind::Mul, {0, 1}, DType::F32),
                                     op(OpKind::Where, {3, 0, 4}, DType::F32)};
  expect_matches_unfused({x, s, z}, prog, "leaky via where");
  auto r = run_fused({x, s, z}, prog);
  for (int64_t i = 0; i < 64 * 33; ++i) {
    const float v = float(get(DType::F32, x.bytes.data(), i));
    EXPECT_EQ(float(get(DType::F32, r.bytes.data(), i)), v > 0 ? v : v * 0.1f);
  }
}

TEST(FusedElementwise, HalfPrecisionValuesInsideProgram) {
  Tensor x = random_tensor(DType::F32, {1000}, -6, 6, 4);
  const std::vector<FusedOp> prog = {op(OpKind::Cast, {0}, DType::F16), op(OpKind::Exp, {1}, DType::F16),
                                     op(OpKind::Tanh, {2}, DType::F16), op(OpKind::Cast, {3}, DType::BF16),
                                     op(OpKind::Sigmoid, {4}, DType::BF16), op(OpKind::Cast, {5}, DType::F32)};
  expect_matches_unfused({x}, prog, "f16/bf16 chain");
}

TEST(FusedElementwise, ScalarOnlyIntermediates) {
  Tensor x = random_tensor(DType::F32, {5, 700}, -1, 1, 5);
  Tensor s = from_values(DType::F32, {1}, {0.75});
  const std::vector<FusedOp> prog = {op(OpKind::Exp, {1}, DType::F32), op(OpKind::Neg, {2}, DType::F32),
                                     op(OpKind::Add, {0, 3}, DType::F32), op(OpKind::Mul, {3, 4}, DType::F32)};
  expect_matches_unfused({x, s}, prog, "scalar intermediates");
}

TEST(FusedElementwise, IntegerAndMixedDtypes) {
  Tensor a = random_tensor(DType::I32, {3, 50}, -1000, 1000, 6);
  Tensor b = random_tensor(DType::I32, {50}, -1000, 1000, 7);
  Tensor f = random_tensor(DType::F64, {3, 1}, -2, 2, 8);
  const std::vector<FusedOp> prog = {op(OpKind::Add, {0, 1}, DType::I32), op(OpKind::Mul, {3, 0}, DType::I32),
                                     op(OpKind::Cast, {4}, DType::F64), op(OpKind::Mul, {5, 2}, DType::F64),
                                     op(OpKind::Less, {6, 2}, DType::Bool), op(OpKind::Cast, {7}, DType::I64)};
  expect_matches_unfused({a, b, f}, prog, "int/f64 chain");
}

TEST(FusedElementwise, LongProgramReusesSlots) {
  Tensor x = random_tensor(DType::F32, {7, 523}, -2, 2, 9);
  Tensor k = from_values(DType::F32, {}, {0.9});
  std::vector<FusedOp> prog;
  int32_t t = 0;
  for (int i = 0; i < 12; ++i) {
    const int32_t base = 2 + int32_t(prog.size());
    prog.push_back(op(i % 2 ? OpKind::Tanh : OpKind::Sigmoid, {t}, DType::F32));
    prog.push_back(op(OpKind::Mul, {base, 1}, DType::F32));
    prog.push_back(op(OpKind::Add, {base + 1, 0}, DType::F32));
    t = base + 2;
  }
  expect_matches_unfused({x, k}, prog, "long chain");
}

TEST(FusedElementwise, ThreadsAndIsaAgreeOnLargeInputs) {
  Tensor x = random_tensor(DType::F32, {300, 1031}, -5, 5, 10);
  Tensor w = random_tensor(DType::F32, {1031}, -1, 1, 11);
  const std::vector<FusedOp> prog = {op(OpKind::Mul, {0, 1}, DType::F32), op(OpKind::Silu, {2}, DType::F32),
                                     op(OpKind::Erf, {3}, DType::F32), op(OpKind::Max, {4, 1}, DType::F32)};
  auto one = run_fused({x, w}, prog);
  EXPECT_EQ(one.bytes, run_fused({x, w}, prog, 2).bytes);
  EXPECT_EQ(one.bytes, run_fused({x, w}, prog, 4).bytes);
  auto sc = with_isa("scalar", [&] { return run_fused({x, w}, prog, 2); });
  std::vector<double> ref(size_t(300 * 1031));
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = get(DType::F32, sc.bytes.data(), int64_t(i));
  expect_all_close(DType::F32, one.bytes, ref, float_tol(DType::F32, 2), "native vs scalar ISA");
}

TEST(FusedElementwise, InvalidProgramIsRejected) {
  Node n;
  n.kind = OpKind::FusedElementwise;
  n.name = "bad_fused";
  n.attrs = FusedElementwiseAttrs{{op(OpKind::Exp, {5}, DType::F32)}};
  Shape s({4}, DType::F32);
  n.outputs = {s};
  const auto& reg = cpu::kernel_registry();
  EXPECT_FALSE(reg.supports(n, {&s}));
  EXPECT_THROW(reg.find(OpKind::FusedElementwise)->build(n, {&s}, n.outputs), Error);
}

}  // namespace
}  // namespace rlx::test::ew
