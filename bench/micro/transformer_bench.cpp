// Transformer-block kernels at BERT/GPT-like shapes: attention (B1 H12 S512 D64, plain
// and causal, and a decoding step), softmax over attention scores and layer norm over
// tokens. Attention reports GFLOP/s (QKᵀ and PV products), the others GB/s moved.
#include <benchmark/benchmark.h>

#include <string>

#include "kernel_runner.h"

namespace rlx::bench {
namespace {

void bm_attention(benchmark::State& st, int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d, bool causal,
                  int threads) {
  Graph g;
  auto q = g.input("q", Shape({b, h, sq, d}, DType::F32));
  auto k = g.input("k", Shape({b, h, sk, d}, DType::F32));
  auto v = g.input("v", Shape({b, h, sk, d}, DType::F32));
  auto y = g.attention(q, k, v, {}, causal);
  KernelRunner r(g, y.node, threads);
  for (auto _ : st) r.run();
  // Visible (query, key) pairs: all, or the causal band aligned to the end.
  double pairs = double(sq) * double(sk);
  if (causal) {
    pairs = 0;
    for (int64_t i = 0; i < sq; ++i) pairs += double(std::min(sk, i + (sk - sq) + 1));
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * double(b * h) * pairs * double(d) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_softmax(benchmark::State& st, int64_t rows, int64_t cols, int threads) {
  Graph g;
  auto y = g.softmax(g.input("x", Shape({rows, cols}, DType::F32)), -1);
  KernelRunner r(g, y.node, threads);
  for (auto _ : st) r.run();
  st.counters["GB/s"] =
      benchmark::Counter(2.0 * double(rows * cols) * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_layer_norm(benchmark::State& st, int64_t rows, int64_t cols, int threads) {
  Graph g;
  auto x = g.input("x", Shape({rows, cols}, DType::F32));
  auto y = g.layer_norm(x, g.input("s", Shape({cols}, DType::F32)), g.input("b", Shape({cols}, DType::F32)));
  KernelRunner r(g, y.node, threads);
  for (auto _ : st) r.run();
  st.counters["GB/s"] =
      benchmark::Counter(2.0 * double(rows * cols) * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

[[maybe_unused]] const bool kRegistered = [] {
  for (int t : {1, 2}) {
    const std::string ts = "/t" + std::to_string(t);
    benchmark::RegisterBenchmark(("rlx_attention/b1_h12_s512_d64" + ts).c_str(), bm_attention, 1, 12, 512, 512, 64,
                                 false, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_attention/b1_h12_s512_d64_causal" + ts).c_str(), bm_attention, 1, 12, 512,
                                 512, 64, true, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_attention/b1_h32_q1_k2048_d128_decode" + ts).c_str(), bm_attention, 1, 32, 1,
                                 2048, 128, true, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_softmax/6144x512" + ts).c_str(), bm_softmax, 12 * 512, 512, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_layer_norm/512x768" + ts).c_str(), bm_layer_norm, 512, 768, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace rlx::bench
