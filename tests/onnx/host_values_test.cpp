// Strings, sequences and optionals: models whose nodes read or make them run those nodes
// on the host between compiled segments (OnnxRunner::run_values). Each test compares with
// the same computation written here. The numbers are small integers and halves, so every
// f32 result (sums of at most 8 of them, doublings, +1) is exact and compares exactly.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx_test_util.h"
#include "rlx/onnx.h"

namespace rlx::onnx {
namespace {

using namespace test;

void add_typed_value(::onnx::ValueInfoProto* vi, const std::string& name, int kind_seq, int elem) {
  vi->set_name(name);
  auto* t = vi->mutable_type();
  if (kind_seq) t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem);
  else t->mutable_tensor_type()->set_elem_type(elem);
}

void set_strings_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRINGS);
  for (const auto& s : v) a->add_strings(s);
}

OnnxValue f32_value(std::vector<int64_t> dims, const std::vector<float>& v) {
  return OnnxValue::of(TypedTensor{DType::F32, std::move(dims), f32_bytes(v)});
}

int64_t i64_of(const OnnxValue& v) {
  int64_t x = 0;
  std::memcpy(&x, v.tensor.bytes.data(), 8);
  return x;
}

// Relu (compiled) -> SplitToSequence into 2-row chunks -> a Loop that reads chunk i, doubles
// it, inserts it at the front of a carried sequence and scans its sum -> ConcatFromSequence ->
// + 1 (compiled) ; SequenceLength of the result.
::onnx::ModelProto sequence_loop_model() {
  auto m = make_model(17);
  add_input(m, "x", 1, {6, 4});
  add_i64_initializer(m, "two_rows", {}, {2});
  add_i64_initializer(m, "trips", {}, {3});
  add_f32_initializer(m, "one", {}, {1.0f});
  auto* cond = m.mutable_graph()->add_initializer();
  cond->set_name("go");
  cond->set_data_type(9);
  cond->add_int32_data(1);
  add_node(m, "Relu", {"x"}, {"r"});
  add_node(m, "SplitToSequence", {"r", "two_rows"}, {"chunks"});
  set_int_attr(add_node(m, "SequenceEmpty", {}, {"empty"}), "dtype", 1);
  auto* loop = add_node(m, "Loop", {"trips", "go", "empty"}, {"acc", "sums"});
  auto* body = add_graph_attr(loop, "body", {"i", "c", "acc_in"}, {"c_out", "acc_out", "sum"});
  add_node(body, "Identity", {"c"}, {"c_out"});
  add_node(body, "SequenceAt", {"chunks", "i"}, {"part"});
  add_node(body, "Add", {"part", "part"}, {"doubled"});
  add_i64_initializer(m, "front", {}, {0});
  add_node(body, "SequenceInsert", {"acc_in", "doubled", "front"}, {"acc_out"});
  set_int_attr(add_node(body, "ReduceSum", {"part"}, {"sum"}), "keepdims", 0);
  set_int_attr(add_node(m, "ConcatFromSequence", {"acc"}, {"cat"}), "axis", 0);
  add_node(m, "Add", {"cat", "one"}, {"y"});
  add_node(m, "SequenceLength", {"acc"}, {"n"});
  add_output(m, "y", 1);
  add_output(m, "n", 7);
  add_output(m, "sums", 1);
  add_typed_value(m.mutable_graph()->add_output(), "acc", 1, 1);
  return m;
}

TEST(HostValues, SequencesThroughALoopBetweenCompiledSegments) {
  std::string b = bytes_of(sequence_loop_model());
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "seq_loop.onnx"));
  for (int rep = 0; rep < 2; ++rep) {
    std::vector<float> x(24);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 + size_t(rep)) % 11 - 4) * 0.5f;
    auto outs = runner.run_values({{"x", f32_value({6, 4}, x)}});
    ASSERT_EQ(outs.size(), 4u);
    // Chunks in reverse order (each inserted at the front), doubled, plus one.
    std::vector<float> want_y, want_sums(3, 0.0f);
    for (int chunk = 2; chunk >= 0; --chunk)
      for (int k = 0; k < 8; ++k) want_y.push_back(2 * std::max(0.0f, x[size_t(chunk * 8 + k)]) + 1);
    for (int chunk = 0; chunk < 3; ++chunk)
      for (int k = 0; k < 8; ++k) want_sums[size_t(chunk)] += std::max(0.0f, x[size_t(chunk * 8 + k)]);
    EXPECT_EQ(outs[0].tensor.dims, (std::vector<int64_t>{6, 4}));
    EXPECT_EQ(as_f32(outs[0].tensor.bytes), want_y);
    EXPECT_EQ(i64_of(outs[1]), 3);
    EXPECT_EQ(outs[2].tensor.dims, (std::vector<int64_t>{3}));
    EXPECT_EQ(as_f32(outs[2].tensor.bytes), want_sums);
    ASSERT_EQ(outs[3].kind, ValueKind::Sequence);
    ASSERT_EQ(outs[3].items.size(), 3u);
    EXPECT_EQ(outs[3].items[0].tensor.dims, (std::vector<int64_t>{2, 4}));
  }
  // run() carries numeric tensors only: the sequence output is named.
  auto e = expect_error([&] { runner.run({{"x", TypedTensor{DType::F32, {6, 4}, f32_bytes(std::vector<float>(24))}}}); },
                        ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("run_values"), std::string::npos) << e.what();
}

// The host work limit counts every node evaluation (1024 units) besides the elements made, so
// a Loop of cheap nodes is bounded by its iterations: the three-trip model (a few dozen node
// evaluations, a few hundred elements) stops with a clear error under a limit of 8 nodes'
// worth, runs under 2^20, and the runner stays usable.
TEST(HostValues, WorkLimitCountsNodeEvaluations) {
  std::string b = bytes_of(sequence_loop_model());
  std::vector<float> x(24, 1.0f);
  ImportOptions tight;
  tight.host_work_limit = 8 * 1024;
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "seq_loop.onnx"), Session(Device::Cpu), tight);
  auto e = expect_error([&] { runner.run_values({{"x", f32_value({6, 4}, x)}}); }, ErrorCategory::ResourceExhausted);
  EXPECT_NE(std::string(e.what()).find("host_work_limit"), std::string::npos) << e.what();
  ImportOptions loose;
  loose.host_work_limit = int64_t(1) << 20;
  OnnxRunner ok(load_onnx_bytes(b.data(), b.size(), "seq_loop.onnx"), Session(Device::Cpu), loose);
  EXPECT_EQ(ok.run_values({{"x", f32_value({6, 4}, x)}}).size(), 4u);
}

// Text in, numbers and text out: StringSplit, RegexFullMatch, Cast both ways, StringConcat,
// Equal and StringNormalizer, with a compiled Mul on the numbers the strings became.
::onnx::ModelProto strings_model() {
  auto m = make_model(20);
  add_input(m, "s", 8, {3});
  add_input(m, "w", 1, {3, 2});
  set_str_attr(add_node(m, "StringSplit", {"s"}, {"parts", "counts"}), "delimiter", ",");
  set_str_attr(add_node(m, "RegexFullMatch", {"parts"}, {"is_num"}), "pattern", "-?[0-9]+(\\.[0-9]+)?");
  auto* k = add_node(m, "Constant", {}, {"prefix"});
  set_strings_attr(k, "value_strings", {"n="});
  auto* cs = add_node(m, "Cast", {"counts"}, {"counts_s"});
  set_int_attr(cs, "to", 8);
  add_node(m, "StringConcat", {"prefix", "counts_s"}, {"labels"});
  auto* pick = add_node(m, "Constant", {}, {"first_col"});
  set_strings_attr(pick, "value_strings", {"a"});
  add_node(m, "Equal", {"parts", "first_col"}, {"is_a"});
  auto* norm = add_node(m, "StringNormalizer", {"s"}, {"upper"});
  set_str_attr(norm, "case_change_action", "UPPER");
  set_strings_attr(norm, "stopwords", {"skip"});
  // The numeric column: the first two parts of the first row, as numbers, times w.
  add_i64_initializer(m, "row0", {1}, {0});
  set_int_attr(add_node(m, "Gather", {"w", "row0"}, {"w0"}), "axis", 0);
  auto* cf = add_node(m, "Cast", {"nums_s"}, {"nums"});
  set_int_attr(cf, "to", 1);
  auto* k2 = add_node(m, "Constant", {}, {"nums_s"});
  set_strings_attr(k2, "value_strings", {"1.5", "-INF"});
  // Constant after its reader in the list: the importer sorts the nodes.
  std::swap(*m.mutable_graph()->mutable_node(m.graph().node_size() - 1),
            *m.mutable_graph()->mutable_node(m.graph().node_size() - 2));
  add_node(m, "Mul", {"w0", "nums"}, {"scaled"});
  for (auto [name, t] : std::vector<std::pair<std::string, int>>{
           {"parts", 8}, {"counts", 7}, {"is_num", 9}, {"labels", 8}, {"is_a", 9}, {"upper", 8}, {"scaled", 1}})
    add_output(m, name, t);
  return m;
}

TEST(HostValues, StringOpsAndCastsAroundACompiledMul) {
  std::string b = bytes_of(strings_model());
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "strings.onnx"));
  auto outs = runner.run_values({{"s", OnnxValue::of_strings({3}, {"a,12,x", "skip", "3.5,a"})},
                                 {"w", f32_value({3, 2}, {2, 4, 6, 8, 10, 12})}});
  ASSERT_EQ(outs.size(), 7u);
  EXPECT_EQ(outs[0].tensor.dims, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(outs[0].strings, (std::vector<std::string>{"a", "12", "x", "skip", "", "", "3.5", "a", ""}));
  std::vector<int64_t> counts(3);
  std::memcpy(counts.data(), outs[1].tensor.bytes.data(), 24);
  EXPECT_EQ(counts, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(outs[2].tensor.bytes, (std::vector<uint8_t>{0, 1, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(outs[3].strings, (std::vector<std::string>{"n=3", "n=1", "n=2"}));
  EXPECT_EQ(outs[4].tensor.bytes, (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(outs[5].tensor.dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(outs[5].strings, (std::vector<std::string>{"A,12,X", "3.5,A"}));
  EXPECT_EQ(as_f32(outs[6].tensor.bytes), (std::vector<float>{3.0f, -std::numeric_limits<float>::infinity()}));

  // A compiled segment that does not fit what the host made is named; the runner stays usable.
  expect_error([&] { runner.run_values({{"s", OnnxValue::of_strings({2}, {"a", "b"})},
                                        {"w", f32_value({3, 3}, std::vector<float>(9, 1.0f))}}); },
               ErrorCategory::Shape);
  auto again = runner.run_values({{"s", OnnxValue::of_strings({1}, {"7"})}, {"w", f32_value({3, 2}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(again[3].strings, (std::vector<std::string>{"n=1"}));
}

TEST(HostValues, BadValuesAreNamedAndTheRunnerStaysUsable) {
  auto m = make_model(17);
  add_typed_value(m.mutable_graph()->add_input(), "seq", 1, 1);
  add_input(m, "pos", 7, {});
  add_node(m, "SequenceAt", {"seq", "pos"}, {"t"}, "pick");
  add_node(m, "Neg", {"t"}, {"y"});
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "seq_at.onnx"));
  OnnxValue seq = OnnxValue::sequence({f32_value({2}, {1, 2}), f32_value({2}, {3, 4})});
  auto pos = [](int64_t p) {
    TypedTensor t{DType::I64, {}, std::vector<uint8_t>(8)};
    std::memcpy(t.bytes.data(), &p, 8);
    return OnnxValue::of(t);
  };
  auto e = expect_error([&] { runner.run_values({{"seq", seq}, {"pos", pos(2)}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'pick'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  // A tensor where the model takes a sequence.
  e = expect_error([&] { runner.run_values({{"seq", f32_value({2}, {1, 2})}, {"pos", pos(0)}}); },
                   ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'seq' is a sequence"), std::string::npos) << e.what();
  // run() points at run_values.
  e = expect_error([&] { runner.run({{"pos", pos(0).tensor}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("run_values"), std::string::npos) << e.what();
  auto outs = runner.run_values({{"seq", seq}, {"pos", pos(-1)}});
  EXPECT_EQ(as_f32(outs[0].tensor.bytes), (std::vector<float>{-3, -4}));
}

// Ops that move elements work on strings as on numbers (run on each string's index):
// Gather, Transpose, Concat, Slice, Where, Split, Reshape; Shape reads a string tensor's dims.
TEST(HostValues, MovementOpsOnStrings) {
  auto m = make_model(17);
  add_input(m, "s", 8, {2, 3});
  add_input(m, "pick", 9, {3, 2});
  add_i64_initializer(m, "rows", {2}, {1, 0});
  add_i64_initializer(m, "flat", {1}, {-1});
  add_i64_initializer(m, "one", {1}, {1});
  add_i64_initializer(m, "three", {1}, {3});
  set_int_attr(add_node(m, "Gather", {"s", "rows"}, {"swapped"}), "axis", 0);
  set_ints_attr(add_node(m, "Transpose", {"swapped"}, {"t"}), "perm", {1, 0});
  auto* k = add_node(m, "Constant", {}, {"other"});
  set_strings_attr(k, "value_strings", {"x", "y", "z", "w", "v", "u"});
  add_node(m, "Reshape", {"other", "flat"}, {"other_flat"});
  add_i64_initializer(m, "shape32", {2}, {3, 2});
  add_node(m, "Reshape", {"other", "shape32"}, {"other32"});
  add_node(m, "Where", {"pick", "t", "other32"}, {"mixed"});
  set_int_attr(add_node(m, "Concat", {"mixed", "other32"}, {"cat"}), "axis", 1);
  add_node(m, "Slice", {"other_flat", "one", "three"}, {"sl"});
  add_node(m, "Shape", {"cat"}, {"shape"});
  add_output(m, "cat", 8);
  add_output(m, "sl", 8);
  add_output(m, "shape", 7);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "move.onnx"));
  TypedTensor pick{DType::Bool, {3, 2}, {1, 0, 0, 1, 1, 1}};
  auto outs = runner.run_values({{"s", OnnxValue::of_strings({2, 3}, {"a", "b", "c", "d", "e", "f"})},
                                 {"pick", OnnxValue::of(pick)}});
  // swapped = [[d e f] [a b c]]; t = [[d a] [e b] [f c]]; other32 = [[x y] [z w] [v u]].
  EXPECT_EQ(outs[0].tensor.dims, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(outs[0].strings, (std::vector<std::string>{"d", "y", "x", "y", "z", "b", "z", "w", "f", "c", "v", "u"}));
  EXPECT_EQ(outs[1].strings, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(i64_of(outs[2]), 3);
}

TEST(HostValues, BadTextIsNamed) {
  auto m = make_model(20);
  add_input(m, "s", 8, {1});
  set_str_attr(add_node(m, "RegexFullMatch", {"s"}, {"y"}, "match"), "pattern", "(unclosed");
  set_int_attr(add_node(m, "Cast", {"s"}, {"f"}, "to_float"), "to", 1);
  add_output(m, "y", 9);
  add_output(m, "f", 1);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "regex.onnx"));
  auto e = expect_error([&] { runner.run_values({{"s", OnnxValue::of_strings({1}, {"12"})}}); },
                        ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'match'"), std::string::npos) << e.what();
  auto m2 = make_model(20);
  add_input(m2, "s", 8, {2});
  set_int_attr(add_node(m2, "Cast", {"s"}, {"f"}, "to_float"), "to", 1);
  add_output(m2, "f", 1);
  b = bytes_of(m2);
  OnnxRunner cast(load_onnx_bytes(b.data(), b.size(), "cast.onnx"));
  e = expect_error([&] { cast.run_values({{"s", OnnxValue::of_strings({2}, {"1e3", "abc"})}}); },
                   ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'abc'"), std::string::npos) << e.what();
  auto outs = cast.run_values({{"s", OnnxValue::of_strings({2}, {" 1e3", "-nan"})}});
  auto f = as_f32(outs[0].tensor.bytes);
  EXPECT_EQ(f[0], 1000.0f);
  EXPECT_TRUE(std::isnan(f[1]));
}

}  // namespace
}  // namespace rlx::onnx
