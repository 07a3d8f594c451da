// Decode-step matrix-vector products per weight format (or, with --rows M, prefill-sized
// products of M rows): a chain of L qmatmul products through square K x K matrices (each its
// own weights, together far larger than a GPU's L2), compiled for a device and run back to
// back (run_pipelined: no host wait between runs), after warm-up. Prints per format the time
// per product, the weight bytes read per second (what a decode step's products are bound by)
// and the multiply-adds per second. The weights are an arbitrary fixed byte pattern (small
// finite scales): only the time is measured.
//   rlx_bench_qmatmul [--device cuda|cpu] [--k 4096] [--layers 16] [--runs 50] [--rows 1]
//                     [--threads 1] [formats...]
// formats by name (f16 q4_0 q2_K ...; default: every format the device reads).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "rlx/quant.h"
#include "rlx/rlx.h"

using namespace rlx;

namespace {

double seconds_per_run(CompiledGraph& net, const std::string& x_name, int64_t rows, int64_t k, int runs) {
  TypedTensor x{DType::F32, {rows, k}, std::vector<uint8_t>(size_t(rows * k) * 4)};
  for (int64_t i = 0; i < rows * k; ++i) {
    const float v = float((i % 7) - 3) * 0.25f;
    std::memcpy(x.bytes.data() + i * 4, &v, 4);
  }
  std::vector<std::map<std::string, TypedTensor>> feeds(size_t(runs), {{x_name, x}});
  net.run_pipelined(std::vector<std::map<std::string, TypedTensor>>(3, {{x_name, x}}));  // warm-up (and the capture)
  const auto t0 = std::chrono::steady_clock::now();
  net.run_pipelined(feeds);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / runs;
}

// A whole number of `opt` in [1, hi], or a usage error naming it.
bool whole(const std::string& opt, const std::string& s, int64_t hi, int64_t& v) {
  char* end = nullptr;
  const long long n = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end || n < 1 || n > hi) {
    std::fprintf(stderr, "rlx_bench_qmatmul: %s takes a whole number from 1 to %lld, not '%s'\n", opt.c_str(),
                 (long long)hi, s.c_str());
    return false;
  }
  v = n;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Device dev = Device::Cuda;
  int64_t k = 4096, layers = 16, rows = 1, threads = 1;
  int runs = 50, rounds = 3;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    int64_t n = 0;
    if (a == "--device") {
      const std::string d = next();
      if (d != "cpu" && d != "cuda") {
        std::fprintf(stderr, "rlx_bench_qmatmul: --device takes cpu or cuda, not '%s'\n", d.c_str());
        return 2;
      }
      dev = d == "cpu" ? Device::Cpu : Device::Cuda;
    } else if (a == "--rows" || a == "--threads") {
      if (!whole(a, next(), a == "--rows" ? 4096 : kMaxThreads, n)) return 2;
      (a == "--rows" ? rows : threads) = n;
    } else if (a == "--k" || a == "--layers" || a == "--runs" || a == "--rounds") {
      // k: a multiple of 32 (the smallest block; a format whose blocks do not divide it, the
      // K-quants' 256 under a k like SmolLM2's 576, is skipped); the others stay small enough to run.
      if (!whole(a, next(), a == "--k" ? int64_t(1) << 20 : 100000, n)) return 2;
      if (a == "--k" && n % 32) {
        std::fprintf(stderr, "rlx_bench_qmatmul: --k must be a multiple of 32 (the smallest block), not %lld\n",
                     (long long)n);
        return 2;
      }
      if (a == "--k") k = n;
      else if (a == "--layers") layers = n;
      else if (a == "--runs") runs = int(n);
      else rounds = int(n);
    } else {
      names.push_back(a);
    }
  }
  if (names.empty())
    names = {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"};
  try {
    std::printf("qmatmul chain on %s, %lld threads: %lld products of [%lld, %lld] x [%lld, %lld]^T per run, %d runs back to "
                "back, median of %d\n",
                std::string(device_name(dev)).c_str(), (long long)threads, (long long)layers, (long long)rows, (long long)k,
                (long long)k, (long long)k, runs, rounds);
    std::printf("%-8s %14s %14s %12s %10s\n", "format", "MB per run", "us per product", "weight GB/s", "GMAC/s");
    for (const std::string& name : names) {
      uint32_t fmt = 0;
      if (!quant::from_name(name.c_str(), fmt)) {
        std::fprintf(stderr, "unknown format '%s'\n", name.c_str());
        return 2;
      }
      if (k % quant::get(fmt).block_elems) {
        std::printf("%-8s skipped: its blocks of %lld do not divide k\n", name.c_str(),
                    (long long)quant::get(fmt).block_elems);
        continue;
      }
      const int64_t rb = quant::row_bytes(fmt, k);
      Graph g("qmatmul_chain");
      Value x = g.input("x", Shape({rows, k}, DType::F32));
      for (int64_t l = 0; l < layers; ++l)
        x = g.qmatmul(x, g.param("w" + std::to_string(l), Shape({k, rb}, DType::U8)), fmt, k);
      g.set_outputs({x}, {"y"});
      CompileOptions o;
      o.threads = int(threads);
      CompiledGraph net = Session(dev, o).compile(g);
      std::vector<uint8_t> w(size_t(k * rb), 0x11);
      for (int64_t l = 0; l < layers; ++l) net.set_param_typed("w" + std::to_string(l), w.data(), w.size(), DType::U8);
      std::vector<double> t;
      for (int r = 0; r < rounds; ++r) t.push_back(seconds_per_run(net, "x", rows, k, runs));
      std::sort(t.begin(), t.end());
      const double s = t[t.size() / 2], bytes = double(layers) * double(k) * double(rb);
      const double macs = double(layers) * double(rows) * double(k) * double(k);
      std::printf("%-8s %14.1f %14.2f %12.1f %10.1f\n", name.c_str(), bytes / 1e6, s / double(layers) * 1e6, bytes / s / 1e9,
                  macs / s / 1e9);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rlx_bench_qmatmul: %s\n", e.what());
    return 1;
  }
  return 0;
}
