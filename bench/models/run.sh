#!/usr/bin/env bash
# End-to-end model benchmarks: each real-weight model through `rlx bench` and through
# ONNX Runtime 1.30 (ort_run.js --bench, the node binding) in the same run, with the same
# .npy inputs and the same thread counts, then one table with the ratio rlx/ORT (p50).
#   bench/models/run.sh [BUILD_DIR]
# Environment: BENCH_RUNS (timed runs per measurement, default 20), BENCH_THREADS
# (thread counts, default "1 2"), BENCH_MODELS (subset of: det rec cls vad).
# Inputs: floats in [0, 1) from make_input.js's fixed-seed generator (the same values
# `rlx bench` generates), integers as the model needs (VAD: zero state, sr = 16000).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
rlx="$build/rlx"
runs="${BENCH_RUNS:-20}"
threads="${BENCH_THREADS:-1 2}"
wanted="${BENCH_MODELS:-det rec cls vad}"
[ -x "$rlx" ] || { echo "bench/models: $rlx is missing (build the rlx_cli target)" >&2; exit 1; }
models=$(bash "$root/scripts/fetch-models.sh" --peer) || { echo "bench/models: cannot fetch the models" >&2; exit 1; }
export NODE_PATH="$models/ort/node_modules"
gen="$root/bench/models/make_input.js"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# model key -> "file.onnx|label|input specs (NAME=DTYPE:DIMS[:value V], separated by ';')"
declare -A spec=(
  [det]="ppocr_det.onnx|PP-OCRv4 det 1x3x320x320|x=f32:1,3,320,320"
  [rec]="ppocr_rec.onnx|PP-OCRv4 rec 1x3x48x320|x=f32:1,3,48,320"
  [cls]="ppocr_cls.onnx|PP-OCR v2 cls 1x3x48x192|x=f32:1,3,48,192"
  [vad]="silero_vad_v5.onnx|Silero VAD v5 1x512|input=f32:1,512;state=f32:2,1,128:value 0;sr=i64::value 16000"
)

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2" | head -n 1; }

rows=() notes=()
for key in $wanted; do
  [ -n "${spec[$key]:-}" ] || { echo "bench/models: unknown model '$key' (det rec cls vad)" >&2; continue; }
  IFS='|' read -r file label inputs <<<"${spec[$key]}"
  feeds=()
  IFS=';' read -ra input_specs <<<"$inputs"
  for a in "${input_specs[@]}"; do
    name="${a%%=*}"
    IFS=: read -r dtype dims extra <<<"${a#*=}"
    # shellcheck disable=SC2086  # $extra is "value V"
    node "$gen" "$tmp/$key.$name.npy" --shape "$dims" --dtype "$dtype" ${extra:+--$extra}
    feeds+=(--input "$name=$tmp/$key.$name.npy")
  done
  for t in $threads; do
    r_out=$("$rlx" bench "$models/$file" "${feeds[@]}" --threads "$t" --runs "$runs" 2>&1)
    o_out=$(node "$root/bench/models/ort_run.js" "$models/$file" "${feeds[@]}" --threads "$t" --bench "$runs" 2>&1)
    r50=$(field p50_ms "$r_out") r90=$(field p90_ms "$r_out")
    o50=$(field p50_ms "$o_out") o90=$(field p90_ms "$o_out")
    if [ -z "$r50" ]; then r50="-" r90="-"; notes+=("rlx $key (threads $t) failed: $(tail -n 1 <<<"$r_out")"); fi
    if [ -z "$o50" ]; then o50="-" o90="-"; notes+=("ORT $key (threads $t) failed: $(tail -n 1 <<<"$o_out")"); fi
    ratio="-"
    [ "$r50" != "-" ] && [ "$o50" != "-" ] && ratio=$(awk -v a="$r50" -v b="$o50" 'BEGIN { printf "%.2f", a / b }')
    rows+=("$(printf '%-28s %7s %10s %10s %10s %10s %9s' "$label" "$t" "$r50" "$r90" "$o50" "$o90" "$ratio")")
  done
done

echo
echo "== models: rlx vs ONNX Runtime 1.30 (CPU), latency in ms over $runs warm runs, $(nproc) cores"
printf '%-28s %7s %10s %10s %10s %10s %9s\n' model threads "rlx p50" "rlx p90" "ORT p50" "ORT p90" "rlx/ORT"
printf '%s\n' "${rows[@]}"
[ ${#notes[@]} -eq 0 ] || printf '%s\n' "" "${notes[@]}"
status=0
[ ${#notes[@]} -eq 0 ] || status=1
exit $status
