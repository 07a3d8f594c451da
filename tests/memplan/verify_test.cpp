// verify_memory_plan must reject broken plans with an Internal error naming the nodes,
// and the planner must hold up on random graphs (verifier + shadow replay).
#include <gtest/gtest.h>

#include <random>

#include "memplan/plan_check.h"
#include "memplan/test_graphs.h"
#include "opt/passes.h"

namespace rlx::opt {
namespace {

using namespace rlx::test_graphs;

// Runs verify and returns the Internal error message ("" if it passed).
std::string verify_error(const Graph& g, const MemoryPlan& p) {
  try {
    verify_memory_plan(g, p);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Internal) << e.what();
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(VerifyMemoryPlan, AcceptsPlannedGraphs) {
  for (const Graph& g : {chain4(), views_and_split(), zero_size(), output_is_input(), output_reused()})
    EXPECT_EQ(verify_error(g, plan_memory(g, 64)), "") << g.name();
}

TEST(VerifyMemoryPlan, RejectsSimultaneouslyLiveOverlap) {
  // x -> a -> b -> c: a and b are both live at step 2; move b onto a.
  Graph g = chain4();
  MemoryPlan p = plan_memory(g, 64);
  p.loc[2][0].offset = p.loc[1][0].offset;
  const std::string e = verify_error(g, p);
  EXPECT_TRUE(contains(e, "overlaps its input")) << e;
  EXPECT_TRUE(contains(e, "'" + g.node(2).name + "'")) << e;
  EXPECT_TRUE(contains(e, "'" + g.node(1).name + "'")) << e;
  EXPECT_NE(simulate_plan(g, p), "");  // the oracle agrees it is broken
}

TEST(VerifyMemoryPlan, RejectsOverlapOfLiveValuesOfDifferentNodes) {
  // y = a + b where a and b are computed at different steps and both live at the add.
  Graph g("pair");
  Value x = g.input("x", Shape({16}, DType::F32));
  Value a = g.relu(x);
  Value b = g.exp(x);
  g.set_outputs({g.add(a, b)});
  MemoryPlan p = plan_memory(g, 64);
  p.loc[b.node][0].offset = p.loc[a.node][0].offset;
  const std::string e = verify_error(g, p);
  EXPECT_TRUE(contains(e, "overlap while both are live")) << e;
  EXPECT_TRUE(contains(e, g.node(a.node).name) && contains(e, g.node(b.node).name)) << e;
}

TEST(VerifyMemoryPlan, RejectsOutputOnItsInput) {
  Graph g = chain4();
  MemoryPlan p = plan_memory(g, 64);
  p.loc[1][0] = p.loc[0][0];  // relu writes over x
  const std::string e = verify_error(g, p);
  EXPECT_TRUE(contains(e, "node '" + g.node(1).name + "' output 0")) << e;
}

TEST(VerifyMemoryPlan, RejectsMisplacedViewParamAndPinnedValues) {
  Graph g = views_and_split();
  const MemoryPlan good = plan_memory(g, 64);
  int32_t r = -1;
  for (int32_t id = 0; id < int32_t(g.nodes().size()); ++id)
    if (g.node(id).name == "r") r = id;
  MemoryPlan p = good;
  p.loc[r][0].offset += 64;
  EXPECT_TRUE(contains(verify_error(g, p), "view 'r':0")) << verify_error(g, p);

  Graph w = output_reused();
  MemoryPlan q = plan_memory(w, 64);
  const int32_t param = w.param_nodes().at(0);
  q.loc[param][0].segment = Segment::Arena;
  EXPECT_TRUE(contains(verify_error(w, q), "weights segment")) << verify_error(w, q);

  MemoryPlan s = good;
  s.persistent.clear();
  s.scratch = {{0, s.arena_bytes}};
  EXPECT_TRUE(contains(verify_error(g, s), "persistent")) << verify_error(g, s);

  MemoryPlan t = good;
  t.arena_bytes -= 64;  // something now runs past the end (and the ranges no longer tile)
  EXPECT_NE(verify_error(g, t), "");

  MemoryPlan u = good;
  u.loc.pop_back();
  EXPECT_TRUE(contains(verify_error(g, u), "locations")) << verify_error(g, u);
}

// Random DAGs of elementwise/binary/matmul ops over a few shapes, with views (reshape,
// leading slices, splits, same-type casts) mixed in and random outputs.
Graph random_graph(std::mt19937& rng, int n_nodes) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Graph g("random");
  std::vector<Value> vals;  // all f32[8, k*16] for k in 1..4
  for (int i = 0; i < pick(1, 3); ++i)
    vals.push_back(g.input("in" + std::to_string(i), Shape({8, 16 * pick(1, 4)}, DType::F32)));
  if (pick(0, 1)) vals.push_back(g.param("p", Shape({8, 32}, DType::F32)));
  if (pick(0, 1)) vals.push_back(g.constant_f32({8, 16}, std::vector<float>(128, 1.f)));
  auto any = [&] { return vals[size_t(pick(std::max(0, int(vals.size()) - 6), int(vals.size()) - 1))]; };
  auto same = [&](Value v) {  // a recent value with v's shape, or v itself
    for (int t = 0; t < 6; ++t) {
      Value u = any();
      if (g.type(u) == g.type(v)) return u;
    }
    return v;
  };
  for (int i = 0; i < n_nodes; ++i) {
    Value v = any();
    const int64_t cols = g.type(v).dim(1).value();
    int op = pick(0, 8);
    if (cols % 2 != 0 && (op == 4 || op == 5 || op == 8)) op = 0;  // halving needs even widths
    switch (op) {
      case 0: vals.push_back(g.relu(v)); break;
      case 1: vals.push_back(g.exp(v)); break;
      case 2: vals.push_back(g.add(v, same(v))); break;
      case 3: vals.push_back(g.mul(same(v), v)); break;
      case 4: {  // leading-axis slice + reshape back into the [8, k] family
        Value s = g.slice(v, {2}, {6}, {0});
        vals.push_back(g.reshape(s, {8, cols / 2}));
        break;
      }
      case 5: {
        auto parts = g.split(g.reshape(v, {2, 4, cols}), 0, {1, 1});
        for (Value p : parts) vals.push_back(g.reshape(p, {8, cols / 2}));
        break;
      }
      case 6: vals.push_back(g.cast(v, DType::F32)); break;
      case 7: {
        Value w = g.param("w" + std::to_string(i), Shape({cols, 16 * pick(1, 4)}, DType::F32));
        vals.push_back(g.tanh(g.matmul(v, w)));
        break;
      }
      default: vals.push_back(g.slice(v, {0, 0}, {8, cols / 2}, {0, 1})); break;  // strided: a copy
    }
  }
  std::vector<Value> outs;
  std::vector<std::string> names;
  for (int i = 0; i < pick(1, 4); ++i) {
    outs.push_back(vals[size_t(pick(0, int(vals.size()) - 1))]);
    names.push_back("out" + std::to_string(i));
  }
  g.set_outputs(outs, names);
  return g;
}

TEST(VerifyMemoryPlan, RandomGraphsPlanSoundly) {
  std::mt19937 rng(42);
  double worst = 1.0;
  for (int iter = 0; iter < 300; ++iter) {
    Graph g = random_graph(rng, 4 + iter % 40);
    const int64_t alignment = iter % 3 == 0 ? 64 : (iter % 3 == 1 ? 32 : 256);
    MemoryPlan p = plan_memory(g, alignment);
    ASSERT_EQ(verify_error(g, p), "") << "iteration " << iter;
    ASSERT_EQ(simulate_plan(g, p), "") << "iteration " << iter << "\n" << p.report(g, 50);
    ASSERT_EQ(p.lower_bound_bytes, reference_lower_bound(g, alignment)) << "iteration " << iter;
    ASSERT_GE(p.arena_bytes, p.lower_bound_bytes);
    if (p.lower_bound_bytes) worst = std::max(worst, double(p.arena_bytes) / double(p.lower_bound_bytes));
  }
  std::cout << "[ ratio    ] random graphs: worst arena / lower bound " << worst << "\n";
  EXPECT_LE(worst, 1.10);
}

}  // namespace
}  // namespace rlx::opt
