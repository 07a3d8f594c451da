#!/usr/bin/env bash
# LLM decode speed of several rlx builds (or one build under several environment settings) on
# one machine, alternated round by round: a GPU lease drifts by a few percent between calls and
# even within one, so a change counts only against a build timed beside it. Each round runs
# `rlx llm-bench -m MODEL --device DEVICE -p 0 -n TOKENS -r REPS [-d DEPTH] [--generate-greedy]`
# once per variant and depth, in the order given; the summary gives each variant's median over
# the rounds and its ratio to the first variant's.
#   bench/gpu/decode_ab.sh MODEL VARIANT [VARIANT...]
#     VARIANT: LABEL=PATH_TO_RLX[,VAR=VALUE...], e.g. head=/w/b/rlx exp=/w/x/rlx,RLX_SWITCH=1
# Environment: ROUNDS (3), TOKENS (128), REPS (3), DEPTHS ("0": cached tokens before the timed
# steps, e.g. "0 2048"), DEVICE (cuda), GREEDY (1: the figure of Engine::generate_greedy, the
# token kept on the device; 0: the host loop's, which reads each step's logits).
# Prints one line per round and depth ("round 1 d0  head 991.5  exp 977.3") and then, per
# depth, "median d0  head 991.5 (1.000)  exp 977.3 (0.986)". Exits non-zero when a run gives no
# figure (its output is shown).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 MODEL LABEL=RLX[,VAR=VALUE...] [LABEL=RLX...]" >&2; exit 2; }
model=$1
shift
[ -f "$model" ] || { echo "decode_ab: no model file '$model'" >&2; exit 2; }
rounds=${ROUNDS:-3} tokens=${TOKENS:-128} reps=${REPS:-3} depths=${DEPTHS:-0} device=${DEVICE:-cuda}
greedy=${GREEDY:-1}
labels=() bins=() envs=()
for v in "$@"; do
  case $v in *=*) ;; *) echo "decode_ab: variant '$v' is not LABEL=PATH[,VAR=VALUE...]" >&2; exit 2 ;; esac
  label=${v%%=*} rest=${v#*=}
  IFS=, read -r -a parts <<<"$rest"
  [ -x "${parts[0]}" ] || { echo "decode_ab: variant '$label': '${parts[0]}' is not an executable" >&2; exit 2; }
  labels+=("$label") bins+=("${parts[0]}") envs+=("${parts[*]:1}")
done
figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
# One figure: the line of the wanted loop among llm-bench's "... tok/s (median of R[; generate_greedy])".
run() {  # index, depth
  local args=(llm-bench -m "$model" --device "$device" -p 0 -n "$tokens" -r "$reps") out line fig which=-v
  [ "$2" != 0 ] && args+=(-d "$2")
  [ "$greedy" = 1 ] && args+=(--generate-greedy) && which=-e
  out=$(env ${envs[$1]} "${bins[$1]}" "${args[@]}" 2>&1)
  line=$(grep 'tok/s' <<<"$out" | grep "$which" 'generate_greedy' | tail -1)
  fig=$(sed -n 's/.*: \([0-9][0-9.]*\) tok\/s.*/\1/p' <<<"$line")
  [ -n "$fig" ] || { echo "decode_ab: '${labels[$1]}' gave no figure at depth $2:" >&2; echo "$out" >&2; return 1; }
  echo "$fig"
}
for ((r = 1; r <= rounds; ++r)); do
  for d in $depths; do
    row="round $r d$d"
    for i in "${!labels[@]}"; do
      f=$(run "$i" "$d") || exit 1
      row+="  ${labels[$i]} $f"
      echo "$d ${labels[$i]} $f" >>"$figures"
    done
    echo "$row"
  done
done
for d in $depths; do
  row="median d$d" base=
  for l in "${labels[@]}"; do
    m=$(awk -v d="$d" -v l="$l" '$1 == d && $2 == l { print $3 }' "$figures" | sort -g |
      awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
    [ -n "$base" ] || base=$m
    row+="  $l $m ($(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.3f", a / b }'))"
  done
  echo "$row"
done
