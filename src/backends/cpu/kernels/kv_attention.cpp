// kv_attention: decoder self-attention straight over a KV cache (see ops.def). One task per
// (sequence, KV head, tile of queries, share of that head's query heads): scores against the
// past[b] filled cache rows and the new rows up to each query (f16 rows widened in registers,
// never copied; each row read once for the tile and the share), a max-shifted softmax, then
// the weighted sum of the value rows. The cache's unused capacity is never
// read, and nothing is concatenated or converted per run. Each output is computed by one
// task in a fixed order: results do not depend on the thread count. cache_write (the new
// rows into a cache, in place on a resident handle) lives here too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/kv_attention.h"
#include "backends/cpu/kernels/qdot.h"
#include "backends/cpu/kernels/row_kernels.h"
#include "backends/cpu/thread_pool.h"

namespace rlx::cpu {

namespace {

struct KvCfg {
  int64_t b = 0, hq = 0, hkv = 0, t = 0, c = 0, d = 0;
  float scale = 1;
  bool f16 = false;
  const QDotKernels* dot = nullptr;
  const RowKernels* rows = nullptr;
  const KvKernels* kv = nullptr;  // the group kernels (kv_kernels), else rows_scores / rows_mix
};

// A group's scores and weighted sums row by row through the ISA's dot and axpy, where
// kv_kernels has none (a scalar CPU, or a head dim the group kernels do not take).
void rows_scores(const KvCfg& c, const uint8_t* rows, int64_t n, const float* q, int64_t g, float* s, int64_t lds) {
  const size_t rb = size_t(c.d) * (c.f16 ? 2 : 4);
  for (int64_t h = 0; h < g; ++h)
    for (int64_t j = 0; j < n; ++j)
      s[h * lds + j] = c.f16 ? c.dot->f16(reinterpret_cast<const uint16_t*>(rows + j * rb), q + h * c.d, c.d)
                             : c.dot->f32(reinterpret_cast<const float*>(rows + j * rb), q + h * c.d, c.d);
}
void rows_mix(const KvCfg& c, const uint8_t* rows, int64_t n, const float* p, int64_t ldp, int64_t g, float* o) {
  const size_t rb = size_t(c.d) * (c.f16 ? 2 : 4);
  for (int64_t h = 0; h < g; ++h)
    for (int64_t j = 0; j < n; ++j) {
      if (c.f16) c.dot->axpy_f16(p[h * ldp + j], reinterpret_cast<const uint16_t*>(rows + j * rb), o + h * c.d, c.d);
      else c.dot->axpy_f32(p[h * ldp + j], reinterpret_cast<const float*>(rows + j * rb), o + h * c.d, c.d);
    }
}

// One task per (sequence, KV head, tile of up to 4 queries, share of the KV head's query
// heads): the share's scores against the cache rows and the new rows up to each query, a
// max-shifted softmax per (query, head), then the weighted sums of the value rows, each cache
// row read once for the tile's queries and the share's heads.
// A head's arithmetic does not depend on which heads share its task, so the shares can
// follow the thread count and the results stay the same bits. A group is split only where
// the sequences, KV heads and query tiles alone are fewer than the threads: each share reads
// the rows again (SmolLM2-135M-shaped, 3 KV heads, 2,048 cached f16 rows, 2 threads: 30
// layers in 4.7-4.9 ms with every group in two shares, 3.9-4.0 ms whole, one thread idle a
// third).
void run_kv_attention(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const KvCfg& c = *static_cast<const KvCfg*>(vcfg);
  const float* q = static_cast<const float*>(bufs[0]);
  const uint8_t* kc = static_cast<const uint8_t*>(bufs[1]);
  const uint8_t* vc = static_cast<const uint8_t*>(bufs[2]);
  const uint8_t* kn = static_cast<const uint8_t*>(bufs[3]);
  const uint8_t* vn = static_cast<const uint8_t*>(bufs[4]);
  const int64_t* past = static_cast<const int64_t*>(bufs[5]);
  float* out = static_cast<float*>(bufs[6]);
  const size_t elt = c.f16 ? 2 : 4;
  for (int64_t b = 0; b < c.b; ++b)
    if (past[b] < 0 || past[b] > c.c)
      fail(ErrorCategory::InvalidArgument, "kv_attention: past[", b, "] = ", past[b], " is outside the cache's [0, ",
           c.c, "] rows");
  // Queries in tiles of up to kTile: a tile's (query, head) pairs score every row once, and
  // share the value rows up to the tile's first query; the rows after it go to each query
  // alone, so every output sums the same rows in the same order as a query taken alone.
  constexpr int64_t kTile = 4;
  const int64_t group = c.hq / c.hkv, tiles = (c.t + kTile - 1) / kTile, units = c.b * c.hkv * tiles;
  const int threads = ctx.pool ? ctx.pool->size() : 1;
  int64_t share = group;
  while (share > 1 && units * ((group + share - 1) / share) < threads) share = (share + 1) / 2;
  const int64_t shares = (group + share - 1) / share;
  auto scores = [&](const uint8_t* rows, int64_t n, const float* qs, int64_t g, float* s, int64_t lds) {
    if (c.kv) c.kv->scores(rows, c.f16, n, c.d, qs, g, s, lds);
    else rows_scores(c, rows, n, qs, g, s, lds);
  };
  auto mix = [&](const uint8_t* rows, int64_t n, const float* p, int64_t ldp, int64_t g, float* o) {
    if (c.kv) c.kv->mix(rows, c.f16, n, c.d, p, ldp, g, o);
    else rows_mix(c, rows, n, p, ldp, g, o);
  };
  const size_t row_bytes = size_t(c.d) * elt;
  auto task = [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> s, qs, os;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t sh = i % shares, tile = (i / shares) % tiles, hk = (i / (shares * tiles)) % c.hkv,
                    b = i / (shares * tiles * c.hkv);
      const int64_t h0 = hk * group + sh * share, g = std::min(share, group - sh * share);
      const int64_t t0 = tile * kTile, tq = std::min(kTile, c.t - t0), gq = g * tq;  // pair e = query * g + head
      const int64_t np = past[b], n = np + t0 + tq;  // the rows the tile's last query sees
      qs.resize(size_t(gq * c.d));
      os.assign(size_t(gq * c.d), 0.0f);
      s.resize(size_t(gq * n));
      for (int64_t u = 0; u < tq; ++u)
        for (int64_t h = 0; h < g; ++h) {
          const float* qr = q + ((b * c.hq + h0 + h) * c.t + t0 + u) * c.d;
          for (int64_t e = 0; e < c.d; ++e) qs[size_t((u * g + h) * c.d + e)] = qr[e] * c.scale;
        }
      const size_t kvb = size_t(b * c.hkv + hk);
      const uint8_t* kcb = kc + kvb * size_t(c.c) * row_bytes;
      const uint8_t* knb = kn + kvb * size_t(c.t) * row_bytes;
      const uint8_t* vcb = vc + kvb * size_t(c.c) * row_bytes;
      const uint8_t* vnb = vn + kvb * size_t(c.t) * row_bytes;
      scores(kcb, np, qs.data(), gq, s.data(), n);
      scores(knb, t0 + tq, qs.data(), gq, s.data() + np, n);  // past a query's own row: not read
      for (int64_t u = 0; u < tq; ++u)
        for (int64_t h = 0; h < g; ++h) {  // softmax over the query's rows: probabilities in place
          float* se = s.data() + (u * g + h) * n;
          const int64_t nu = np + t0 + u + 1;
          const float mx = c.rows->max(se, nu);
          c.rows->scale(se, nu, 1.0f / c.rows->exp_sum(se, nu, mx));
        }
      mix(vcb, np, s.data(), n, gq, os.data());
      mix(vnb, t0 + 1, s.data() + np, n, gq, os.data());  // the new rows every query of the tile sees
      for (int64_t u = 1; u < tq; ++u)                   // and each query's own after them
        mix(vnb + size_t(t0 + 1) * row_bytes, u, s.data() + u * g * n + np + t0 + 1, n, g, os.data() + u * g * c.d);
      for (int64_t u = 0; u < tq; ++u)
        for (int64_t h = 0; h < g; ++h)
          std::copy(os.begin() + (u * g + h) * c.d, os.begin() + (u * g + h + 1) * c.d,
                    out + ((b * c.hq + h0 + h) * c.t + t0 + u) * c.d);
    }
  };
  const int64_t tasks = units * shares;
  if (ctx.pool && tasks > 1) ctx.pool->parallel_for(tasks, 1, task);
  else task(0, tasks);
}

KernelCall build_kv_attention(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>&) {
  KvCfg c;
  const std::vector<int64_t> qd = in[0]->static_dims(), kd = in[1]->static_dims();
  c.b = qd[0];
  c.hq = qd[1];
  c.t = qd[2];
  c.d = qd[3];
  c.hkv = kd[1];
  c.c = kd[2];
  const double sc = node.attr<AttentionAttrs>().scale;
  c.scale = static_cast<float>(sc != 0 ? sc : 1.0 / std::sqrt(double(c.d)));
  c.f16 = in[1]->dtype() == DType::F16;
  const Isa isa = detect_isa();
  c.dot = &qdot_kernels(isa);
  c.rows = &row_kernels(isa);
  c.kv = kv_kernels(isa, c.d);
  return make_call(run_kv_attention, c);
}

// cache_write: rows [past[b], past[b] + t) of each (sequence, head) replaced; the rest of
// the cache is copied only when the output does not share the cache's storage.
struct CacheWriteCfg {
  int64_t b = 0, h = 0, c = 0, t = 0;
  size_t row = 0;  // bytes per row
};

void run_cache_write(const RunCtx&, const void* vcfg, void* const* bufs) {
  const CacheWriteCfg& c = *static_cast<const CacheWriteCfg*>(vcfg);
  const uint8_t* cache = static_cast<const uint8_t*>(bufs[0]);
  const uint8_t* rows = static_cast<const uint8_t*>(bufs[1]);
  const int64_t* past = static_cast<const int64_t*>(bufs[2]);
  uint8_t* out = static_cast<uint8_t*>(bufs[3]);
  for (int64_t b = 0; b < c.b; ++b)
    if (past[b] < 0 || past[b] > c.c - c.t)
      fail(ErrorCategory::InvalidArgument, "cache_write: rows [", past[b], ", ", past[b] + c.t, ") of sequence ", b,
           " are outside the cache's [0, ", c.c, ")");
  if (out != cache) std::memcpy(out, cache, size_t(c.b * c.h * c.c) * c.row);
  for (int64_t bh = 0; bh < c.b * c.h; ++bh)
    std::memcpy(out + size_t(bh * c.c + past[bh / c.h]) * c.row, rows + size_t(bh * c.t) * c.row, size_t(c.t) * c.row);
}

KernelCall build_cache_write(const Node&, const std::vector<const Shape*>& in, const std::vector<Shape>&) {
  const std::vector<int64_t> cd = in[0]->static_dims();
  CacheWriteCfg c{cd[0], cd[1], cd[2], in[1]->static_dims()[2], size_t(cd[3]) * dtype_size(in[0]->dtype())};
  return make_call(run_cache_write, c);
}

}  // namespace

const KvKernels* kv_kernels(Isa isa, int64_t d) {
  if (d % 16 != 0 || d < 16 || (d > 128 && d != 256)) return nullptr;  // kv_attention_vec.h's with_nc
  return isa == Isa::Avx512 ? kv_kernels_avx512() : isa == Isa::Avx2 ? kv_kernels_avx2() : nullptr;
}

void register_kv_attention_kernels(KernelRegistry& r) {
  r.add(OpKind::KvAttention, build_kv_attention);
  r.add(OpKind::CacheWrite, build_cache_write);
}

}  // namespace rlx::cpu
