#!/bin/bash
# Carries a CUDA build to a GPU machine that has the NVIDIA driver and PyTorch's CUDA wheels but
# no toolkit and none of the build's other libraries (no compiler either: build here, run there).
#
#   scripts/gpu-bundle.sh pack BUILD_DIR SHARED_DIR OUT_DIR [GGUF_PY_DIR]
#     OUT_DIR/bin.tar.xz: rlx and the test binaries that have a CUDA mode (rlx_test_cuda,
#       rlx_test_e2e, rlx_test_llm; those BUILD_DIR has), stripped, with every shared library
#       they load that is not glibc's, the driver's or CUDA's (those come from the machine and
#       its wheels). One xz stream with a 64 MiB window: the binaries share most of their bytes.
#     OUT_DIR/fixtures.tar.xz: SHARED_DIR's gguf/ and onnx/node.tar.xz, and GGUF_PY_DIR (llama.cpp's
#       gguf-py, which the model generator of ../shared/gguf/tools imports) when given.
#     Prints each file's size: a carried folder counts against the device tool's transfer limit.
#   scripts/gpu-bundle.sh pack-decode BUILD_DIR SHARED_DIR OUT_DIR GGUF_PY_DIR
#     The smallest bundle that times decode (bench/gpu/decode_ab.sh, bench/gpu/llm_decode.sh):
#     OUT_DIR/bin.tar.xz with rlx alone, OUT_DIR/fixtures.tar.xz with SHARED_DIR's model generator
#     (gguf/tools), the llama SPM vocabulary it reads and gguf-py: about 15 MB where pack's are
#     about 40, which the device tool carries faster.
#   scripts/gpu-bundle.sh variant BUILD_DIR OUT_DIR NAME
#     OUT_DIR/NAME.tar.xz: another build's binaries (an experiment to time against the first), the
#       ones OUT_DIR/bin.tar.xz holds (all that pack takes when there is none), stripped, under
#       NAME/; only the libraries that OUT_DIR/bin.tar.xz lacks go with them (NAME/lib), so a
#       variant of the same tree adds a few MB.
#   scripts/gpu-bundle.sh unpack OUT_DIR DEST      (on the GPU machine)
#     DEST/b (binaries and their lib/), DEST/NAME for each variant, DEST/shared, DEST/gguf-py, and
#     DEST/env.sh, which sets LD_LIBRARY_PATH to the bundle's libraries and then the lib folders
#     of the `nvidia` wheels.
#     Then: . DEST/env.sh && scripts/gpu-check.sh DEST/b DEST/shared, and bench/gpu/decode_ab.sh
#     MODEL head=DEST/b/rlx exp=DEST/NAME/rlx to time a variant against the bundle's build.
set -euo pipefail
mode=${1:-}
# The libraries the binaries resolve, less the ones the GPU machine brings itself.
own_libs() {  # BINARY...
  ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libcuda|libcublas|libcublasLt|libcudart|libcudnn[a-z_]*|libnvrtc|libnvJitLink)\.so' || true
}
# BUILD's rlx and test binaries with a CUDA mode (those named in ONLY, one a line, when it is not
# empty), stripped, under NAME/ with NAME/lib holding the libraries they load that are not named
# in HAVE (one file name a line), as one xz stream in ARCHIVE. Uses $tmp.
bundle_bins() {  # BUILD NAME ARCHIVE HAVE [ONLY]
  local p l bins=()
  mkdir -p "$tmp/$2/lib"
  for p in "$1/rlx" "$1"/tests/rlx_test_{cuda,e2e,llm}; do
    [ -x "$p" ] || continue
    [ -z "${5:-}" ] || grep -qxF "$(basename "$p")" <<<"$5" || continue
    cp "$p" "$tmp/$2/" && strip "$tmp/$2/$(basename "$p")" && bins+=("$p")
  done
  [ ${#bins[@]} -gt 0 ] || { echo "gpu-bundle: no rlx or test binary under $1" >&2; exit 1; }
  own_libs "${bins[@]}" | while read -r l; do
    grep -qxF "$(basename "$l")" <<<"$4" || cp -L "$l" "$tmp/$2/lib/"
  done
  tar cf - -C "$tmp" "$2" | xz -9e > "$3"
}
case $mode in
  pack | pack-decode)
    # The same bundle either way; pack-decode keeps only rlx and what makes the decode model.
    if [ "$mode" = pack ]; then
      [ $# -ge 4 ] || { echo "usage: $0 pack BUILD_DIR SHARED_DIR OUT_DIR [GGUF_PY_DIR]" >&2; exit 2; }
    else
      [ $# -eq 5 ] || { echo "usage: $0 pack-decode BUILD_DIR SHARED_DIR OUT_DIR GGUF_PY_DIR" >&2; exit 2; }
    fi
    build=$(cd "$2" && pwd); shared=$(cd "$3" && pwd); mkdir -p "$4"; out=$(cd "$4" && pwd)
    vocab=$shared/gguf/vocab/ggml-vocab-llama-spm.gguf
    if [ "$mode" = pack-decode ]; then
      for f in "$shared/gguf/tools/make_synth_llama_gguf.py" "$vocab" "$5/gguf"; do
        [ -e "$f" ] || { echo "gpu-bundle: pack-decode needs $f" >&2; exit 2; }
      done
    fi
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    if [ "$mode" = pack ]; then
      bundle_bins "$build" b "$out/bin.tar.xz" ""
      mkdir -p "$tmp/f/shared/onnx"
      cp -r "$shared/gguf" "$tmp/f/shared/"
      [ -f "$shared/onnx/node.tar.xz" ] && cp "$shared/onnx/node.tar.xz" "$tmp/f/shared/onnx/"
      if [ -n "${5:-}" ]; then cp -r "$5" "$tmp/f/gguf-py"; fi
    else
      bundle_bins "$build" b "$out/bin.tar.xz" "" rlx
      mkdir -p "$tmp/f/shared/gguf/vocab" "$tmp/f/gguf-py"
      cp -r "$shared/gguf/tools" "$tmp/f/shared/gguf/"
      cp "$vocab" "$tmp/f/shared/gguf/vocab/"
      cp -r "$5/gguf" "$tmp/f/gguf-py/"
    fi
    tar cf - -C "$tmp/f" . | xz -6 > "$out/fixtures.tar.xz"
    ls -la "$out/bin.tar.xz" "$out/fixtures.tar.xz"
    ;;
  variant)
    [ $# -eq 4 ] || { echo "usage: $0 variant BUILD_DIR OUT_DIR NAME" >&2; exit 2; }
    [[ $4 =~ ^[A-Za-z0-9_-]+$ ]] && [[ ! $4 =~ ^(b|bin|fixtures|shared|gguf-py)$ ]] ||
      { echo "gpu-bundle: variant name '$4' must be letters, digits, _ or - and not b, bin, fixtures, shared or gguf-py" >&2; exit 2; }
    build=$(cd "$2" && pwd); mkdir -p "$3"; out=$(cd "$3" && pwd); name=$4
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    have=$( [ -f "$out/bin.tar.xz" ] && tar tJf "$out/bin.tar.xz" | sed -n 's|^b/lib/||p' || true)
    only=$( [ -f "$out/bin.tar.xz" ] && tar tJf "$out/bin.tar.xz" | sed -n 's|^b/\([^/][^/]*\)$|\1|p' || true)
    bundle_bins "$build" "$name" "$out/$name.tar.xz" "$have" "$only"
    ls -la "$out/$name.tar.xz"
    ;;
  unpack)
    [ $# -eq 3 ] || { echo "usage: $0 unpack OUT_DIR DEST" >&2; exit 2; }
    mkdir -p "$3"; dest=$(cd "$3" && pwd)
    tar xJf "$2/bin.tar.xz" -C "$dest"
    tar xJf "$2/fixtures.tar.xz" -C "$dest"
    libs=$dest/b/lib variants=
    for v in "$2"/*.tar.xz; do
      n=$(basename "$v" .tar.xz)
      case $n in bin | fixtures) continue ;; esac
      tar xJf "$v" -C "$dest"
      variants+=" $n/"
      [ -n "$(ls -A "$dest/$n/lib" 2>/dev/null)" ] && libs+=":$dest/$n/lib"
    done
    cat > "$dest/env.sh" <<EOF
# LD_LIBRARY_PATH for the bundle under $dest: its own libraries, then the CUDA wheels' (if any).
wheels=\$(python3 -c "import glob, nvidia; print(':'.join(d for p in nvidia.__path__ for d in glob.glob(p + '/*/lib')))" 2>/dev/null || true)
export LD_LIBRARY_PATH=$libs\${wheels:+:\$wheels}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
    echo "$dest: b/$variants shared/$( [ -d "$dest/gguf-py" ] && echo ' gguf-py/') env.sh"
    ;;
  *) echo "usage: $0 pack BUILD_DIR SHARED_DIR OUT_DIR [GGUF_PY_DIR] | pack-decode BUILD_DIR SHARED_DIR OUT_DIR GGUF_PY_DIR | variant BUILD_DIR OUT_DIR NAME | unpack OUT_DIR DEST" >&2; exit 2 ;;
esac
