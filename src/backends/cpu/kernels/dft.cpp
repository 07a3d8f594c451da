// dft / idft (ops.def): a mixed-radix fast Fourier transform per row, computed in double for
// every float type and rounded once to the output type.
//
// Decimation in frequency, smallest factor first: for n = f * m, each residue r < f of the
// output index k = f*q + r is an m-point transform of y[j] = (sum_t x[j + t*m] W_f^(t*r)) *
// W_n^(j*r); a prime length (or the last factor) is summed directly. Twiddles are computed
// in double, quarter turns exactly. The error before the final rounding is at most
// (sum over the factors f of (f + 4)) * 2^-53 * sum|x|, so an f32 result is the exact
// transform rounded once wherever it is not far below the row's scale (an f32 FFT, like
// numpy's for complex64 or ONNX Runtime's, leaves ~1e-7 relative noise, e.g. at exact
// zeros). Arithmetic is uncontracted (this file is built with -ffp-contract=off), so the
// bits do not depend on the ISA or the compiler's choice of fused multiply-adds.
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/gemm.h"  // load_as_f32, store_from_f32
#include "backends/cpu/thread_pool.h"

namespace rlx::cpu {
namespace {

struct Cx {
  double re, im;
};
inline Cx add(Cx a, Cx b) { return {a.re + b.re, a.im + b.im}; }
inline Cx mul(Cx a, Cx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }

struct DftCfg {
  DType type = DType::F32;
  int64_t rows = 0, n = 0, c_in = 2;
  bool inverse = false;
  std::vector<int64_t> factors;  // smallest first; their product is n
  std::vector<Cx> tw;            // W^k = e^(-+2 pi i k / n), k < n
};

std::vector<int64_t> factorize(int64_t n) {
  std::vector<int64_t> f;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      f.push_back(p);
      n /= p;
    }
  if (n > 1) f.push_back(n);
  return f;
}

// W_n^k for the forward (sign -1) or inverse (+1) transform; quarter turns exact.
Cx twiddle(int64_t k, int64_t n, double sign) {
  if (k == 0) return {1.0, 0.0};
  if (4 * k == n) return {0.0, sign};
  if (2 * k == n) return {-1.0, 0.0};
  if (4 * k == 3 * n) return {0.0, -sign};
  const double th = 2.0 * std::numbers::pi * double(k) / double(n);
  return {std::cos(th), sign * std::sin(th)};
}

// The n-point transform of x (contiguous) into out[k * os]; tw[e * ts] is W_n^e.
// `level` indexes cfg.factors; scratch holds at least n elements.
void fft(const DftCfg& c, size_t level, int64_t n, int64_t ts, const Cx* x, Cx* out, int64_t os, Cx* scratch) {
  const Cx* tw = c.tw.data();
  const int64_t f = level < c.factors.size() ? c.factors[level] : n;  // n = 1 has no factors
  if (f == n) {  // direct sum
    for (int64_t k = 0; k < n; ++k) {
      Cx s{0.0, 0.0};
      for (int64_t j = 0; j < n; ++j) s = add(s, mul(x[j], tw[(j * k % n) * ts]));
      out[k * os] = s;
    }
    return;
  }
  const int64_t m = n / f;
  Cx* y = scratch;
  for (int64_t r = 0; r < f; ++r) {
    for (int64_t j = 0; j < m; ++j) {
      Cx s{0.0, 0.0};
      for (int64_t t = 0; t < f; ++t) s = add(s, mul(x[j + t * m], tw[(t * r * m % n) * ts]));
      y[j] = mul(s, tw[(j * r % n) * ts]);
    }
    fft(c, level + 1, m, ts * f, y, out + r * os, os * f, scratch + m);
  }
}

void dft_rows(const DftCfg& c, const void* x, void* y, int64_t r0, int64_t r1) {
  thread_local std::vector<Cx> buf;
  const int64_t n = c.n;
  buf.resize(size_t(3 * n));
  Cx *in = buf.data(), *res = in + n, *scratch = res + n;
  const double scale = 1.0 / double(n);
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t base = row * n * c.c_in;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * c.c_in;
      if (c.type == DType::F64) {
        const double* xd = static_cast<const double*>(x);
        in[j] = {xd[at], c.c_in == 2 ? xd[at + 1] : 0.0};
      } else {
        in[j] = {load_as_f32(x, c.type, at), c.c_in == 2 ? load_as_f32(x, c.type, at + 1) : 0.0};
      }
    }
    fft(c, 0, n, 1, in, res, 1, scratch);
    for (int64_t k = 0; k < n; ++k) {
      Cx v = res[k];
      if (c.inverse) v = {v.re * scale, v.im * scale};
      const int64_t o = (row * n + k) * 2;
      if (c.type == DType::F64) {
        static_cast<double*>(y)[o] = v.re;
        static_cast<double*>(y)[o + 1] = v.im;
      } else {  // rounded from double (f16 / bf16 through f32: a second rounding)
        store_from_f32(y, c.type, o, float(v.re));
        store_from_f32(y, c.type, o + 1, float(v.im));
      }
    }
  }
}

void run_dft(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const DftCfg& c = *static_cast<const DftCfg*>(vcfg);
  if (c.rows == 0 || c.n == 0) return;
  int64_t work = c.n;  // complex multiply-adds per row
  for (int64_t f : c.factors) work += c.n * f;
  ThreadPool* pool = double(work) * double(c.rows) < 32768.0 ? nullptr : ctx.pool;
  auto body = [&](int64_t r0, int64_t r1) {
    dft_rows(c, bufs[0], bufs[1], r0, r1);
  };
  if (pool && pool->size() > 1 && c.rows > 1) pool->parallel_for(c.rows, 1, body);
  else body(0, c.rows);
}

bool supports_dft(const Node&, const std::vector<const Shape*>& in) {
  const DType t = in[0]->dtype();
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

KernelCall build_dft(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>&) {
  const std::vector<int64_t> d = in[0]->static_dims();
  DftCfg c;
  c.type = in[0]->dtype();
  c.n = d[d.size() - 2];
  c.c_in = d.back();
  c.rows = 1;
  for (size_t i = 0; i + 2 < d.size(); ++i) c.rows *= d[i];
  c.inverse = node.kind == OpKind::Idft;
  c.factors = factorize(c.n);
  const double sign = c.inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < c.n; ++k) c.tw.push_back(twiddle(k, c.n, sign));
  return make_call(run_dft, std::move(c));
}

}  // namespace

void register_dft_kernels(KernelRegistry& r) {
  r.add(OpKind::Dft, build_dft, supports_dft);
  r.add(OpKind::Idft, build_dft, supports_dft);
}

}  // namespace rlx::cpu
