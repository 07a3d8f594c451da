// constant-fold: golden before/after with a small reference evaluator written here
// (f32 add/mul/neg/expand on same-shape or scalar operands).
#include <cstring>

#include "opt/passes.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

std::vector<float> floats(const Blob& b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

Blob blob(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return Blob(std::move(b));
}

struct RefEval {
  int calls = 0;
  ConstEvaluator fn() {
    return [this](const Node& n, const std::vector<Shape>& types, const std::vector<Blob>& vals) {
      ++calls;
      auto at = [](const std::vector<float>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
      size_t count = size_t(n.outputs[0].numel());
      std::vector<float> out(count);
      switch (n.kind) {
        case OpKind::Add:
        case OpKind::Mul: {
          auto a = floats(vals[0]), b = floats(vals[1]);
          for (size_t i = 0; i < count; ++i)
            out[i] = n.kind == OpKind::Add ? at(a, i) + at(b, i) : at(a, i) * at(b, i);
          break;
        }
        case OpKind::Neg: {
          auto a = floats(vals[0]);
          for (size_t i = 0; i < count; ++i) out[i] = -a[i];
          break;
        }
        case OpKind::Expand: {
          auto a = floats(vals[0]);
          for (size_t i = 0; i < count; ++i) out[i] = a[0];
          break;
        }
        default:
          fail(ErrorCategory::Unsupported, "test evaluator: no ", op_name(n.kind));
      }
      (void)types;
      return std::vector<Blob>{blob(out)};
    };
  }
};

TEST(ConstantFold, FoldsChainsOfConstantsOnly) {
  Graph g = parse(R"(
graph main {
  %0 = input "x" : f32[2]
  %1 = constant {value=)" + hex_f32({1, 2}) + R"(} : f32[2]
  %2 = constant {value=)" + hex_f32({3}) + R"(} : f32[]
  %3 = add(%1, %2) name="c_sum" : f32[2]
  %4 = neg(%3) : f32[2]
  %5 = mul(%0, %4) name="scaled" : f32[2]
  outputs(%5)
}
)");
  RefEval ev;
  expect_graph(constant_fold(g, ev.fn()), R"(
graph main {
  %0 = input "x" : f32[2]
  %1 = constant {value=)" + hex_f32({-4, -5}) + R"(} : f32[2]
  %2 = mul(%0, %1) name="scaled" : f32[2]
  outputs(%2)
}
)");
  EXPECT_EQ(ev.calls, 2);
}

TEST(ConstantFold, UnsupportedByEvaluatorStays) {
  const char* text = R"(
graph main {
  %0 = constant {value=0x0000803f} : f32[]
  %1 = exp(%0) name="e" : f32[]
  outputs(%1)
}
)";
  RefEval ev;
  expect_graph(constant_fold(parse(text), ev.fn()), text);
  EXPECT_EQ(ev.calls, 1);
}

TEST(ConstantFold, SkipsResultsOver16MiB) {
  // 16 MiB + 4 bytes of f32: too large to fold; 16 MiB exactly is folded.
  Graph g = parse(R"(
graph main {
  %0 = constant {value=0x0000803f} : f32[]
  %1 = expand(%0) {shape=[4194305]} name="big" : f32[4194305]
  %2 = expand(%0) {shape=[4194304]} name="limit" : f32[4194304]
  outputs(%1, %2)
}
)");
  RefEval ev;
  Graph out = constant_fold(g, ev.fn());
  EXPECT_EQ(ev.calls, 1);
  ASSERT_EQ(out.nodes().size(), 3u);
  EXPECT_EQ(out.node(out.outputs()[0].value.node).kind, OpKind::Expand);
  EXPECT_EQ(out.node(out.outputs()[1].value.node).kind, OpKind::Constant);
  EXPECT_EQ(out.node(out.outputs()[1].value.node).name, "limit");
  EXPECT_EQ(out.outputs()[1].name, "limit");
}

TEST(ConstantFold, FoldsLargeResultsUpToTwiceTheirInputs) {
  // A 16 MiB + 4 byte constant negated and doubled: results up to twice their input are
  // folded (a weight's Transpose, its Cast from f16 to f32); tripled, it is not.
  const int64_t n = 4194305;
  Graph g;
  Value c = g.constant(Shape({n}, DType::F32), blob(std::vector<float>(size_t(n), 2.0f)), "w");
  g.set_outputs({g.neg(c), g.expand(c, {2, n}), g.expand(c, {3, n})}, {"negw", "twice", "grow"});
  RefEval ev;
  Graph out = constant_fold(g, ev.fn());
  EXPECT_EQ(ev.calls, 2);
  const Node& folded = out.node(out.outputs()[0].value.node);
  ASSERT_EQ(folded.kind, OpKind::Constant);
  auto v = floats(folded.attr<ConstantAttrs>().value);
  ASSERT_EQ(v.size(), size_t(n));
  EXPECT_EQ(v.front(), -2.0f);
  EXPECT_EQ(v.back(), -2.0f);
  EXPECT_EQ(out.node(out.outputs()[1].value.node).kind, OpKind::Constant);
  EXPECT_EQ(out.node(out.outputs()[2].value.node).kind, OpKind::Expand);
}

TEST(ConstantFold, NoEvaluatorIsANoOp) {
  const char* text = R"(
graph main {
  %0 = constant {value=0x0000803f} : f32[]
  %1 = neg(%0) : f32[]
  outputs(%1)
}
)";
  expect_graph(constant_fold(parse(text), ConstEvaluator{}), text);
}

TEST(ConstantFold, WrongSizeFromEvaluatorIsAnInternalError) {
  Graph g = parse(R"(
graph main {
  %0 = constant {value=0x0000803f} : f32[]
  %1 = neg(%0) name="n" : f32[]
  outputs(%1)
}
)");
  ConstEvaluator bad = [](const Node&, const std::vector<Shape>&, const std::vector<Blob>&) {
    return std::vector<Blob>{Blob(std::vector<uint8_t>(8))};
  };
  try {
    constant_fold(g, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Internal);
    EXPECT_NE(std::string(e.what()).find("'n'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlx::opt::test
