// plan-memory on model graphs and small hand-checked graphs: every plan must pass the
// verifier and the shadow-replay oracle, match the reference lower bound, and pack the
// arena within 1.10x of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "memplan/plan_check.h"
#include "memplan/test_graphs.h"
#include "opt/passes.h"

namespace rlx::opt {
namespace {

using namespace rlx::test_graphs;

int64_t aligned(int64_t b, int64_t a) { return (b + a - 1) / a * a; }

int32_t node_named(const Graph& g, const std::string& name) {
  for (int32_t i = 0; i < int32_t(g.nodes().size()); ++i)
    if (g.node(i).name == name) return i;
  ADD_FAILURE() << "no node named " << name;
  return 0;
}

// Everything every plan must satisfy; returns the plan for further checks.
MemoryPlan plan_and_check(const Graph& g, int64_t alignment = 64) {
  MemoryPlan plan = plan_memory(g, alignment);
  EXPECT_NO_THROW(verify_memory_plan(g, plan)) << plan.report(g);
  EXPECT_EQ(simulate_plan(g, plan), "") << plan.report(g);
  EXPECT_EQ(plan.lower_bound_bytes, reference_lower_bound(g, alignment));
  EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
  EXPECT_EQ(plan.alignment, alignment);
  // Params: weights segment, packed from 0 smallest first (ties in node order: written
  // small params share pages, external ones' pages are never touched), nothing else there.
  std::vector<int32_t> params;
  for (int32_t id = 0; id < int32_t(g.nodes().size()); ++id)
    if (g.node(id).kind == OpKind::Param) params.push_back(id);
  std::stable_sort(params.begin(), params.end(),
                   [&](int32_t a, int32_t b) { return g.node(a).outputs[0].bytes() < g.node(b).outputs[0].bytes(); });
  int64_t weights = 0;
  for (int32_t id : params) {
    const Node& n = g.node(id);
    const Loc& l = plan.loc[id][0];
    EXPECT_EQ(l.segment, Segment::Weights) << n.name;
    if (n.outputs[0].bytes() == 0) continue;
    EXPECT_EQ(l.offset, weights) << n.name;
    weights += aligned(int64_t(n.outputs[0].bytes()), alignment);
  }
  EXPECT_EQ(plan.weights_bytes, weights);
  for (const Buffer& b : plan.buffers)
    EXPECT_EQ(b.role == BufferRole::Param, g.node(b.node).kind == OpKind::Param);
  return plan;
}

double ratio(const MemoryPlan& p) {
  return p.lower_bound_bytes ? double(p.arena_bytes) / double(p.lower_bound_bytes) : 1.0;
}

void check_model(const Graph& g) {
  MemoryPlan plan = plan_and_check(g);
  std::cout << "[ ratio    ] " << g.name() << ": " << plan.report(g, 3);
  ::testing::Test::RecordProperty("arena_bytes", std::to_string(plan.arena_bytes));
  ::testing::Test::RecordProperty("lower_bound_bytes", std::to_string(plan.lower_bound_bytes));
  EXPECT_LE(ratio(plan), 1.10) << plan.report(g, 20);
  EXPECT_GT(plan.lower_bound_bytes, 0);
}

TEST(MemoryPlan, TransformerEncoder12Layers) {
  Graph g = transformer_encoder();
  check_model(g);
  // Params: 12 layers x (4 hidden^2 + 2 hidden*mlp + biases + norms) in f32, all aligned.
  const MemoryPlan plan = plan_memory(g, 64);
  EXPECT_GT(plan.weights_bytes, int64_t(12) * (4 * 768 * 768 + 2 * 768 * 3072) * 4);
  // The head split is a reshape view: same offset as the projection it reshapes.
  for (int32_t id = 0; id < int32_t(g.nodes().size()); ++id)
    if (g.node(id).kind == OpKind::Reshape) {
      const Value src = g.node(id).inputs[0];
      EXPECT_EQ(plan.loc[id][0].offset, plan.loc[src.node][src.out].offset) << g.node(id).name;
    }
}

TEST(MemoryPlan, TransformerSmallConfigs) {
  for (int layers : {1, 2, 4})
    for (int64_t seq : {1, 7, 64}) {
      SCOPED_TRACE(std::to_string(layers) + " layers, seq " + std::to_string(seq));
      check_model(transformer_encoder({layers, seq, 64, 4, 256}));
    }
}

TEST(MemoryPlan, ResidualCnn) {
  Graph g = residual_cnn();
  int convs = 0;
  for (const Node& n : g.nodes()) convs += n.kind == OpKind::Conv2d;
  EXPECT_GE(convs, 20);
  check_model(g);
}

TEST(MemoryPlan, Mlp) { check_model(mlp()); }

TEST(MemoryPlan, ChainReusesTheFirstTemporary) {
  // x pinned [0,3]; a [1,2]; b [2,3]; c [3,3]: peak is three 64-byte buffers, and c can
  // only take a's place.
  Graph g = chain4();
  MemoryPlan plan = plan_and_check(g);
  EXPECT_EQ(plan.lower_bound_bytes, 192);
  EXPECT_EQ(plan.arena_bytes, 192);
  EXPECT_EQ(plan.loc[3][0].offset, plan.loc[1][0].offset);  // c reuses a
  EXPECT_NE(plan.loc[2][0].offset, plan.loc[1][0].offset);  // b never meets a's bytes
  ASSERT_EQ(plan.persistent.size(), 1u);
  EXPECT_EQ(plan.persistent[0].second - plan.persistent[0].first, 64);
  const Loc& x = plan.loc[0][0];
  EXPECT_EQ(plan.persistent[0].first, x.offset);
}

TEST(MemoryPlan, AlignmentIsHonoured) {
  Graph g("odd");
  Value x = g.input("x", Shape({3}, DType::F32));  // 12 bytes
  Value a = g.relu(x);
  Value b = g.exp(a);
  g.set_outputs({g.add(a, b)});
  for (int64_t al : {1, 16, 64, 256}) {
    MemoryPlan plan = plan_and_check(g, al);
    for (const Buffer& b : plan.buffers) EXPECT_EQ(b.offset % al, 0) << al;
    EXPECT_EQ(plan.arena_bytes % al, 0);
    EXPECT_EQ(plan.lower_bound_bytes, 4 * aligned(12, al));  // x, a, b, sum all live at the add
  }
  EXPECT_THROW(plan_memory(g, 0), Error);
}

TEST(MemoryPlan, ViewsShareTheirRootOffsets) {
  Graph g = views_and_split();
  MemoryPlan plan = plan_and_check(g);
  auto at = [&](const char* name, int out = 0) { return plan.loc[node_named(g, name)][out].offset; };
  const int64_t x = plan.loc[node_named(g, "x")][0].offset, y = at("y");
  EXPECT_EQ(at("r"), y);
  EXPECT_EQ(at("i"), y);
  EXPECT_EQ(at("c"), y);
  EXPECT_EQ(at("s1"), y + 128);
  EXPECT_EQ(at("s2"), x + 192);
  EXPECT_EQ(at("t"), x + 192);
  EXPECT_EQ(at("split0", 0), y);
  EXPECT_EQ(at("split0", 1), y + 192);
  EXPECT_EQ(at("split0", 2), y + 576);
  // Copies get buffers of their own.
  for (const char* copy : {"s3", "cast16"}) {
    const int32_t id = node_named(g, copy);
    bool own = false;
    for (const Buffer& b : plan.buffers) own |= b.node == id;
    EXPECT_TRUE(own) << copy;
  }
  // y's root buffer lives until its last view use (the split parts are outputs: the end).
  for (const Buffer& b : plan.buffers)
    if (b.node == node_named(g, "y")) {
      EXPECT_EQ(b.last, int32_t(g.nodes().size()) - 1);
      EXPECT_EQ(b.role, BufferRole::Output);
    }
  // Outputs that are views of the input stay inside the input's pinned range.
  EXPECT_EQ(plan.loc[node_named(g, "t")][0].segment, Segment::Arena);
}

TEST(MemoryPlan, ZeroSizeValuesHaveNoLocation) {
  Graph g = zero_size();
  MemoryPlan plan = plan_and_check(g);
  for (int32_t id = 0; id < int32_t(g.nodes().size()); ++id)
    for (size_t o = 0; o < g.node(id).outputs.size(); ++o) {
      const bool empty = g.node(id).outputs[o].bytes() == 0;
      EXPECT_EQ(plan.loc[id][o].offset < 0, empty) << g.node(id).name;
    }
  for (const Buffer& b : plan.buffers) EXPECT_GT(b.bytes, 0);
}

TEST(MemoryPlan, OutputIsItsInput) {
  Graph g = output_is_input();
  MemoryPlan plan = plan_and_check(g);
  ASSERT_EQ(plan.buffers.size(), 1u);
  EXPECT_EQ(plan.buffers[0].role, BufferRole::Input);
  EXPECT_EQ(plan.arena_bytes, 64);
  EXPECT_EQ(plan.lower_bound_bytes, 64);
  EXPECT_TRUE(plan.scratch.empty());
  ASSERT_EQ(plan.persistent.size(), 1u);
  EXPECT_EQ(plan.persistent[0], std::make_pair(int64_t(0), int64_t(64)));
}

TEST(MemoryPlan, OutputAlsoUsedAsIntermediate) {
  Graph g = output_reused();
  MemoryPlan plan = plan_and_check(g);
  const int32_t end = int32_t(g.nodes().size()) - 1;
  for (const Buffer& b : plan.buffers) {
    const std::string& n = g.node(b.node).name;
    if (g.node(b.node).kind == OpKind::Relu || g.node(b.node).kind == OpKind::Tanh) {
      EXPECT_EQ(b.role, BufferRole::Output) << n;
      EXPECT_EQ(b.last, end) << n;
    }
    if (g.node(b.node).kind == OpKind::Exp) {  // unused: lives only at its own step
      EXPECT_EQ(b.first, b.last);
      EXPECT_EQ(b.role, BufferRole::Scratch);
    }
  }
  // The flattened param is a view in the weights segment.
  const Value wv = g.outputs()[3].value;
  EXPECT_EQ(plan.loc[wv.node][wv.out].segment, Segment::Weights);
  EXPECT_EQ(plan.loc[wv.node][wv.out].offset, 0);
}

TEST(MemoryPlan, PersistentAndScratchTileTheArena) {
  Graph g = views_and_split();
  MemoryPlan plan = plan_and_check(g);
  int64_t covered = 0;
  for (auto [b, e] : plan.persistent) covered += e - b;
  for (auto [b, e] : plan.scratch) covered += e - b;
  EXPECT_EQ(covered, plan.arena_bytes);
  // Exactly the input "x" is pinned.
  ASSERT_EQ(plan.persistent.size(), 1u);
  EXPECT_EQ(plan.persistent[0].second - plan.persistent[0].first, 768);
}

TEST(MemoryPlan, EmptyGraph) {
  Graph g("empty");
  g.set_outputs({});
  MemoryPlan plan = plan_and_check(g);
  EXPECT_EQ(plan.arena_bytes, 0);
  EXPECT_EQ(plan.weights_bytes, 0);
  EXPECT_TRUE(plan.buffers.empty());
}

TEST(MemoryPlan, UnboundDimsAreRefused) {
  Graph g("dyn");
  Value x = g.input("x", Shape(std::vector<Dim>{g.sym("n"), Dim(4)}, DType::F32));
  g.set_outputs({g.relu(x)});
  try {
    plan_memory(g, 64);
    FAIL() << "expected a Shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Shape);
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
}

TEST(MemoryPlan, ReportNamesTheLargestBuffers) {
  Graph g = transformer_encoder({2, 16, 64, 4, 256});
  MemoryPlan plan = plan_memory(g, 64);
  const std::string r = plan.report(g, 2);
  char head[400];
  std::snprintf(head, sizeof head,
                "weights %lld bytes: params %lld bytes (weights segment), constants %lld bytes (in the arena)\n"
                "arena %lld bytes, lower bound %lld bytes (ratio %.3f); activations and inputs %lld bytes\n",
                (long long)(plan.weights_bytes + plan.constant_bytes), (long long)plan.weights_bytes,
                (long long)plan.constant_bytes, (long long)plan.arena_bytes, (long long)plan.lower_bound_bytes,
                ratio(plan), (long long)(plan.arena_bytes - plan.constant_bytes));
  EXPECT_EQ(r.rfind(head, 0), 0u) << r;
  // The largest arena buffers are the [16, 256] MLP activations (fc1 matmul / add / gelu).
  EXPECT_NE(r.find("16384 bytes"), std::string::npos) << r;
  EXPECT_NE(r.find("steps "), std::string::npos) << r;
  // head (2 lines), "top 2 of", 2 buffers, then the constants list when there are any.
  const size_t consts = r.find(" constants:\n");
  EXPECT_EQ(std::count(r.begin(), consts == std::string::npos ? r.end() : r.begin() + long(r.rfind("top ", consts)), '\n'), 5) << r;
}

// A joint run (nodes a backend runs as one launch) is planned as one step: without it, c
// may take a's bytes (a's last reader is b, before c); with b..d joint, every result of
// the run misses every input it reads and every other result of it.
TEST(MemoryPlan, JointStepsKeepTheRunsResultsOffItsInputs) {
  Graph g("joint");
  Value x = g.input("x", Shape({256}, DType::F32));
  Value a = g.relu(x);   // read by b only
  Value b = g.neg(a);
  Value c = g.exp(b);    // may land on a, free after b
  Value d = g.add(c, b);
  g.set_outputs({d});
  auto where = [&](const MemoryPlan& p, Value v) { return p.loc[size_t(v.node)][size_t(v.out)].offset; };
  plan_and_check(g);
  const MemoryPlan joint = plan_memory(g, 64, {{b.node, d.node}});
  EXPECT_NO_THROW(verify_memory_plan(g, joint)) << joint.report(g);
  EXPECT_EQ(simulate_plan(g, joint), "") << joint.report(g);
  const Value run_in[] = {a, b, c}, run_out[] = {b, c, d};  // read / written inside b..d
  for (const Value o : run_out)
    for (const Value i : run_in) {
      if (o == i) continue;
      const int64_t lo = where(joint, o), li = where(joint, i), n = 256 * 4;
      EXPECT_TRUE(lo + n <= li || li + n <= lo) << "node " << o.node << " at " << lo << ", node " << i.node << " at " << li;
    }
  EXPECT_THROW(plan_memory(g, 64, {{d.node, b.node}}), Error);  // not a run
}

// Constants (what ONNX initializers become) are weights in the report, not arena buffers.
TEST(MemoryPlan, ReportCountsConstantsAsWeights) {
  Graph g;
  Value x = g.input("x", Shape({4, 256}, DType::F32));
  Value w = g.constant_f32({256, 256}, std::vector<float>(256 * 256, 0.5f), "big_initializer");
  g.set_outputs({g.matmul(x, w)});
  MemoryPlan plan = plan_memory(g, 64);
  EXPECT_EQ(plan.constant_bytes, 256 * 256 * 4);
  EXPECT_EQ(plan.weights_bytes, 0);
  const std::string r = plan.report(g, 8);
  EXPECT_EQ(r.rfind("weights 262144 bytes: params 0 bytes (weights segment), constants 262144 bytes", 0), 0u) << r;
  const size_t arena_list = r.find("arena buffers"), const_list = r.find("of 1 constants:");
  ASSERT_NE(arena_list, std::string::npos) << r;
  ASSERT_NE(const_list, std::string::npos) << r;
  // The initializer is listed under constants only.
  EXPECT_GT(r.find("big_initializer"), const_list) << r;
}

}  // namespace
}  // namespace rlx::opt
