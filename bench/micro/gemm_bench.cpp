// GEMM-heavy kernels at realistic shapes: matmul (square, MLP-like, a decoding
// matrix-vector product with a row-major and with a transposed [N, K] weight), with
// OpenBLAS's cblas_sgemm on the same shapes and thread counts as the peer, and a
// ResNet-like 3x3 conv2d. Counters report GFLOP/s.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/gemm.h"
#include "kernel_runner.h"

#if RLX_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace rlx::bench {
namespace {

struct MatmulShape {
  int64_t m, k, n;
  bool b_transposed;  // b stored [N, K] (a linear layer's weight), used transposed
};

// Square 256..2048, the transformer shapes of a BERT-base layer at 128 tokens (QKV / output
// projection, FFN up, FFN down), an MLP-like product and decode-sized matrix-vector ones.
const std::vector<MatmulShape> kMatmulShapes = {
    {256, 256, 256, false},   {512, 512, 512, false},    {1024, 1024, 1024, false}, {2048, 2048, 2048, false},
    {128, 768, 768, false},   {128, 768, 3072, false},   {128, 3072, 768, false},   {1024, 1024, 4096, false},
    {1, 4096, 4096, false},   {1, 4096, 4096, true}};

std::string shape_name(const MatmulShape& s, int threads) {
  return std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + (s.b_transposed ? "_bT" : "") +
         "/t" + std::to_string(threads);
}

void set_flops(benchmark::State& st, double flops) {
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

std::vector<float> filled(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return v;
}

// The matmul node through the registry; a transposed weight cannot be one matmul node
// (the graph would hold a transpose), so that case calls the same sgemm on the strided
// view, as attention and fused layers do.
void bm_rlx_matmul(benchmark::State& st, MatmulShape s, int threads) {
  if (!s.b_transposed) {
    Graph g;
    auto a = g.input("a", Shape({s.m, s.k}, DType::F32));
    auto y = g.matmul(a, g.input("b", Shape({s.k, s.n}, DType::F32)));
    KernelRunner r(g, y.node, threads);
    for (auto _ : st) r.run();
  } else {
    const auto a = filled(size_t(s.m * s.k), 1), w = filled(size_t(s.n * s.k), 2);
    std::vector<float> c(size_t(s.m * s.n));
    cpu::ThreadPool pool(threads);
    cpu::SgemmProblem p;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.a = {a.data(), DType::F32, s.k, 1};
    p.b = {w.data(), DType::F32, 1, s.k};
    p.c = c.data();
    p.ldc = s.n;
    const cpu::IsaKernels& ks = cpu::isa_kernels(cpu::detect_isa());
    for (auto _ : st) cpu::sgemm(p, &pool, ks);
  }
  set_flops(st, 2.0 * double(s.m) * double(s.n) * double(s.k));
  st.SetLabel(std::string(cpu::isa_name(cpu::detect_isa())));
}

#if RLX_BENCH_OPENBLAS
void bm_openblas(benchmark::State& st, MatmulShape s, int threads) {
  const auto a = filled(size_t(s.m * s.k), 1), b = filled(size_t(s.n * s.k), 2);
  std::vector<float> c(size_t(s.m * s.n));
  openblas_set_num_threads(threads);
  for (auto _ : st)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s.b_transposed ? CblasTrans : CblasNoTrans, int(s.m), int(s.n),
                int(s.k), 1.0f, a.data(), int(s.k), b.data(), s.b_transposed ? int(s.k) : int(s.n), 0.0f, c.data(),
                int(s.n));
  set_flops(st, 2.0 * double(s.m) * double(s.n) * double(s.k));
}
#endif

void conv_bench(benchmark::State& st, int64_t n, int64_t c, int64_t hw, int64_t cout, int64_t k, int64_t stride,
                int64_t group, int threads, bool const_weights) {
  Graph g;
  auto x = g.input("x", Shape({n, c, hw, hw}, DType::F32));
  auto w = g.input("w", Shape({cout, c / group, k, k}, DType::F32));
  auto b = g.input("b", Shape({cout}, DType::F32));
  const int64_t p = k / 2;
  auto y = g.conv2d(x, w, b, {stride, stride}, {p, p, p, p}, {1, 1}, group);
  const auto od = g.type(y).static_dims();
  KernelRunner r(g, y.node, threads, const_weights ? std::vector<int>{1, 2} : std::vector<int>{});
  for (auto _ : st) r.run();
  set_flops(st, 2.0 * double(n * cout * od[2] * od[3]) * double(c / group * k * k));
}

void bm_conv(benchmark::State& st, int64_t n, int64_t c, int64_t hw, int64_t cout, int64_t k, int64_t stride,
             int64_t group, int threads) {
  conv_bench(st, n, c, hw, cout, k, stride, group, threads, false);
}

// The weights and bias as constants of the program, as a model's initializers compile.
void bm_conv_const(benchmark::State& st, int64_t c, int64_t hw, int threads) {
  conv_bench(st, 1, c, hw, c, 3, 1, 1, threads, true);
}

const int kThreads[] = {1, 2};

[[maybe_unused]] const bool kRegistered = [] {
  for (int t : kThreads) {
    for (const MatmulShape& s : kMatmulShapes) {
      benchmark::RegisterBenchmark(("rlx_matmul/" + shape_name(s, t)).c_str(), bm_rlx_matmul, s, t)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
#if RLX_BENCH_OPENBLAS
      benchmark::RegisterBenchmark(("openblas_sgemm/" + shape_name(s, t)).c_str(), bm_openblas, s, t)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
#endif
    }
    benchmark::RegisterBenchmark(("rlx_conv2d/n1_c64_56x56_k64_3x3/t" + std::to_string(t)).c_str(), bm_conv, 1, 64,
                                 56, 64, 3, 1, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_conv2d/n1_c128_28x28_k128_3x3/t" + std::to_string(t)).c_str(), bm_conv, 1,
                                 128, 28, 128, 3, 1, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_conv2d/n1_c64_56x56_k256_1x1/t" + std::to_string(t)).c_str(), bm_conv, 1, 64,
                                 56, 256, 1, 1, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    // ResNet-50's last stage: 49 output positions, many channels (the transposed product).
    benchmark::RegisterBenchmark(("rlx_conv2d/n1_c512_7x7_k512_3x3/t" + std::to_string(t)).c_str(), bm_conv, 1, 512,
                                 7, 512, 3, 1, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_conv2d/n1_c512_7x7_k2048_1x1/t" + std::to_string(t)).c_str(), bm_conv, 1, 512,
                                 7, 2048, 1, 1, 1, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("rlx_conv2d/n1_c128_56x56_dw3x3/t" + std::to_string(t)).c_str(), bm_conv, 1, 128,
                                 56, 128, 3, 1, 128, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    // ResNet-50's 3x3 stride-1 convs with constant weights, as a model compiles them (the
    // Winograd path where it applies; RLX_CPU_WINOGRAD=0 gives the GEMM path). FLOP/s count
    // the direct product's multiply-adds.
    for (const auto& [c, hw] : {std::pair<int64_t, int64_t>{64, 56}, {128, 28}, {256, 14}, {512, 7}})
      benchmark::RegisterBenchmark(("rlx_conv2d_const/n1_c" + std::to_string(c) + "_" + std::to_string(hw) + "x" +
                                    std::to_string(hw) + "_k" + std::to_string(c) + "_3x3/t" + std::to_string(t))
                                       .c_str(),
                                   bm_conv_const, c, hw, t)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace rlx::bench
