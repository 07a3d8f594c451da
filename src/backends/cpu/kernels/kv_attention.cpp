// kv_attention: decoder self-attention straight over a KV cache (see ops.def). One task per
// (sequence, query head, query): scores against the past[b] filled cache rows and the new
// rows up to this query (f16 rows widened in registers, never copied), a max-shifted
// softmax, then the weighted sum of the value rows. The cache's unused capacity is never
// read, and nothing is concatenated or converted per run. Each output is computed by one
// task in a fixed order: results do not depend on the thread count. cache_write (the new
// rows into a cache, in place on a resident handle) lives here too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
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
};

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
  const int64_t group = c.hq / c.hkv;
  auto dot = [&](const uint8_t* row, const float* x) {
    return c.f16 ? c.dot->f16(reinterpret_cast<const uint16_t*>(row), x, c.d)
                 : c.dot->f32(reinterpret_cast<const float*>(row), x, c.d);
  };
  auto axpy = [&](float a, const uint8_t* row, float* y) {
    if (c.f16) c.dot->axpy_f16(a, reinterpret_cast<const uint16_t*>(row), y, c.d);
    else c.dot->axpy_f32(a, reinterpret_cast<const float*>(row), y, c.d);
  };
  auto task = [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> s, qs;
    qs.resize(static_cast<size_t>(c.d));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i % c.t, h = (i / c.t) % c.hq, b = i / (c.t * c.hq), hk = h / group;
      const int64_t np = past[b], n = np + t + 1;
      const float* qr = q + i * c.d;
      for (int64_t e = 0; e < c.d; ++e) qs[size_t(e)] = qr[e] * c.scale;
      s.resize(static_cast<size_t>(n));
      const uint8_t* kcb = kc + size_t((b * c.hkv + hk) * c.c) * size_t(c.d) * elt;
      const uint8_t* knb = kn + size_t((b * c.hkv + hk) * c.t) * size_t(c.d) * elt;
      for (int64_t j = 0; j < np; ++j) s[size_t(j)] = dot(kcb + size_t(j * c.d) * elt, qs.data());
      for (int64_t u = 0; u <= t; ++u) s[size_t(np + u)] = dot(knb + size_t(u * c.d) * elt, qs.data());
      const float mx = c.rows->max(s.data(), n);
      const float inv = 1.0f / c.rows->exp_sum(s.data(), n, mx);
      float* o = out + i * c.d;
      std::fill(o, o + c.d, 0.0f);
      const uint8_t* vcb = vc + size_t((b * c.hkv + hk) * c.c) * size_t(c.d) * elt;
      const uint8_t* vnb = vn + size_t((b * c.hkv + hk) * c.t) * size_t(c.d) * elt;
      for (int64_t j = 0; j < np; ++j) axpy(s[size_t(j)] * inv, vcb + size_t(j * c.d) * elt, o);
      for (int64_t u = 0; u <= t; ++u) axpy(s[size_t(np + u)] * inv, vnb + size_t(u * c.d) * elt, o);
    }
  };
  const int64_t tasks = c.b * c.hq * c.t;
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

void register_kv_attention_kernels(KernelRegistry& r) {
  r.add(OpKind::KvAttention, build_kv_attention);
  r.add(OpKind::CacheWrite, build_cache_write);
}

}  // namespace rlx::cpu
