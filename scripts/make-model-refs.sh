#!/usr/bin/env bash
# Regenerates the ONNX Runtime 1.30 reference outputs the real-model tests compare
# against (tests/models/refs/<case>/{input,output}/NAME.npy). Inputs are deterministic
# and small, so the refs stay small in the repo (4 MB in all, 2 of them ISNet's two flat
# uint8 masks, which git compresses to 10-32 KB): floats in [0, 1)
# from a fixed-seed LCG and integers 0 or a fixed value (bench/models/make_input.js), and
# for PP-OCR detection and recognition a line of text rendered by ImageMagick and
# normalized as PaddleOCR does (on noise the detector's output is ~1e-7 everywhere,
# below ONNX Runtime's own float resolution there, which makes a useless reference).
#   scripts/make-model-refs.sh            # all cases
#   scripts/make-model-refs.sh CASE...    # only these cases
# Needs node + npm (fetches the models and onnxruntime-node@1.30.0 into .cache/models).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models=$(bash "$root/scripts/fetch-models.sh" --peer)
refs="$root/tests/models/refs"
gen="$root/bench/models/make_input.js"
ort="$root/bench/models/ort_run.js"
export NODE_PATH="$models/ort/node_modules"

want() {  # want CASE: true when CASE was asked for (or no case was named)
  [ ${#cases[@]} -eq 0 ] && return 0
  local c
  for c in "${cases[@]}"; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# run_case CASE MODEL.onnx NAME=SPEC...: SPEC is "f32:D0,D1,...[:seed S]", "i64:DIMS:value V",
# "file:PATH" (an .npy to copy) or "image:WxH:MEAN:STD:TEXT" (TEXT rendered black on white). Writes CASE/input/NAME.npy and runs ORT (1 thread).
run_case() {
  local case="$1" model="$2"; shift 2
  want "$case" || return 0
  local dir="$refs/$case" feeds=()
  rm -rf "$dir" && mkdir -p "$dir/input" "$dir/output"
  local a name spec dtype dims extra
  for a in "$@"; do
    name="${a%%=*}" spec="${a#*=}"
    if [ "${spec%%:*}" = file ]; then
      cp "${spec#file:}" "$dir/input/$name.npy"
    elif [ "${spec%%:*}" = image ]; then
      local size mean std text
      IFS=: read -r _ size mean std text <<<"$spec"
      convert -size "$size" xc:white -font DejaVu-Sans -pointsize 28 -fill black -gravity center \
              -annotate 0 "$text" -depth 8 "$dir/$name.ppm"
      node "$gen" "$dir/input/$name.npy" --image "$dir/$name.ppm" --mean "$mean" --std "$std"
      rm -f "$dir/$name.ppm"
    else
      IFS=: read -r dtype dims extra <<<"$spec"
      # shellcheck disable=SC2086  # $extra is "--seed S" or "--value V"
      node "$gen" "$dir/input/$name.npy" --shape "$dims" --dtype "$dtype" ${extra:+--$extra}
    fi
    feeds+=(--input "$name=$dir/input/$name.npy")
  done
  echo "$model" > "$dir/model.txt"
  node "$ort" "$models/$model" "${feeds[@]}" --output-dir "$dir/output" --threads 1
  echo "make-model-refs: $case: $(cd "$dir" && ls input output | tr '\n' ' ')"
}

cases=("$@")
run_case ppocr_det ppocr_det.onnx "x=image:256x96:0.485,0.456,0.406:0.229,0.224,0.225:rlx 2026 OCR"
run_case ppocr_rec ppocr_rec.onnx "x=image:320x48:0.5,0.5,0.5:0.5,0.5,0.5:Hello from rlx 2026"
run_case ppocr_cls ppocr_cls.onnx "x=f32:1,3,48,192"
run_case silero_vad_v5 silero_vad_v5.onnx \
  "input=f32:1,512" "state=f32:2,1,128:value 0" "sr=i64::value 16000"
# A second streaming step: the state the first step returned, a new chunk of audio, so the
# LSTM's recurrent weights take part (with a zero state they multiply zeros).
if want silero_vad_v5_step2 && [ ! -f "$refs/silero_vad_v5/output/stateN.npy" ]; then
  echo "make-model-refs: silero_vad_v5_step2 needs silero_vad_v5 first" >&2; exit 1
fi
run_case silero_vad_v5_step2 silero_vad_v5.onnx \
  "input=f32:1,512:seed 2" "state=file:$refs/silero_vad_v5/output/stateN.npy" "sr=i64::value 16000"
# ISNet (background removal, 1024x1024): an object on a gradient, stored as PNG (18 KB), and
# each model's final mask from ORT stored as uint8 (round(255 v), 1 MiB raw, mostly flat); the
# quantized model is compared by statistics (tests/models/isnet_test.cpp says why).
if want isnet; then
  dir="$refs/isnet" scratch=$(mktemp -d)
  rm -rf "$dir" && mkdir -p "$dir"
  convert -size 1024x1024 gradient:skyblue-white -fill firebrick -draw "circle 512,560 512,260" \
          -fill black -draw "rectangle 430,180 594,300" -depth 8 "PNG24:$dir/scene.png"
  convert "$dir/scene.png" -depth 8 "$scratch/scene.ppm"
  node "$gen" "$scratch/input.npy" --image "$scratch/scene.ppm" --mean 0.5,0.5,0.5 --std 1,1,1
  for m in small medium; do
    node "$ort" "$models/isnet_$m.onnx" --input "input=$scratch/input.npy" --output-dir "$scratch/$m" --threads 1
    node -e '
      const { readNpy, writeNpy } = require(process.argv[1]);
      const r = readNpy(process.argv[2]), q = new Uint8Array(r.data.length);
      for (let i = 0; i < q.length; ++i) q[i] = Math.round(255 * Math.min(1, Math.max(0, r.data[i])));
      writeNpy(process.argv[3], "uint8", r.dims, q);' "$root/bench/models/npy.js" "$scratch/$m/output.npy" "$dir/${m}_mask_u8.npy"
  done
  echo "isnet_small.onnx isnet_medium.onnx" > "$dir/model.txt"
  rm -rf "$scratch"
  echo "make-model-refs: isnet: $(ls "$dir" | tr '\n' ' ')"
fi
du -sh "$refs"
