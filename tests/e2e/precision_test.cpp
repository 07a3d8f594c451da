// Precision policies end to end: F16 and BF16 compiles of an MLP and a transformer block
// stay within 1e-2 (relative to each output's scale) of the F32 compile, run compute on
// operands in the low type (in the low type, or in f32 between casts from and to it where
// the backend prefers its f32 kernels: the CPU does, BackendClaims::prefers_f32), keep
// reductions in f32, and run softmax and norms either in f32 or, where the backend claims
// them on low operands (CUDA does: its kernels widen to f32), on low operands with a low
// result.
#include "e2e_models.h"

namespace rlx::e2e {
namespace {

bool norm_or_softmax(OpKind k) {
  return k == OpKind::Softmax || k == OpKind::LogSoftmax || k == OpKind::LayerNorm || k == OpKind::RmsNorm;
}

bool kept_in_f32(OpKind k) {
  switch (k) {
    case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::ReduceProd:
      return true;
    default:
      return false;
  }
}

void check_policy(const Graph& g, const Feeds& in, const Feeds& params, Precision p, DType low) {
  CompiledGraph ref = compile_e2e(g, default_options());
  CompileOptions o = default_options();
  o.precision = p;
  CompiledGraph net = compile_e2e(g, o);
  set_params(ref, params);
  set_params(net, params);
  std::vector<T> want = run_net(ref, in), got = run_net(net, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype, want[i].dtype) << "outputs keep their declared types";
    const double d = max_rel_diff(got[i], want[i]);
    EXPECT_LE(d, 1e-2) << g.name() << " output " << i << " in " << dtype_name(low);
    EXPECT_GT(d, 0.0) << g.name() << " output " << i << ": identical to f32, was the policy applied?";
  }
  int low_compute = 0, kept = 0;
  const Graph& cg = net.graph();
  for (const Node& n : cg.nodes()) {
    if (n.kind == OpKind::MatMul || n.kind == OpKind::FusedMatMul || n.kind == OpKind::Attention) {
      const Node& src = cg.node(n.inputs[0].node);
      low_compute += n.outputs[0].dtype() == low || (src.kind == OpKind::Cast && cg.type(src.inputs[0]).dtype() == low);
    }
    if (norm_or_softmax(n.kind)) {
      ++kept;
      const DType t = n.outputs[0].dtype();
      EXPECT_TRUE(t == DType::F32 || t == low) << op_name(n.kind) << " '" << n.name << "'";
      for (Value v : n.inputs)
        if (v.valid()) {
          EXPECT_EQ(cg.type(v).dtype(), t) << op_name(n.kind) << " '" << n.name << "' mixes its operand types";
        }
      continue;
    }
    if (!kept_in_f32(n.kind)) continue;
    ++kept;
    EXPECT_EQ(n.outputs[0].dtype(), DType::F32) << op_name(n.kind) << " '" << n.name << "' left f32";
    for (Value v : n.inputs)
      if (v.valid() && is_float(cg.type(v).dtype())) {
        EXPECT_EQ(cg.type(v).dtype(), DType::F32) << op_name(n.kind) << " '" << n.name << "' reads a low input";
      }
  }
  EXPECT_GT(low_compute, 0) << "no matmul/attention runs on " << dtype_name(low) << " operands";
  EXPECT_GT(kept, 0) << "the graph should keep some softmax/norm/reduction";
}

Graph small_mlp() { return test_graphs::mlp(16, {64, 96, 48, 10}); }

TEST(Precision, MlpF16) {
  Graph g = small_mlp();
  check_policy(g, random_inputs(g, 1), random_params(g, 2), Precision::F16, DType::F16);
}

TEST(Precision, MlpBF16) {
  Graph g = small_mlp();
  check_policy(g, random_inputs(g, 1), random_params(g, 2), Precision::BF16, DType::BF16);
}

TEST(Precision, EncoderLayerF16) {
  Graph g = small_encoder(1);
  check_policy(g, random_inputs(g, 3), random_params(g, 4), Precision::F16, DType::F16);
}

TEST(Precision, EncoderLayerBF16) {
  Graph g = small_encoder(1);
  check_policy(g, random_inputs(g, 3), random_params(g, 4), Precision::BF16, DType::BF16);
}

TEST(Precision, DecoderBlockF16) {
  Graph g = decoder_block();
  check_policy(g, decoder_inputs(5), random_params(g, 6), Precision::F16, DType::F16);
}

TEST(Precision, DecoderBlockBF16) {
  Graph g = decoder_block();
  check_policy(g, decoder_inputs(5), random_params(g, 6), Precision::BF16, DType::BF16);
}

}  // namespace
}  // namespace rlx::e2e
