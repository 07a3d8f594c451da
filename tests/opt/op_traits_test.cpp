// Every trait of the op table (ir/op_table.h) against the code it describes: the table is
// the only per-op list, so a trait set on the wrong op, or code that drifted from the
// trait it reads, fails here.
#include <gtest/gtest.h>

#include <set>

#include "ir/op_table.h"
#include "opt/decompose.h"
#include "opt/memory_plan.h"
#include "opt/passes.h"

namespace rlx::opt::test {
namespace {

using ir::has_trait;

// Output dtype of `kind` on small inputs of the first dtype family it accepts
// (nullopt when it accepts none of them: e.g. bitwise ops on f32 but then i32 works).
std::optional<DType> infer_dtype(OpKind kind) {
  const int arity = ir::elementwise_arity(kind);
  for (DType t : {DType::F32, DType::I32, DType::Bool}) {
    Graph g;
    std::vector<Value> in;
    for (int i = 0; i < arity; ++i)
      in.push_back(g.input("x" + std::to_string(i), Shape({2, 3}, kind == OpKind::Where && i == 0 ? DType::Bool : t)));
    try {
      return g.type(g.add1(kind, in, default_attrs(kind))).dtype();
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

TEST(OpTraits, ArityTraits) {
  for (const ir::OpInfo& op : ir::all_ops()) {
    SCOPED_TRACE(std::string(op.name));
    if (op.traits & ir::kLeaf) {
      EXPECT_TRUE(op.min_inputs == 0 && op.max_inputs == 0);
    }
    if (op.traits & ir::kUnary) {
      EXPECT_TRUE(op.traits & ir::kElementwise);
      EXPECT_EQ(ir::elementwise_arity(op.kind), 1);
    }
    if (op.traits & ir::kBinary) {
      EXPECT_TRUE(op.traits & ir::kElementwise);
      EXPECT_EQ(ir::elementwise_arity(op.kind), 2);
    }
    if (op.traits & ir::kCommutative) {
      EXPECT_TRUE(op.traits & ir::kBinary);
    }
    if (op.traits & ir::kFusable) {
      EXPECT_TRUE(op.traits & ir::kElementwise);
    }
    if (!(op.traits & ir::kElementwise)) {
      EXPECT_EQ(ir::elementwise_arity(op.kind), -1);
    }
  }
}

TEST(OpTraits, BoolResultAndFloatOnlyMatchInference) {
  int checked = 0;
  for (const ir::OpInfo& op : ir::all_ops()) {
    if (ir::elementwise_arity(op.kind) < 0 || op.kind == OpKind::Cast) continue;
    SCOPED_TRACE(std::string(op.name));
    std::optional<DType> out = infer_dtype(op.kind);
    ASSERT_TRUE(out.has_value()) << "no dtype family accepted";
    EXPECT_EQ(*out == DType::Bool, bool(op.traits & ir::kBoolResult)) << dtype_name(*out);
    if (op.traits & ir::kFloatOnly) {
      Graph g;
      std::vector<Value> in;
      for (int i = 0; i < ir::elementwise_arity(op.kind); ++i) in.push_back(g.input("x" + std::to_string(i), Shape({2}, DType::I32)));
      EXPECT_THROW(g.add1(op.kind, in, default_attrs(op.kind)), Error);
    }
    EXPECT_EQ(ir::is_float_unary(op.kind),
              (op.traits & ir::kUnary) && (op.traits & ir::kFloatOnly) && *out != DType::Bool);
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

TEST(OpTraits, ViewsAreViews) {
  Graph g;
  Value x = g.input("x", Shape({2, 3}, DType::F32));
  Value id = g.identity(x), r = g.reshape(x, {3, 2}), bc = g.bitcast(x, DType::I32);
  g.set_outputs({id, r, bc});
  for (Value v : {id, r, bc}) {
    ASSERT_TRUE(has_trait(g.node(v.node).kind, ir::kView));
    EXPECT_TRUE(view_of(g, v.node, 0).has_value()) << op_name(g.node(v.node).kind);
  }
  int views = 0;
  for (const ir::OpInfo& op : ir::all_ops()) views += bool(op.traits & ir::kView);
  EXPECT_EQ(views, 3);  // identity, reshape and bitcast: the three tested above
}

// One graph per op with kHasDecomposition, lowered by legalize against a backend that
// claims every op but that one: the decomposition must exist. Ops without the trait
// must be refused the same way.
Graph graph_for(OpKind kind) {
  Graph g;
  Value x = g.input("x", Shape({2, 4, 8, 16}, DType::F32));
  Value out;
  switch (kind) {
    case OpKind::LayerNorm: out = g.layer_norm(x, g.constant_f32({16}, std::vector<float>(16, 1)), {}); break;
    case OpKind::RmsNorm: out = g.rms_norm(x, g.constant_f32({16}, std::vector<float>(16, 1))); break;
    case OpKind::Softmax: out = g.softmax(x); break;
    case OpKind::LogSoftmax: out = g.log_softmax(x); break;
    case OpKind::FusedMatMul:
      out = g.fused_matmul(x, g.input("w", Shape({16, 8}, DType::F32)), {}, Activation::Relu);
      break;
    case OpKind::Attention: out = g.attention(x, x, x, {}, true); break;
    case OpKind::Rotary:
      out = g.rotary(x, g.input("cos", Shape({8, 8}, DType::F32)), g.input("sin", Shape({8, 8}, DType::F32)));
      break;
    case OpKind::FusedElementwise: {
      FusedElementwiseAttrs a;
      a.program.push_back(FusedOp{OpKind::Exp, {0}, 0, 0, DType::F32});
      out = g.add1(OpKind::FusedElementwise, {x}, a);
      break;
    }
    case OpKind::FusedConv2d: {
      FusedConvAttrs a;
      a.pads = {1, 1, 1, 1};
      a.activation = Activation::Relu;
      Value w = g.constant_f32({4, 4, 3, 3}, std::vector<float>(144, 0.25f));
      out = g.fused_conv2d(x, w, g.constant_f32({4}, std::vector<float>(4, 1)), x, a);
      break;
    }
    case OpKind::Conv2d: {  // channels last: x as [N,H,W,C] = [2,4,8,16]
      ConvAttrs a;
      a.pads = {1, 1, 1, 1};
      a.nhwc = true;
      out = g.add1(kind, {x, g.constant_f32({4, 3, 3, 16}, std::vector<float>(576, 0.25f))}, a);
      break;
    }
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: {
      PoolAttrs a;
      a.kernel = a.strides = {2, 2};
      a.nhwc = true;
      out = g.add1(kind, {x}, a);
      break;
    }
    case OpKind::ConvInteger:
      out = g.add1(kind,
                   {g.input("xi", Shape({1, 4, 8, 8}, DType::U8)), g.input("wi", Shape({2, 4, 3, 3}, DType::I8)),
                    g.input("xz", Shape(std::vector<int64_t>{}, DType::U8)),
                    g.input("wz", Shape(std::vector<int64_t>{}, DType::I8))},
                   ConvAttrs{});
      break;
    case OpKind::Dft:
    case OpKind::Idft: out = g.add1(kind, {g.input("sig", Shape({2, 8, 2}, DType::F32))}); break;
    default: out = g.add1(kind, {x}, default_attrs(kind)); break;
  }
  g.set_outputs({out});
  return g;
}

TEST(OpTraits, DecompositionsExistExactlyForTheTrait) {
  int decomposed = 0;
  for (const ir::OpInfo& op : ir::all_ops()) {
    const bool trait = op.traits & ir::kHasDecomposition;
    EXPECT_EQ(has_decomposition(op.kind), trait);
    if (!trait && !(op.traits & ir::kUnary)) continue;  // other ops need graphs of their own to build
    SCOPED_TRACE(std::string(op.name));
    Graph g;
    try {
      g = graph_for(op.kind);
    } catch (const Error& e) {
      ASSERT_FALSE(trait) << e.what();  // e.g. bitwise_not takes no f32: nothing to lower
      continue;
    }
    const OpKind k = op.kind;
    // A backend without op k (for the channels-last ops: without their nhwc form, which is
    // what decomposes into the NCHW one).
    BackendClaims all_but{"fake", [k](const Node& n, const std::vector<const Shape*>&) {
                            if (n.kind != k) return true;
                            if (k == OpKind::Conv2d) return !n.attr<ConvAttrs>().nhwc;
                            if (k == OpKind::MaxPool2d || k == OpKind::AvgPool2d) return !n.attr<PoolAttrs>().nhwc;
                            return false;
                          }};
    try {
      legalize(g, all_but, nullptr);
      EXPECT_TRUE(trait) << "legalize lowered an op without kHasDecomposition";
      ++decomposed;
    } catch (const Error& e) {
      EXPECT_FALSE(trait) << e.what();
      EXPECT_EQ(e.category(), ErrorCategory::Unsupported) << e.what();
    }
  }
  int with_trait = 0;
  for (const ir::OpInfo& op : ir::all_ops()) with_trait += bool(op.traits & ir::kHasDecomposition);
  EXPECT_EQ(decomposed, with_trait);
}

}  // namespace
}  // namespace rlx::opt::test
