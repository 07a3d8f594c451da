#!/usr/bin/env bash
# Regenerates docs/onnx-coverage.md: runs the ONNX backend node suite with the built rlx,
# then prints the coverage table from the importer's op table and the run's results.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
suite="${RLX_ONNX_SUITE:-$root/../shared/onnx/node}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$build/rlx" test-onnx "$suite" --jobs "$(nproc)" > "$log" || true
"$build/rlx" onnx-coverage --suite "$suite" --results "$log" > "$root/docs/onnx-coverage.md"
tail -n 1 "$log"
