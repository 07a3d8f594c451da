#!/usr/bin/env bash
# make demo: renders a line of text to an image, runs PP-OCRv4 recognition on it with rlx
# and prints what it read, the compile reports and the latency.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
models=$(bash "$root/scripts/fetch-models.sh")
text="${RLX_DEMO_TEXT:-Hello from rlx 2026}"
img="$build/demo_text.ppm"
convert -size 560x64 xc:white -font DejaVu-Sans -pointsize 36 -fill black -gravity center \
        -annotate 0 "$text" -depth 8 "$img"
echo "== rendered \"$text\" to $img"
"$build/rlx_example_ocr_demo" "$models/ppocr_rec.onnx" "$models/ppocr_keys_v1.txt" "$img"
