#!/bin/bash
# The CUDA backend's checks, on a machine with an NVIDIA GPU (CI has none: there the CUDA
# tests skip with a message). Runs every suite that has a CUDA mode and prints each one's
# summary line; the exit status is non-zero when any suite failed.
#
#   scripts/gpu-check.sh BUILD_DIR SHARED_DIR [SUITES]
#
# BUILD_DIR holds rlx and the test binaries, either as the build made them (BUILD_DIR/rlx,
# BUILD_DIR/tests/rlx_test_*) or side by side in one folder. SHARED_DIR holds the fixtures
# (gguf/, and onnx/node/ or onnx/node.tar.xz, which is unpacked into a temporary folder).
# SUITES: any of cuda e2e llm onnx (default: all four), e.g. "cuda llm".
#   cuda  rlx_test_cuda: the backend's own tests (kernels against the CPU, graph replay,
#         handles, errors, fused steps with the same bits as the launches they replace)
#   e2e   rlx_test_e2e with RLX_E2E_DEVICE=cuda: the end-to-end suite with every graph
#         compiled for CUDA
#   llm   rlx_test_llm with RLX_LLM_DEVICE=cuda: the GGUF fixtures' logits and greedy ids
#         against llama.cpp's, batched and padded passes, greedy generation on the device
#   onnx  rlx test-onnx --device cuda over the official node cases, the failures CUDA is
#         expected to have listed in tests/onnx/expected_failures_cuda.txt
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR SHARED_DIR [SUITES]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
shared=$(cd "$2" && pwd) || exit 2
suites=${3:-cuda e2e llm onnx}
tmp=
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT

bin() {  # the path of binary $1 in the build
  for p in "$build/tests/$1" "$build/$1"; do [ -x "$p" ] && { echo "$p"; return 0; }; done
  echo "gpu-check: no $1 under $build" >&2
  return 1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "gpu-check: nvidia-smi found no GPU (the suites will say whether CUDA is available)"

failed=0
run() {  # name, command...: runs it, prints its summary, counts a failure
  local name=$1 log
  shift
  log=$(mktemp)
  "$@" > "$log" 2>&1
  local rc=$?
  echo "== $name (exit $rc)"
  grep -E '^\[  (PASSED|SKIPPED) *\] [0-9]+ tests?|^\[  FAILED  \]|^[0-9]+ passed' "$log" | head -20
  [ $rc -eq 0 ] || { failed=$((failed + 1)); tail -30 "$log"; }
  rm -f "$log"
}

for s in $suites; do
  case $s in
    cuda) run "rlx_test_cuda" "$(bin rlx_test_cuda)" ;;
    e2e) run "rlx_test_e2e on CUDA" env RLX_E2E_DEVICE=cuda RLX_SOURCE_DIR="$root" "$(bin rlx_test_e2e)" ;;
    llm) run "rlx_test_llm on CUDA" env RLX_LLM_DEVICE=cuda RLX_SHARED_DIR="$shared" "$(bin rlx_test_llm)" ;;
    onnx)
      nodes=$shared/onnx/node
      if [ ! -d "$nodes" ] && [ -f "$shared/onnx/node.tar.xz" ]; then
        tmp=$(mktemp -d)
        tar xJf "$shared/onnx/node.tar.xz" -C "$tmp"
        nodes=$(find "$tmp" -maxdepth 2 -type d -name node | head -1)
      fi
      run "rlx test-onnx --device cuda" "$(bin rlx)" test-onnx --device cuda --no-isolate \
        --expected-failures "$root/tests/onnx/expected_failures_cuda.txt" "$nodes"
      ;;
    *) echo "gpu-check: unknown suite '$s' (cuda, e2e, llm, onnx)" >&2; failed=$((failed + 1)) ;;
  esac
done
echo "gpu-check: $failed suite(s) failed"
[ $failed -eq 0 ]
