// ONNX importer: malformed / truncated files, unknown ops, external data, folding of
// shape arithmetic, symbolic inputs and the per-shape compile cache.
#ifdef RLX_HAVE_ONNX  // built without the importer: no tests here
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>

#include "io/onnx/tensor.h"
#include "onnx_test_util.h"
#include "rlx/onnx.h"

namespace rlx::onnx::test {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("rlx_onnx_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// y = x + w with w a [4] f32 initializer.
::onnx::ModelProto add_model() {
  auto m = make_model();
  add_input(m, "x", 1, {4});
  add_f32_initializer(m, "w", {4}, {1, 2, 3, 4});
  add_node(m, "Add", {"x", "w"}, {"y"});
  add_output(m, "y", 1);
  return m;
}

TEST(OnnxLoad, GarbageBytesAreAParseErrorNamingTheFile) {
  std::string junk = "this is not a protobuf \x01\x02\xff\xff\xff";
  Error e = expect_error([&] { load_onnx_bytes(junk.data(), junk.size(), "junk.onnx"); }, ErrorCategory::Parse);
  EXPECT_NE(std::string(e.what()).find("junk.onnx"), std::string::npos) << e.what();
}

TEST(OnnxLoad, MissingFileIsAnIoError) {
  expect_error([] { load_onnx("/nonexistent/dir/model.onnx"); }, ErrorCategory::Io);
}

TEST(OnnxLoad, EveryTruncationIsAParseError) {
  std::string full = bytes_of(add_model());
  fs::path dir = temp_dir("trunc");
  for (size_t len = 0; len < full.size(); ++len) {
    fs::path p = dir / "model.onnx";
    write_file(p, full.substr(0, len));
    Error e = expect_error([&] { load_onnx(p.string()); }, ErrorCategory::Parse);
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << "len " << len << ": " << e.what();
  }
  fs::remove_all(dir);
}

TEST(OnnxLoad, UnknownOpNamesOpNodeAndOpset) {
  auto m = make_model(17);
  add_input(m, "x", 1, {2});
  add_node(m, "FrobnicateTensor", {"x"}, {"y"}, "my_node");
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::Unsupported);
  std::string msg = e.what();
  EXPECT_NE(msg.find("FrobnicateTensor"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("17"), std::string::npos) << msg;
}

TEST(OnnxLoad, OpOutsideItsOpsetRangeIsUnsupported) {
  auto m = make_model(13);  // Gelu exists from opset 20
  add_input(m, "x", 1, {2});
  add_node(m, "Gelu", {"x"}, {"y"}, "g");
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::Unsupported);
  EXPECT_NE(std::string(e.what()).find("opset 13"), std::string::npos) << e.what();
}

TEST(OnnxLoad, NonDefaultDomainIsUnsupported) {
  auto m = make_model();
  auto* os = m.add_opset_import();
  os->set_domain("com.example");
  os->set_version(1);
  add_input(m, "x", 1, {2});
  add_node(m, "Custom", {"x"}, {"y"}, "c")->set_domain("com.example");
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::Unsupported);
  EXPECT_NE(std::string(e.what()).find("com.example"), std::string::npos) << e.what();
}

// ai.onnx.preview.training's optimizer steps: an Adam step with T = 2 over two tensors
// against the operator's formulas in double (the tolerance: a few f32 roundings of values
// of order 1, 1e-6), a Momentum step at T = 0 (beta replaced by 1), and the domain's
// errors: no opset_import for it, an opset it does not have, a wrong input count.
::onnx::ModelProto training_model(const std::string& op, int n_in, int n_out, int64_t domain_opset) {
  auto m = make_model(17);
  if (domain_opset > 0) import_domain(m, "ai.onnx.preview.training", domain_opset);
  add_input(m, "R", 1, {});
  add_input(m, "T", 7, {});
  std::vector<std::string> in{"R", "T"}, out;
  for (int i = 0; i < n_in; ++i) {
    in.push_back("in" + std::to_string(i));
    add_input(m, in.back(), 1, {3});
  }
  for (int i = 0; i < n_out; ++i) out.push_back("out" + std::to_string(i));
  add_node(m, op, in, out, "step")->set_domain("ai.onnx.preview.training");
  for (const auto& o : out) add_output(m, o, 1);
  return m;
}

TEST(OnnxTraining, AdamStepMatchesTheFormulas) {
  auto m = training_model("Adam", 8, 6, 1);  // X1 X2 G1 G2 V1 V2 H1 H2 -> X'1 X'2 V'1 V'2 H'1 H'2
  auto* n = m.mutable_graph()->mutable_node(0);
  set_float_attr(n, "alpha", 0.8f);
  set_float_attr(n, "beta", 0.95f);
  set_float_attr(n, "epsilon", 1e-3f);
  set_float_attr(n, "norm_coefficient", 0.1f);
  set_float_attr(n, "norm_coefficient_post", 0.05f);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "adam.onnx"));
  const std::vector<std::vector<float>> v{{1, -2, 3}, {0.5f, 0.25f, -1}, {0.1f, 0.2f, -0.3f}, {-1, 1, 2},
                                          {0.3f, 0, -0.1f}, {0.05f, 0.1f, 0.2f}, {0.4f, 0.5f, 0.6f}, {1, 2, 3}};
  std::map<std::string, TypedTensor> feeds{{"R", TypedTensor{DType::F32, {}, f32_bytes({0.1f})}}};
  const int64_t t = 2;
  std::vector<uint8_t> tb(8);
  std::memcpy(tb.data(), &t, 8);
  feeds["T"] = TypedTensor{DType::I64, {}, tb};
  for (int i = 0; i < 8; ++i) feeds["in" + std::to_string(i)] = TypedTensor{DType::F32, {3}, f32_bytes(v[size_t(i)])};
  auto out = runner.run(feeds);
  ASSERT_EQ(out.size(), 6u);
  const double alpha = 0.8f, beta = 0.95f, eps = 1e-3f, norm = 0.1f, post = 0.05f, r = 0.1f;
  for (int i = 0; i < 2; ++i)
    for (int e = 0; e < 3; ++e) {
      const double x = v[size_t(i)][size_t(e)], g = v[size_t(2 + i)][size_t(e)], vv = v[size_t(4 + i)][size_t(e)],
                   h = v[size_t(6 + i)][size_t(e)];
      const double gr = norm * x + g, vn = alpha * vv + (1 - alpha) * gr, hn = beta * h + (1 - beta) * gr * gr;
      const double ra = r * std::sqrt(1 - std::pow(beta, 2)) / (1 - std::pow(alpha, 2));
      const double xn = (1 - post) * (x - ra * vn / (std::sqrt(hn) + eps));
      EXPECT_NEAR(as_f32(out[size_t(i)].bytes)[size_t(e)], xn, 1e-6) << "X " << i << "," << e;
      EXPECT_NEAR(as_f32(out[size_t(2 + i)].bytes)[size_t(e)], vn, 1e-6) << "V " << i << "," << e;
      EXPECT_NEAR(as_f32(out[size_t(4 + i)].bytes)[size_t(e)], hn, 1e-6) << "H " << i << "," << e;
    }
}

TEST(OnnxTraining, MomentumAtTheFirstStepTakesTheWholeGradient) {
  auto m = training_model("Momentum", 3, 2, 1);
  auto* n = m.mutable_graph()->mutable_node(0);
  set_float_attr(n, "alpha", 0.9f);
  set_float_attr(n, "beta", 0.5f);
  set_float_attr(n, "norm_coefficient", 0.0f);
  auto* a = n->add_attribute();
  a->set_name("mode");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("standard");
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "momentum.onnx"));
  std::vector<uint8_t> t0(8, 0);
  auto out = runner.run({{"R", TypedTensor{DType::F32, {}, f32_bytes({0.5f})}},
                         {"T", TypedTensor{DType::I64, {}, t0}},
                         {"in0", TypedTensor{DType::F32, {3}, f32_bytes({1, 2, 3})}},
                         {"in1", TypedTensor{DType::F32, {3}, f32_bytes({2, 4, 8})}},
                         {"in2", TypedTensor{DType::F32, {3}, f32_bytes({0, 0, 0})}}});
  // T = 0: V' = 0.9 * 0 + 1 * G, X' = X - 0.5 V' (exact in f32)
  EXPECT_EQ(as_f32(out[1].bytes), (std::vector<float>{2, 4, 8}));
  EXPECT_EQ(as_f32(out[0].bytes), (std::vector<float>{0, 0, -1}));
}

TEST(OnnxTraining, DomainErrorsNameTheDomainAndTheNode) {
  {
    std::string b = bytes_of(training_model("Adagrad", 3, 2, 0));  // no opset_import for the domain
    Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::Parse);
    EXPECT_NE(std::string(e.what()).find("ai.onnx.preview.training"), std::string::npos) << e.what();
  }
  {
    std::string b = bytes_of(training_model("Adagrad", 3, 2, 2));
    Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::Unsupported);
    EXPECT_NE(std::string(e.what()).find("opset 2"), std::string::npos) << e.what();
  }
  {
    std::string b = bytes_of(training_model("Adagrad", 4, 2, 1));  // 4 tensors: not X, G, H runs
    Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'step'"), std::string::npos) << e.what();
  }
}

// FlexAttention (ai.onnx.preview) with grouped heads (4 query heads over 2 K/V heads) and
// a score_mod subgraph that doubles the scores, against attention computed in double
// (tolerance: f32 products of 4 terms and a softmax over 3, values of order 1: 1e-6).
// Q [1, q_heads, 2, 4], K [1, 2, 3, 4], V [1, 2, 3, 2] into one FlexAttention node 'flex'.
::onnx::ModelProto flex_model(int64_t q_heads, ::onnx::NodeProto** node) {
  auto m = make_model(26);
  import_domain(m, "ai.onnx.preview", 1);
  add_input(m, "Q", 1, {1, q_heads, 2, 4});
  add_input(m, "K", 1, {1, 2, 3, 4});
  add_input(m, "V", 1, {1, 2, 3, 2});
  *node = add_node(m, "FlexAttention", {"Q", "K", "V"}, {"Y"}, "flex");
  (*node)->set_domain("ai.onnx.preview");
  add_output(m, "Y", 1);
  return m;
}

TEST(OnnxFlexAttention, GroupedHeadsAndAScoreModifierMatchAReference) {
  ::onnx::NodeProto* n = nullptr;
  auto m = flex_model(4, &n);
  auto* g = add_graph_attr(n, "score_mod", {"scores"}, {"scores_out"});
  auto* two = g->add_initializer();
  two->set_name("two");
  two->set_data_type(1);
  two->add_float_data(2.0f);
  add_node(g, "Mul", {"scores", "two"}, {"scores_out"});
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "flex.onnx"));
  std::vector<float> q(32), k(24), v(12);
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(std::sin(0.7 * double(i)));
  for (size_t i = 0; i < k.size(); ++i) k[i] = float(std::cos(0.3 * double(i)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 5) - 2.0f;
  auto y = runner.run({{"Q", TypedTensor{DType::F32, {1, 4, 2, 4}, f32_bytes(q)}},
                       {"K", TypedTensor{DType::F32, {1, 2, 3, 4}, f32_bytes(k)}},
                       {"V", TypedTensor{DType::F32, {1, 2, 3, 2}, f32_bytes(v)}}});
  const std::vector<float> got = as_f32(y[0].bytes);
  ASSERT_EQ(got.size(), 16u);
  for (int h = 0; h < 4; ++h)
    for (int l = 0; l < 2; ++l) {
      const int kh = h / 2;
      double sc[3], mx = -1e300, sum = 0;
      for (int j = 0; j < 3; ++j) {
        double d = 0;
        for (int e = 0; e < 4; ++e) d += double(q[size_t((h * 2 + l) * 4 + e)]) * double(k[size_t((kh * 3 + j) * 4 + e)]);
        sc[j] = 2.0 * d * 0.5;  // scale 1 / sqrt(4), then the modifier's x2
        mx = std::max(mx, sc[j]);
      }
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int e = 0; e < 2; ++e) {
        double want = 0;
        for (int j = 0; j < 3; ++j) want += sc[j] / sum * double(v[size_t((kh * 3 + j) * 2 + e)]);
        EXPECT_NEAR(got[size_t((h * 2 + l) * 2 + e)], want, 1e-6) << h << "," << l << "," << e;
      }
    }
}

TEST(OnnxFlexAttention, HeadsThatDoNotGroupAreInvalid) {
  ::onnx::NodeProto* n = nullptr;
  std::string b = bytes_of(flex_model(3, &n));
  Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("not a multiple of kv heads"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'flex'"), std::string::npos) << e.what();
}

// TreeEnsemble (ai.onnx.ml 5): two trees, one splitting on x1 <= 0.5, the other on
// x0 in {1, 3}, AVERAGE over the trees then LOGISTIC, checked against the walk done by
// hand (f32 sigmoid of exact sums of weights: 1e-6); a cycle in the trees is invalid.
::onnx::ModelProto tree_model(bool cycle) {
  auto m = make_model(17);
  import_domain(m, "ai.onnx.ml", 5);
  add_input(m, "X", 1, {3, 2});
  auto* n = add_node(m, "TreeEnsemble", {"X"}, {"Y"}, "trees");
  n->set_domain("ai.onnx.ml");
  auto ints = [&](const char* name, std::vector<int64_t> v) { set_ints_attr(n, name, v); };
  auto floats = [&](const char* name, std::vector<float> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(1);
    a->mutable_t()->add_dims(int64_t(v.size()));
    for (float x : v) a->mutable_t()->add_float_data(x);
  };
  // node 0: x1 <= 0.5 -> leaf 0 else leaf 1; node 1: x0 in {1, 3} -> leaf 2 else leaf 3
  ints("nodes_featureids", {1, 0});
  floats("nodes_splits", {0.5f, 0});
  auto* modes = n->add_attribute();
  modes->set_name("nodes_modes");
  modes->set_type(::onnx::AttributeProto::TENSOR);
  modes->mutable_t()->set_data_type(6);  // int32
  modes->mutable_t()->add_dims(2);
  modes->mutable_t()->add_int32_data(0);
  modes->mutable_t()->add_int32_data(6);
  ints("nodes_truenodeids", {0, 2});
  ints("nodes_trueleafs", {1, 1});
  ints("nodes_falsenodeids", {cycle ? 0 : 1, 3});
  ints("nodes_falseleafs", {cycle ? 0 : 1, 1});
  floats("membership_values", {1, 3, std::nanf("")});
  ints("tree_roots", {0, 1});
  ints("leaf_targetids", {0, 1, 0, 1});
  floats("leaf_weights", {2, 4, 6, 8});
  set_int_attr(n, "n_targets", 2);
  set_int_attr(n, "aggregate_function", 0);
  set_int_attr(n, "post_transform", 2);
  add_output(m, "Y", 1);
  return m;
}

TEST(OnnxTreeEnsemble, TwoTreesAveragedThroughALogisticMatchTheWalk) {
  std::string b = bytes_of(tree_model(false));
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "trees.onnx"));
  auto y = runner.run({{"X", TypedTensor{DType::F32, {3, 2}, f32_bytes({1, 0.2f, 2, 0.9f, 3, 0.5f})}}});
  const std::vector<float> got = as_f32(y[0].bytes);
  // rows: (1, 0.2): leaf 0 (t0 +2), leaf 2 (t0 +6); (2, 0.9): leaf 1 (t1 +4), leaf 3 (t1 +8);
  // (3, 0.5): leaf 0 (t0 +2), leaf 2 (t0 +6). AVERAGE over 2 trees, then the sigmoid.
  const double sums[3][2] = {{8, 0}, {0, 12}, {8, 0}};
  ASSERT_EQ(got.size(), 6u);
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 2; ++k)
      EXPECT_NEAR(got[size_t(r * 2 + k)], 1.0 / (1.0 + std::exp(-sums[r][k] / 2)), 1e-6) << r << "," << k;
}

TEST(OnnxTreeEnsemble, ACycleIsInvalid) {
  std::string b = bytes_of(tree_model(true));
  Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
}

// Scan before opset 9 (batched form): a running sum over each batch entry's sequence, one
// input scanned in reverse; states and per-step outputs stacked over the batch. Exact
// (sums of small integers in f32).
TEST(OnnxScan8, RunningSumsPerBatchEntryOneInputReversed) {
  auto m = make_model(8);
  add_input(m, "init", 1, {2, 1});
  add_input(m, "xs", 1, {2, 3, 1});
  auto* n = add_node(m, "Scan", {"", "init", "xs"}, {"final", "steps"}, "scan");
  set_int_attr(n, "num_scan_inputs", 1);
  set_ints_attr(n, "directions", {1});
  auto* g = add_graph_attr(n, "body", {"s", "x"}, {"s_next", "y"});
  add_node(g, "Add", {"s", "x"}, {"s_next"});
  add_node(g, "Identity", {"s_next"}, {"y"});
  add_output(m, "final", 1);
  add_output(m, "steps", 1);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "scan8.onnx"));
  auto out = runner.run({{"init", TypedTensor{DType::F32, {2, 1}, f32_bytes({0, 100})}},
                         {"xs", TypedTensor{DType::F32, {2, 3, 1}, f32_bytes({1, 2, 3, 10, 20, 30})}}});
  // reversed: entry 0 adds 3, 2, 1; entry 1 adds 30, 20, 10 onto 100
  EXPECT_EQ(as_f32(out[0].bytes), (std::vector<float>{6, 160}));
  EXPECT_EQ(as_f32(out[1].bytes), (std::vector<float>{3, 5, 6, 130, 150, 160}));
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{2, 3, 1}));
}

TEST(OnnxLoad, UndefinedValueIsAParseError) {
  auto m = make_model();
  add_input(m, "x", 1, {2});
  add_node(m, "Add", {"x", "nowhere"}, {"y"}, "a");
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  Error e = expect_error([&] { load_onnx_bytes(b.data(), b.size(), "m.onnx"); }, ErrorCategory::Parse);
  EXPECT_NE(std::string(e.what()).find("nowhere"), std::string::npos) << e.what();
}

TEST(OnnxLoad, ExternalDataIsReadAndBoundsChecked) {
  fs::path dir = temp_dir("ext");
  std::vector<float> w{10, 20, 30, 40};
  std::string blob(8, 'z');  // 8 junk bytes, then the tensor at offset 8
  blob.append(reinterpret_cast<const char*>(w.data()), 16);
  write_file(dir / "weights.bin", blob);
  auto make = [&](const std::string& location, int64_t offset, int64_t length) {
    auto m = make_model();
    add_input(m, "x", 1, {4});
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(1);
    t->add_dims(4);
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto add_kv = [&](const char* k, const std::string& v) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add_kv("location", location);
    add_kv("offset", std::to_string(offset));
    add_kv("length", std::to_string(length));
    add_node(m, "Add", {"x", "w"}, {"y"});
    add_output(m, "y", 1);
    fs::path p = dir / "model.onnx";
    write_file(p, bytes_of(m));
    return p.string();
  };
  OnnxModel ok = load_onnx(make("weights.bin", 8, 16));
  ASSERT_TRUE(ok.has_graph);
  OnnxRunner runner(ok);
  auto out = runner.run({{"x", TypedTensor{DType::F32, {4}, f32_bytes({1, 2, 3, 4})}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(as_f32(out[0].bytes), (std::vector<float>{11, 22, 33, 44}));
  expect_error([&] { load_onnx(make("weights.bin", 16, 16)); }, ErrorCategory::Parse);  // past the end
  expect_error([&] { load_onnx(make("weights.bin", 0, 12)); }, ErrorCategory::Parse);   // wrong size
  expect_error([&] { load_onnx(make("../weights.bin", 8, 16)); }, ErrorCategory::Parse);
  expect_error([&] { load_onnx(make("/etc/passwd", 0, 16)); }, ErrorCategory::Parse);
  expect_error([&] { load_onnx(make("missing.bin", 0, 16)); }, ErrorCategory::Io);
  fs::remove_all(dir);
}

TEST(OnnxImport, ShapeArithmeticFoldsToAStaticReshape) {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))
  auto m = make_model(13);
  add_input(m, "x", 1, {2, 3, 4});
  add_i64_initializer(m, "zero", {}, {0});
  add_i64_initializer(m, "axes0", {1}, {0});
  add_i64_initializer(m, "minus1", {1}, {-1});
  add_node(m, "Shape", {"x"}, {"s"});
  add_node(m, "Gather", {"s", "zero"}, {"n"});
  add_node(m, "Unsqueeze", {"n", "axes0"}, {"n1"});
  set_int_attr(add_node(m, "Concat", {"n1", "minus1"}, {"shape"}), "axis", 0);
  add_node(m, "Reshape", {"x", "shape"}, {"y"});
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  OnnxModel model = load_onnx_bytes(b.data(), b.size(), "fold.onnx");
  ASSERT_TRUE(model.has_graph) << model.dynamic_reason;
  const Graph& g = model.graph;
  int reshapes = 0;
  for (const Node& n : g.nodes()) {
    EXPECT_TRUE(n.kind == OpKind::Input || n.kind == OpKind::Constant || n.kind == OpKind::Reshape)
        << "unexpected node " << n.name << " (" << op_name(n.kind) << ")";
    reshapes += n.kind == OpKind::Reshape;
  }
  EXPECT_EQ(reshapes, 1);
  EXPECT_EQ(g.type(g.outputs()[0].value).static_dims(), (std::vector<int64_t>{2, 12}));
}

// ConvTranspose whose kernel equals its stride (the learned upsampling of detection heads)
// imports as one matmul and a block reshuffle (no zero-upsampled input, no pad); checked
// against the definition y[n, m, i*s + a, j*t + b] = bias[m] + sum_c x[n, c, i, j] w[c, m, a, b]
// (exact: each output sums C = 3 products, compared at f32 rounding of such a sum).
TEST(OnnxImport, ConvTransposeWithKernelEqualToStrideIsOneMatmul) {
  const int64_t N = 2, C = 3, H = 4, W = 5, M = 4, S = 2, T = 3;
  auto m = make_model(17);
  add_input(m, "x", 1, {N, C, H, W});
  std::vector<float> wv(static_cast<size_t>(C * M * S * T)), bv(static_cast<size_t>(M));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i % 7) - 3) * 0.25f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(i) - 1.5f;
  add_f32_initializer(m, "w", {C, M, S, T}, wv);
  add_f32_initializer(m, "b", {M}, bv);
  auto* n = add_node(m, "ConvTranspose", {"x", "w", "b"}, {"y"});
  set_ints_attr(n, "kernel_shape", {S, T});
  set_ints_attr(n, "strides", {S, T});
  add_output(m, "y", 1);
  std::string bytes = bytes_of(m);
  OnnxModel model = load_onnx_bytes(bytes.data(), bytes.size(), "deconv.onnx");
  ASSERT_TRUE(model.has_graph) << model.dynamic_reason;
  int matmuls = 0;
  for (const Node& nd : model.graph.nodes()) {
    EXPECT_NE(nd.kind, OpKind::Pad) << "the zero-upsampling lowering was used";
    EXPECT_NE(nd.kind, OpKind::Conv2d) << "the zero-upsampling lowering was used";
    matmuls += nd.kind == OpKind::MatMul;
  }
  EXPECT_EQ(matmuls, 1);
  std::vector<float> xv(size_t(N * C * H * W));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i % 11) - 5) * 0.5f;
  OnnxRunner runner(model);
  auto out = runner.run({{"x", TypedTensor{DType::F32, {N, C, H, W}, f32_bytes(xv)}}});
  ASSERT_EQ(out[0].dims, (std::vector<int64_t>{N, M, H * S, W * T}));
  const std::vector<float> y = as_f32(out[0].bytes);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t o = 0; o < M; ++o)
      for (int64_t i = 0; i < H * S; ++i)
        for (int64_t j = 0; j < W * T; ++j) {
          double want = bv[size_t(o)];
          for (int64_t c = 0; c < C; ++c)
            want += double(xv[size_t(((b * C + c) * H + i / S) * W + j / T)]) *
                    wv[size_t(((c * M + o) * S + i % S) * T + j % T)];
          ASSERT_NEAR(y[size_t(((b * M + o) * H * S + i) * W * T + j)], want, 4 * std::ldexp(1.0, -24) * 8)
              << "y[" << b << "," << o << "," << i << "," << j << "]";
        }
}

TEST(OnnxImport, SymbolicInputStaysSymbolicAndTheRunnerCompilesPerShape) {
  auto m = make_model();
  add_input(m, "x", 1, {-1, 2}, "batch");
  add_node(m, "Relu", {"x"}, {"y"});
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  OnnxModel model = load_onnx_bytes(b.data(), b.size(), "sym.onnx");
  ASSERT_TRUE(model.has_graph);
  ASSERT_EQ(model.inputs.size(), 1u);
  EXPECT_EQ(model.inputs[0].dims, (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(model.inputs[0].dim_params[0], "batch");
  ASSERT_EQ(model.graph.symbols().size(), 1u);
  EXPECT_EQ(model.graph.symbols()[0], "batch");
  OnnxRunner runner(model);
  auto a = runner.run({{"x", TypedTensor{DType::F32, {1, 2}, f32_bytes({-1, 2})}}});
  auto c = runner.run({{"x", TypedTensor{DType::F32, {3, 2}, f32_bytes({-1, 2, -3, 4, 5, -6})}}});
  runner.run({{"x", TypedTensor{DType::F32, {1, 2}, f32_bytes({7, -7})}}});
  EXPECT_EQ(runner.cache_size(), 2u);
  EXPECT_EQ(as_f32(a[0].bytes), (std::vector<float>{0, 2}));
  EXPECT_EQ(as_f32(c[0].bytes), (std::vector<float>{0, 2, 0, 4, 5, 0}));
  EXPECT_EQ(c[0].dims, (std::vector<int64_t>{3, 2}));

  // A compiled graph handed out stays valid after the cache (32 entries) evicts it.
  std::shared_ptr<CompiledGraph> first = runner.compiled({{"x", {1, 2}}});
  for (int64_t n = 10; n < 50; ++n) runner.compiled({{"x", {n, 2}}});
  EXPECT_EQ(runner.cache_size(), 32u);
  auto again = first->run_typed({{"x", TypedTensor{DType::F32, {1, 2}, f32_bytes({-4, 4})}}});
  EXPECT_EQ(as_f32(again[0].bytes), (std::vector<float>{0, 4}));
  // A name that is no input of the model is refused, not ignored (the graph would be
  // compiled for the declared dims), for shapes and for values alike.
  Error y = expect_error([&] { runner.compiled({{"x", {1, 2}}, {"y", {1, 2}}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(y.what()).find("OnnxRunner::compiled: the model has no input 'y' (its inputs: x f32[batch,2])"),
            std::string::npos) << y.what();
  Error z = expect_error(
      [&] { runner.compiled_for({{"x", {1, 2}}}, {{"z", TypedTensor{DType::F32, {1}, f32_bytes({1})}}}); },
      ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(z.what()).find("OnnxRunner::compiled_for: the model has no input 'z'"), std::string::npos)
      << z.what();
  EXPECT_EQ(runner.cache_size(), 32u);
}

TEST(OnnxImport, ShapeOfASymbolicInputNeedsConcreteShapes) {
  // y = Reshape(x, Shape(x)) -- only foldable once "batch" is known.
  auto m = make_model();
  add_input(m, "x", 1, {-1, 2}, "batch");
  add_node(m, "Shape", {"x"}, {"s"});
  add_node(m, "Reshape", {"x", "s"}, {"y"});
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  OnnxModel model = load_onnx_bytes(b.data(), b.size(), "dyn.onnx");
  EXPECT_FALSE(model.has_graph);
  EXPECT_FALSE(model.dynamic_reason.empty());
  OnnxRunner runner(model);
  auto out = runner.run({{"x", TypedTensor{DType::F32, {2, 2}, f32_bytes({1, 2, 3, 4})}}});
  EXPECT_EQ(as_f32(out[0].bytes), (std::vector<float>{1, 2, 3, 4}));
}

TEST(OnnxImport, WrongInputShapeIsAShapeError) {
  std::string b = bytes_of(add_model());
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "add.onnx"));
  expect_error([&] { runner.run({{"x", TypedTensor{DType::F32, {5}, f32_bytes({1, 2, 3, 4, 5})}}}); },
               ErrorCategory::Shape);
  expect_error([&] { runner.run({{"x", TypedTensor{DType::F32, {2, 2}, f32_bytes({1, 2, 3, 4})}}}); },
               ErrorCategory::Shape);
  expect_error([&] { runner.run({}); }, ErrorCategory::InvalidArgument);
}

TEST(OnnxImport, ShapeFedAsAnInputIsBoundByValue) {
  auto m = make_model(13);
  add_input(m, "x", 1, {4});
  add_input(m, "shape", 7, {-1}, "r");
  add_node(m, "Reshape", {"x", "shape"}, {"y"});
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "reshape.onnx"));
  auto shape = [](std::vector<int64_t> v) {
    TypedTensor t{DType::I64, {int64_t(v.size())}, {}};
    t.bytes.resize(v.size() * 8);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  };
  TypedTensor x{DType::F32, {4}, f32_bytes({1, 2, 3, 4})};
  auto a = runner.run({{"x", x}, {"shape", shape({2, 2})}});
  auto c = runner.run({{"x", x}, {"shape", shape({1, 4})}});
  EXPECT_EQ(a[0].dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c[0].dims, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(as_f32(c[0].bytes), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(runner.cache_size(), 2u);
}

TEST(OnnxImport, IfWithARunTimeConditionSelectsABranch) {
  auto m = make_model(13);
  add_input(m, "c", 9, {});
  add_input(m, "x", 1, {2});
  add_f32_initializer(m, "one", {}, {1});
  auto* n = add_node(m, "If", {"c"}, {"y"}, "if");
  auto branch = [&](const char* attr, const char* op) {
    const std::string out = std::string(attr) + "_out";
    add_node(add_graph_attr(n, attr, {}, {out}), op, {"x", "one"}, {out});
  };
  branch("then_branch", "Add");
  branch("else_branch", "Sub");
  add_output(m, "y", 1);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "if.onnx"));
  TypedTensor x{DType::F32, {2}, f32_bytes({10, 20})};
  auto t = runner.run({{"c", TypedTensor{DType::Bool, {}, {1}}}, {"x", x}});
  auto f = runner.run({{"c", TypedTensor{DType::Bool, {}, {0}}}, {"x", x}});
  EXPECT_EQ(as_f32(t[0].bytes), (std::vector<float>{11, 21}));
  EXPECT_EQ(as_f32(f[0].bytes), (std::vector<float>{9, 19}));
  EXPECT_EQ(runner.cache_size(), 1u);  // both branches in one graph, selected at run time
}

TEST(OnnxTensor, MinifloatDecodeAndRound) {
  EXPECT_EQ(decode_minifloat(0x7E, kF8E4M3FN), 448.0f);
  EXPECT_TRUE(std::isnan(decode_minifloat(0x7F, kF8E4M3FN)));
  EXPECT_EQ(decode_minifloat(0x01, kF8E4M3FN), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(decode_minifloat(0x80, kF8E4M3FNUZ)));
  EXPECT_EQ(decode_minifloat(0x7C, kF8E5M2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(decode_minifloat(0x7, kF4E2M1), 6.0f);
  EXPECT_EQ(decode_minifloat(0xE, kF4E2M1), -4.0f);
  EXPECT_EQ(round_to_minifloat(1e6f, kF8E4M3FN, true), 448.0f);
  EXPECT_TRUE(std::isnan(round_to_minifloat(1e6f, kF8E4M3FN, false)));
  EXPECT_EQ(round_to_minifloat(464.0f, kF8E4M3FN, false), 448.0f);  // tie rounds to even
  EXPECT_EQ(round_to_minifloat(-3.5f, kF4E2M1, true), -4.0f);
  EXPECT_EQ(round_to_minifloat(0.25f, kF4E2M1, true), 0.0f);
  EXPECT_EQ(round_to_minifloat(1e9f, kF8E5M2, false), std::numeric_limits<float>::infinity());
}

TEST(OnnxTensor, TypedFieldsAndSubBytePacking) {
  ::onnx::TensorProto t;
  t.set_data_type(kInt4);
  t.add_dims(3);
  t.set_raw_data(std::string("\x87\x0f", 2));  // 7, -8, -1
  HostTensor h = decode_tensor(t, "", "int4");
  ASSERT_EQ(h.dtype, DType::I8);
  EXPECT_EQ(std::vector<int8_t>(h.bytes.begin(), h.bytes.end()), (std::vector<int8_t>{7, -8, -1}));
  ::onnx::TensorProto f;
  f.set_data_type(kFloat16);
  f.add_dims(2);
  f.add_int32_data(0x3C00);  // 1.0
  f.add_int32_data(0xC000);  // -2.0
  HostTensor hf = decode_tensor(f, "", "f16");
  EXPECT_EQ(tensor_to_f64(hf), (std::vector<double>{1.0, -2.0}));
  f.add_int32_data(0);  // one value too many for the dims
  expect_error([&] { decode_tensor(f, "", "f16"); }, ErrorCategory::Parse);
}

TEST(OnnxTensor, WriteScalarFollowsCastSemanticsForIntegers) {
  // NaN -> 0, saturate to int64, then wrap to the narrow type (never a UB conversion).
  auto one = [](DType t, double v) { return make_tensor(t, {1}, {v}); };
  EXPECT_EQ(tensor_to_i64(one(DType::I64, std::nan(""))), (std::vector<int64_t>{0}));
  EXPECT_EQ(tensor_to_i64(one(DType::I64, 1e300)), (std::vector<int64_t>{std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(tensor_to_i64(one(DType::I64, -1e300)), (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(tensor_to_i64(one(DType::U8, 300.7)), (std::vector<int64_t>{44}));
  EXPECT_EQ(tensor_to_i64(one(DType::I32, -2.9)), (std::vector<int64_t>{-2}));
  EXPECT_EQ(tensor_to_i64(make_tensor(DType::F32, {1}, {std::nan("")})), (std::vector<int64_t>{0}));
}

TEST(OnnxImport, RangeOfAbsurdLengthIsRefused) {
  auto range_model = [](DType t, double start, double limit, double delta) {
    auto m = make_model(13);
    for (auto [name, v] : {std::pair{"s", start}, std::pair{"l", limit}, std::pair{"d", delta}}) {
      if (t == DType::I64) add_i64_initializer(m, name, {}, {int64_t(v)});
      else add_f32_initializer(m, name, {}, {float(v)});
    }
    add_node(m, "Range", {"s", "l", "d"}, {"y"});
    add_output(m, "y", t == DType::I64 ? 7 : 1);
    return bytes_of(m);
  };
  for (const std::string& b : {range_model(DType::I64, -9.2e18, 9.2e18, 1), range_model(DType::F32, 0, 1e30, 1),
                               range_model(DType::F32, 0, INFINITY, 1), range_model(DType::F32, 0, NAN, 1)})
    expect_error([&] { load_onnx_bytes(b.data(), b.size(), "range.onnx"); }, ErrorCategory::InvalidArgument);
  std::string ok = range_model(DType::I64, 5, -1, -2);
  OnnxModel m = load_onnx_bytes(ok.data(), ok.size(), "range.onnx");
  ASSERT_TRUE(m.has_graph);
  auto out = OnnxRunner(m).run({});
  ASSERT_EQ(out.size(), 1u);
  std::vector<int64_t> got(out[0].bytes.size() / 8);
  std::memcpy(got.data(), out[0].bytes.data(), out[0].bytes.size());
  EXPECT_EQ(got, (std::vector<int64_t>{5, 3, 1}));
}

// The hostile model of the hardening issue: Expand to [2^62, 4] then ReduceSum. The
// Expand's output cannot exist (2^64 elements): a Shape error naming the node, at import.
TEST(OnnxHostile, ExpandPastInt64IsRefusedAtImport) {
  auto m = make_model();
  add_input(m, "x", 1, {1, 4});
  add_i64_initializer(m, "shape", {2}, {int64_t(1) << 62, 4});
  add_i64_initializer(m, "axes", {1}, {0});
  add_node(m, "Expand", {"x", "shape"}, {"big"})->set_name("expand_big");
  add_node(m, "ReduceSum", {"big", "axes"}, {"y"});
  add_output(m, "y", 1);
  std::string bytes = bytes_of(m);
  Error e = expect_error([&] { load_onnx_bytes(bytes.data(), bytes.size(), "hostile.onnx"); }, ErrorCategory::Shape);
  EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
}

// 2^40 x 4 fits int64 but no machine's memory: refused at compile, before any allocation.
TEST(OnnxHostile, ExpandAboveMemoryIsResourceExhausted) {
  auto m = make_model();
  add_input(m, "x", 1, {1, 4});
  add_i64_initializer(m, "shape", {2}, {int64_t(1) << 40, 4});
  add_i64_initializer(m, "axes", {1}, {0});
  add_node(m, "Expand", {"x", "shape"}, {"big"});
  add_node(m, "ReduceSum", {"big", "axes"}, {"y"});
  add_output(m, "y", 1);
  std::string bytes = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(bytes.data(), bytes.size(), "big.onnx"));
  TypedTensor x{DType::F32, {1, 4}, f32_bytes({1, 2, 3, 4})};
  expect_error([&] { runner.run({{"x", x}}); }, ErrorCategory::ResourceExhausted);
  expect_error([&] { runner.run({{"x", x}}); }, ErrorCategory::ResourceExhausted);  // still usable
}

TEST(OnnxHostile, InitializerDimsPastInt64AreRefused) {
  auto m = make_model();
  add_input(m, "x", 1, {4});
  auto* t = add_f32_initializer(m, "w", {int64_t(1) << 40, int64_t(1) << 40}, {});
  (void)t;
  add_node(m, "Add", {"x", "w"}, {"y"});
  add_output(m, "y", 1);
  std::string bytes = bytes_of(m);
  try {
    load_onnx_bytes(bytes.data(), bytes.size(), "init.onnx");
    ADD_FAILURE() << "expected an rlx::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("init.onnx"), std::string::npos) << e.what();
  }
}

TEST(OnnxRunnerErrors, UnknownInputListsTheModelsInputs) {
  std::string bytes = bytes_of(add_model());
  OnnxRunner runner(load_onnx_bytes(bytes.data(), bytes.size(), "add.onnx"));
  TypedTensor x{DType::F32, {4}, f32_bytes({1, 2, 3, 4})};
  Error e = expect_error([&] { runner.run({{"x", x}, {"typo", x}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'typo'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("its inputs: x f32[4]"), std::string::npos) << e.what();
  // A dtype that does not convert names the input.
  TypedTensor s{DType::C64, {4}, std::vector<uint8_t>(32, 0)};
  Error d = expect_error([&] { runner.run({{"x", s}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(d.what()).find("input 'x'"), std::string::npos) << d.what();
  // Negative or overflowing dims name the input too.
  TypedTensor big{DType::F32, {int64_t(1) << 62, 4}, {}};
  Error b = expect_error([&] { runner.run({{"x", big}}); }, ErrorCategory::Shape);
  EXPECT_NE(std::string(b.what()).find("input 'x'"), std::string::npos) << b.what();
  EXPECT_EQ(as_f32(runner.run({{"x", x}})[0].bytes), (std::vector<float>{2, 4, 6, 8}));
}

}  // namespace
}  // namespace rlx::onnx::test

#endif  // RLX_HAVE_ONNX

namespace rlx::onnx {
namespace {

TEST(OnnxImport, NodesOutOfOrderAreSortedTopologically) {
  // y = Relu(t) listed before t = Cast(x) (as float16 converters append the input casts),
  // and a node that reads nothing the graph makes stays where it is.
  auto m = test::make_model(13);
  test::add_input(m, "x", 1, {2, 2});
  test::add_node(m, "Relu", {"t"}, {"y"});
  test::add_node(m, "Neg", {"x"}, {"z"});
  test::set_int_attr(test::add_node(m, "Cast", {"x"}, {"t"}), "to", 1);
  test::add_output(m, "y", 1);
  test::add_output(m, "z", 1);
  std::string b = test::bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "unsorted.onnx"));
  auto out = runner.run({{"x", TypedTensor{DType::F32, {2, 2}, test::f32_bytes({-1, 2, -3, 4})}}});
  EXPECT_EQ(test::as_f32(out[0].bytes), (std::vector<float>{0, 2, 0, 4}));
  EXPECT_EQ(test::as_f32(out[1].bytes), (std::vector<float>{1, -2, 3, -4}));
  // A cycle is not sorted away: the import names the value read before it is made.
  auto c = test::make_model(13);
  test::add_input(c, "x", 1, {2});
  test::add_node(c, "Add", {"x", "b"}, {"a"});
  test::add_node(c, "Neg", {"a"}, {"b"});
  test::add_output(c, "b", 1);
  std::string cb = test::bytes_of(c);
  Error e = test::expect_error([&] {
    OnnxRunner r(load_onnx_bytes(cb.data(), cb.size(), "cycle.onnx"));
    r.run({{"x", TypedTensor{DType::F32, {2}, test::f32_bytes({1, 2})}}});
  }, ErrorCategory::Parse);
  EXPECT_NE(std::string(e.what()).find("not defined before it"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace rlx::onnx
