// Runs an ONNX model through ONNX Runtime (onnxruntime-node) — the peer rlx is measured
// against. Inputs/outputs are NumPy .npy files, so the same files feed `rlx run`.
//   node ort_run.js MODEL.onnx --input name=FILE.npy ... [--output-dir DIR]
//                   [--bench N] [--threads T]
// With --bench, prints "ort p50_ms=X p90_ms=Y runs=N threads=T" over N warm runs.
// NODE_PATH must reach onnxruntime-node (scripts/fetch-models.sh --peer installs it).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const DT = {  // npy descr -> [ort type, TypedArray]
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|i1': ['int8', Int8Array], '|u1': ['uint8', Uint8Array],
  '|b1': ['bool', Uint8Array], '<i2': ['int16', Int16Array], '<u4': ['uint32', Uint32Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order unsupported`);
  const [type, Arr] = DT[descr] || (() => { throw new Error(`${file}: dtype ${descr} unsupported`); })();
  const body = buf.subarray(hstart + hlen);
  const data = new Arr(body.buffer.slice(body.byteOffset, body.byteOffset + body.length));
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data) : data, shape);
}

function writeNpy(file, t) {
  const rev = Object.entries(DT).find(([, [ty]]) => ty === t.type);
  if (!rev) throw new Error(`output type ${t.type} unsupported`);
  let header = `{'descr': '${rev[0]}', 'fortran_order': False, 'shape': (${t.dims.join(', ')}${t.dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1'); pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  const d = t.data;
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

(async () => {
  const args = process.argv.slice(2);
  const model = args.shift();
  const feeds = {}; let outDir = null, bench = 0, threads = 0;
  while (args.length) {
    const a = args.shift();
    if (a === '--input') { const [n, f] = args.shift().split('='); feeds[n] = readNpy(f); }
    else if (a === '--output-dir') outDir = args.shift();
    else if (a === '--bench') bench = Number(args.shift());
    else if (a === '--threads') threads = Number(args.shift());
    else throw new Error(`unknown argument ${a}`);
  }
  const opts = { graphOptimizationLevel: 'all' };
  if (threads > 0) { opts.intraOpNumThreads = threads; opts.interOpNumThreads = 1; }
  const s = await ort.InferenceSession.create(model, opts);
  const out = await s.run(feeds);
  if (outDir) {
    fs.mkdirSync(outDir, { recursive: true });
    for (const n of s.outputNames) writeNpy(path.join(outDir, n.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy'), out[n]);
  }
  if (bench > 0) {
    const ms = [];
    for (let i = 0; i < bench; ++i) { const t0 = process.hrtime.bigint(); await s.run(feeds); ms.push(Number(process.hrtime.bigint() - t0) / 1e6); }
    ms.sort((a, b) => a - b);
    const q = p => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))];
    console.log(`ort p50_ms=${q(0.5).toFixed(3)} p90_ms=${q(0.9).toFixed(3)} runs=${bench} threads=${threads || 'default'}`);
  }
})().catch(e => { console.error(`ort_run: ${e.message}`); process.exit(1); });
