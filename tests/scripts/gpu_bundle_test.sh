#!/bin/bash
# scripts/gpu-bundle.sh on a stand-in build: a small C++ program named rlx (it loads libstdc++,
# a library a bare GPU image may lack) and a fixture tree. Checks that the bundle holds the
# stripped binary with libstdc++ but not glibc, the fixtures and gguf-py; that the program runs
# from the unpacked bundle with env.sh's LD_LIBRARY_PATH resolving libstdc++ to the bundle's
# copy; that a variant (a second build) is packed without the libraries the bundle has and runs
# from it too; and that a build without binaries, a reserved variant name and a wrong mode are
# refused; that pack-decode carries rlx alone with only the decode model's generator, vocabulary
# and gguf-py, and that a variant of such a bundle carries rlx alone too.
#   tests/scripts/gpu_bundle_test.sh SOURCE_DIR CXX
set -u
src=$1 cxx=$2
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail=0
check() {  # description, command...
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi
}
mkdir -p "$t/build" "$t/shared/gguf/vocab" "$t/shared/onnx" "$t/gguf-py/gguf"
printf '#include <iostream>\n#include <string>\nint main() { std::cout << std::string("bundled") << "\\n"; }\n' > "$t/p.cpp"
"$cxx" -g -O1 -o "$t/build/rlx" "$t/p.cpp" || { echo "FAILED: cannot compile the stand-in"; exit 1; }
echo vocab > "$t/shared/gguf/vocab/v.gguf"
echo nodes > "$t/shared/onnx/node.tar.xz"
echo 'x = 1' > "$t/gguf-py/gguf/__init__.py"

bash "$src/scripts/gpu-bundle.sh" pack "$t/build" "$t/shared" "$t/out" "$t/gguf-py"
check "pack succeeds" test $? -eq 0
bins=$(tar tJf "$t/out/bin.tar.xz")
check "the binary is bundled" grep -qx 'b/rlx' <<<"$bins"
check "libstdc++ is bundled" grep -q '^b/lib/libstdc++\.so' <<<"$bins"
check "glibc is not bundled" bash -c '! grep -Eq "^b/lib/(libc|libm)\.so" <<<"$1"' _ "$bins"
fix=$(tar tJf "$t/out/fixtures.tar.xz")
check "the fixtures are bundled" grep -q 'shared/gguf/vocab/v.gguf' <<<"$fix"
check "node.tar.xz is bundled" grep -q 'shared/onnx/node.tar.xz' <<<"$fix"
check "gguf-py is bundled" grep -q 'gguf-py/gguf/__init__.py' <<<"$fix"

bash "$src/scripts/gpu-bundle.sh" unpack "$t/out" "$t/dest" >/dev/null
check "unpack succeeds" test $? -eq 0
check "the bundled binary is stripped" bash -c '! readelf -S "$1" | grep -q "\.debug_info"' _ "$t/dest/b/rlx"
ran=$(. "$t/dest/env.sh" && "$t/dest/b/rlx")
check "the binary runs from the bundle" test "$ran" = bundled
check "env.sh resolves libstdc++ to the bundle" bash -c '. "$1/env.sh" && ldd "$1/b/rlx" | grep -q "libstdc++.* => $1/b/lib/"' _ "$t/dest"
check "the fixtures are unpacked" test -f "$t/dest/shared/gguf/vocab/v.gguf"

# A variant: another build of the same stand-in, packed beside the first; the library the bundle
# already holds is not carried again, and the variant runs from the unpacked bundle too.
mkdir -p "$t/build2"
printf '#include <iostream>\n#include <string>\nint main() { std::cout << std::string("variant") << "\\n"; }\n' > "$t/p2.cpp"
"$cxx" -O1 -o "$t/build2/rlx" "$t/p2.cpp" || { echo "FAILED: cannot compile the variant stand-in"; exit 1; }
bash "$src/scripts/gpu-bundle.sh" variant "$t/build2" "$t/out" exp1 >/dev/null
check "variant succeeds" test $? -eq 0
vbins=$(tar tJf "$t/out/exp1.tar.xz")
check "the variant's binary is bundled" grep -qx 'exp1/rlx' <<<"$vbins"
check "the variant does not carry libstdc++ again" bash -c '! grep -q "^exp1/lib/libstdc" <<<"$1"' _ "$vbins"
bash "$src/scripts/gpu-bundle.sh" unpack "$t/out" "$t/dest2" >/dev/null
vran=$(. "$t/dest2/env.sh" && "$t/dest2/exp1/rlx")
check "the variant runs from the bundle" test "$vran" = variant
check "a variant named like the bundle's own folders is refused" \
  bash -c '! bash "$1/scripts/gpu-bundle.sh" variant "$2/build2" "$2/out" shared 2>/dev/null' _ "$src" "$t"

# pack-decode: rlx alone (not the test binary beside it) and only what makes the decode model.
mkdir -p "$t/build3/tests" "$t/shared/gguf/tools" "$t/gguf-py/tests"
cp "$t/build/rlx" "$t/build3/rlx" && cp "$t/build/rlx" "$t/build3/tests/rlx_test_cuda"
echo gen > "$t/shared/gguf/tools/make_synth_llama_gguf.py"
echo spm > "$t/shared/gguf/vocab/ggml-vocab-llama-spm.gguf"
echo test > "$t/gguf-py/tests/t.py"
bash "$src/scripts/gpu-bundle.sh" pack-decode "$t/build3" "$t/shared" "$t/outd" "$t/gguf-py" >/dev/null
check "pack-decode succeeds" test $? -eq 0
dbins=$(tar tJf "$t/outd/bin.tar.xz")
check "pack-decode bundles rlx" grep -qx 'b/rlx' <<<"$dbins"
check "pack-decode leaves the test binaries out" bash -c '! grep -q "rlx_test" <<<"$1"' _ "$dbins"
dfix=$(tar tJf "$t/outd/fixtures.tar.xz")
for f in shared/gguf/tools/make_synth_llama_gguf.py shared/gguf/vocab/ggml-vocab-llama-spm.gguf gguf-py/gguf/__init__.py; do
  check "pack-decode bundles $f" grep -q "$f" <<<"$dfix"
done
check "pack-decode leaves the rest out" bash -c '! grep -Eq "v\.gguf|node\.tar\.xz|gguf-py/tests" <<<"$1"' _ "$dfix"
bash "$src/scripts/gpu-bundle.sh" variant "$t/build3" "$t/outd" exp2 >/dev/null
vdbins=$(tar tJf "$t/outd/exp2.tar.xz")
check "a variant of a pack-decode bundle takes rlx alone" \
  bash -c 'grep -qx "exp2/rlx" <<<"$1" && ! grep -q "rlx_test" <<<"$1"' _ "$vdbins"
bash "$src/scripts/gpu-bundle.sh" unpack "$t/outd" "$t/destd" >/dev/null
dran=$(. "$t/destd/env.sh" && "$t/destd/exp2/rlx")
check "the pack-decode variant runs from the bundle" test "$dran" = bundled
check "pack-decode without gguf-py is refused" \
  bash -c '! bash "$1/scripts/gpu-bundle.sh" pack-decode "$2/build3" "$2/shared" "$2/o3" "$2/none" 2>/dev/null' _ "$src" "$t"

mkdir -p "$t/empty"
check "a build without binaries is refused" bash -c '! bash "$1/scripts/gpu-bundle.sh" pack "$2/empty" "$2/shared" "$2/o2" 2>/dev/null' _ "$src" "$t"
check "an unknown mode is refused" bash -c '! bash "$1/scripts/gpu-bundle.sh" run 2>/dev/null' _ "$src"
[ $fail -eq 0 ] && echo "gpu-bundle: every check passed"
exit $fail
