#!/usr/bin/env bash
# make bench: the per-kernel micro benchmarks (BUILD/bench/rlx_bench_micro, Google
# Benchmark with OpenBLAS as the GEMM peer, when it was built), then the end-to-end model
# benchmarks against ONNX Runtime 1.30 (bench/models/run.sh) and the LLM benchmark against
# llama.cpp (bench/llm/run.sh). Exits non-zero if any fails.
#   scripts/bench.sh [BUILD_DIR]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
status=0
micro="$build/bench/rlx_bench_micro"
if [ -x "$micro" ]; then
  echo "== micro benchmarks ($micro)"
  "$micro" || status=1
else
  echo "== micro benchmarks: $micro not built (configure with -DRLX_BUILD_BENCH=ON), skipped"
fi
echo "== model benchmarks"
bash "$root/bench/models/run.sh" "$build" || status=1
echo "== LLM benchmarks"
bash "$root/bench/llm/run.sh" "$build" || status=1
exit $status
