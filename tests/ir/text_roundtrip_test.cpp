// Text format: a graph holding every op kind prints, parses back equal and prints
// identically; golden output for a small graph; exact round trip of doubles/bytes.
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "ir/op_table.h"
#include "ir_test_util.h"

namespace rlx {
namespace {

Shape t(std::vector<int64_t> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }
Shape ts(std::vector<Dim> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }

FusedOp fop(OpKind k, std::vector<int32_t> args, DType type, double alpha = 0, double beta = 0) {
  FusedOp o;
  o.kind = k;
  o.args = std::move(args);
  o.type = type;
  o.alpha = alpha;
  o.beta = beta;
  return o;
}

Blob bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return Blob(std::move(b));
}

}  // namespace

namespace test {
Graph every_op_graph() {
  const double inf = std::numeric_limits<double>::infinity();
  Graph g("every op");
  Dim batch = g.sym("batch");
  Dim seq = g.sym("seq len");
  auto x = g.input("x", ts({batch, 4}));
  auto xs = g.input("xs", t({2, 4}));
  auto i = g.input("i", t({2, 4}, DType::I32));
  auto m = g.input("m", t({2, 4}, DType::Bool));
  auto idx = g.input("idx", t({3}, DType::I64));
  std::vector<float> wv(16);
  for (size_t k = 0; k < wv.size(); ++k) wv[k] = float(k) * 0.5f - 3.f;
  auto w = g.param("w", t({4, 4}), bytes_of(wv));
  auto c = g.constant_f32({4}, {1.f, -2.5f, 0.f, 3.f});
  std::vector<Value> outs;

  for (const auto& op : ir::all_ops()) {
    if (op.infer != &ir::infer_unary || !(op.traits & ir::kUnary)) continue;
    if (op.kind == OpKind::BitwiseNot) {
      outs.push_back(g.add1(op.kind, {i}));
      continue;
    }
    Attrs a = default_attrs(op.kind);
    if (auto* s = std::get_if<ScalarAttrs>(&a)) *s = ScalarAttrs{0.2, 0.5};
    if (op.kind == OpKind::Gelu) a = GeluAttrs{true};
    if (op.kind == OpKind::Clip) a = ClipAttrs{-inf, 0.5};
    outs.push_back(g.add1(op.kind, {xs}, a));
  }
  outs.push_back(g.add1(OpKind::IsNaN, {xs}));
  outs.push_back(g.add1(OpKind::IsInf, {xs}, IsInfAttrs{true, false}));
  outs.push_back(g.logical_not(m));
  outs.push_back(g.cast(xs, DType::F16));
  outs.push_back(g.bitcast(xs, DType::I32));
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min})
    outs.push_back(g.add1(k, {x, c}));
  outs.push_back(g.mod(x, c, true));
  for (OpKind k : {OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor}) outs.push_back(g.add1(k, {i, i}));
  for (OpKind k : {OpKind::And, OpKind::Or, OpKind::Xor}) outs.push_back(g.add1(k, {m, m}));
  for (OpKind k : {OpKind::Equal, OpKind::NotEqual, OpKind::Less, OpKind::LessEqual, OpKind::Greater,
                   OpKind::GreaterEqual})
    outs.push_back(g.add1(k, {xs, c}));
  outs.push_back(g.where(outs.back(), xs, g.scalar(0, DType::F32)));
  FusedElementwiseAttrs fe;
  fe.program = {fop(OpKind::Mul, {0, 1}, DType::F32), fop(OpKind::LeakyRelu, {2}, DType::F32, 0.1),
                fop(OpKind::Clip, {3}, DType::F32, -0.0, 6), fop(OpKind::Cast, {4}, DType::F16)};
  outs.push_back(g.add1(OpKind::FusedElementwise, {x, c}, fe, "fused \"quoted\"\tname"));

  outs.push_back(g.matmul(x, w));
  outs.push_back(g.fused_matmul(x, w, c, Activation::GeluTanh));
  outs.push_back(g.fused_matmul(xs, w, Value{}, Activation::LeakyRelu, 0.01));

  outs.push_back(g.reduce_sum(x, {1}));
  outs.push_back(g.reduce_mean(x, {-1}, false));
  outs.push_back(g.reduce_max(xs, {}));
  outs.push_back(g.reduce_min(xs, {0, 1}, false));
  outs.push_back(g.reduce_prod(x, {1}));
  outs.push_back(g.argmax(xs, 1, false, true));
  outs.push_back(g.argmin(xs, 0));
  auto [tv, ti] = g.topk(xs, 2, -1, false, false);
  outs.push_back(ti);

  outs.push_back(g.softmax(x, 1));
  outs.push_back(g.log_softmax(x));
  outs.push_back(g.add1(OpKind::LayerNorm, {x, Value{}, c}, NormAttrs{-1, 1e-6}));
  outs.push_back(g.rms_norm(x, c));

  outs.push_back(g.reshape(xs, {-1, 2}));
  outs.push_back(g.transpose(xs, {1, 0}));
  outs.push_back(g.slice(xs, {-1, 0}, {std::numeric_limits<int64_t>::min(), 3}, {1, 0}, {-2, 1}));
  outs.push_back(g.concat({xs, xs}, 0));
  auto parts = g.split(xs, 1, {1, 3});
  outs.push_back(g.add(parts[0], parts[1]));
  outs.push_back(g.gather(xs, idx, 1));
  outs.push_back(g.expand(c, {3, 4}));
  outs.push_back(g.pad(xs, {1, 0, 1, 2}, PadMode::Reflect, 0));
  outs.push_back(g.pad(xs, {0, 1, 0, 1}, PadMode::Constant, -1.5));
  outs.push_back(g.tile(xs, {2, 1}));

  auto img = g.input("img", t({1, 4, 6, 6}));
  auto cw = g.param("cw", t({8, 2, 3, 3}));
  auto cb = g.param("cb", t({8}));
  outs.push_back(g.conv2d(img, cw, cb, {2, 1}, {1, 1, 0, 0}, {1, 2}, 2));
  {
    FusedConvAttrs fa;
    fa.strides = {2, 1};
    fa.pads = {1, 1, 0, 0};
    fa.group = 2;
    fa.activation = Activation::LeakyRelu;
    fa.alpha = 0.5;
    Value c = g.conv2d(img, cw, cb, {2, 1}, {1, 1, 0, 0}, {1, 1}, 2);
    outs.push_back(g.fused_conv2d(img, cw, Value{}, c, fa));  // residual, no bias
  }
  {
    ConvAttrs qa;
    qa.strides = {1, 2};
    qa.pads = {1, 0, 1, 1};
    qa.group = 2;
    outs.push_back(g.add1(OpKind::ConvInteger,
                          {g.input("ciimg", Shape({1, 4, 6, 6}, DType::U8)), g.param("ciw", Shape({8, 2, 3, 3}, DType::I8)),
                           g.input("cixz", Shape(std::vector<int64_t>{}, DType::U8)),
                           g.param("ciwz", Shape({8}, DType::I8))},
                          qa));
  }
  outs.push_back(g.max_pool2d(img, {3, 3}, {2, 2}, {1, 1, 1, 1}));
  PoolAttrs pa;
  pa.kernel = {2, 2};
  pa.strides = {2, 2};
  pa.ceil_mode = true;
  pa.count_include_pad = true;
  outs.push_back(g.add1(OpKind::AvgPool2d, {img}, pa));

  auto q = g.input("q", ts({1, 4, seq, 8}));
  auto kv = g.input("kv", ts({1, 2, seq, 8}));
  auto mask = g.input("mask", ts({seq, seq}));
  outs.push_back(g.attention(q, kv, kv, mask, true, 0.125));
  outs.push_back(g.attention(q, kv, kv));
  auto cs = g.input("cos", ts({seq, 2}));
  outs.push_back(g.rotary(q, cs, cs, true));
  auto kc = g.input("kcache", t({1, 2, 5, 8}, DType::F16));
  auto kn = g.input("knew", t({1, 2, 1, 8}, DType::F16));
  auto q1 = g.input("q1", t({1, 4, 1, 8}));
  auto past = g.input("past", t({1}, DType::I64));
  outs.push_back(g.kv_attention(q1, kc, kc, kn, kn, past, 0.25));
  outs.push_back(g.cache_write(kc, kn, past));

  auto qx = g.input("qx", t({3, 64}));
  auto qw = g.param("qw", t({5, 68}, DType::U8));  // 64 q8_0 elements per row
  outs.push_back(g.qmatmul(qx, qw, 8, 64));
  auto qe = g.param("qe", t({2, 5, 68}, DType::U8));
  auto ids = g.input("ids", t({3, 2}, DType::I64));
  outs.push_back(g.qmatmul_id(qx, qe, ids, 8, 64));

  auto sig = g.input("sig", t({3, 8, 2}));
  outs.push_back(g.add1(OpKind::Dft, {sig}));
  outs.push_back(g.add1(OpKind::Idft, {g.input("rsig", t({8, 1}))}));

  // A node carrying a body (the shape of future control-flow ops).
  auto body = std::make_shared<Graph>("body");
  auto bx = body->input("bx", t({2}));
  body->set_outputs({body->neg(bx)});
  auto holder = g.identity(xs);
  g.mutable_node(holder.node).subgraphs.push_back(body);
  outs.push_back(holder);

  std::vector<std::string> names(outs.size());
  names[0] = "first output";
  for (size_t k = 1; k < outs.size(); ++k) {
    const Node& n = g.node(outs[k].node);
    names[k] = n.name;
    if (n.outputs.size() != 1) names[k].append(":").append(std::to_string(outs[k].out));
  }
  outs.push_back(tv);
  names.push_back("topk values");
  g.set_outputs(outs, names);
  return g;
}
}  // namespace test

namespace {
using test::every_op_graph;

TEST(TextRoundTrip, EveryOpKind) {
  Graph g = every_op_graph();
  std::set<OpKind> present;
  for (const Node& n : g.nodes()) present.insert(n.kind);
  for (const auto& op : ir::all_ops())
    EXPECT_TRUE(present.count(op.kind)) << "op " << op.name << " is missing from the round-trip graph";
  ASSERT_NO_THROW(verify_graph(g));
  std::string text = print_graph(g);
  Graph back = parse_graph(text, "roundtrip");
  EXPECT_TRUE(graphs_equal(g, back)) << text << "\n---\n" << print_graph(back);
  EXPECT_EQ(print_graph(back), text);
  EXPECT_NO_THROW(verify_graph(back));
  // The comparison is able to fail.
  back.mutable_node(back.nodes().size() - 1).name = "renamed";
  EXPECT_FALSE(graphs_equal(g, back));
}

TEST(TextRoundTrip, GoldenSmallGraph) {
  Graph g("hello");
  auto x = g.input("x", t({1, 4}));
  auto w = g.param("w", t({4, 2}));
  auto y = g.matmul(x, w);
  auto parts = g.split(y, 1, {1, 1});
  auto s = g.add1(OpKind::Add, {parts[0], parts[1]}, NoAttrs{}, "sum");
  g.set_outputs({y, s}, {"y", "sum"});
  const char* expected =
      "graph hello {\n"
      "  %0 = input \"x\" : f32[1,4]\n"
      "  %1 = param \"w\" : f32[4,2]\n"
      "  %2 = matmul(%0, %1) : f32[1,2]\n"
      "  %3:2 = split(%2) {axis=1, sizes=[1,1]} : f32[1,1], f32[1,1]\n"
      "  %4 = add(%3.0, %3.1) name=\"sum\" : f32[1,1]\n"
      "  outputs(%2 as \"y\", %4)\n"
      "}\n";
  EXPECT_EQ(print_graph(g), expected);
  EXPECT_TRUE(graphs_equal(parse_graph(expected), g));
}

TEST(TextRoundTrip, DoublesAndBytesAreExact) {
  const double vals[] = {0.1,   1.0 / 3,  -0.0,  5e-324, 1.7976931348623157e308, -1e-300,
                         123.0, 1e21,     -2.5,  std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), std::nan("")};
  for (double v : vals) {
    Graph g;
    auto x = g.input("x", t({2}));
    g.set_outputs({g.pad(x, {1, 1}, PadMode::Constant, v)});
    std::string text = print_graph(g);
    Graph back = parse_graph(text);
    const auto& a = back.node(1).attr<PadAttrs>();
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(a.value)) << text;
    } else {
      EXPECT_EQ(a.value, v) << text;
      EXPECT_EQ(std::signbit(a.value), std::signbit(v)) << text;
    }
    EXPECT_TRUE(graphs_equal(g, back)) << text;
  }
  std::vector<uint8_t> all(256);
  for (int k = 0; k < 256; ++k) all[size_t(k)] = uint8_t(k);
  Graph g;
  g.set_outputs({g.constant(t({64}, DType::F32), Blob(all)), g.constant(t({0}), Blob())});
  Graph back = parse_graph(print_graph(g));
  EXPECT_TRUE(graphs_equal(g, back));
  EXPECT_EQ(back.node(0).attr<ConstantAttrs>().value, Blob(all));
}

TEST(TextRoundTrip, HandWrittenTextInfersTypes) {
  const char* text = R"(# a hand-written graph: labels are names, types may be left out
graph "my net" {
  symbols(n)
  %x = input "x" : f32[n, 3]
  %b = constant {value=0x0000803f0000003f00000000} : f32[3]
  %y = add(%x, %b)
  %z = reduce_sum(%y) {keepdims=false, axes=[-1]} name="total"
  %p:2 = topk(%y) {k=2}
  outputs(%z as "z", %p.1 as "idx")
}
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(g.name(), "my net");
  ASSERT_EQ(g.nodes().size(), 5u);
  Dim n = Dim::symbol(0);
  EXPECT_EQ(g.nodes()[2].outputs[0], ts({n, 3}));
  EXPECT_EQ(g.nodes()[2].name, "add_2");
  EXPECT_EQ(g.nodes()[3].name, "total");
  EXPECT_EQ(g.nodes()[3].outputs[0], ts({n}));
  EXPECT_EQ(g.nodes()[4].outputs[1], ts({n, 2}, DType::I64));
  EXPECT_EQ(g.outputs()[1].value, (Value{4, 1}));
  EXPECT_EQ(g.outputs()[1].name, "idx");
  EXPECT_NO_THROW(verify_graph(g));
  EXPECT_TRUE(graphs_equal(parse_graph(print_graph(g)), g));
}

}  // namespace
}  // namespace rlx
