// Thread-count independence: a 4-layer transformer encoder and a residual CNN compiled
// with threads=1 and threads=2 give bit-identical outputs (kernels split work, never
// the order of a sum).
#include "e2e_models.h"

namespace rlx::e2e {
namespace {

void expect_same_across_threads(const Graph& g, const Feeds& in, const Feeds& params) {
  std::vector<T> outs[2];
  for (int t = 1; t <= 2; ++t) {
    CompiledGraph net = compile_e2e(g, default_options(t));
    // The CPU runs on the threads asked for; a device backend (RLX_E2E_DEVICE) on none of
    // the host's, which it reports as 1, and must give the same bits all the same.
    EXPECT_EQ(net.capabilities().threads, e2e_device() == Device::Cpu ? t : 1);
    set_params(net, params);
    outs[t - 1] = run_net(net, in);
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t o = 0; o < outs[0].size(); ++o)
    expect_bitwise_equal(outs[0][o], outs[1][o], g.name() + " output " + std::to_string(o));
}

TEST(Threads, TransformerEncoderFourLayersBitIdentical) {
  test_graphs::TransformerConfig c;
  c.layers = 4;
  c.seq = 48, c.hidden = 192, c.heads = 6, c.mlp = 384;
  Graph g = test_graphs::transformer_encoder(c);
  expect_same_across_threads(g, random_inputs(g, 1), random_params(g, 2));
}

TEST(Threads, ResidualCnnBitIdentical) {
  test_graphs::CnnConfig c;
  c.batch = 2, c.image = 32;
  c.stage_channels = {16, 32, 48};
  c.blocks_per_stage = 1;
  Graph g = test_graphs::residual_cnn(c);
  expect_same_across_threads(g, random_inputs(g, 3), random_params(g, 4));
}

TEST(Threads, DecoderBlockBitIdentical) {
  Graph g = decoder_block(33, 64, 8, 2, 160);
  expect_same_across_threads(g, decoder_inputs(5, 33, 64, 8), random_params(g, 6));
}

}  // namespace
}  // namespace rlx::e2e
