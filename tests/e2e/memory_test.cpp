// Memory plan quality through Session: the arena of the full-size 12-layer encoder and
// of the default residual CNN is within 10% of the lower bound (the largest total of
// simultaneously live bytes). Compile only: the report is known before any run.
#include "e2e_models.h"

namespace rlx::e2e {
namespace {

void expect_tight(const Graph& g) {
  CompileOptions o = default_options();
  o.verify_each_pass = false;  // the plan is checked by the memplan tests; keep this fast
  CompiledGraph net = compile_e2e(g, o);
  const CompileReport& r = net.report();
  EXPECT_GT(r.lower_bound_bytes, 0);
  EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
  EXPECT_LE(double(r.arena_bytes), 1.10 * double(r.lower_bound_bytes))
      << g.name() << ": arena " << r.arena_bytes << " bytes, lower bound " << r.lower_bound_bytes << "\n" << r.memory;
}

TEST(Memory, TwelveLayerEncoderArenaNearLowerBound) { expect_tight(test_graphs::transformer_encoder()); }

TEST(Memory, ResidualCnnArenaNearLowerBound) { expect_tight(test_graphs::residual_cnn()); }

}  // namespace
}  // namespace rlx::e2e
