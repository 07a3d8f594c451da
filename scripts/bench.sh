#!/usr/bin/env bash
# make bench: the per-kernel micro benchmarks (BUILD/bench/rlx_bench_micro, Google
# Benchmark with OpenBLAS as the GEMM peer, when it was built), then the end-to-end model
# benchmarks against ONNX Runtime 1.30 (bench/models/run.sh) and the LLM benchmark against
# llama.cpp (bench/llm/run.sh). Ends with a summary: each section's status and the model table
# again (the LLM table is the section just above it). Exits non-zero if any fails.
#   scripts/bench.sh [BUILD_DIR]
# Environment: see bench/models/run.sh (BENCH_RUNS, BENCH_ROUNDS, BENCH_WARMUP, BENCH_THREADS,
# BENCH_MODELS) and bench/llm/run.sh.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
status=0
# PyTorch for the exported models (bench/models/export_torch.py); only make bench needs it.
bash "$root/scripts/install-deps.sh" --bench || status=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
declare -A result
micro="$build/bench/rlx_bench_micro"
if [ -x "$micro" ]; then
  echo "== micro benchmarks ($micro)"
  if "$micro"; then result[micro]=ok; else result[micro]=FAILED; status=1; fi
else
  echo "== micro benchmarks: $micro not built (configure with -DRLX_BUILD_BENCH=ON), skipped"
  result[micro]="not built, skipped"
fi
echo "== model benchmarks"
if bash "$root/bench/models/run.sh" "$build" | tee "$log"; then  # pipefail: run.sh's status
  result[models]=ok
else
  result[models]=FAILED; status=1
fi
echo "== LLM benchmarks"
if bash "$root/bench/llm/run.sh" "$build"; then result[llm]=ok; else result[llm]=FAILED; status=1; fi

echo
echo "== summary: micro ${result[micro]}; models ${result[models]}; LLM ${result[llm]} (tables above)"
sed -n '/^== models:/,$p' "$log"
exit $status
