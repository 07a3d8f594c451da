// Compares the outputs of two runs of one model: every NAME.npy in REF_DIR against
// GOT_DIR/NAME.npy (`rlx run --output-dir` and `ort_run.js --output-dir` name files alike).
//   node compare.js GOT_DIR REF_DIR [--rtol R | --stat M,F] [--label TEXT]
// One line per output (max |got - ref|, max |ref|, relative error), then
//   compare ok|MISMATCH worst_rel=R outputs=N
// and exit status 1 on a mismatch (dtype, dims, a missing file, or an error beyond tolerance).
//
// Tolerance (the rule of the real-model tests, tests/models/model_refs.cpp): per output,
// max|got - ref| / max|ref| <= R (default 1e-4; run.sh raises it where it says why); integer and
// bool outputs must be equal. Why 1e-4: two correct fp32 runtimes differ by summation order
// (blocked GEMM, Winograd or im2col conv, fused epilogues) and by a few ulps in exp/erf/tanh/sqrt.
// A length-K dot product then moves by about sqrt(K) * 6e-8 relative (3e-6 at K = 3072, BERT's
// FFN); normalization layers keep those errors additive across depth (~1e-5 after 12 layers). 1e-4
// leaves headroom for that, while a real bug is far above it (the MiniLM-shaped encoder with its
// attention mask ignored: 5.5e-2). Scaled by max|ref| rather than per element, because near-zero
// elements (sigmoid tails, masked logits) have no meaningful relative error; for the same reason
// run.sh feeds PP-OCR det rendered text (on noise its whole output is below 1e-5).
//
// --stat M,F (for models whose every activation is quantized at run time, where one differing
// rounding moves whole regions and no elementwise bound holds; run.sh says where and why): per
// float output, mean |got - ref| / max|ref| <= M and at most a fraction F of the elements with
// |got - ref| > 0.1 max|ref|.
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy } = require('./npy.js');

const args = process.argv.slice(2);
const [gotDir, refDir] = args;
const opt = (k, d) => (args.indexOf(k) >= 0 ? args[args.indexOf(k) + 1] : d);
const RTOL = Number(opt('--rtol', '1e-4'));
const STAT = opt('--stat', null) === null ? null : opt('--stat').split(',').map(Number);
const label = opt('--label', null) === null ? '' : opt('--label') + ': ';
if (!gotDir || !refDir || !(RTOL >= 0) || (STAT && !(STAT.length === 2 && STAT[0] >= 0 && STAT[1] >= 0))) {
  console.error('usage: node compare.js GOT_DIR REF_DIR [--rtol R | --stat M,F] [--label TEXT]'); process.exit(2);
}

const isFloat = d => d[1] === 'f';
let ok = true, worst = 0, n = 0;
const names = fs.readdirSync(refDir).filter(f => f.endsWith('.npy')).sort();
if (names.length === 0) { console.log(`${label}no outputs in ${refDir}`); ok = false; }
for (const f of names) {
  ++n;
  const ref = readNpy(path.join(refDir, f));
  let got;
  try { got = readNpy(path.join(gotDir, f)); } catch (e) { console.log(`${label}${f}: ${e.message}`); ok = false; continue; }
  if (got.descr !== ref.descr || got.dims.join(',') !== ref.dims.join(',')) {
    console.log(`${label}${f}: ${got.descr}[${got.dims}] vs reference ${ref.descr}[${ref.dims}]`);
    ok = false; worst = Infinity; continue;
  }
  let maxDiff = 0, maxRef = 0, sumDiff = 0;
  const diffs = new Float64Array(ref.data.length);
  for (let i = 0; i < ref.data.length; ++i) {
    const a = Number(got.data[i]), b = Number(ref.data[i]);
    const d = Number.isNaN(a) || Number.isNaN(b) ? (Number.isNaN(a) && Number.isNaN(b) ? 0 : Infinity) : Math.abs(a - b);
    diffs[i] = d;
    sumDiff += d;
    if (d > maxDiff) maxDiff = d;
    if (Math.abs(b) > maxRef) maxRef = Math.abs(b);
  }
  if (STAT && isFloat(ref.descr)) {
    const scale = Math.max(maxRef, 1e-30), mean = sumDiff / Math.max(diffs.length, 1) / scale;
    let far = 0;
    for (const d of diffs) far += d > 0.1 * scale ? 1 : 0;
    const frac = far / Math.max(diffs.length, 1), good = mean <= STAT[0] && frac <= STAT[1];
    worst = Math.max(worst, mean);
    ok = ok && good;
    console.log(`${label}${f}: mean_rel_diff=${mean.toExponential(2)} far_fraction=${frac.toExponential(2)} ` +
                `max_abs_diff=${maxDiff.toExponential(2)} ${good ? 'ok' : 'MISMATCH'} (tolerance mean ${STAT[0]}, far ${STAT[1]})`);
    continue;
  }
  const rel = isFloat(ref.descr) ? maxDiff / Math.max(maxRef, 1e-30) : maxDiff;
  const good = isFloat(ref.descr) ? rel <= RTOL : maxDiff === 0;
  worst = Math.max(worst, rel);
  ok = ok && good;
  console.log(`${label}${f}: max_abs_diff=${maxDiff.toExponential(2)} max_abs_ref=${maxRef.toExponential(2)} ` +
              `rel=${rel.toExponential(2)} ${good ? 'ok' : 'MISMATCH'} (tolerance ${isFloat(ref.descr) ? RTOL : 'exact'})`);
}
console.log(`${label}compare ${ok ? 'ok' : 'MISMATCH'} worst_rel=${worst.toExponential(1)} outputs=${n}`);
process.exit(ok ? 0 : 1);
