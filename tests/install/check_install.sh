#!/usr/bin/env bash
# Installs the built tree into a temporary prefix, builds examples/hello.cpp as an outside
# project with find_package(rlx CONFIG REQUIRED), runs it and expects "4 6".
set -euo pipefail
src="$1"; build="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# The exported target names its dependencies as imported targets, never as absolute paths.
targets=$(ls "$tmp"/prefix/lib*/cmake/rlx/rlxTargets.cmake)
if grep -n 'INTERFACE_LINK_LIBRARIES.*"/' "$targets"; then
  echo "rlxTargets.cmake links an absolute library path (above)"; exit 1
fi
grep -q 'cxx_std_20' "$targets" || { echo "rlxTargets.cmake does not carry cxx_std_20"; exit 1; }
cmake -S "$src/tests/install/consumer" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DHELLO_SOURCE="$src/examples/hello.cpp" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/b" -j2 >/dev/null
out=$("$tmp/b/hello")
echo "hello printed: $out"
[ "$out" = "4 6" ]
test -x "$tmp/prefix/bin/rlx" && "$tmp/prefix/bin/rlx" --version
