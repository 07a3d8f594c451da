// The verifier: accepts built graphs, rejects each kind of corruption by name.
#include "ir_test_util.h"

namespace rlx {
namespace {

Shape t(std::vector<int64_t> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }

struct Small {
  Graph g{"v"};
  Value x, y, r, s;
  Small() {
    x = g.input("x", t({2, 3}));
    y = g.param("y", t({3}));
    r = g.add(x, y);       // node 2: add_2
    s = g.relu(r);         // node 3: relu_3
    g.set_outputs({s}, {"out"});
  }
};

TEST(Verify, AcceptsBuiltGraphs) {
  Small m;
  EXPECT_NO_THROW(verify_graph(m.g));
  Graph empty;
  EXPECT_NO_THROW(verify_graph(empty));
}

TEST(Verify, WrongOutputType) {
  Small m;
  m.g.mutable_node(3).outputs[0] = t({2, 4});
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "graph 'v'", "node 'relu_3' (#3, relu)", "f32[2,4]",
                   "re-inference gives f32[2,3]");
}

TEST(Verify, NotTopological) {
  Small m;
  m.g.mutable_node(2).inputs[1] = Value{3, 0};
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "node 'add_2'", "node #3", "does not precede");
  Small self;
  self.g.mutable_node(3).inputs[0] = Value{3, 0};
  EXPECT_RLX_ERROR(verify_graph(self.g), Verify, "node 'relu_3'", "does not precede");
}

TEST(Verify, BadValueReference) {
  Small m;
  m.g.mutable_node(3).inputs[0] = Value{2, 1};
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "node 'relu_3'", "output 1", "does not exist");
}

TEST(Verify, Arity) {
  Small m;
  m.g.mutable_node(3).inputs.push_back(m.x);
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "node 'relu_3'", "has 2 inputs", "takes 1..1");
  Small absent;
  absent.g.mutable_node(2).inputs[0] = Value{};
  EXPECT_RLX_ERROR(verify_graph(absent.g), Verify, "node 'add_2'", "required input 0 is absent");
}

TEST(Verify, OutputCount) {
  Small m;
  m.g.mutable_node(3).outputs.push_back(t({2, 3}));
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "node 'relu_3'", "has 2 outputs");
  Graph g;
  auto x = g.input("x", t({4}));
  auto parts = g.split(x, 0, {1, 3});
  g.mutable_node(parts[0].node).outputs.pop_back();
  EXPECT_RLX_ERROR(verify_graph(g), Verify, "split", "has 1 outputs, re-inference gives 2");
}

TEST(Verify, AttrsMatchTheOp) {
  Small m;
  m.g.mutable_node(3).attrs = AxisAttrs{0};
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "node 'relu_3'", "wrong attribute struct");
  Graph g;
  auto x = g.input("x", t({2, 3}));
  auto sm = g.softmax(x, 1);
  g.mutable_node(sm.node).attr<AxisAttrs>().axis = 5;
  EXPECT_RLX_ERROR(verify_graph(g), Verify, "node 'softmax_1' (softmax)", "axis 5");
}

TEST(Verify, NamesAndLeaves) {
  Small m;
  m.g.mutable_node(3).name = "add_2";
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "node 'add_2' (#3, relu)", "used twice");
  Small e;
  e.g.mutable_node(3).name = "";
  EXPECT_RLX_ERROR(verify_graph(e.g), Verify, "empty node name");
  Small p;
  p.g.mutable_node(1).kind = OpKind::Input;
  p.g.mutable_node(1).attr<LeafAttrs>().name = "x";
  EXPECT_RLX_ERROR(verify_graph(p.g), Verify, "input name 'x' is used twice");
  Small c;
  c.g.mutable_node(1).attr<LeafAttrs>().init = Blob(std::vector<uint8_t>(5));
  EXPECT_RLX_ERROR(verify_graph(c.g), Verify, "node 'y' (param)", "5 bytes");
}

TEST(Verify, GraphOutputsAndSymbols) {
  Small m;
  m.g.set_outputs_raw({GraphOutput{Value{7, 0}, "o"}});
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "output 0 ('o') refers to no value");
  Small d;
  d.g.set_outputs_raw({GraphOutput{d.s, "o"}, GraphOutput{d.r, "o"}});
  EXPECT_RLX_ERROR(verify_graph(d.g), Verify, "output name 'o' is used twice");
  Small n;
  n.g.set_outputs_raw({GraphOutput{n.s, ""}});
  EXPECT_RLX_ERROR(verify_graph(n.g), Verify, "empty name");
  Small s;
  s.g.mutable_node(0).outputs[0] = Shape(std::vector<Dim>{Dim::symbol(4), 3}, DType::F32);
  EXPECT_RLX_ERROR(verify_graph(s.g), Verify, "node 'x'", "does not declare");
  Small dup;
  dup.g.set_symbols({"a", "a"});
  EXPECT_RLX_ERROR(verify_graph(dup.g), Verify, "symbol 'a' is declared twice");
  // The builder refuses an empty symbol name itself (the verifier would refuse every compile
  // of the graph after), leaving the graph as it was.
  Small e;
  EXPECT_RLX_ERROR(e.g.symbol(""), InvalidArgument, "a symbol needs a name");
  EXPECT_TRUE(e.g.symbols().empty());
  EXPECT_NO_THROW(verify_graph(e.g));
}

TEST(Verify, Bodies) {
  Small m;
  auto body = std::make_shared<Graph>("inner");
  auto bx = body->input("bx", t({2}));
  auto neg = body->neg(bx);
  body->set_outputs({neg});
  m.g.mutable_node(3).subgraphs.push_back(body);
  EXPECT_NO_THROW(verify_graph(m.g));
  body->mutable_node(1).outputs[0] = t({3});
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "in body 0 of node 'relu_3'", "graph 'inner'", "node 'neg_1'");
  m.g.mutable_node(3).subgraphs[0] = nullptr;
  EXPECT_RLX_ERROR(verify_graph(m.g), Verify, "body 0 is missing");
}

}  // namespace
}  // namespace rlx
