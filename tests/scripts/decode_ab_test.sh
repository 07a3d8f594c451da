#!/bin/bash
# bench/gpu/decode_ab.sh on stand-in rlx binaries (shell scripts that answer llm-bench as rlx
# prints it, with figures they take from their environment), so the alternation, the argument
# passing, the choice between the greedy and host-loop figures, the medians and ratios can be
# checked on a machine without a GPU. With RLX (a built rlx) and MODEL (a GGUF file) also one
# round on the CPU through the real binary.
#   tests/scripts/decode_ab_test.sh SOURCE_DIR [RLX MODEL]
set -u
src=$1 rlx=${2:-} model=${3:-}
ab=$src/bench/gpu/decode_ab.sh
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail=0
check() {  # description, command...
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi
}
touch "$t/model.gguf"
# The stand-in logs its arguments and prints FIG (host loop) and GFIG (greedy) for each call;
# with SEQ, its n-th call of the run prints the n-th number of SEQ instead of FIG.
cat > "$t/rlx" <<'EOF'
#!/bin/bash
echo "$*" >> "$LOG"
n=$(grep -c . "$LOG")
fig=${FIG:-100.0}
[ -n "${SEQ:-}" ] && fig=$(echo $SEQ | cut -d' ' -f$n)
d=; for ((i = 1; i <= $#; ++i)); do [ "${!i}" = -d ] && j=$((i + 1)) && d=" @ d${!j}"; done
echo "rlx tg128$d t=1: $fig tok/s (median of 3)"
for a in "$@"; do [ "$a" = --generate-greedy ] && echo "rlx tg128$d t=1: ${GFIG:-200.0} tok/s (median of 3; generate_greedy)"; done
exit 0
EOF
chmod +x "$t/rlx"
export LOG=$t/log

: > "$LOG"
out=$(GREEDY=0 ROUNDS=3 SEQ="100 90 102 95 98 99" bash "$ab" "$t/model.gguf" a="$t/rlx" b="$t/rlx")
check "runs" test $? -eq 0
check "one line per round" test "$(grep -c '^round ' <<<"$out")" -eq 3
check "the variants alternate within a round" grep -qx 'round 2 d0  a 102  b 95' <<<"$out"
check "medians over the rounds and the ratio to the first" grep -qx 'median d0  a 100 (1.000)  b 95 (0.950)' <<<"$out"
check "the host loop's figure without --generate-greedy" bash -c '! grep -q -- --generate-greedy "$1"' _ "$LOG"
check "the arguments of llm-bench" grep -qx -- "llm-bench -m $t/model.gguf --device cuda -p 0 -n 128 -r 3" "$LOG"

: > "$LOG"
out=$(ROUNDS=1 DEPTHS="0 2048" DEVICE=cpu TOKENS=16 REPS=1 GFIG=321.5 bash "$ab" "$t/model.gguf" one="$t/rlx")
check "the greedy figure by default" grep -qx 'round 1 d0  one 321.5' <<<"$out"
check "a depth is passed as -d" grep -qx -- "llm-bench -m $t/model.gguf --device cpu -p 0 -n 16 -r 1 -d 2048 --generate-greedy" "$LOG"
check "a line per depth" grep -qx 'median d2048  one 321.5 (1.000)' <<<"$out"

: > "$LOG"
out=$(ROUNDS=1 bash "$ab" "$t/model.gguf" a="$t/rlx" b="$t/rlx,GFIG=250.0")
check "a variant's settings reach its runs only" grep -qx 'round 1 d0  a 200.0  b 250.0' <<<"$out"
check "the ratio of a variant with settings" grep -qx 'median d0  a 200.0 (1.000)  b 250.0 (1.250)' <<<"$out"

printf '#!/bin/bash\necho "no such model" >&2\nexit 1\n' > "$t/bad"
chmod +x "$t/bad"
err=$(ROUNDS=1 bash "$ab" "$t/model.gguf" a="$t/rlx" b="$t/bad" 2>&1)
check "a run without a figure fails the script" test $? -ne 0
check "and shows that run's output" grep -q 'no such model' <<<"$err"
printf '#!/bin/bash\necho "rlx tg128 t=1: n/a tok/s (median of 3; generate_greedy)"\n' > "$t/odd"
chmod +x "$t/odd"
check "a figure that is not a number fails the script" \
  bash -c '! ROUNDS=1 bash "$1" "$2/model.gguf" a="$2/odd" >/dev/null 2>&1' _ "$ab" "$t"
check "a variant without a label is refused" bash -c '! bash "$1" "$2/model.gguf" "$2/rlx" 2>/dev/null' _ "$ab" "$t"
check "a missing binary is refused" bash -c '! bash "$1" "$2/model.gguf" a="$2/none" 2>/dev/null' _ "$ab" "$t"
check "a missing model is refused" bash -c '! bash "$1" "$2/none.gguf" a="$2/rlx" 2>/dev/null' _ "$ab" "$t"

if [ -n "$rlx" ] && [ -x "$rlx" ] && [ -f "$model" ]; then
  out=$(ROUNDS=1 DEVICE=cpu TOKENS=4 REPS=1 bash "$ab" "$model" a="$rlx" b="$rlx")
  check "the real rlx on the CPU gives a figure for each variant" \
    grep -Eq '^median d0  a [0-9.]+ \(1\.000\)  b [0-9.]+ \([0-9.]+\)$' <<<"$out"
else
  echo "skip: the real rlx (no binary or model given)"
fi
[ $fail -eq 0 ] && echo "decode_ab: every check passed"
exit $fail
