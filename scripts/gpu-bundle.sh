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
#   scripts/gpu-bundle.sh unpack OUT_DIR DEST      (on the GPU machine)
#     DEST/b (binaries and their lib/), DEST/shared, DEST/gguf-py, and DEST/env.sh, which sets
#     LD_LIBRARY_PATH to the bundle's libraries and then the lib folders of the `nvidia` wheels.
#     Then: . DEST/env.sh && scripts/gpu-check.sh DEST/b DEST/shared
set -euo pipefail
mode=${1:-}
case $mode in
  pack)
    [ $# -ge 4 ] || { echo "usage: $0 pack BUILD_DIR SHARED_DIR OUT_DIR [GGUF_PY_DIR]" >&2; exit 2; }
    build=$(cd "$2" && pwd); shared=$(cd "$3" && pwd); mkdir -p "$4"; out=$(cd "$4" && pwd)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/b/lib" "$tmp/f/shared/onnx"
    bins=()
    for p in "$build/rlx" "$build"/tests/rlx_test_{cuda,e2e,llm}; do
      [ -x "$p" ] || continue
      cp "$p" "$tmp/b/" && strip "$tmp/b/$(basename "$p")" && bins+=("$p")
    done
    [ ${#bins[@]} -gt 0 ] || { echo "gpu-bundle: no rlx or test binary under $build" >&2; exit 1; }
    # The libraries each binary resolves, less the ones the GPU machine brings itself.
    ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
      grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libcuda|libcublas|libcublasLt|libcudart|libcudnn[a-z_]*|libnvrtc|libnvJitLink)\.so' |
      while read -r l; do cp -L "$l" "$tmp/b/lib/"; done
    tar cf - -C "$tmp" b | xz -9e > "$out/bin.tar.xz"
    cp -r "$shared/gguf" "$tmp/f/shared/"
    [ -f "$shared/onnx/node.tar.xz" ] && cp "$shared/onnx/node.tar.xz" "$tmp/f/shared/onnx/"
    [ -n "${5:-}" ] && cp -r "$5" "$tmp/f/gguf-py"
    tar cf - -C "$tmp/f" . | xz -6 > "$out/fixtures.tar.xz"
    ls -la "$out/bin.tar.xz" "$out/fixtures.tar.xz"
    ;;
  unpack)
    [ $# -eq 3 ] || { echo "usage: $0 unpack OUT_DIR DEST" >&2; exit 2; }
    mkdir -p "$3"; dest=$(cd "$3" && pwd)
    tar xJf "$2/bin.tar.xz" -C "$dest"
    tar xJf "$2/fixtures.tar.xz" -C "$dest"
    cat > "$dest/env.sh" <<EOF
# LD_LIBRARY_PATH for the bundle under $dest: its own libraries, then the CUDA wheels' (if any).
wheels=\$(python3 -c "import glob, nvidia; print(':'.join(d for p in nvidia.__path__ for d in glob.glob(p + '/*/lib')))" 2>/dev/null || true)
export LD_LIBRARY_PATH=$dest/b/lib\${wheels:+:\$wheels}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
    echo "$dest: b/ shared/$( [ -d "$dest/gguf-py" ] && echo ' gguf-py/') env.sh"
    ;;
  *) echo "usage: $0 pack BUILD_DIR SHARED_DIR OUT_DIR [GGUF_PY_DIR] | unpack OUT_DIR DEST" >&2; exit 2 ;;
esac
