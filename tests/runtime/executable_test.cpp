// The CPU executable's mechanics, on hand-built programs with test kernels (so they
// do not depend on the real kernels or planner): extent routing, error naming,
// scratch poisoning, page release, clones; then compile() on a real plan.
#include <atomic>

#include "backends/cpu/executable.h"
#include "opt/pipeline.h"
#include "runtime_test_util.h"

namespace rlx::test {
namespace {

using cpu::BufRef;
using cpu::Executable;
using cpu::Program;
using cpu::RunCtx;

struct RowCfg {
  int64_t rows = 0, cols = 0;
  float add = 1;
  bool* fail_flag = nullptr;      // when *fail_flag: throw rlx::Error
  bool* std_fail_flag = nullptr;  // when *std_fail_flag: throw std::runtime_error
  uint8_t* first_seen = nullptr;  // records the output's first byte before writing
};

// y[r, :] = x[r, :] + add for the rows the context asks for.
void add_rows(const RunCtx& ctx, const void* cfg_, void* const* bufs) {
  const auto& cfg = *static_cast<const RowCfg*>(cfg_);
  if (cfg.fail_flag && *cfg.fail_flag) fail(ErrorCategory::InvalidArgument, "test kernel refused");
  if (cfg.std_fail_flag && *cfg.std_fail_flag) throw std::runtime_error("plain exception");
  if (cfg.first_seen) *cfg.first_seen = *static_cast<const uint8_t*>(bufs[1]);
  const auto* x = static_cast<const float*>(bufs[0]);
  auto* y = static_cast<float*>(bufs[1]);
  const int64_t rows = ctx.rows(cfg.rows);
  for (int64_t i = 0; i < rows * cfg.cols; ++i) y[i] = x[i] + cfg.add;
}

// x: input f32[4,2] at arena 0 (persistent); a = x + 1 (extent-ok) at 64;
// b = a + 10 (not extent-ok) at 128. Arena 192 bytes (or `arena` when larger).
std::shared_ptr<Program> two_step_program(RowCfg c1, RowCfg c2, int64_t arena = 192) {
  auto p = std::make_shared<Program>();
  Graph& g = p->plan.graph;
  auto x = g.input("x", Shape({4, 2}, DType::F32));
  auto a = g.add1(OpKind::Relu, {x}, NoAttrs{}, "step_a");  // kinds only name the node here
  auto b = g.add1(OpKind::Relu, {a}, NoAttrs{}, "step_b");
  g.set_outputs({b});
  opt::MemoryPlan& m = p->plan.memory;
  m.loc = {{{opt::Segment::Arena, 0}}, {{opt::Segment::Arena, 64}}, {{opt::Segment::Arena, 128}}};
  m.arena_bytes = arena;
  m.persistent = {{0, 64}};
  m.scratch = {{64, arena}};
  p->values = {{BufRef{opt::Segment::Arena, -1, 0}}, {BufRef{opt::Segment::Arena, -1, 64}},
               {BufRef{opt::Segment::Arena, -1, 128}}};
  c1.rows = c2.rows = 4;
  c1.cols = c2.cols = 2;
  c2.add = 10;
  p->bufs = {p->values[0][0], p->values[1][0], p->values[1][0], p->values[2][0]};
  p->thunks.push_back({&add_rows, std::make_shared<const RowCfg>(c1), true, a.node, 0, 2});
  p->thunks.push_back({&add_rows, std::make_shared<const RowCfg>(c2), false, b.node, 2, 2});
  return p;
}

void write_x(Executable& e, const std::vector<float>& x) { std::memcpy(e.locate({opt::Segment::Arena, -1, 0}), x.data(), 32); }
std::vector<float> read_at(Executable& e, int64_t off) {
  std::vector<float> v(8);
  std::memcpy(v.data(), e.locate({opt::Segment::Arena, -1, off}), 32);
  return v;
}

TEST(Executable, RunsThunksInOrderAndRoutesTheExtent) {
  Executable e(two_step_program({}, {}), 1);
  write_x(e, {0, 1, 2, 3, 4, 5, 6, 7});
  e.run();
  EXPECT_EQ(read_at(e, 128), (std::vector<float>{11, 12, 13, 14, 15, 16, 17, 18}));
  write_x(e, {100, 100, 100, 100, 100, 100, 100, 100});
  e.set_extent(2, 4);  // step_a honours it: rows 2, 3 of a keep the old values
  e.run();
  EXPECT_EQ(read_at(e, 64), (std::vector<float>{101, 101, 101, 101, 5, 6, 7, 8}));
  EXPECT_EQ(read_at(e, 128), (std::vector<float>{111, 111, 111, 111, 15, 16, 17, 18}));  // step_b: full
  e.set_extent(4, 4);
  e.run();
  EXPECT_EQ(read_at(e, 128), std::vector<float>(8, 111));
}

TEST(Executable, KernelErrorsNameTheNodeAndLeaveItUsable) {
  bool fail_now = true, std_fail = false;
  RowCfg bad;
  bad.fail_flag = &fail_now;
  bad.std_fail_flag = &std_fail;
  Executable e(two_step_program({}, bad), 2);
  expect_error([&] { e.run(); }, ErrorCategory::InvalidArgument, "node 'step_b' (relu): test kernel refused");
  fail_now = false;
  std_fail = true;
  expect_error([&] { e.run(); }, ErrorCategory::Internal, "node 'step_b' (relu): plain exception");
  std_fail = false;
  write_x(e, std::vector<float>(8, 1));
  e.run();
  EXPECT_EQ(read_at(e, 128), std::vector<float>(8, 12));
}

TEST(Executable, PoisonShowsKernelsWhatTheyMustOverwrite) {
  uint8_t seen = 0;
  RowCfg spy;
  spy.first_seen = &seen;
  Executable e(two_step_program(spy, {}), 1);
  e.run();
  EXPECT_EQ(seen, 0);  // fresh arenas read as zero
  e.set_poison_scratch(true);
  e.run();
  EXPECT_EQ(seen, 0xFF);
  EXPECT_EQ(read_at(e, 128), std::vector<float>(8, 11));  // the persistent input survived
}

TEST(Executable, ReleaseScratchReturnsPagesOfLargeArenas) {
  const int64_t big = cpu::Arena::kMapThreshold * 2;
  Executable e(two_step_program({}, {}, big), 1);
  write_x(e, {1, 2, 3, 4, 5, 6, 7, 8});
  e.run();
  uint8_t* far = e.locate({opt::Segment::Arena, -1, big - 100});
  far[0] = 7;
  EXPECT_GT(e.release_scratch(), big / 2);
  EXPECT_EQ(far[0], 0);                                                  // zero-filled again
  EXPECT_EQ(read_at(e, 0), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));  // input kept
  e.run();
  EXPECT_EQ(read_at(e, 128), (std::vector<float>{12, 13, 14, 15, 16, 17, 18, 19}));
  Executable small(two_step_program({}, {}), 1);
  EXPECT_EQ(small.release_scratch(), 0);  // heap arenas keep their memory
}

TEST(Executable, CloneCopiesPersistentRangesAndIsIndependent) {
  Executable e(two_step_program({}, {}), 1);
  write_x(e, {1, 1, 1, 1, 2, 2, 2, 2});
  auto c = e.clone();
  c->run();
  EXPECT_EQ(read_at(*c, 128), (std::vector<float>{12, 12, 12, 12, 13, 13, 13, 13}));
  write_x(*c, std::vector<float>(8, 0));
  EXPECT_EQ(read_at(e, 0), (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(Arena, AlignedZeroedAndMovable) {
  cpu::Arena a(1000, 128);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 128, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.data()[i], 0);
  EXPECT_FALSE(a.mapped());
  cpu::Arena m(cpu::Arena::kMapThreshold, 64);
  EXPECT_TRUE(m.mapped());
  cpu::Arena moved = std::move(m);
  EXPECT_TRUE(moved.mapped());
  EXPECT_EQ(m.data(), nullptr);  // NOLINT: moved from
  EXPECT_EQ(cpu::Arena(0, 64).data(), nullptr);
  expect_error([] { cpu::Arena(64, 48); }, ErrorCategory::InvalidArgument, "power of two");
}

// ---- compile() on a real plan

opt::Plan plan_for(const Graph& g) {
  opt::PipelineContext ctx;
  ctx.claims = {"cpu", [](const Node& n, const std::vector<const Shape*>& in) {
                  return cpu::kernel_registry().supports(n, in);
                }};
  ctx.options = test_options();
  return opt::compile_pipeline(g, ctx);
}

TEST(Executable, CompileSkipsLeavesAndViewsAndWritesConstants) {
  Graph g("views");
  auto x = g.input("x", Shape({2, 4}, DType::F32));
  auto w = g.param("w", Shape({8}, DType::F32));
  auto r = g.reshape(g.relu(x), {8});  // a view of relu's output
  g.set_outputs({g.add(g.mul(r, w), g.constant_f32({8}, {1, 2, 3, 4, 5, 6, 7, 8}))});
  auto prog = cpu::compile(plan_for(g));
  const Graph& cg = prog->plan.graph;
  EXPECT_GE(prog->num_views, 1);
  int computing = 0;
  for (const Node& n : cg.nodes())
    if (n.kind != OpKind::Input && n.kind != OpKind::Param && n.kind != OpKind::Constant &&
        n.kind != OpKind::Reshape)
      ++computing;
  EXPECT_EQ(int(prog->thunks.size()), computing);
  for (const cpu::Thunk& t : prog->thunks) {
    OpKind k = cg.node(t.node).kind;
    EXPECT_NE(k, OpKind::Reshape);
    EXPECT_NE(k, OpKind::Input);
    EXPECT_EQ(t.num_bufs, cg.node(t.node).inputs.size() + cg.node(t.node).outputs.size());
  }
  ASSERT_EQ(prog->params.size(), 1u);
  EXPECT_EQ(prog->params[0].name, "w");

  Executable e(prog, 2);
  // Params live in the weights segment; write through it, then run.
  const cpu::Weights::Entry* we = e.weights()->find("w");
  ASSERT_NE(we, nullptr);
  std::vector<float> wv{1, -1, 1, -1, 1, -1, 1, -1};
  std::memcpy(e.weights()->data(*we), wv.data(), 32);
  std::vector<float> xv{1, -2, 3, -4, 5, -6, 7, -8};
  int32_t xin = cg.find_input("x");
  std::memcpy(e.locate(prog->values[size_t(xin)][0]), xv.data(), 32);
  e.run();
  const Value out = cg.outputs()[0].value;
  std::vector<float> y(8);
  std::memcpy(y.data(), e.locate(prog->values[size_t(out.node)][size_t(out.out)]), 32);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], std::max(xv[i], 0.f) * wv[i] + float(i + 1)) << i;
}

TEST(Executable, UseWeightsRefusesMissingParamsUnchanged) {
  Graph g("w");
  auto x = g.input("x", Shape({4}, DType::F32));
  g.set_outputs({g.mul(x, g.param("w", Shape({4}, DType::F32)))});
  Graph h("v");
  auto y = h.input("x", Shape({4}, DType::F32));
  h.set_outputs({h.mul(y, h.param("v", Shape({4}, DType::F32)))});
  Executable a(cpu::compile(plan_for(g)), 1);
  Executable b(cpu::compile(plan_for(h)), 1);
  auto before = a.weights();
  expect_error([&] { a.use_weights(b.weights()); }, ErrorCategory::InvalidArgument, "no param 'w'");
  EXPECT_EQ(a.weights(), before);
}

}  // namespace
}  // namespace rlx::test
