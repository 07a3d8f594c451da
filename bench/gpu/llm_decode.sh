#!/usr/bin/env bash
# LLM decode on a GPU: a TinyLlama-1.1B-shaped llama (random weights, real tokenizer; made by
# ../shared/gguf/tools/make_synth_llama_gguf.py preset tinyllama-1.1b) at F16 and Q4_0 through
# rlx on CUDA, batch 1: generation tokens/s (rlx llm-bench: greedy, one token per step, the
# median of R repetitions after a warm-up; with the host in the loop and by generate_greedy)
# and the weight bandwidth that implies (the bytes of every matrix a step reads: all but the
# token embedding table, of which a step reads one row)
# against the device's copy bandwidth measured in the same run (PyTorch device-to-device copy
# of 1 GiB, read + write bytes over time). Needs a GPU machine with PyTorch.
#   bench/gpu/llm_decode.sh BUILD_DIR WORK_DIR
# Environment: SHARED (default ../shared beside the checkout), GGUF_PY (llama.cpp's gguf-py,
# for the generator), PYTHON (python3), TOKENS (generated per repetition, 128), REPS (5).
# With LLAMA_CPP_SRC (llama.cpp's source: the v0.5.0 bundle of node-llama-cpp@3.22.1) or
# LLAMA_CPP_BIN (a folder with llama-bench and llama-quantize built with -DGGML_CUDA=ON), the
# same models also run through llama.cpp's CUDA build (llama-bench -ngl 99, generation only,
# the same token count), alternated with rlx, and Q4_0 as llama-quantize makes it runs on
# both (identical bytes); DEPTHS (default "0") lists the cached tokens each side-by-side
# generation starts after (rlx llm-bench -d, llama-bench -d).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:?usage: llm_decode.sh BUILD_DIR WORK_DIR}" && pwd)"
work="${2:?usage: llm_decode.sh BUILD_DIR WORK_DIR}"
shared="${SHARED:-$root/../shared}"
py="${PYTHON:-python3}"
tokens="${TOKENS:-128}" reps="${REPS:-5}" depths="${DEPTHS:-0}"
rlx="$build/rlx"
mkdir -p "$work"
f16="$work/tinyllama-1.1b-f16.gguf" q40="$work/tinyllama-1.1b-q4_0.gguf"
if [ ! -s "$f16" ]; then
  PYTHONPATH="${GGUF_PY:-}" "$py" "$shared/gguf/tools/make_synth_llama_gguf.py" \
    "$shared/gguf/vocab/ggml-vocab-llama-spm.gguf" "$f16" tinyllama-1.1b >/dev/null
fi
[ -s "$q40" ] || "$rlx" quantize "$f16" "$q40" q4_0 --quiet

copy_bw=$("$py" - <<'PY'
import torch
n = 1 << 30
x = torch.empty(n, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
for _ in range(20): y.copy_(x)
b.record(); torch.cuda.synchronize()
print("%.1f" % (2 * n * 20 / (a.elapsed_time(b) / 1e3) / 1e9))
PY
)

# Bytes of the matrices one decode step reads, from rlx inspect's tensor table (the token
# table counts only when it is also the output projection: tied embeddings).
step_bytes() {
  "$rlx" inspect "$1" | awk '
    $1 ~ /\.weight$/ && NF >= 5 {
      v = $(NF - 1); u = $NF
      m = u == "GiB" ? 1073741824 : u == "MiB" ? 1048576 : u == "KiB" ? 1024 : 1
      if ($1 == "token_embd.weight") emb = v * m; else s += v * m
      if ($1 == "output.weight") untied = 1 }
    END { printf "%.0f", untied ? s : s + emb }'
}

echo "== LLM decode on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1): TinyLlama-1.1B shape, batch 1, $tokens tokens x $reps"
echo "device copy bandwidth (read + write): $copy_bw GB/s"
# Two rows per type: llm-bench's steps (each token read back by the host and fed to the next
# step, as llama-bench's generation runs) and Engine::generate_greedy's (the argmax fed back on
# the device, the steps queued back to back).
printf '%-8s %-16s %10s %14s %14s %10s\n' type steps "tok/s" "MB per token" "weight GB/s" "of copy"
for m in "$f16" "$q40"; do
  type=$(basename "$m" .gguf | sed 's/.*-//')
  out=$("$rlx" llm-bench -m "$m" --device cuda -p 0 -n "$tokens" -r "$reps" --generate-greedy)
  bytes=$(step_bytes "$m")
  for how in host generate_greedy; do
    rate=$(grep $([ $how = host ] && echo -v) generate_greedy <<<"$out" | sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p' | head -n 1)
    awk -v t="$type" -v h="$how" -v r="$rate" -v b="$bytes" -v c="$copy_bw" 'BEGIN {
      gbs = r * b / 1e9; printf "%-8s %-16s %10.1f %14.1f %14.1f %9.1f%%\n", t, h, r, b / 1e6, gbs, 100 * gbs / c }'
  done
done

# Launch overhead: the F16 decode step with every kernel launched by the host on every step
# (RLX_CUDA_GRAPH=0) against the step replayed as one CUDA Graph (the rows above).
rate_graph=$("$rlx" llm-bench -m "$f16" --device cuda -p 0 -n "$tokens" -r "$reps" | sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p' | head -n 1)
rate_eager=$(RLX_CUDA_GRAPH=0 "$rlx" llm-bench -m "$f16" --device cuda -p 0 -n "$tokens" -r "$reps" | sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p' | head -n 1)
awk -v g="$rate_graph" -v e="$rate_eager" 'BEGIN {
  printf "f16 step with graph replay %.3f ms (%.1f tok/s), without %.3f ms (%.1f tok/s): replay saves %.3f ms per step\n",
    1e3 / g, g, 1e3 / e, e, 1e3 / e - 1e3 / g }'

# A chat's turns of new lengths (compiles included): prompts padded to a few pass lengths,
# which later turns reuse, against a pass compiled for each exact length.
"$rlx" llm-bench -m "$f16" --device cuda -p 0 -n 0 -r "$reps" --chat 23,41,17,60,35,12

# llama.cpp's CUDA build side by side (optional, see the header).
lbin="${LLAMA_CPP_BIN:-}"
if [ -z "$lbin" ] && [ -n "${LLAMA_CPP_SRC:-}" ]; then
  lbuild="$work/llama.cpp-build"
  if [ ! -x "$lbuild/bin/llama-bench" ]; then
    echo "building llama.cpp's CUDA build (llama-bench, llama-quantize) under $lbuild"
    cmake -S "$LLAMA_CPP_SRC" -B "$lbuild" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_APP=OFF >/dev/null
    cmake --build "$lbuild" -j"$(nproc)" --target llama-bench llama-quantize >/dev/null
  fi
  lbin="$lbuild/bin"
fi
if [ -n "$lbin" ]; then
  lq40="$work/tinyllama-1.1b-q4_0-llama.gguf"
  [ -s "$lq40" ] || "$lbin/llama-quantize" "$f16" "$lq40" Q4_0 >/dev/null 2>&1
  lb_rate() {  # MODEL DEPTH: tok/s of llama-bench's generation row (CSV avg_ts)
    "$lbin/llama-bench" -m "$1" -ngl 99 -p 0 -n "$tokens" -d "$2" -r "$reps" -o csv 2>/dev/null |
      "$py" -c 'import csv, sys; r = [x for x in csv.DictReader(sys.stdin) if x["n_gen"] != "0"]; print("%.1f" % float(r[0]["avg_ts"]) if r else "-")'
  }
  rlx_rate() { "$rlx" llm-bench -m "$1" --device cuda -p 0 -n "$tokens" -d "$2" -r "$reps" | sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p' | head -n 1; }
  echo "== rlx against llama.cpp's CUDA build, same GPU, generation of $tokens tokens x $reps (tok/s; alternated, two rounds)"
  printf '%-22s %10s %10s %10s %10s\n' model "rlx" "llama.cpp" "rlx" "llama.cpp"
  for d in $depths; do
    for m in "$f16" "$lq40" "$q40"; do
      name=$(basename "$m" .gguf | sed 's/tinyllama-1.1b-//')
      [ "$d" = 0 ] || name="$name @ d$d"
      printf '%-22s %10s %10s %10s %10s\n' "$name" "$(rlx_rate "$m" "$d")" "$(lb_rate "$m" "$d")" "$(rlx_rate "$m" "$d")" \
        "$(lb_rate "$m" "$d")"
    done
  done
fi
