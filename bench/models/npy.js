// NumPy .npy read/write for the benchmark scripts (ort_run.js, compare.js): C order,
// little-endian, format versions 1-3 on read, version 1 on write.
'use strict';
const fs = require('fs');

// npy descr -> [ONNX Runtime type name, TypedArray]
const DT = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|i1': ['int8', Int8Array], '|u1': ['uint8', Uint8Array],
  '|b1': ['bool', Uint8Array], '<i2': ['int16', Int16Array], '<u4': ['uint32', Uint32Array],
};

// -> { descr, type, dims, data } (data a TypedArray of its own buffer)
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order unsupported`);
  if (!DT[descr]) throw new Error(`${file}: dtype ${descr} unsupported`);
  const [type, Arr] = DT[descr];
  const body = buf.subarray(hstart + hlen);
  return { descr, type, dims, data: new Arr(body.buffer.slice(body.byteOffset, body.byteOffset + body.length)) };
}

function writeNpy(file, type, dims, data) {
  const rev = Object.entries(DT).find(([, [ty]]) => ty === type);
  if (!rev) throw new Error(`output type ${type} unsupported`);
  let header = `{'descr': '${rev[0]}', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1'); pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
                                        Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

module.exports = { DT, readNpy, writeNpy };
