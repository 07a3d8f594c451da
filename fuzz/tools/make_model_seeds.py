#!/usr/bin/env python3
"""Writes the GGUF fuzz target's model seeds: tiny llama models (random weights, no
tokenizer) that rlx::llm::Model::load accepts and an Engine runs, so that mutations of them
reach the model loader and the graph builders.

    python3 fuzz/tools/make_model_seeds.py fuzz/corpus/gguf

model-llama-f32.gguf: n_embd 8, one layer, 2 heads of 4, 1 KV head, FFN 16, vocab 8, f32.
model-llama-q8.gguf:  n_embd 32, two layers, 4 heads of 8, 2 KV heads, FFN 64, vocab 16; its
                      matrices q8_0 (one f16 scale and 32 int8 values a block), tied output.
"""
import random
import struct
import sys

ALIGN = 32
F32, F16, Q8_0 = 0, 1, 8
U32, F32V, STRING = 4, 6, 8


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == U32:
        out += struct.pack("<I", value)
    elif vtype == F32V:
        out += struct.pack("<f", value)
    elif vtype == STRING:
        out += gguf_string(value)
    return out


def f32_data(rng, n, scale):
    return struct.pack("<%df" % n, *[rng.uniform(-scale, scale) for _ in range(n)])


def q8_data(rng, n):
    assert n % 32 == 0
    out = b""
    for _ in range(n // 32):
        out += struct.pack("<e", rng.uniform(0.001, 0.01))
        out += struct.pack("<32b", *[rng.randint(-127, 127) for _ in range(32)])
    return out


def write(path, embd, layers, heads, kv_heads, ff, vocab, quant, tied, seed):
    rng = random.Random(seed)
    hd = embd // heads
    tensors = []  # (name, dims, type, data)

    def vec(name, n):
        tensors.append((name, [n], F32, f32_data(rng, n, 1.0)))

    def mat(name, k, n):  # GGUF dims: [k (input), n (output)]
        if quant:
            tensors.append((name, [k, n], Q8_0, q8_data(rng, k * n)))
        else:
            tensors.append((name, [k, n], F32, f32_data(rng, k * n, 0.5)))

    tensors.append(("token_embd.weight", [embd, vocab], F32, f32_data(rng, embd * vocab, 1.0)))
    vec("output_norm.weight", embd)
    if not tied:
        mat("output.weight", embd, vocab)
    for il in range(layers):
        b = "blk.%d." % il
        vec(b + "attn_norm.weight", embd)
        mat(b + "attn_q.weight", embd, heads * hd)
        mat(b + "attn_k.weight", embd, kv_heads * hd)
        mat(b + "attn_v.weight", embd, kv_heads * hd)
        mat(b + "attn_output.weight", heads * hd, embd)
        vec(b + "ffn_norm.weight", embd)
        mat(b + "ffn_gate.weight", embd, ff)
        mat(b + "ffn_up.weight", embd, ff)
        mat(b + "ffn_down.weight", ff, embd)
    meta = [
        kv("general.architecture", STRING, "llama"),
        kv("llama.context_length", U32, 16),
        kv("llama.embedding_length", U32, embd),
        kv("llama.block_count", U32, layers),
        kv("llama.feed_forward_length", U32, ff),
        kv("llama.attention.head_count", U32, heads),
        kv("llama.attention.head_count_kv", U32, kv_heads),
        kv("llama.rope.freq_base", F32V, 10000.0),
        kv("llama.attention.layer_norm_rms_epsilon", F32V, 1e-5),
    ]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta)
    offset = 0
    for name, dims, ttype, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        out += struct.pack("<IQ", ttype, offset)
        offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
    out += b"\0" * (-len(out) % ALIGN)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % ALIGN)
    with open(path, "wb") as f:
        f.write(out)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/gguf"
    write(d + "/model-llama-f32.gguf", 8, 1, 2, 1, 16, 8, False, False, 1)
    write(d + "/model-llama-q8.gguf", 32, 2, 4, 2, 64, 16, True, True, 2)


if __name__ == "__main__":
    main()
