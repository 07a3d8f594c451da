# Helpers the LLM benchmark scripts share (sourced by run.sh and ab.sh).
# The median of the numbers on stdin, one a line ("-" for none).
med() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# llama-bench CSV on stdin: the avg_ts column of the row whose n_prompt (pp) / n_gen (tg) is set.
lb_rate() { python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
for r in rows:
    if (sys.argv[1] == "pp" and r["n_prompt"] != "0") or (sys.argv[1] == "tg" and r["n_gen"] != "0"):
        print(r["avg_ts"]); break' "$1"; }
# rlx llm-bench output on stdin: the tok/s of test $1 (pp128, tg32, ...) at $2 threads.
rlx_rate() { sed -n "s/^rlx $1.* t=$2: \([0-9.]*\) tok\/s.*/\1/p" | head -n 1; }
