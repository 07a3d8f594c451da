#!/usr/bin/env bash
# make demo: installs what is missing, builds only the demo program, fetches the PP-OCRv4
# models, renders a line of text to an image, runs PP-OCRv4 recognition on it with rlx and
# prints what it read, the compile reports and the latency. Package-manager, build and
# download output goes to a log file ($build/demo.log), whose path is printed on failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
build_type="${BUILD_TYPE:-Release}"
jobs="${JOBS:-$(nproc)}"
mkdir -p "$build"
log="$build/demo.log"
: > "$log"

step() {  # step "what" command...: runs quietly, appending to the log
  local what="$1"; shift
  printf '== %s ... ' "$what"
  if "$@" >>"$log" 2>&1; then
    echo "ok"
  else
    echo "failed"
    echo "demo: '$what' failed; the last lines of $log:" >&2
    tail -n 30 "$log" >&2
    echo "demo: full log: $log" >&2
    exit 1
  fi
}

step "installing missing packages" bash "$root/scripts/install-deps.sh"
step "configuring ($build_type)" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="$build_type"
step "building the demo (rlx_example_ocr_demo)" cmake --build "$build" -j"$jobs" --target rlx_example_ocr_demo
step "fetching the PP-OCRv4 models" bash "$root/scripts/fetch-models.sh"
models=$(bash "$root/scripts/fetch-models.sh" 2>>"$log")
text="${RLX_DEMO_TEXT:-Hello from rlx 2026}"
img="$build/demo_text.ppm"
step "rendering \"$text\"" convert -size 560x64 xc:white -font DejaVu-Sans -pointsize 36 -fill black \
  -gravity center -annotate 0 "$text" -depth 8 "$img"
"$build/rlx_example_ocr_demo" "$models/ppocr_rec.onnx" "$models/ppocr_keys_v1.txt" "$img"
