// Text parser errors: category Parse, "source:line:col: message".
#include <cstdio>
#include <fstream>
#include <random>

#include "ir_test_util.h"

namespace rlx {
namespace {

TEST(TextParseError, PositionsAndMessages) {
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = foo()\n}\n", "a.rlx"), Parse, "a.rlx:2:8: unknown op 'foo'");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = relu(%1)\n}\n"), Parse, "<text>:2:13:", "'%1' is not defined");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x\" : f32[2]\n  %0 = relu(%0)\n}"), Parse, "<text>:3:3:",
                   "defined twice");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x\" : f32[2]\n  %1 = relu(%0) : f32[3]\n}"), Parse,
                   "<text>:3:19:", "printed type f32[3] does not match the inferred f32[2]");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x : f32[2]\n}"), Parse, "<text>:2:14:", "unterminated string");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x\" : f32[2] @\n}"), Parse, "<text>:2:27:",
                   "unexpected character '@'");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x\" : f99[2]\n}"), Parse, "<text>:2:20:",
                   "unknown dtype 'f99'");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x\" : f32[-2]\n}"), Parse, "negative dim");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"x\"\n}"), Parse, "<text>:3:1:", "exactly one type");
}

TEST(TextParseError, Attributes) {
  const char* head = "graph g {\n  %0 = input \"x\" : f32[2,3]\n";
  auto with = [&](const char* line) { return std::string(head) + line + "\n}\n"; };
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = softmax(%0) {axes=1}")), Parse, "<text>:3:21:",
                   "softmax has no attribute 'axes'");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = softmax(%0) {axis=1, axis=0}")), Parse, "<text>:3:29:", "given twice");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = softmax(%0) {axis=1.5}")), Parse, "expected an integer");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = softmax(%0) {axis=99999999999999999999}")), Parse, "out of range");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = reduce_sum(%0) {keepdims=yes}")), Parse, "true or false");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = pad(%0) {pads=[0,0,0,0], mode=wrap}")), Parse, "unknown pad mode 'wrap'");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = input \"y\" {name=\"z\"} : f32[1]")), Parse, "no attribute 'name'");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = constant {value=0x123} : u8[2]")), Parse, "even number");
  EXPECT_RLX_ERROR(parse_graph(with("  %1 = fused_elementwise(%0) {program=[relu(0){gamma=1}:f32]}")), Parse,
                   "only alpha and beta");
}

TEST(TextParseError, InferenceFailuresBecomeParseErrors) {
  const char* text =
      "graph g {\n"
      "  %0 = input \"a\" : f32[2,3]\n"
      "  %1 = input \"b\" : f32[4]\n"
      "  %2 = add(%0, %1)\n"
      "}\n";
  EXPECT_RLX_ERROR(parse_graph(text, "m.rlx"), Parse, "m.rlx:4:8:", "node 'add_2' (add)", "broadcast");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  %1:3 = split(%0) {sizes=[2,2]}\n}"), Parse,
                   "<text>:3:3:", "declares 3 outputs but the op has 2");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  %1 = relu(%0.1)\n}"), Parse, "has no output 1");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  %1 = add(%0)\n}"), Parse, "expects 2");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  %1 = add(_, %0)\n}"), Parse,
                   "input 0 is required");
}

TEST(TextParseError, StructureAndNames) {
  EXPECT_RLX_ERROR(parse_graph("graph g {\n}\nextra"), Parse, "<text>:3:1:", "unexpected text after the graph");
  EXPECT_RLX_ERROR(parse_graph("graf g {}"), Parse, "<text>:1:1:", "expected 'graph'");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n"), Parse, "end of input");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  %1 = relu(%0) name=\"b\"\n"
                               "  %2 = relu(%0) name=\"b\"\n}"),
                   Parse, "<text>:4:17:", "node name \"b\" is used twice");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  %1 = relu(%0) name=\"a\"\n}"), Parse,
                   "<text>:3:17:", "node name \"a\" is used twice");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  outputs(%0, %0)\n}"), Parse,
                   "output name \"a\" is used twice");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  outputs()\n  outputs()\n}"), Parse, "given twice");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  outputs()\n  %0 = input \"a\" : f32[4]\n}"), Parse, "before outputs");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  symbols(a, a)\n}"), Parse, "<text>:2:14:", "declared twice");
  // Names the verifier requires are refused where they stand (fuzz/regressions/text/symbol_empty_name.rlx).
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  symbols(batch, \"\")\n}"), Parse, "<text>:2:18:", "empty symbol name");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[\"\"]\n}"), Parse, "<text>:2:24:",
                   "empty symbol name");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4]\n  outputs(%0 as \"\")\n}"), Parse,
                   "<text>:3:11:", "empty output name");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\\q\" : f32[4]\n}"), Parse, "unknown escape");
  EXPECT_RLX_ERROR(parse_graph("graph g {\n  %0 = input \"a\" : f32[4] 1e\n}"), Parse, "malformed exponent");
}

TEST(TextParseError, NestingIsBounded) {
  auto nested = [](int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += "graph g { %0 = input \"x\" : f32[1]\n";
    s += "graph leaf { }";
    for (int i = 0; i < depth; ++i) s += "}";
    return s;
  };
  Graph ok = parse_graph(nested(10));
  EXPECT_EQ(ok.node(0).subgraphs.size(), 1u);
  EXPECT_TRUE(graphs_equal(parse_graph(print_graph(ok)), ok));
  EXPECT_RLX_ERROR(parse_graph(nested(100)), Parse, "nested more than 64");
}

TEST(TextParseError, FileLoading) {
  EXPECT_RLX_ERROR(load_graph_file("/nonexistent/dir/g.rlx"), Io, "/nonexistent/dir/g.rlx");
  std::string path = std::string(RLX_BINARY_DIR) + "/ir_parse_error_test.rlx";
  {
    std::ofstream f(path);
    f << "graph g {\n  %0 = input \"x\" : f32[2]\n  %1 = nope(%0)\n}\n";
  }
  EXPECT_RLX_ERROR(load_graph_file(path), Parse, path + ":3:8: unknown op 'nope'");
  {
    std::ofstream f(path);
    f << "graph g {\n  %0 = input \"x\" : f32[2]\n  %1 = relu(%0)\n  outputs(%1 as \"y\")\n}\n";
  }
  Graph g = load_graph_file(path);
  EXPECT_EQ(g.outputs().at(0).name, "y");
  std::remove(path.c_str());
}

// Random edits of a valid text: the parser either accepts (and then the result
// round-trips exactly) or throws rlx::Error; nothing else, never a crash.
TEST(TextParseError, MutatedTextNeverCrashes) {
  const std::string base = print_graph(test::every_op_graph());
  const std::string pieces[] = {"%",   "%1",  ".",  ",",    "(",  ")",  "{",     "}",   "[",  "]",   "\"",  "_",
                                "=",   ":",   "-",  "0x",   "0x1", "1e",  "inf",  "nan", "9223372036854775807",
                                "-1", "#",    "\n", "graph g {", "f32[", "axis=", "\\", "outputs(", "name="};
  std::mt19937 rng(11);
  int accepted = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string text = base;
    int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (text.size() + 1);
      switch (rng() % 4) {
        case 0: text.erase(pos, 1 + rng() % 8); break;
        case 1: text.insert(pos, pieces[rng() % std::size(pieces)]); break;
        case 2: if (pos < text.size()) text[pos] = char(rng() % 128); break;
        default: text.resize(pos); break;
      }
    }
    try {
      Graph g = parse_graph(text, "fuzz");
      ++accepted;
      std::string again = print_graph(g);
      Graph back = parse_graph(again, "fuzz-reprint");
      ASSERT_TRUE(graphs_equal(g, back)) << "mutated text:\n" << text;
      ASSERT_EQ(print_graph(back), again);
    } catch (const Error& e) {
      ASSERT_EQ(e.category(), ErrorCategory::Parse) << e.what();
      ASSERT_EQ(std::string(e.what()).rfind("fuzz:", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(accepted, 0);  // some edits (e.g. inside names or comments) stay valid
}

}  // namespace
}  // namespace rlx
