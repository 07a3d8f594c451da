#!/usr/bin/python3
"""Exports the PyTorch-made benchmark models of bench/models/run.sh to ONNX.

  /usr/bin/python3 bench/models/export_torch.py OUT_DIR [NAME ...]

Run it with Debian's python3 (python3-torch 1.13, python3-torchvision 0.14; `scripts/install-deps.sh
--bench` installs them): a pyenv or venv python3 on PATH usually has no torch.
NAME is one of bert_base, minilm_l6, resnet50 (default: all). Each model lands in OUT_DIR/NAME/:
  model.onnx        opset 14, static shapes (the benchmark shape; no dynamic axes)
  input/NAME.npy    the inputs the benchmark feeds to both runtimes
  torch/NAME.npy    PyTorch's own outputs for those inputs (the exporter's reference)
  manifest.txt      versions, opset, tolerance, sha256 of model.onnx
A model whose folder is complete is not exported again (delete the folder to redo it). Random
weights from a fixed seed, one torch thread, fixed inputs: the same files on every run.

Before a folder is published, the exported file is run through ONNX Runtime (bench/models/ort_run.js,
onnxruntime-node from scripts/fetch-models.sh --peer; NODE_PATH, or .cache/models/ort by default) and its
outputs are compared with PyTorch's; a difference beyond the tolerance below fails the export (exit 1).

The encoders are written here in plain torch.nn, shaped like BERT as Hugging Face writes it: token
embeddings + learned positions + token type 0, LayerNorm(eps 1e-12); per layer Q/K/V projections, heads
split by reshape/transpose, scores = QK^T / sqrt(d) + additive mask ((1 - mask) * -10000), softmax,
context, output projection, residual + LayerNorm, FFN with erf GELU, residual + LayerNorm; a tanh
pooler on token 0. Opset 14 keeps LayerNorm and GELU decomposed (ReduceMean/Pow/Sqrt, Erf), as an
opset-14 export of a Hugging Face model has them. Inputs: input_ids int64 [1,128] and attention_mask
int64 [1,128] (token ids rather than embeddings, so the embedding Gather and the mask arithmetic are
part of the graph); the last 28 positions are padding (mask 0), so a runtime that ignored the mask
would fail the output check (by 5.5e-2 relative on the MiniLM-shaped one). Initialization as BERT's: N(0, 0.02) weights, zero biases.
"""
import hashlib
import math
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # most often: a python3 other than Debian's
    raise SystemExit(f"export_torch: {e} ({sys.executable}; run it with /usr/bin/python3 after "
                     "scripts/install-deps.sh --bench)")

OPSET = 14
SEED = 0
SEQ = 128
PAD = 28  # padding positions at the end of the sequence (attention_mask 0)
# Tolerance, the same rule as tests/models (model_refs.cpp) and compare.js: per output,
# max|a - b| / max|reference| <= 1e-4, integers exact. Why 1e-4: two correct fp32 runtimes differ
# by summation order and by a few ulps in exp/erf/sqrt; for a dot product of length K that is about
# sqrt(K) * 6e-8 relative (3e-6 at K = 3072), and LayerNorm re-normalizes every layer, so the errors
# add over layers rather than compound (~1e-5 after 12). 1e-4 leaves ~10x headroom; a real bug is far
# above it (ORT on the MiniLM-shaped model with the mask all ones instead of padded: 5.5e-2).
RTOL = 1e-4

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class Layer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def split(self, t):  # [B, S, H] -> [B, heads, S, dh]
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.dh).transpose(1, 2)

    def forward(self, x, add_mask):
        b, s, h = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + add_mask
        ctx = torch.matmul(F.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.o(ctx))
        return self.norm2(x + self.down(F.gelu(self.up(x))))  # F.gelu: the erf form


class Encoder(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, vocab=30522, positions=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(Layer(hidden, heads, ffn) for _ in range(layers))
        self.pool = nn.Linear(hidden, hidden)
        for m in self.modules():  # BERT's initializer
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.pos(positions) + self.token_type(torch.zeros_like(input_ids))
        x = self.norm(x)
        add_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, add_mask)
        return x, torch.tanh(self.pool(x[:, 0]))


def encoder_inputs(vocab=30522):
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(1000, vocab, (1, SEQ), generator=g, dtype=torch.int64)
    ids[0, 0], ids[0, SEQ - PAD - 1] = 101, 102  # [CLS] ... [SEP]
    ids[0, SEQ - PAD:] = 0                       # [PAD]
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[0, SEQ - PAD:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def resnet50():
    import torchvision
    return torchvision.models.resnet50(weights=None)


def resnet_inputs():
    g = torch.Generator().manual_seed(SEED + 1)
    x = torch.rand(1, 3, 224, 224, generator=g)  # an "image" in [0, 1), ImageNet-normalized
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return {"x": (x - mean) / std}


# name -> (description, model factory, inputs factory, output names)
MODELS = {
    "bert_base": ("BERT-base-shaped encoder: 12 layers, hidden 768, 12 heads, FFN 3072",
                  lambda: Encoder(12, 768, 12, 3072), encoder_inputs, ["last_hidden_state", "pooler_output"]),
    "minilm_l6": ("MiniLM-L6-shaped encoder: 6 layers, hidden 384, 12 heads, FFN 1536",
                  lambda: Encoder(6, 384, 12, 1536), encoder_inputs, ["last_hidden_state", "pooler_output"]),
    "resnet50": ("torchvision ResNet-50, weights=None", resnet50, resnet_inputs, ["logits"]),
}


def compare(got, ref):
    """(ok, relative error) under the rule above."""
    if got.dtype != ref.dtype or got.shape != ref.shape:
        return False, float("inf")
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    if not np.issubdtype(ref.dtype, np.floating):
        return bool(diff.max(initial=0) == 0), float(diff.max(initial=0))
    rel = float(diff.max(initial=0)) / max(float(np.abs(ref).max(initial=0)), 1e-30)
    return rel <= RTOL, rel


def ort_check(tmp, names, outputs):
    """Runs tmp/model.onnx through ONNX Runtime; returns the lines that report each output."""
    env = dict(os.environ)
    env.setdefault("NODE_PATH", os.path.join(ROOT, ".cache", "models", "ort", "node_modules"))
    cmd = ["node", os.path.join(HERE, "ort_run.js"), os.path.join(tmp, "model.onnx"), "--threads", "1",
           "--output-dir", os.path.join(tmp, "ort")]
    for n in names:
        cmd += ["--input", f"{n}={os.path.join(tmp, 'input', n + '.npy')}"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"export_torch: ONNX Runtime failed on {tmp}/model.onnx (NODE_PATH must reach "
                         f"onnxruntime-node: scripts/fetch-models.sh --peer):\n{r.stderr.strip()}")
    lines, ok = [], True
    for o in outputs:
        good, rel = compare(np.load(os.path.join(tmp, "ort", o + ".npy")), np.load(os.path.join(tmp, "torch", o + ".npy")))
        lines.append(f"{o}: ORT vs PyTorch relative error {rel:.2e} ({'ok' if good else 'FAIL'}, tolerance {RTOL:g})")
        ok = ok and good
    return ok, lines


def export(out_dir, name):
    desc, make_model, make_inputs, outputs = MODELS[name]
    final = os.path.join(out_dir, name)
    if os.path.isfile(os.path.join(final, "manifest.txt")):
        print(f"export_torch: {name}: present ({final})")
        return True
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for sub in ("input", "torch"):
        os.makedirs(os.path.join(tmp, sub))
    torch.manual_seed(SEED)
    model = make_model().eval()
    inputs = make_inputs()
    with torch.no_grad():
        ref = model(*inputs.values())
    ref = ref if isinstance(ref, tuple) else (ref,)
    for n, t in inputs.items():
        np.save(os.path.join(tmp, "input", n + ".npy"), t.numpy())
    for n, t in zip(outputs, ref):
        np.save(os.path.join(tmp, "torch", n + ".npy"), t.numpy())
    path = os.path.join(tmp, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs.values()), path, opset_version=OPSET, do_constant_folding=True,
                          input_names=list(inputs), output_names=outputs)
    ok, lines = ort_check(tmp, list(inputs), outputs)
    for line in lines:
        print(f"export_torch: {name}: {line}")
    if not ok:
        print(f"export_torch: {name}: the exported model differs from PyTorch; left in {tmp}", file=sys.stderr)
        return False
    shutil.rmtree(os.path.join(tmp, "ort"))
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(tmp, "manifest.txt"), "w") as f:
        f.write(f"{desc}\ntorch {torch.__version__}, opset {OPSET}, seed {SEED}, rtol {RTOL:g}\n"
                f"inputs: {' '.join(f'{n}{list(t.shape)}:{t.dtype}' for n, t in inputs.items())}\n"
                f"outputs: {' '.join(outputs)}\nsha256 model.onnx: {digest}\n" + "\n".join(lines) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    print(f"export_torch: {name}: exported {final}/model.onnx (sha256 {digest[:16]}...)")
    return True


def main(argv):
    if not argv or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    out_dir, names = argv[0], argv[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"export_torch: unknown model {' '.join(unknown)} (known: {' '.join(MODELS)})")
    torch.set_num_threads(1)  # deterministic reference outputs (and gentle on a shared machine)
    os.makedirs(out_dir, exist_ok=True)
    ok = all([export(out_dir, n) for n in names])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
