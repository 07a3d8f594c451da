// rlx_bench_micro entry point: runs the registered benchmarks, then prints, for every
// rlx benchmark that has a peer measured in the same run (same shape and threads), the
// ratio of their GFLOP/s, and for one-thread GEMMs the fraction of the measured
// single-core FMA peak.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

namespace {

// Remembers GFLOP/s per benchmark name ("<impl>/<shape>/t<threads>").
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // Plain runs, or the median when repetitions are aggregated.
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      std::string name = r.benchmark_name();
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name != "median") continue;
        name = name.substr(0, name.size() - std::string("_median").size());
      }
      const std::string rt = "/real_time";  // UseRealTime() appends it; the tables key on the plain name
      if (name.size() > rt.size() && name.compare(name.size() - rt.size(), rt.size(), rt) == 0)
        name.resize(name.size() - rt.size());
      auto it = r.counters.find("GFLOP/s");
      if (it != r.counters.end()) gflops_[name] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    bool header = false;
    if (auto p = gflops_.find("fma_peak/t1"); p != gflops_.end())
      std::printf("\nsingle-core FMA peak (measured): %.1f GFLOP/s\n", p->second);
    for (const auto& [name, mine] : gflops_) {
      const std::string prefix = "rlx_matmul/";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string rest = name.substr(prefix.size());
      auto peer = gflops_.find("openblas_sgemm/" + rest);
      if (peer == gflops_.end()) continue;
      if (!header)
        std::printf("\n%-36s %12s %12s %8s %12s\n", "matmul (MxKxN, threads)", "rlx GFLOP/s", "OpenBLAS", "ratio",
                    "rlx/FMA peak");
      header = true;
      // One-thread rows against the measured single-core FMA peak (fma_peak.cpp).
      auto peak = gflops_.find("fma_peak/t1");
      const bool one = rest.size() > 3 && rest.compare(rest.size() - 3, 3, "/t1") == 0;
      if (one && peak != gflops_.end())
        std::printf("%-36s %12.1f %12.1f %8.2f %11.0f%%\n", rest.c_str(), mine, peer->second, mine / peer->second,
                    100.0 * mine / peak->second);
      else
        std::printf("%-36s %12.1f %12.1f %8.2f %12s\n", rest.c_str(), mine, peer->second, mine / peer->second, "-");
    }
  }

 private:
  std::map<std::string, double> gflops_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
