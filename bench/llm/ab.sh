#!/usr/bin/env bash
# Two rlx builds against llama.cpp's llama-bench on one GGUF: prompt 128 and generation 32 at
# one thread count, the three runs interleaved in each round (A, B, llama-bench), medians of
# ROUNDS rounds, printed with each build's ratio to llama.cpp.
#   bench/llm/ab.sh MODEL.gguf THREADS ROUNDS RLX_A RLX_B LLAMA_BENCH
# e.g. bench/llm/ab.sh q4_k_m.gguf 2 3 /tmp/rlx-before build/rlx <llama.cpp build>/bin/llama-bench
set -uo pipefail
[ $# -eq 6 ] || { echo "usage: $0 MODEL.gguf THREADS ROUNDS RLX_A RLX_B LLAMA_BENCH" >&2; exit 2; }
m=$1 t=$2 rounds=$3 a=$4 b=$5 lb=$6
declare -A v
lb_rate() { python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
for r in rows:
    if (sys.argv[1] == "pp" and r["n_prompt"] != "0") or (sys.argv[1] == "tg" and r["n_gen"] != "0"):
        print(r["avg_ts"]); break' "$1"; }
for ((r = 0; r < rounds; ++r)); do
  for k in a b; do
    out=$("${!k}" llm-bench -m "$m" -p 128 -n 32 -t "$t" -r 1 2>&1)
    v[$k.pp]+="$(sed -n "s/^rlx pp128 t=$t: \([0-9.]*\).*/\1/p" <<<"$out") "
    v[$k.tg]+="$(sed -n "s/^rlx tg32 t=$t: \([0-9.]*\).*/\1/p" <<<"$out") "
  done
  out=$("$lb" -m "$m" -p 128 -n 32 -t "$t" -r 1 -o csv 2>/dev/null)
  v[l.pp]+="$(lb_rate pp <<<"$out") "
  v[l.tg]+="$(lb_rate tg <<<"$out") "
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print 0; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "$(basename "$m"), $t threads, medians of $rounds interleaved rounds (tok/s)"
for k in pp tg; do
  x=$(med <<<"${v[a.$k]}") y=$(med <<<"${v[b.$k]}") z=$(med <<<"${v[l.$k]}")
  awk -v k=$k -v x="$x" -v y="$y" -v z="$z" 'BEGIN {
    printf "%s  A %8.1f  B %8.1f  llama.cpp %8.1f   A/lcpp %s  B/lcpp %s\n", (k == "pp" ? "prompt 128   " : "generation 32"), x, y, z,
      (z > 0 ? sprintf("%.2f", x / z) : "-"), (z > 0 ? sprintf("%.2f", y / z) : "-") }'
done
