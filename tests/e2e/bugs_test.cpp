// Minimal reproductions of bugs found by the end-to-end tests in code owned elsewhere.
// Each is skipped while the bug is open (the skip message names it); remove the skip
// when the fix lands. Root causes are in the e2e report.
#include "e2e_ref.h"
#include "e2e_util.h"

namespace rlx::e2e {
namespace {

// src/backends/cpu/kernels/attention.cpp, run_attention: the K/V pack lambda runs on
// pool workers but writes to `packed.data()`, and `packed` is a thread_local of the
// calling thread: on a worker it names the worker's own (empty) vector, so the pack
// writes through a null pointer (segfault), or into a stale buffer the caller never
// reads. Needs Sq * (Hq / Hkv) >= 8 and threads >= 2.
TEST(Bugs, AttentionPacksKvOnWorkerThreads) {
  if (kBugAttentionPackOnWorkers) GTEST_SKIP() << "bug: attention K/V pack uses the worker's thread_local buffer";
  Graph g("attn_threads");
  Value q = g.input("q", Shape({1, 4, 8, 16}, DType::F32));
  Value k = g.input("k", Shape({1, 4, 96, 16}, DType::F32));
  Value v = g.input("v", Shape({1, 4, 96, 16}, DType::F32));
  g.set_outputs({g.attention(q, k, v, {}, true)});
  CompileOptions o = default_options(2);
  CompiledGraph net = Session(Device::Cpu, o).compile(g);
  Rng rng(1);
  Feeds in{{"q", rng.tensor({1, 4, 8, 16})}, {"k", rng.tensor({1, 4, 96, 16})}, {"v", rng.tensor({1, 4, 96, 16})}};
  const T want = ref::attention(in["q"], in["k"], in["v"], nullptr, true, 0);
  for (int i = 0; i < 50; ++i) expect_close(run_net(net, in)[0], want, 5e-5, 5e-6, "attention with 2 threads");
}

}  // namespace
}  // namespace rlx::e2e
