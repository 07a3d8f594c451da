#!/usr/bin/env bash
# Builds one libFuzzer target and runs it over a copy of its seed corpus.
#   fuzz/run.sh TARGET [BUILD_DIR] [SECONDS] [JOBS]      TARGET: onnx | text | npy | gguf
# Configures BUILD_DIR (default build-fuzz) with clang++ -DRLX_FUZZ=ON (library with
# fuzzer-no-link + ASan + UBSan), builds rlx_fuzz_TARGET, copies fuzz/corpus/TARGET to
# BUILD_DIR/fuzz-work/TARGET/corpus (new inputs land there, the seeds stay untouched)
# and fuzzes for SECONDS (default 600). Exits non-zero on a finding (crash, sanitizer
# report, non-rlx::Error exception, timeout over 10 s, RSS over 2 GiB); the input that
# triggered it is written to BUILD_DIR/fuzz-work/TARGET/artifacts/.
# Extra libFuzzer flags can be passed through FUZZ_FLAGS, e.g. to collect every finding
# of a run instead of stopping at the first: FUZZ_FLAGS="-fork=1 -ignore_crashes=1".
set -euo pipefail

target=${1:?usage: fuzz/run.sh onnx|text|npy|gguf [BUILD_DIR] [SECONDS] [JOBS]}
build=${2:-build-fuzz}
seconds=${3:-600}
jobs=${4:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

case "$target" in onnx|text|npy|gguf) ;; *) echo "fuzz/run.sh: unknown target '$target' (onnx, text, npy, gguf)" >&2; exit 2 ;; esac
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz/run.sh: $cxx not found; libFuzzer needs clang (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi

# -O1 with line tables: fast to build, readable sanitizer stacks; asserts stay on.
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DRLX_FUZZ=ON -DRLX_BUILD_TESTS=OFF -DRLX_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target "rlx_fuzz_$target"

work="$build/fuzz-work/$target"
rm -rf "$work/corpus" "$work/artifacts"
mkdir -p "$work/corpus" "$work/artifacts"
cp fuzz/corpus/"$target"/* "$work/corpus/"
dict=()
[ -f "fuzz/$target.dict" ] && dict=(-dict="fuzz/$target.dict")

echo "fuzz/run.sh: fuzzing $target for ${seconds}s over $(ls "$work/corpus" | wc -l) seeds"
set +e
# UBSan reports abort (the library is built with -fno-sanitize-recover=undefined);
# leak checking is on by default in ASan and reported by libFuzzer per input.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0} \
  "$build/fuzz/rlx_fuzz_$target" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" ${FUZZ_FLAGS:-} "$work/corpus"
rc=$?
set -e
# Fork mode with -ignore_crashes=1 (FUZZ_FLAGS) keeps going after a finding and exits 0:
# any artifact left behind is a finding all the same.
if [ $rc -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  echo "fuzz/run.sh: $target: FINDING (libFuzzer exit $rc); inputs in $work/artifacts/:" >&2
  ls -l "$work/artifacts/" >&2
  exit 1
fi
echo "fuzz/run.sh: $target: no findings in ${seconds}s (corpus now $(ls "$work/corpus" | wc -l) inputs)"
