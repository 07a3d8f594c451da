// Runs an ONNX model through ONNX Runtime (onnxruntime-node) — the peer rlx is measured
// against. Inputs/outputs are NumPy .npy files, so the same files feed `rlx run`.
//   node ort_run.js MODEL.onnx --input name=FILE.npy ... [--output-dir DIR]
//                   [--bench N] [--warmup W] [--threads T]
// Session options: graph optimizations 'all', executionMode 'sequential' (set explicitly: the
// benchmark compares against rlx's one-op-at-a-time schedule), intra-op threads T, inter-op 1.
// With --bench, prints
//   ort p50_ms=X p90_ms=Y runs=N threads=T create_ms=C first_ms=F
// over N timed runs after W untimed ones (default 3, as `rlx bench`); p50/p90 are element
// floor(q * N) of the sorted times, as in `rlx bench`. create_ms: InferenceSession.create (read,
// parse, optimize, kernel set-up); first_ms: the first run after it.
// NODE_PATH must reach onnxruntime-node (scripts/fetch-models.sh --peer installs it).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { readNpy, writeNpy } = require('./npy.js');

function tensor(file) {
  const t = readNpy(file);
  return new ort.Tensor(t.type, t.data, t.dims);
}

const ms = t0 => Number(process.hrtime.bigint() - t0) / 1e6;

(async () => {
  const args = process.argv.slice(2);
  const model = args.shift();
  const feeds = {}; let outDir = null, bench = 0, warmup = 3, threads = 0;
  while (args.length) {
    const a = args.shift();
    if (a === '--input') { const [n, f] = args.shift().split('='); feeds[n] = tensor(f); }
    else if (a === '--output-dir') outDir = args.shift();
    else if (a === '--bench') bench = Number(args.shift());
    else if (a === '--warmup') warmup = Number(args.shift());
    else if (a === '--threads') threads = Number(args.shift());
    else throw new Error(`unknown argument ${a}`);
  }
  const opts = { graphOptimizationLevel: 'all', executionMode: 'sequential' };
  if (threads > 0) { opts.intraOpNumThreads = threads; opts.interOpNumThreads = 1; }
  let t0 = process.hrtime.bigint();
  const s = await ort.InferenceSession.create(model, opts);
  const createMs = ms(t0);
  t0 = process.hrtime.bigint();
  const out = await s.run(feeds);
  const firstMs = ms(t0);
  if (outDir) {
    fs.mkdirSync(outDir, { recursive: true });
    for (const n of s.outputNames)
      writeNpy(path.join(outDir, n.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy'), out[n].type, out[n].dims, out[n].data);
  }
  if (bench > 0) {
    for (let i = 0; i < warmup; ++i) await s.run(feeds);
    const times = [];
    for (let i = 0; i < bench; ++i) { t0 = process.hrtime.bigint(); await s.run(feeds); times.push(ms(t0)); }
    times.sort((a, b) => a - b);
    const q = p => times[Math.min(times.length - 1, Math.floor(p * times.length))];
    console.log(`ort p50_ms=${q(0.5).toFixed(3)} p90_ms=${q(0.9).toFixed(3)} runs=${bench} threads=${threads || 'default'} ` +
                `create_ms=${createMs.toFixed(1)} first_ms=${firstMs.toFixed(1)}`);
  }
})().catch(e => { console.error(`ort_run: ${e.message}`); process.exit(1); });
