#!/usr/bin/env python3
"""rlx's CUDA backend against PyTorch on the same GPU, in the same run.

  python3 bench/gpu/models.py BUILD_DIR WORK_DIR [bert_base resnet50]

Models (bench/models/export_torch.py builds them: random weights from its fixed seed):
  bert_base  BERT-base-shaped encoder (12 layers, hidden 768, FFN 3072), batch 8 x sequence 128
  resnet50   torchvision ResNet-50, batch 32 x 3 x 224 x 224
Each is exported once to WORK_DIR (the TorchScript ONNX exporter, opset 14, static shapes) with its
inputs as .npy. Then, per model:
  - PyTorch 2.x: eager fp32 (TF32 off), eager TF32, eager fp16 (the model in half), and
    torch.compile(mode="reduce-overhead") (CUDA graphs) in fp32 and fp16: the median of ITERS timed
    forwards (CUDA events, inputs and outputs on the device) after warm-up;
  - rlx: per precision policy (f32, tf32, f16, bf16) `rlx bench MODEL.onnx --device cuda --resident
    --precision P` (its p50: inputs bound once on the device and no output read back, as the
    PyTorch rows are timed) and `rlx run`, whose outputs are compared with PyTorch's fp32 eager
    outputs (max |d| / max |ref|); then f32 with the input/output copies, and f32 with graph
    replay off (RLX_CUDA_GRAPH=0: the launch overhead replay saves).
Each rlx row gives rlx / peer against the PyTorch rows of its precision.
Environment: ITERS (50), RLX_RUNS (20).
"""
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models"))
import export_torch as ex  # noqa: E402  (the model definitions of the CPU benchmark)

ITERS = int(os.environ.get("ITERS", "50"))
RLX_RUNS = int(os.environ.get("RLX_RUNS", "20"))
BATCH = {"bert_base": 8, "resnet50": 32}


def batched(name):
    base = ex.MODELS[name][2]()
    b = BATCH[name]
    return {k: v.repeat(b, *([1] * (v.dim() - 1))) for k, v in base.items()}


def export(name, work):
    path = os.path.join(work, f"{name}_b{BATCH[name]}.onnx")
    inputs = batched(name)
    npy = {k: os.path.join(work, f"{name}.{k}.npy") for k in inputs}
    if not os.path.exists(path):
        torch.manual_seed(ex.SEED)
        model = ex.MODELS[name][1]().eval()
        with torch.no_grad():
            torch.onnx.export(model, tuple(inputs.values()), path + ".tmp", opset_version=ex.OPSET,
                              do_constant_folding=True, input_names=list(inputs),
                              output_names=ex.MODELS[name][3], dynamo=False)
        os.replace(path + ".tmp", path)
    for k, v in inputs.items():
        np.save(npy[k], v.numpy())
    return path, inputs, npy


def cuda_ms(fn):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(ITERS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def torch_rows(name, inputs):
    torch.manual_seed(ex.SEED)
    model = ex.MODELS[name][1]().eval().cuda()
    x32 = [v.cuda() for v in inputs.values()]
    rows, ref = [], None
    with torch.no_grad():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        ref = model(*x32)
        rows.append(("torch eager fp32", cuda_ms(lambda: model(*x32)), ""))
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        rows.append(("torch eager tf32", cuda_ms(lambda: model(*x32)), ""))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        half = ex.MODELS[name][1]().eval().cuda()
        half.load_state_dict(model.state_dict())
        half = half.half()
        x16 = [v.half() if v.is_floating_point() else v for v in x32]
        rows.append(("torch eager fp16", cuda_ms(lambda: half(*x16)), ""))
        for label, m, x in (("fp32", model, x32), ("fp16", half, x16)):
            c = torch.compile(m, mode="reduce-overhead")
            t0 = time.time()
            c(*x)
            c(*x)
            took = time.time() - t0
            rows.append((f"torch.compile {label}", cuda_ms(lambda: c(*x)), f"compile {took:.0f} s"))
    outs = ref if isinstance(ref, tuple) else (ref,)
    return rows, [o.float().cpu().numpy() for o in outs]


# rlx's policies and the PyTorch rows each is set against.
POLICIES = [("f32", ["torch eager fp32", "torch.compile fp32"]), ("tf32", ["torch eager tf32"]),
            ("f16", ["torch eager fp16", "torch.compile fp16"]), ("bf16", [])]


def rlx_p50(rlx, path, feeds, extra, env=None):
    bench = subprocess.run([rlx, "bench", path, "--device", "cuda", "--runs", str(RLX_RUNS)] + extra + feeds,
                           capture_output=True, text=True, env=env)
    for tok in bench.stdout.split():
        if tok.startswith("p50_ms="):
            return float(tok.split("=")[1]), ""
    return None, "bench failed: " + (bench.stderr.strip().splitlines() or ["?"])[-1]


def rlx_rows(build, name, path, npy, ref, work):
    """One row per precision policy: p50 of `rlx bench --resident` (inputs bound once on the
    device, no output read back: the device time of a run and its one wait, as the PyTorch
    rows time it), the output compared with PyTorch's fp32 eager output. Then fp32 with the
    copies (the default bench) and fp32 without CUDA Graph replay (RLX_CUDA_GRAPH=0)."""
    rlx = os.path.join(build, "rlx")
    feeds = sum((["--input", f"{k}={v}"] for k, v in npy.items()), [])
    rows = []
    for pol, _ in POLICIES:
        out_dir = os.path.join(work, f"{name}.rlx_out_{pol}")
        run = subprocess.run([rlx, "run", path, "--device", "cuda", "--precision", pol, "--output-dir", out_dir] + feeds,
                             capture_output=True, text=True)
        if run.returncode != 0:
            rows.append((f"rlx cuda {pol}", None, "run failed: " + (run.stderr.strip().splitlines() or ["?"])[-1]))
            continue
        worst = 0.0
        for o, want in zip(ex.MODELS[name][3], ref):
            got = np.load(os.path.join(out_dir, o + ".npy"))
            worst = max(worst, float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)))
        p50, err = rlx_p50(rlx, path, feeds, ["--resident", "--precision", pol])
        rows.append((f"rlx cuda {pol}", p50, f"vs torch fp32 max|d|/max|ref| {worst:.1e} {err}"))
    p50, err = rlx_p50(rlx, path, feeds, [])
    rows.append(("rlx cuda f32 +copies", p50, "inputs uploaded and outputs read back every run " + err))
    env = dict(os.environ, RLX_CUDA_GRAPH="0")
    p50, err = rlx_p50(rlx, path, feeds, ["--resident"], env)
    rows.append(("rlx cuda f32 no graph", p50, "RLX_CUDA_GRAPH=0: every kernel launched by the host " + err))
    return rows


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    build, work = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    names = argv[3:] or ["bert_base", "resnet50"]
    os.makedirs(work, exist_ok=True)
    print(f"== GPU models: {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}, {ITERS} timed runs")
    for name in names:
        path, inputs, npy = export(name, work)
        peers, ref = torch_rows(name, inputs)
        mine = rlx_rows(build, name, path, npy, ref, work)
        peer_ms = {label: ms for label, ms, _ in peers}
        print(f"{name} batch {BATCH[name]}:")
        for label, ms, note in peers:
            ms_s = f"{ms:9.3f}" if ms else "        -"
            print(f"  {label:24s} {ms_s} ms   {note}")
        against = dict(POLICIES)
        for label, ms, note in mine:
            ms_s = f"{ms:9.3f}" if ms else "        -"
            pol = label.split()[2]
            ratios = []
            if ms and label == f"rlx cuda {pol}":
                for peer in against.get(pol, []):
                    if peer_ms.get(peer):
                        ratios.append(f"{ms / peer_ms[peer]:.2f}x {peer}")
            print(f"  {label:24s} {ms_s} ms   {'; '.join(ratios)}   {note}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)
