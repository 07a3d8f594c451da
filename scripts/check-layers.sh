#!/usr/bin/env bash
# Checks that the per-layer include roots (build/layers/LAYER, made by CMakeLists.txt)
# let each layer include itself and the layers below it, and nothing above: a
# wrong-way include must fail to compile. Run by `make test`.
#   scripts/check-layers.sh CXX SOURCE_DIR BINARY_DIR
set -euo pipefail
cxx="$1"; src="$2"; bin="$3"
fail=0
try() {  # try LAYER HEADER yes|no
  local layer="$1" header="$2" want="$3" got=no
  if echo "#include \"$header\"" | "$cxx" -std=c++20 -fsyntax-only -I"$src/include" -I"$bin/layers/$layer" -x c++ - \
       >/dev/null 2>&1; then got=yes; fi
  if [ "$got" != "$want" ]; then
    echo "layer $layer including $header: compiles=$got, expected $want"
    fail=1
  fi
}
try ir ir/op_table.h yes
try ir opt/plan.h no
try opt opt/pipeline.h yes
try opt backends/backend.h no
try backends backends/cpu/kernel.h yes
try backends runtime/instance.h no
try runtime runtime/instance.h yes
try runtime io/onnx/importer.h no
try io runtime/backend_registry.h yes
try io backends/cpu/kernel.h no
try io backends/null/backend.h no
try io backends/cuda/backend.h no
try runtime backends/cuda/backend.h yes
try io llm/arch.h no
try llm runtime/instance.h yes
try llm backends/cpu/kernel.h no
[ "$fail" -eq 0 ] && echo "layer include roots: every allowed include compiles, every wrong-way include fails"
exit "$fail"
