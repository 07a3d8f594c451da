// Writes a deterministic input tensor as a NumPy .npy file, for reference outputs
// (scripts/make-model-refs.sh) and benchmarks (bench/models/run.sh).
//   node make_input.js OUT.npy --shape D0,D1,... [--dtype f32|i64|i32] [--value V] [--seed S]
// Without --value, floats come from the generator `rlx bench` uses for inputs it is not
// given: a 32-bit LCG, state = state * 1664525 + 1013904223 (mod 2^32), seeded with S
// (default 1, as in rlx bench) per tensor, each element (state >> 8) / 2^24, i.e. in
// [0, 1); integers are 0. With
// --value every element is V. An empty --shape ("") writes a scalar.
//   node make_input.js OUT.npy --image IMAGE.ppm [--mean M0,M1,M2] [--std S0,S1,S2]
// writes an 8-bit binary PPM as f32 [1, 3, H, W]: (pixel / 255 - mean[c]) / std[c], with
// channel 0 = blue (BGR, as PaddleOCR feeds its models).
'use strict';
const fs = require('fs');

const TYPES = { f32: ['<f4', Float32Array], i64: ['<i8', BigInt64Array], i32: ['<i4', Int32Array] };

function writeNpy(file, descr, dims, data) {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1'); pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
                                        Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

// Binary 8-bit PPM (P6) -> f32 NCHW, BGR channel order, normalized per channel.
function readPpm(file, mean, std) {
  const buf = fs.readFileSync(file);
  const tok = []; let i = 0;
  while (tok.length < 4) {
    while (i < buf.length && /\s/.test(String.fromCharCode(buf[i]))) ++i;
    if (buf[i] === 0x23) { while (i < buf.length && buf[i] !== 0x0a) ++i; continue; }
    let t = '';
    while (i < buf.length && !/\s/.test(String.fromCharCode(buf[i]))) t += String.fromCharCode(buf[i++]);
    tok.push(t);
  }
  const [magic, w, h, maxval] = [tok[0], Number(tok[1]), Number(tok[2]), Number(tok[3])];
  if (magic !== 'P6' || maxval !== 255) throw new Error(`${file}: expected an 8-bit binary PPM (P6, maxval 255)`);
  const px = buf.subarray(i + 1);
  if (px.length < w * h * 3) throw new Error(`${file}: truncated pixel data`);
  const data = new Float32Array(3 * h * w);
  for (let y = 0; y < h; ++y)
    for (let x = 0; x < w; ++x)
      for (let c = 0; c < 3; ++c) {
        const bgr = 2 - c;
        data[(bgr * h + y) * w + x] = (px[(y * w + x) * 3 + c] / 255 - mean[bgr]) / std[bgr];
      }
  return { dims: [1, 3, h, w], data };
}

const args = process.argv.slice(2);
const out = args.shift();
let dims = null, dtype = 'f32', value = null, seed = 1, image = null, mean = [0, 0, 0], std = [1, 1, 1];
while (args.length) {
  const a = args.shift();
  if (a === '--shape') { const s = args.shift(); dims = s === '' ? [] : s.split(',').map(Number); }
  else if (a === '--dtype') dtype = args.shift();
  else if (a === '--value') value = Number(args.shift());
  else if (a === '--image') image = args.shift();
  else if (a === '--mean') mean = args.shift().split(',').map(Number);
  else if (a === '--std') std = args.shift().split(',').map(Number);
  else if (a === '--seed') seed = Number(args.shift()) >>> 0;
  else { console.error(`make_input: unknown argument ${a}`); process.exit(2); }
}
if (out && image) {
  const img = readPpm(image, mean, std);
  writeNpy(out, '<f4', img.dims, img.data);
  process.exit(0);
}
if (!out || !dims || dims.some(d => !Number.isInteger(d) || d < 0) || !TYPES[dtype]) {
  console.error('usage: node make_input.js OUT.npy --shape D0,D1,... [--dtype f32|i64|i32] [--value V] [--seed S]');
  process.exit(2);
}
const [descr, Arr] = TYPES[dtype];
const n = dims.reduce((a, b) => a * b, 1);
const data = new Arr(n);
if (value !== null) data.fill(dtype === 'i64' ? BigInt(value) : value);
else if (dtype === 'f32') {
  let state = seed;
  for (let i = 0; i < n; ++i) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    data[i] = (state >>> 8) / 16777216;
  }
}
writeNpy(out, descr, dims, data);
