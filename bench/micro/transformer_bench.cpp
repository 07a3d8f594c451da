// Transformer-block kernels at BERT/GPT-like shapes: attention (B1 H12 S512 D64, plain
// and causal, and a decoding step), a decode step's attention over an f16 KV cache
// (kv_attention: grouped query heads, one sequence deep in its cache and eight batched
// ones, and a prompt chunk's 512 queries), softmax over attention scores and layer norm over tokens. Attention reports GFLOP/s
// (QKᵀ and PV products; kv_attention also the GB/s of cache rows, counted once), the others GB/s moved.
#include <benchmark/benchmark.h>

#include <algorithm>
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

// Queries [b, hq, t, d] over f16 caches [b, hkv, past + t, d] holding `past` rows each (t > 1:
// a prompt pass's chunk, each query seeing the new rows up to its own).
void bm_kv_attention(benchmark::State& st, int64_t b, int64_t hq, int64_t hkv, int64_t past, int64_t d, int64_t t,
                     int threads) {
  Graph g;
  auto q = g.input("q", Shape({b, hq, t, d}, DType::F32));
  auto kc = g.input("kc", Shape({b, hkv, past + t, d}, DType::F16));
  auto vc = g.input("vc", Shape({b, hkv, past + t, d}, DType::F16));
  auto kn = g.input("kn", Shape({b, hkv, t, d}, DType::F16));
  auto vn = g.input("vn", Shape({b, hkv, t, d}, DType::F16));
  auto y = g.kv_attention(q, kc, vc, kn, vn, g.input("past", Shape({b}, DType::I64)));
  KernelRunner r(g, y.node, threads);
  std::fill_n(static_cast<int64_t*>(r.input(5)), b, past);
  for (auto _ : st) r.run();
  const double pairs = double(t) * double(past) + double(t) * double(t + 1) / 2;  // (query, row) pairs
  st.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * double(b * hq) * pairs * double(d) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GB/s"] = benchmark::Counter(2.0 * 2 * double(b * hkv) * double(past + t) * double(d) * 1e-9,
                                           benchmark::Counter::kIsIterationInvariantRate);
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
    // SmolLM2-135M's heads (9 query heads over 3 KV heads, d 64) after 2,048 tokens, and eight
    // sequences of 160; TinyLlama-1.1B's (32 over 4) after 2,048.
    benchmark::RegisterBenchmark(("rlx_kv_attention/b1_h9_kv3_past2048_d64_f16" + ts).c_str(), bm_kv_attention, 1, 9,
                                 3, 2048, 64, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_kv_attention/b8_h9_kv3_past160_d64_f16" + ts).c_str(), bm_kv_attention, 8, 9,
                                 3, 160, 64, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_kv_attention/b1_h32_kv4_past2048_d64_f16" + ts).c_str(), bm_kv_attention, 1,
                                 32, 4, 2048, 64, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    // A prompt pass's last chunk of 512 tokens after 1,536 (SmolLM2's heads).
    benchmark::RegisterBenchmark(("rlx_kv_attention/b1_h9_kv3_past1536_t512_d64_f16" + ts).c_str(), bm_kv_attention,
                                 1, 9, 3, 1536, 64, 512, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
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
