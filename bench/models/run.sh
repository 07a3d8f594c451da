#!/usr/bin/env bash
# End-to-end model benchmarks, rlx against ONNX Runtime 1.30 (CPU; ort_run.js, the node binding:
# graph optimizations 'all', executionMode 'sequential', intra-op threads = rlx's threads) on the
# same .npy inputs. Per model and thread count:
#   1. output check + peak RSS: `rlx run` and `ort_run.js --output-dir`, each in its own process
#      under GNU time (load, compile, one run); compare.js compares the outputs (tolerance per model
#      below; exported models also against PyTorch's outputs). A mismatch marks the row and fails.
#   2. latency: BENCH_ROUNDS interleaved rounds (rlx bench --runs N, then ort_run.js --bench N, ...),
#      each process warming up BENCH_WARMUP runs first; the table gives the median over rounds of
#      each p50 / p90 / session-creation time.
#   bench/models/run.sh [BUILD_DIR]
# Environment: BENCH_RUNS (timed runs per process, default 20), BENCH_ROUNDS (default 5),
# BENCH_WARMUP (default 3), BENCH_THREADS (default "1 2"), BENCH_MODELS (subset of the keys below).
# Inputs: PP-OCR det/rec get rendered text (on noise det's output is < 1e-5 everywhere, too small to
# check), cls/VAD make_input.js's fixed-seed values (the ones `rlx bench` generates); the BERT-, MiniLM-
# and ResNet-shaped models are made by export_torch.py (Debian's /usr/bin/python3 with torch; once,
# into the model cache) with their own fixed inputs.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
rlx="$build/rlx" here="$root/bench/models"
vmstate="$build/bench/rlx_bench_vmstate"  # the vCPUs' placement, probed before every round
runs="${BENCH_RUNS:-20}" rounds="${BENCH_ROUNDS:-5}" warmup="${BENCH_WARMUP:-3}"
threads="${BENCH_THREADS:-1 2}"
wanted="${BENCH_MODELS:-det det640 rec cls vad minilm bert resnet50 isnet isnet_small}"
[ -x "$rlx" ] || { echo "bench/models: $rlx is missing (build the rlx_cli target)" >&2; exit 1; }
models=$(bash "$root/scripts/fetch-models.sh" --peer) || { echo "bench/models: cannot fetch the models" >&2; exit 1; }
export NODE_PATH="$models/ort/node_modules"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# key -> "file (in the model cache)|label|rtol|inputs". inputs: NAME=SPEC separated by ';', SPEC one of
#   f32:DIMS[:value V] / i64:DIMS:value V   make_input.js (fixed-seed floats in [0, 1), or V)
#   image:WxH:PT:MEAN:STD:TEXT              TEXT (\n: new line) in PT-point DejaVu Sans, black on white,
#                                           normalized per channel (BGR) as PaddleOCR does
#   exported                                every input the exporter wrote (input/NAME.npy)
# An optional fifth field caps the timed runs (and warm-up runs) per round for a model whose run takes
# seconds (ISNet at 1024x1024: 5-13 s a run on 2 cores).
# rtol (compare.js: max|rlx - ORT| / max|ORT|) is 1e-4, the real-model tests' rule (compare.js says
# why), except det at 640x640: there ONNX Runtime itself, optimizations 'all' vs 'disabled', differs by
# 1.4e-4 (measured on this input; at 320x320 by 3e-5), so 1e-4 cannot tell a correct runtime from a
# wrong one; 5e-4 keeps ~3.5x headroom over that spread, far below a real bug (compare.js: 5.5e-2).
# ISNet medium is a float16 graph (f32 input cast to f16, every op in f16, outputs cast back): rlx rounds each
# op's result to f16 as the graph says, ONNX Runtime's CPU provider runs most ops in f32 between inserted
# casts. Its six outputs are sigmoids of f16 logits of magnitude up to ~8, where one f16 ulp is 2^-8 = 3.9e-3,
# which moves sigmoid(x) by up to 3.9e-3 relative: rtol 1e-2 allows two such ulps (measured: 5.6e-3 worst;
# ORT optimizations 'all' vs 'disabled' differ by 6.2e-4 on the same input).
# ISNet small quantizes every activation at run time (DynamicQuantizeLinear: scale and zero point
# from the tensor's min and max, then round), so one last-bit difference anywhere can move a value
# across a rounding step, and such flips compound over its 119 quantized convolutions: no
# elementwise bound holds between two correct runtimes. Its own sensitivity, measured with ONNX
# Runtime on the scene below: the same input with 1% of its pixels moved by one ulp changes the
# outputs by a mean 1.0e-3 of max|ref| (worst output), with 0.22% of the elements off by more than
# 0.1 max|ref| (rlx vs ORT: 9.6e-4 and 0.20%). compare.js --stat 5e-3,1e-2 allows about 5x that.
# Rendered text is no input for it: on text ORT's own 1-ulp sensitivity is 20% of the pixels.
imnet="0.485,0.456,0.406:0.229,0.224,0.225"
declare -A spec=(
  [det]="ppocr_det.onnx|PP-OCRv4 det 1x3x320x320|1e-4|x=image:320x320:28:$imnet:rlx benchmark\nONNX Runtime 1.30\nPP-OCRv4 det"
  [det640]="ppocr_det.onnx|PP-OCRv4 det 1x3x640x640|5e-4|x=image:640x640:40:$imnet:rlx benchmark 2026\nONNX Runtime 1.30\nPP-OCRv4 det 640"
  [rec]="ppocr_rec.onnx|PP-OCRv4 rec 1x3x48x320|1e-4|x=image:320x48:28:0.5,0.5,0.5:0.5,0.5,0.5:Hello from rlx 2026"
  [cls]="ppocr_cls.onnx|PP-OCR v2 cls 1x3x48x192|1e-4|x=f32:1,3,48,192"
  [vad]="silero_vad_v5.onnx|Silero VAD v5 1x512|1e-4|input=f32:1,512;state=f32:2,1,128:value 0;sr=i64::value 16000"
  [minilm]="exported/minilm_l6/model.onnx|MiniLM-L6-shaped 1x128|1e-4|exported"
  [bert]="exported/bert_base/model.onnx|BERT-base-shaped 1x128|1e-4|exported"
  [resnet50]="exported/resnet50/model.onnx|ResNet-50 1x3x224x224|1e-4|exported"
  [isnet]="isnet_medium.onnx|ISNet f16 1x3x1024x1024|1e-2|input=image:1024x1024:96:0.5,0.5,0.5:1,1,1:rlx\nbackground\nremoval|3"
  [isnet_small]="isnet_small.onnx|ISNet u8 1x3x1024x1024|stat:5e-3,1e-2|input=scene:1024x1024:0.5,0.5,0.5:1,1,1|3"
)

# The exported models: made once (export_torch.py skips complete folders), only if asked for.
need=()
for key in $wanted; do
  f="${spec[$key]:-}"; f="${f%%|*}"
  [[ "$f" == exported/* ]] && [ ! -f "$models/$(dirname "$f")/manifest.txt" ] && need+=("$(basename "$(dirname "$f")")")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "bench/models: exporting ${need[*]} with /usr/bin/python3 (once)"
  /usr/bin/python3 "$here/export_torch.py" "$models/exported" "${need[@]}" || echo "bench/models: export failed" >&2
fi

field() { sed -n "s/.*$1=\([-0-9.e+]*\).*/\1/p" <<<"$2" | head -n 1; }
med() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mb() { awk -v k="$1" 'BEGIN { if (k ~ /^[0-9]+$/) printf "%.0f", k / 1024; else print "-" }'; }

inputs_for() {  # inputs_for KEY SPECS: writes the inputs, sets feeds=(--input NAME=FILE ...)
  local key="$1" a name dtype dims extra size pt mean std text
  feeds=()
  IFS=';' read -ra input_specs <<<"$2"
  for a in "${input_specs[@]}"; do
    if [ "$a" = exported ]; then
      for f in "$models/$(dirname "$file")"/input/*.npy; do feeds+=(--input "$(basename "$f" .npy)=$f"); done
      continue
    fi
    name="${a%%=*}"
    if [[ "${a#*=}" == scene:* ]]; then  # an object on a gradient (background removal's input)
      IFS=: read -r _ size mean std <<<"${a#*=}"
      convert -size "$size" gradient:skyblue-white -fill firebrick -draw "circle 512,560 512,260" \
              -fill black -draw "rectangle 430,180 594,300" -depth 8 "$tmp/$key.ppm" &&
        node "$here/make_input.js" "$tmp/$key.$name.npy" --image "$tmp/$key.ppm" --mean "$mean" --std "$std" || return 1
    elif [[ "${a#*=}" == image:* ]]; then
      IFS=: read -r _ size pt mean std text <<<"${a#*=}"
      convert -size "$size" xc:white -font DejaVu-Sans -pointsize "$pt" -fill black -gravity center \
              -annotate 0 "$text" -depth 8 "$tmp/$key.ppm" &&
        node "$here/make_input.js" "$tmp/$key.$name.npy" --image "$tmp/$key.ppm" --mean "$mean" --std "$std" || return 1
    else
      IFS=: read -r dtype dims extra <<<"${a#*=}"
      # shellcheck disable=SC2086  # $extra is "value V"
      node "$here/make_input.js" "$tmp/$key.$name.npy" --shape "$dims" --dtype "$dtype" ${extra:+--$extra} || return 1
    fi
    feeds+=(--input "$name=$tmp/$key.$name.npy")
  done
}

rows=() notes=() status=0
for key in $wanted; do
  [ -n "${spec[$key]:-}" ] || { notes+=("unknown model '$key' (known: ${!spec[*]})"); status=1; continue; }
  IFS='|' read -r file label rtol inputs cap <<<"${spec[$key]}"
  mruns=$runs mwarm=$warmup
  if [ -n "$cap" ]; then
    [ "$mruns" -gt "$cap" ] && mruns=$cap
    [ "$mwarm" -gt 1 ] && mwarm=1
  fi
  if [ ! -f "$models/$file" ] || ! inputs_for "$key" "$inputs"; then
    notes+=("$label: model or inputs missing ($models/$file)"); status=1; continue
  fi
  for t in $threads; do
    # 1. Outputs and peak RSS, one process each (these also warm the page cache for the rounds).
    o="$tmp/$key.$t"
    /usr/bin/time -o "$o.rlx.rss" -f %M "$rlx" run "$models/$file" "${feeds[@]}" --threads "$t" --output-dir "$o.rlx" >"$o.rlx.log" 2>&1 ||
      notes+=("rlx run $key (threads $t) failed: $(tail -n 1 "$o.rlx.log")")
    /usr/bin/time -o "$o.ort.rss" -f %M node "$here/ort_run.js" "$models/$file" "${feeds[@]}" --threads "$t" --output-dir "$o.ort" >"$o.ort.log" 2>&1 ||
      notes+=("ORT $key (threads $t) failed: $(tail -n 1 "$o.ort.log")")
    check=ok
    tol=(--rtol "$rtol")
    [[ "$rtol" == stat:* ]] && tol=(--stat "${rtol#stat:}")
    cmp=$(node "$here/compare.js" "$o.rlx" "$o.ort" "${tol[@]}" --label "$key t$t rlx vs ORT") || check=MISMATCH
    echo "$cmp"
    worst=$(field worst_rel "$cmp")
    if [[ "$file" == exported/* ]]; then  # and both against PyTorch, the exporter's reference
      ref="$models/$(dirname "$file")/torch"
      cmp=$(node "$here/compare.js" "$o.rlx" "$ref" --rtol "$rtol" --label "$key t$t rlx vs PyTorch") || check=MISMATCH
      echo "$cmp"
      cmp=$(node "$here/compare.js" "$o.ort" "$ref" --rtol "$rtol" --label "$key t$t ORT vs PyTorch") || check=MISMATCH
      echo "$cmp"
    fi
    check="$check ${worst:-?}"
    [ "${check%% *}" = ok ] || { status=1; notes+=("$label (threads $t): outputs differ beyond rtol $rtol (lines above)"); }
    r_rss=$(mb "$(tail -n 1 "$o.rlx.rss")") o_rss=$(mb "$(tail -n 1 "$o.ort.rss")")
    # 2. Latency, interleaved: rlx, ORT, rlx, ORT, ...
    : >"$o.r50"; : >"$o.r90"; : >"$o.rf"; : >"$o.o50"; : >"$o.o90"; : >"$o.oc"; : >"$o.of"; : >"$o.rtt"
    for ((r = 0; r < rounds; ++r)); do
      [ -x "$vmstate" ] && field rtt_ns "$("$vmstate")" >>"$o.rtt"
      out=$("$rlx" bench "$models/$file" "${feeds[@]}" --threads "$t" --runs "$mruns" --warmup "$mwarm" 2>&1)
      field p50_ms "$out" >>"$o.r50"; field p90_ms "$out" >>"$o.r90"; field first_ms "$out" >>"$o.rf"
      [ -n "$(field p50_ms "$out")" ] || notes+=("rlx bench $key (threads $t) failed: $(tail -n 1 <<<"$out")")
      out=$(node "$here/ort_run.js" "$models/$file" "${feeds[@]}" --threads "$t" --bench "$mruns" --warmup "$mwarm" 2>&1)
      field p50_ms "$out" >>"$o.o50"; field p90_ms "$out" >>"$o.o90"
      field create_ms "$out" >>"$o.oc"; field first_ms "$out" >>"$o.of"
      [ -n "$(field p50_ms "$out")" ] || notes+=("ORT $key (threads $t) failed: $(tail -n 1 <<<"$out")")
    done
    r50=$(med <"$o.r50") r90=$(med <"$o.r90") rf=$(med <"$o.rf")
    o50=$(med <"$o.o50") o90=$(med <"$o.o90") oc=$(med <"$o.oc") of=$(med <"$o.of") rtt=$(med <"$o.rtt")
    { [ "$r50" = - ] || [ "$o50" = - ]; } && status=1
    ratio=$(awk -v a="$r50" -v b="$o50" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
    rows+=("$(printf '%-26s %3s %8s %8s %8s %8s %7s %9s %13s %7s %7s %6s  %s' "$label" "$t" "$r50" "$r90" "$o50" "$o90" \
      "$ratio" "$rf" "$([ "$oc" = - ] && echo - || echo "$oc+$of")" "$r_rss" "$o_rss" "$rtt" "$check")")
  done
done

node_rss=$(/usr/bin/time -f %M node -e "require('onnxruntime-node')" 2>&1 >/dev/null | tail -n 1)
echo
echo "== models: rlx vs ONNX Runtime 1.30 (CPU), ms; median of $rounds interleaved rounds of $runs runs (after $warmup warm-up runs)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $(date -u +%F)"
printf '%-26s %3s %8s %8s %8s %8s %7s %9s %13s %7s %7s %6s  %s\n' model thr "rlx p50" "rlx p90" "ORT p50" "ORT p90" \
  rlx/ORT "rlx first" "ORT create+1st" "rlx MB" "ORT MB" "rtt ns" "output check (worst rel. error)"
printf '%s\n' "${rows[@]}"
echo "rlx first: rlx bench's first_ms = ONNX-to-IR import + compile + first run (not the .onnx file parse)."
echo "ORT create+1st: InferenceSession.create (read, parse, optimize, set up) + its first run."
echo "MB: peak RSS of one load + compile + run process (GNU time %M). ORT's is the whole node process, nothing"
echo "subtracted: node with onnxruntime-node loaded and no session takes $(mb "$node_rss") MB of it."
echo "check: rlx vs ORT (and, for exported models, both vs PyTorch) within the rtol in run.sh; ratio > 1: rlx slower."
echo "rtt ns: a cache line's round trip between two threads before each round (rlx_bench_vmstate), median: about 100"
echo "when the vCPUs share a cache, 350-600 when the hypervisor has put them apart (two-thread rows then run slower)."
[ ${#notes[@]} -eq 0 ] || { printf '%s\n' "" "${notes[@]}"; status=1; }
exit $status
