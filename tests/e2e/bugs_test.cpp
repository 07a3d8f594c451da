// Minimal reproductions of bugs found by the end-to-end tests in code owned elsewhere.
// Each is skipped while the bug is open (the skip message names it); once fixed, the
// test stays as a regression test. Root causes are in the e2e report.
#include <cstdlib>

#include "e2e_ref.h"
#include "e2e_util.h"

namespace rlx::e2e {
namespace {

// Fixed (b175c9f). src/backends/cpu/kernels/attention.cpp, run_attention: the K/V pack
// lambda ran on pool workers but wrote to `packed.data()`, a thread_local of the
// calling thread: on a worker it named the worker's own (empty) vector, so the pack
// wrote through a null pointer (segfault). Needs Sq * (Hq / Hkv) >= 8, threads >= 2.
TEST(Bugs, AttentionPacksKvOnWorkerThreads) {
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

// RLX_ISA=native: the kernels' ISA detection accepts it (src/backends/cpu/isa.cpp,
// detect_isa: "native" = the hardware's level) but apply_env rejects it
// (src/runtime/env.cpp, apply_env: only scalar/avx2/avx512), so every compile throws.
// The registry text lists three values; one of the two files is wrong.
TEST(Bugs, IsaNativeAcceptedByKernelsRejectedBySession) {
  if (kBugIsaNativeRejected) GTEST_SKIP() << "bug: RLX_ISA=native rejected by apply_env, accepted by detect_isa";
  const char* old = std::getenv("RLX_ISA");
  const std::string saved = old ? old : "";
  setenv("RLX_ISA", "native", 1);
  Graph g("isa_native");
  g.set_outputs({g.exp(g.input("x", Shape({4}, DType::F32)))});
  std::string error;
  try {
    CompiledGraph net = Session(Device::Cpu, default_options()).compile(g);
    run_net(net, {{"x", T({4}, {0, 1, 2, 3})}});
  } catch (const Error& e) {
    error = e.what();
  }
  if (old) setenv("RLX_ISA", saved.c_str(), 1);
  else unsetenv("RLX_ISA");
  EXPECT_EQ(error, "") << "RLX_ISA=native should select the hardware's level";
}

}  // namespace
}  // namespace rlx::e2e
