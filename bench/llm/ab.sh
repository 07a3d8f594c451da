#!/usr/bin/env bash
# Two rlx builds against llama.cpp's llama-bench on one GGUF: prompt 128 and generation 32 at
# one thread count, the three runs interleaved in each round (A, B, llama-bench), medians of
# ROUNDS rounds, printed with each build's ratio to llama.cpp.
#   bench/llm/ab.sh MODEL.gguf THREADS ROUNDS RLX_A RLX_B LLAMA_BENCH
# e.g. bench/llm/ab.sh q4_k_m.gguf 2 3 /tmp/rlx-before build/rlx <llama.cpp build>/bin/llama-bench
set -uo pipefail
[ $# -eq 6 ] || { echo "usage: $0 MODEL.gguf THREADS ROUNDS RLX_A RLX_B LLAMA_BENCH" >&2; exit 2; }
m=$1 t=$2 rounds=$3 a=$4 b=$5 lb=$6
. "$(dirname "$0")/common.sh"  # med, lb_rate, rlx_rate
declare -A v
for ((r = 0; r < rounds; ++r)); do
  for k in a b; do
    out=$("${!k}" llm-bench -m "$m" -p 128 -n 32 -t "$t" -r 1 2>&1)
    v[$k.pp]+="$(rlx_rate pp128 "$t" <<<"$out") "
    v[$k.tg]+="$(rlx_rate tg32 "$t" <<<"$out") "
  done
  out=$("$lb" -m "$m" -p 128 -n 32 -t "$t" -r 1 -o csv 2>/dev/null)
  v[l.pp]+="$(lb_rate pp <<<"$out") "
  v[l.tg]+="$(lb_rate tg <<<"$out") "
done
echo "$(basename "$m"), $t threads, medians of $rounds interleaved rounds (tok/s)"
for k in pp tg; do
  x=$(tr ' ' '\n' <<<"${v[a.$k]}" | grep . | med) y=$(tr ' ' '\n' <<<"${v[b.$k]}" | grep . | med)
  z=$(tr ' ' '\n' <<<"${v[l.$k]}" | grep . | med)
  awk -v k=$k -v x="$x" -v y="$y" -v z="$z" 'BEGIN {
    printf "%s  A %8.1f  B %8.1f  llama.cpp %8.1f   A/lcpp %s  B/lcpp %s\n", (k == "pp" ? "prompt 128   " : "generation 32"), x, y, z,
      (z + 0 > 0 ? sprintf("%.2f", x / z) : "-"), (z + 0 > 0 ? sprintf("%.2f", y / z) : "-") }'
done
