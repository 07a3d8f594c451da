// Run-time output shapes: models whose nodes' output shapes depend on input values
// (NonMaxSuppression, NonZero, Unique, Compress, Range fed by a computed value) run in
// compiled segments with the node evaluated on the host between them. Each test compares
// with a plain implementation written here (integers and selections exactly; the f32
// arithmetic around them is one rounding per op, compared exactly against the same
// float operations in the same order).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "onnx_test_util.h"
#include "rlx/onnx.h"

namespace rlx::onnx {
namespace {

using namespace test;

std::vector<int64_t> as_i64(const std::vector<uint8_t>& b) {
  std::vector<int64_t> v(b.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

TypedTensor f32(std::vector<int64_t> dims, const std::vector<float>& v) { return {DType::F32, std::move(dims), f32_bytes(v)}; }

// A detector's tail: boxes = raw + offset (static), scores = Sigmoid(logits) (static),
// NonMaxSuppression (run-time count), then the static ops after it on the selected boxes.
::onnx::ModelProto detector_tail(int64_t n, int64_t classes) {
  auto m = make_model(13);
  add_input(m, "raw", 1, {1, n, 4});
  add_input(m, "logits", 1, {1, classes, n});
  add_f32_initializer(m, "offset", {4}, {0.5f, 0.25f, 0.5f, 0.25f});
  add_i64_initializer(m, "max_out", {1}, {3});
  add_f32_initializer(m, "iou", {1}, {0.4f});
  add_f32_initializer(m, "score_min", {1}, {0.3f});
  add_i64_initializer(m, "col", {}, {2});
  add_i64_initializer(m, "flat", {2}, {n, 4});
  add_f32_initializer(m, "two", {}, {2.0f});
  add_node(m, "Add", {"raw", "offset"}, {"boxes"});
  add_node(m, "Sigmoid", {"logits"}, {"scores"});
  add_node(m, "NonMaxSuppression", {"boxes", "scores", "max_out", "iou", "score_min"}, {"selected"});
  set_int_attr(add_node(m, "Gather", {"selected", "col"}, {"box_index"}), "axis", 1);
  add_node(m, "Reshape", {"boxes", "flat"}, {"boxes2"});
  set_int_attr(add_node(m, "Gather", {"boxes2", "box_index"}, {"picked"}), "axis", 0);
  add_node(m, "Mul", {"picked", "two"}, {"scaled"});
  add_node(m, "Shape", {"scaled"}, {"count"});
  add_output(m, "selected", 7);
  add_output(m, "scaled", 1);
  add_output(m, "count", 7);
  return m;
}

// Greedy NMS as ONNX defines it (corner boxes, IoU > threshold suppresses, scores >
// threshold kept, highest score first, at most max_out per class).
std::vector<int64_t> reference_nms(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t n,
                                   int64_t classes, int64_t max_out, float iou, float score_min) {
  std::vector<int64_t> out;
  auto area = [&](int64_t i) {
    const float* b = &boxes[size_t(4 * i)];
    return (std::max(b[0], b[2]) - std::min(b[0], b[2])) * (std::max(b[1], b[3]) - std::min(b[1], b[3]));
  };
  for (int64_t c = 0; c < classes; ++c) {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; ++i)
      if (scores[size_t(c * n + i)] > score_min) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return scores[size_t(c * n + a)] > scores[size_t(c * n + b)]; });
    std::vector<int64_t> kept;
    for (int64_t i : idx) {
      if (int64_t(kept.size()) == max_out) break;
      bool ok = true;
      for (int64_t j : kept) {
        const float* a = &boxes[size_t(4 * i)];
        const float* b = &boxes[size_t(4 * j)];
        const float ih = std::min(std::max(a[0], a[2]), std::max(b[0], b[2])) - std::max(std::min(a[0], a[2]), std::min(b[0], b[2]));
        const float iw = std::min(std::max(a[1], a[3]), std::max(b[1], b[3])) - std::max(std::min(a[1], a[3]), std::min(b[1], b[3]));
        if (ih > 0 && iw > 0 && ih * iw / (area(j) + area(i) - ih * iw) > iou) ok = false;
      }
      if (!ok) continue;
      kept.push_back(i);
      out.insert(out.end(), {0, c, i});
    }
  }
  return out;
}

TEST(OnnxRunTimeShape, DetectorTailWithNonMaxSuppression) {
  const int64_t n = 64, classes = 2;
  std::string b = bytes_of(detector_tail(n, classes));
  OnnxModel model = load_onnx_bytes(b.data(), b.size(), "detector.onnx");
  EXPECT_FALSE(model.has_graph);
  EXPECT_NE(model.dynamic_reason.find("NonMaxSuppression"), std::string::npos) << model.dynamic_reason;
  OnnxRunner runner(model);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pos(0.0f, 8.0f), size(0.5f, 3.0f);
  std::set<size_t> counts;
  for (int round = 0; round < 6; ++round) {
    std::vector<float> raw(size_t(n * 4)), logits(size_t(classes * n));
    for (int64_t i = 0; i < n; ++i) {
      const float y = pos(rng), x = pos(rng);
      raw[size_t(4 * i)] = y, raw[size_t(4 * i + 1)] = x;
      raw[size_t(4 * i + 2)] = y + size(rng), raw[size_t(4 * i + 3)] = x + size(rng);
    }
    // Logits on a shuffled grid of step 1/8 over [-4, 4): scores at least 2e-3 apart and
    // from the threshold (see below). Round 4: every score under the threshold (no box
    // selected: empty outputs downstream).
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<int64_t> perm(static_cast<size_t>(n));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t i = 0; i < n; ++i) logits[size_t(c * n + i)] = round == 4 ? -5.0f : -4.0f + float(perm[size_t(i)]) / 8;
    }
    auto out = runner.run({{"raw", f32({1, n, 4}, raw)}, {"logits", f32({1, classes, n}, logits)}});
    ASSERT_EQ(out.size(), 3u);

    std::vector<float> boxes(raw.size()), scores(logits.size());
    const float offset[4] = {0.5f, 0.25f, 0.5f, 0.25f};
    for (size_t i = 0; i < raw.size(); ++i) boxes[i] = raw[i] + offset[i % 4];
    // The sigmoid's rounding may differ from std::exp's by an ulp: the scores here are more
    // than 1e-3 apart from each other and from the threshold (asserted below), so the
    // selection does not depend on it.
    for (size_t i = 0; i < logits.size(); ++i) scores[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<float> s(scores.begin() + c * n, scores.begin() + (c + 1) * n);
      s.push_back(0.3f);
      std::sort(s.begin(), s.end());
      for (size_t i = 1; i < s.size(); ++i) ASSERT_TRUE(s[i] - s[i - 1] > 1e-3f || round == 4);
    }
    std::vector<int64_t> want = reference_nms(boxes, scores, n, classes, 3, 0.4f, 0.3f);
    const int64_t k = int64_t(want.size() / 3);
    counts.insert(size_t(k));
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{k, 3}));
    EXPECT_EQ(as_i64(out[0].bytes), want);
    std::vector<float> scaled;
    for (int64_t j = 0; j < k; ++j)
      for (int e = 0; e < 4; ++e) scaled.push_back(boxes[size_t(4 * want[size_t(3 * j + 2)] + e)] * 2.0f);
    EXPECT_EQ(out[1].dims, (std::vector<int64_t>{k, 4}));
    EXPECT_EQ(as_f32(out[1].bytes), scaled);
    EXPECT_EQ(as_i64(out[2].bytes), (std::vector<int64_t>{k, 4}));
    if (round == 4) {
      EXPECT_EQ(k, 0);
    }
  }
  EXPECT_GE(counts.size(), 2u);  // the tail really ran for different run-time shapes
  EXPECT_EQ(runner.cache_size(), 1u);  // one compiled head; the tails hang off it
  // The model as one compiled graph does not exist: asking for one names the reason.
  expect_error([&] { runner.compiled({{"raw", {1, n, 4}}, {"logits", {1, classes, n}}}); }, ErrorCategory::Unsupported);
  expect_error([&] { import_graph(model, {}); }, ErrorCategory::Unsupported);
}

// run() of a model that compiles whole feeds the caller's tensors to the compiled graph as
// they are; its outputs must be the general path's (run_values) in the model's output order,
// which here is not the order they are computed in, and an input in another dtype (converted
// by the general path) must give the same values.
TEST(OnnxRunner, RunOfAWholeModelMatchesTheGeneralPathInOutputOrder) {
  auto m = make_model(13);
  add_input(m, "a", 1, {2, 3});
  add_input(m, "b", 1, {-1, 3});
  add_node(m, "Add", {"a", "b"}, {"s"});
  add_node(m, "Mul", {"s", "b"}, {"p"});
  add_node(m, "Neg", {"p"}, {"n"});
  add_output(m, "n", 1);
  add_output(m, "s", 1);
  add_output(m, "p", 1);
  std::string bytes = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(bytes.data(), bytes.size(), "whole.onnx"));
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{0.5f, -1, 2, 3, -4, 0.25f};
  std::vector<float> s(6), p(6), n(6);
  for (size_t i = 0; i < 6; ++i) s[i] = a[i] + b[i], p[i] = s[i] * b[i], n[i] = -p[i];
  for (int round = 0; round < 2; ++round) {  // the second run reuses the cached compiled graph
    auto out = runner.run({{"a", f32({2, 3}, a)}, {"b", f32({2, 3}, b)}});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(as_f32(out[0].bytes), n);
    EXPECT_EQ(as_f32(out[1].bytes), s);
    EXPECT_EQ(as_f32(out[2].bytes), p);
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{2, 3}));
    auto general = runner.run_values({{"a", OnnxValue::of(f32({2, 3}, a))}, {"b", OnnxValue::of(f32({2, 3}, b))}});
    ASSERT_EQ(general.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(general[k].tensor.bytes, out[k].bytes) << "output " << k;
  }
  std::vector<double> bd(b.begin(), b.end());
  TypedTensor b64{DType::F64, {2, 3}, std::vector<uint8_t>(6 * sizeof(double))};
  std::memcpy(b64.bytes.data(), bd.data(), b64.bytes.size());
  auto conv = runner.run({{"a", f32({2, 3}, a)}, {"b", b64}});
  EXPECT_EQ(as_f32(conv[0].bytes), n);
  expect_error([&] { runner.run({{"a", f32({2, 3}, a)}}); }, ErrorCategory::InvalidArgument);
  expect_error([&] { runner.run({{"a", f32({2, 3}, a)}, {"b", f32({2, 3}, b)}, {"c", f32({1}, {0})}}); },
               ErrorCategory::InvalidArgument);
}

TEST(OnnxRunTimeShape, NonZeroIndicesFeedStaticOps) {
  // idx = NonZero(x > 0) [2, k]; t = Transpose(idx) [k, 2]; s = ReduceSum(t, axis 0)
  auto m = make_model(13);
  add_input(m, "x", 1, {5, 7});
  add_f32_initializer(m, "zero", {}, {0.0f});
  add_node(m, "Greater", {"x", "zero"}, {"mask"});
  add_node(m, "NonZero", {"mask"}, {"idx"});
  add_node(m, "Transpose", {"idx"}, {"t"});
  add_i64_initializer(m, "axes", {1}, {0});
  set_int_attr(add_node(m, "ReduceSum", {"t", "axes"}, {"s"}), "keepdims", 0);
  add_output(m, "t", 7);
  add_output(m, "s", 7);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "nonzero.onnx"));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int round = 0; round < 3; ++round) {
    std::vector<float> x(35);
    for (auto& v : x) v = round == 2 ? -1.0f : u(rng);
    auto out = runner.run({{"x", f32({5, 7}, x)}});
    std::vector<int64_t> t;
    int64_t s0 = 0, s1 = 0;
    for (int64_t i = 0; i < 35; ++i)
      if (x[size_t(i)] > 0) t.insert(t.end(), {i / 7, i % 7}), s0 += i / 7, s1 += i % 7;
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{int64_t(t.size() / 2), 2}));
    EXPECT_EQ(as_i64(out[0].bytes), t);
    EXPECT_EQ(as_i64(out[1].bytes), (std::vector<int64_t>{s0, s1}));
  }
}

TEST(OnnxRunTimeShape, UniqueAndCompressOfComputedValues) {
  // r = Relu(x); u, idx, inv, counts = Unique(r) (sorted); c = Compress(x, x > 0)
  auto m = make_model(13);
  add_input(m, "x", 1, {12});
  add_f32_initializer(m, "zero", {}, {0.0f});
  add_node(m, "Relu", {"x"}, {"r"});
  add_node(m, "Unique", {"r"}, {"u", "first", "inv", "counts"});
  add_node(m, "Greater", {"x", "zero"}, {"keep"});
  add_node(m, "Compress", {"x", "keep"}, {"c"});
  for (const char* o : {"u", "first", "inv", "counts", "c"}) add_output(m, o, std::string(o) == "u" || std::string(o) == "c" ? 1 : 7);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "unique.onnx"));
  const std::vector<float> x = {3, -1, 2, 3, 0, -5, 2, 7, 3, -2, 1, 7};
  auto out = runner.run({{"x", f32({12}, x)}});
  ASSERT_EQ(out.size(), 5u);
  // r = {3, 0, 2, 3, 0, 0, 2, 7, 3, 0, 1, 7}
  EXPECT_EQ(as_f32(out[0].bytes), (std::vector<float>{0, 1, 2, 3, 7}));
  EXPECT_EQ(as_i64(out[1].bytes), (std::vector<int64_t>{1, 10, 2, 0, 7}));
  EXPECT_EQ(as_i64(out[2].bytes), (std::vector<int64_t>{3, 0, 2, 3, 0, 0, 2, 4, 3, 0, 1, 4}));
  EXPECT_EQ(as_i64(out[3].bytes), (std::vector<int64_t>{4, 1, 2, 3, 2}));
  EXPECT_EQ(as_f32(out[4].bytes), (std::vector<float>{3, 2, 3, 2, 7, 3, 1, 7}));
}

TEST(OnnxRunTimeShape, ShapeInputComputedFromDataIsBoundByValue) {
  // n = ReduceMax(Cast(x, int64)); y = Range(0, n, 1) * 2: Range needs n at import, and n
  // is computed by the model: the compiled segment stops before Range and the rest is
  // compiled per value of n.
  auto m = make_model(13);
  add_input(m, "x", 1, {4, 4096});  // too large to be bound by value itself
  add_i64_initializer(m, "zero", {}, {0});
  add_i64_initializer(m, "one", {}, {1});
  add_i64_initializer(m, "two", {}, {2});
  set_int_attr(add_node(m, "Cast", {"x"}, {"xi"}), "to", 7);
  set_int_attr(add_node(m, "ReduceMax", {"xi"}, {"n"}), "keepdims", 0);
  add_node(m, "Range", {"zero", "n", "one"}, {"r"});
  add_node(m, "Mul", {"r", "two"}, {"y"});
  add_output(m, "y", 7);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "range.onnx"));
  for (float top : {5.0f, 3.0f, 5.0f}) {
    std::vector<float> x(4 * 4096, 1.0f);
    x[1234] = top;
    auto out = runner.run({{"x", f32({4, 4096}, x)}});
    std::vector<int64_t> want;
    for (int64_t i = 0; i < int64_t(top); ++i) want.push_back(2 * i);
    EXPECT_EQ(as_i64(out[0].bytes), want);
  }
}

TEST(OnnxRunTimeShape, NodeInsideASubgraphIsRefusedByName) {
  // A NonZero over a run-time value inside a subgraph (an If branch, a Loop body) would
  // have to run between segments inside the body: refused, naming the subgraph.
  auto m = make_model(13);
  add_input(m, "x", 1, {4});
  add_input(m, "cond", 9, {});
  auto* n = add_node(m, "If", {"cond"}, {"y"}, "branchy");
  for (const char* br : {"then_branch", "else_branch"}) {
    auto* g = add_graph_attr(n, br, {}, {"z"});
    add_node(g, "NonZero", {"x"}, {"z"});
  }
  add_output(m, "y", 7);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "if.onnx"));
  const TypedTensor cond{DType::Bool, {}, {1}};
  for (int i = 0; i < 2; ++i) {  // the runner stays usable: the same answer again
    Error e = expect_error([&] { runner.run({{"x", f32({4}, {0, 2, 0, 3})}, {"cond", cond}}); }, ErrorCategory::Unsupported);
    EXPECT_NE(std::string(e.what()).find("subgraph"), std::string::npos) << e.what();
  }
  auto l = make_model(13);
  add_input(l, "x", 1, {4});
  add_i64_initializer(l, "trip", {}, {2});
  auto* loop = add_node(l, "Loop", {"trip", "", "x"}, {"xf"}, "looped");
  auto* body = add_graph_attr(loop, "body", {"i", "c", "xs"}, {"c_out", "xs_out"});
  add_node(body, "Identity", {"c"}, {"c_out"});
  add_node(body, "NonZero", {"xs"}, {"nz"});
  add_node(body, "Identity", {"xs"}, {"xs_out"});
  add_output(l, "xf", 1);
  std::string lb = bytes_of(l);
  OnnxRunner lr(load_onnx_bytes(lb.data(), lb.size(), "loop.onnx"));
  Error e = expect_error([&] { lr.run({{"x", f32({4}, {0, 2, 0, 3})}}); }, ErrorCategory::Unsupported);
  EXPECT_NE(std::string(e.what()).find("subgraph"), std::string::npos) << e.what();
}

TEST(OnnxRunTimeShape, BadNonMaxSuppressionInputsAreNamed) {
  auto m = make_model(11);
  add_input(m, "boxes", 1, {1, 3, 4});
  add_input(m, "scores", 1, {1, 1, 2});  // 2 scores for 3 boxes
  add_node(m, "NonMaxSuppression", {"boxes", "scores"}, {"sel"}, "nms");
  add_output(m, "sel", 7);
  std::string b = bytes_of(m);
  OnnxRunner runner(load_onnx_bytes(b.data(), b.size(), "nms.onnx"));
  Error e = expect_error([&] {
    runner.run({{"boxes", f32({1, 3, 4}, std::vector<float>(12, 1.0f))}, {"scores", f32({1, 1, 2}, {0.5f, 0.7f})}});
  }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'nms'"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace rlx::onnx

namespace rlx::onnx {
namespace {

TypedTensor f32_tensor(std::vector<int64_t> dims, const std::vector<float>& v) {
  TypedTensor t{DType::F32, std::move(dims), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// The CPU prepacks a constant matmul weight and frees the original; the model source then
// holds it weakly (release_initializers). A later import for another input shape reads it
// again from the file; a file changed in between is refused by name, and the runner stays
// usable for the shapes it has compiled.
TEST(OnnxWeights, ReleasedInitializersAreReadAgainFromTheFile) {
  const int64_t k = 40, n = 64;
  auto m = test::make_model();
  test::add_input(m, "x", 1, {-1, k});
  test::add_output(m, "y", 1);
  std::vector<float> w(size_t(k * n));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 7 % 17) - 8) / 16.0f;
  test::add_f32_initializer(m, "w", {k, n}, w);
  test::add_node(m, "MatMul", {"x", "w"}, {"y"});
  const std::string path = ::testing::TempDir() + "rlx_released_weights.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    f << test::bytes_of(m);
  }
  OnnxRunner runner(load_onnx(path));
  auto run_rows = [&](int64_t rows) {
    std::vector<float> x(size_t(rows * k));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 5 % 13) - 6) / 8.0f;
    std::vector<TypedTensor> out = runner.run({{"x", f32_tensor({rows, k}, x)}});
    EXPECT_EQ(out.at(0).dims, (std::vector<int64_t>{rows, n}));
    const float* y = reinterpret_cast<const float*>(out.at(0).bytes.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;  // every product and partial sum is a multiple of 2^-7 below 2^8: exact in f32
        for (int64_t p = 0; p < k; ++p) want += double(x[size_t(i * k + p)]) * double(w[size_t(p * n + j)]);
        ASSERT_EQ(double(y[i * n + j]), want) << rows << " rows, (" << i << ", " << j << ")";
      }
  };
  run_rows(8);
  run_rows(6);  // a second import: w is read from the file again
  run_rows(8);
  // Another file at the same path (other size and time): reading w again must be refused.
  m.mutable_graph()->set_doc_string(std::string(100, 'x'));
  {
    std::ofstream f(path, std::ios::binary);
    f << test::bytes_of(m);
  }
  const Error e = test::expect_error([&] { run_rows(7); }, ErrorCategory::Io);
  EXPECT_NE(std::string(e.what()).find("changed"), std::string::npos) << e.what();
  run_rows(6);  // compiled before: still runs
  std::remove(path.c_str());
}

}  // namespace
}  // namespace rlx::onnx
