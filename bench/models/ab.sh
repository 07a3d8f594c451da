#!/usr/bin/env bash
# A/B latency of two rlx builds on the real-weight models: `rlx bench` of A then B, interleaved,
# ROUNDS rounds of RUNS warm runs each; prints the median over rounds of each build's p50 and B/A.
# For "did this change make anything slower" (same machine, same inputs, same threads).
#   bench/models/ab.sh A/rlx B/rlx        (env: ROUNDS=5 RUNS=30 THREADS="1 2" MODELS="vad cls rec det")
# Build A from another commit with e.g.: git worktree add /tmp/a REV && cmake -S /tmp/a -B /tmp/a/build
#   -DRLX_BUILD_TESTS=OFF -DRLX_BUILD_BENCH=OFF && cmake --build /tmp/a/build --target rlx_cli
set -euo pipefail
a="${1:?usage: bench/models/ab.sh A/rlx B/rlx}"; b="${2:?usage: bench/models/ab.sh A/rlx B/rlx}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${ROUNDS:-5}" runs="${RUNS:-30}" threads="${THREADS:-1 2}" wanted="${MODELS:-vad cls rec det}"
models=$(bash "$root/scripts/fetch-models.sh" --peer)
export NODE_PATH="$models/ort/node_modules"
gen="$root/bench/models/make_input.js"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$gen" "$tmp/cls.npy" --shape 1,3,48,192 --dtype f32
node "$gen" "$tmp/rec.npy" --shape 1,3,48,320 --dtype f32
node "$gen" "$tmp/det.npy" --shape 1,3,320,320 --dtype f32
node "$gen" "$tmp/vad.input.npy" --shape 1,512 --dtype f32
node "$gen" "$tmp/vad.state.npy" --shape 2,1,128 --dtype f32 --value 0
node "$gen" "$tmp/vad.sr.npy" --shape "" --dtype i64 --value 16000
declare -A file=([cls]=ppocr_cls.onnx [rec]=ppocr_rec.onnx [det]=ppocr_det.onnx [vad]=silero_vad_v5.onnx)
declare -A feeds=([cls]="--input x=$tmp/cls.npy" [rec]="--input x=$tmp/rec.npy" [det]="--input x=$tmp/det.npy"
                  [vad]="--input input=$tmp/vad.input.npy --input state=$tmp/vad.state.npy --input sr=$tmp/vad.sr.npy")
p50() {  # p50 BINARY MODEL THREADS
  # shellcheck disable=SC2086  # feeds are several words
  "$1" bench "$models/${file[$2]}" ${feeds[$2]} --threads "$3" --runs "$runs" 2>&1 | sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-5s %7s %10s %10s %7s\n' model threads "A p50" "B p50" "B/A"
for m in $wanted; do
  for t in $threads; do
    ra=() rb=()
    for _ in $(seq "$rounds"); do ra+=("$(p50 "$a" "$m" "$t")"); rb+=("$(p50 "$b" "$m" "$t")"); done
    ma=$(median "${ra[@]}") mb=$(median "${rb[@]}")
    printf '%-5s %7s %10s %10s %7s\n' "$m" "$t" "$ma" "$mb" "$(awk -v x="$mb" -v y="$ma" 'BEGIN { printf "%.3f", x / y }')"
  done
done
