// attention (streaming softmax, flash-style) and rotary position embedding.
//
// attention(q[B,Hq,Sq,D], k[B,Hkv,Sk,D], v[B,Hkv,Sk,Dv], mask?) -> [B,Hq,Sq,Dv] (bshd: all
// four [B,S,H,D], read and written through row strides, so no transposes around the node):
// query head h reads key/value head h / (Hq/Hkv); the additive mask broadcasts to
// [B,Hq,Sq,Sk]; causal lets query i see keys j <= i + (Sk - Sq); scale 0 means
// 1/sqrt(D). A query row that can see no key (or whose every score is -inf) yields
// zeros rather than NaN.
//
// Float types stream over key blocks: S = Q Kᵀ (sgemm on strided views, no transposes),
// online softmax per row (running max and sum, rescaling the partial output), O += P V.
// Tasks are (batch, head, query block), so results do not depend on the thread count.
// F64 uses a plain two-pass softmax per row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "ir/dims.h"

namespace rlx::cpu {
namespace {

struct AttnCfg {
  DType type = DType::F32;
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, sk = 0, d = 0, dv = 0;
  float scale = 1;
  double scale_f64 = 1;
  bool causal = false;
  bool has_mask = false;
  int n_in = 3;  // node inputs (the output pointer follows them)
  // Element strides over (batch, head, position) of q, k, v and the output; a row's D (Dv)
  // elements are contiguous. Heads-first [B,H,S,D]: {H*S*D, S*D, D}; bshd: {S*H*D, D, H*D}.
  int64_t q_st[3] = {0, 0, 0}, k_st[3] = {0, 0, 0}, v_st[3] = {0, 0, 0}, o_st[3] = {0, 0, 0};
  int64_t mask_st[4] = {0, 0, 0, 0};  // element strides over [B, Hq, Sq, Sk]; 0 broadcasts
  int64_t bq = 64, bk = 256;           // query / key block sizes
  const IsaKernels* kernels = nullptr;
  const RowKernels* rows = nullptr;  // online-softmax steps
};

// Exclusive end of the keys query i may see.
inline int64_t key_end(const AttnCfg& c, int64_t i) {
  return c.causal ? std::clamp<int64_t>(i + (c.sk - c.sq) + 1, 0, c.sk) : c.sk;
}

struct Scratch {
  std::vector<float> s, o, m, l, q;
};
thread_local Scratch tl_attn;

// K and V of every (batch, kv head, key block) packed once as GEMM B operands (Kᵀ for
// S = Q Kᵀ, V for O += P V), shared by all query heads and blocks that read them.
struct PackedKv {
  const float* data = nullptr;  // nullptr: operands are packed per product
  int64_t kt_floats = 0, v_floats = 0, per_block = 0, blocks = 0;
  const float* kt(const AttnCfg& c, int64_t bi, int64_t hk, int64_t kb) const {
    return data + ((bi * c.hkv + hk) * blocks + kb) * per_block;
  }
  const float* v(const AttnCfg& c, int64_t bi, int64_t hk, int64_t kb) const { return kt(c, bi, hk, kb) + kt_floats; }
};

// One (batch, head, query block) task for F32/F16/BF16.
void attend_block(const AttnCfg& c, const PackedKv& kv, const void* q, const void* k, const void* v, const void* mask,
                  void* out, int64_t bi, int64_t h, int64_t i0) {
  const IsaKernels& K = *c.kernels;
  const RowKernels& R = *c.rows;
  const size_t esz = dtype_size(c.type);
  const int64_t rows = std::min(c.bq, c.sq - i0);
  const int64_t hk = h / (c.hq / c.hkv);
  const int64_t ldq = c.q_st[2], ldk = c.k_st[2], ldv = c.v_st[2], ldo = c.o_st[2];
  const uint8_t* qb = static_cast<const uint8_t*>(q) + (bi * c.q_st[0] + h * c.q_st[1] + i0 * ldq) * esz;
  const uint8_t* kb = static_cast<const uint8_t*>(k) + (bi * c.k_st[0] + hk * c.k_st[1]) * esz;
  const uint8_t* vb = static_cast<const uint8_t*>(v) + (bi * c.v_st[0] + hk * c.v_st[1]) * esz;
  Scratch& sc = tl_attn;
  sc.s.resize(size_t(c.bq * c.bk));
  sc.o.assign(size_t(rows * c.dv), 0.0f);
  sc.m.assign(size_t(rows), -INFINITY);
  sc.l.assign(size_t(rows), 0.0f);
  float* S = sc.s.data();
  float* O = sc.o.data();
  if (kv.data) {  // Q is reused by every key block: pack it once
    sc.q.resize(size_t(packed_a_floats(K, rows, c.d)));
    pack_a_full(K, {qb, c.type, ldq, 1}, rows, c.d, sc.q.data());
  }
  const int64_t kend = key_end(c, i0 + rows - 1);  // the block's last row sees the most keys
  for (int64_t j0 = 0; j0 < kend; j0 += c.bk) {
    // Whole key blocks even where causality cuts them short (per-row `valid` masks the
    // rest): products must match the shapes the shared K/V blocks were packed for.
    const int64_t cols = std::min(c.bk, c.sk - j0);
    SgemmProblem qk;
    qk.m = rows;
    qk.n = cols;
    qk.k = c.d;
    qk.a = {qb, c.type, ldq, 1};
    qk.b = {kb + j0 * ldk * esz, c.type, 1, ldk};  // Kᵀ as a strided view
    qk.c = S;
    qk.ldc = c.bk;
    if (kv.data) {
      qk.a_packed = sc.q.data();
      qk.b_packed = kv.kt(c, bi, hk, j0 / c.bk);
    }
    sgemm(qk, nullptr, K);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      float* srow = S + r * c.bk;
      const int64_t valid = std::clamp<int64_t>(key_end(c, i) - j0, 0, cols);
      const int64_t base = bi * c.mask_st[0] + h * c.mask_st[1] + i * c.mask_st[2] + j0 * c.mask_st[3];
      float row_max;
      if (!c.has_mask || (c.type == DType::F32 && c.mask_st[3] == 1)) {
        // Scale, mask and maximum in one vector pass over the row (the same values as the three;
        // the mask's add was a baseline-ISA loop): MiniLM-L6's attention 0.230 -> 0.193 ms a
        // layer, the model 12.76 -> 12.44 ms on one thread, 6.98 -> 6.71 on two.
        row_max = R.scale_add_max(srow, valid, c.scale,
                                  c.has_mask && valid > 0 ? static_cast<const float*>(mask) + base : nullptr);
      } else {
        R.scale(srow, valid, c.scale);
        for (int64_t j = 0; j < valid; ++j) srow[j] += load_as_f32(mask, c.type, base + j * c.mask_st[3]);
        row_max = R.max(srow, valid);
      }
      const float m_new = std::max(sc.m[size_t(r)], row_max);
      if (m_new == -INFINITY) {  // nothing visible yet: this block contributes nothing
        std::fill(srow, srow + cols, 0.0f);
        continue;
      }
      const float sum = R.exp_sum(srow, valid, m_new);
      std::fill(srow + valid, srow + cols, 0.0f);
      const float corr = sc.m[size_t(r)] == -INFINITY ? 0.0f : std::exp(sc.m[size_t(r)] - m_new);
      if (corr != 1.0f) R.scale(O + r * c.dv, c.dv, corr);
      sc.l[size_t(r)] = sc.l[size_t(r)] * corr + sum;
      sc.m[size_t(r)] = m_new;
    }
    SgemmProblem pv;
    pv.m = rows;
    pv.n = c.dv;
    pv.k = cols;
    pv.a = {S, DType::F32, c.bk, 1};
    pv.b = {vb + j0 * ldv * esz, c.type, ldv, 1};
    pv.c = O;
    pv.ldc = c.dv;
    pv.accumulate = true;
    if (kv.data) pv.b_packed = kv.v(c, bi, hk, j0 / c.bk);
    sgemm(pv, nullptr, K);
  }
  uint8_t* ob = static_cast<uint8_t*>(out) + (bi * c.o_st[0] + h * c.o_st[1] + i0 * ldo) * esz;
  for (int64_t r = 0; r < rows; ++r) {
    const float l = sc.l[size_t(r)];
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    float* orow = O + r * c.dv;
    if (c.type == DType::F32) {
      float* dst = reinterpret_cast<float*>(ob) + r * ldo;
      for (int64_t j = 0; j < c.dv; ++j) dst[j] = orow[j] * inv;
    } else {
      for (int64_t j = 0; j < c.dv; ++j) store_from_f32(ob, c.type, r * ldo + j, orow[j] * inv);
    }
  }
}

// F64: all of a row's scores at once, then a two-pass softmax.
void attend_head_f64(const AttnCfg& c, const double* q, const double* k, const double* v, const double* mask,
                     double* out, int64_t bi, int64_t h) {
  const int64_t hk = h / (c.hq / c.hkv);
  const double* kb = k + bi * c.k_st[0] + hk * c.k_st[1];
  const double* vb = v + bi * c.v_st[0] + hk * c.v_st[1];
  std::vector<double> s(size_t(c.sk));
  for (int64_t i = 0; i < c.sq; ++i) {
    const double* qi = q + bi * c.q_st[0] + h * c.q_st[1] + i * c.q_st[2];
    double* oi = out + bi * c.o_st[0] + h * c.o_st[1] + i * c.o_st[2];
    const int64_t n = key_end(c, i);
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t t = 0; t < c.d; ++t) dot += qi[t] * kb[j * c.k_st[2] + t];
      dot *= c.scale_f64;
      if (c.has_mask) dot += mask[bi * c.mask_st[0] + h * c.mask_st[1] + i * c.mask_st[2] + j * c.mask_st[3]];
      s[size_t(j)] = dot;
      mx = std::max(mx, dot);
    }
    std::fill(oi, oi + c.dv, 0.0);
    if (mx == -INFINITY) continue;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
    for (int64_t j = 0; j < n; ++j) {
      const double p = s[size_t(j)] / sum;
      for (int64_t t = 0; t < c.dv; ++t) oi[t] += p * vb[j * c.v_st[2] + t];
    }
  }
}

void run_attention(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const AttnCfg& c = *static_cast<const AttnCfg*>(vcfg);
  const void *q = bufs[0], *k = bufs[1], *v = bufs[2], *mask = c.has_mask ? bufs[3] : nullptr;
  void* out = bufs[c.n_in];
  if (c.b == 0 || c.hq == 0 || c.sq == 0 || c.dv == 0) return;
  ThreadPool* pool = ctx.pool && ctx.pool->size() > 1 ? ctx.pool : nullptr;
  if (c.type == DType::F64) {
    auto f = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        attend_head_f64(c, static_cast<const double*>(q), static_cast<const double*>(k),
                        static_cast<const double*>(v), static_cast<const double*>(mask), static_cast<double*>(out),
                        t / c.hq, t % c.hq);
    };
    if (pool) pool->parallel_for(c.b * c.hq, 1, f);
    else f(0, c.b * c.hq);
    return;
  }
  // Pack K and V once when each is read by enough query rows (Sq times the group size).
  PackedKv kv;
  thread_local std::vector<float> packed;
  const IsaKernels& K = *c.kernels;
  const size_t esz = dtype_size(c.type);
  if (c.sk > 0 && c.sq * (c.hq / c.hkv) >= 8) {
    kv.blocks = (c.sk + c.bk - 1) / c.bk;
    kv.kt_floats = packed_b_floats(K, c.d, std::min(c.bk, c.sk));
    kv.v_floats = packed_b_floats(K, std::min(c.bk, c.sk), c.dv);
    kv.per_block = kv.kt_floats + kv.v_floats;
    packed.resize(size_t(c.b * c.hkv * kv.blocks * kv.per_block));
    // `packed` is thread-local: workers must use this thread's buffer through a pointer.
    float* const base = packed.data();
    kv.data = base;
    auto pack = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t kb = t % kv.blocks, bh = t / kv.blocks, j0 = kb * c.bk, cols = std::min(c.bk, c.sk - j0);
        const int64_t bi = bh / c.hkv, hk = bh % c.hkv;
        const uint8_t* kp = static_cast<const uint8_t*>(k) + (bi * c.k_st[0] + hk * c.k_st[1] + j0 * c.k_st[2]) * esz;
        const uint8_t* vp = static_cast<const uint8_t*>(v) + (bi * c.v_st[0] + hk * c.v_st[1] + j0 * c.v_st[2]) * esz;
        float* dst = base + t * kv.per_block;
        pack_b_full(K, {kp, c.type, 1, c.k_st[2]}, c.d, cols, dst);
        pack_b_full(K, {vp, c.type, c.v_st[2], 1}, cols, c.dv, dst + kv.kt_floats);
      }
    };
    if (pool) pool->parallel_for(c.b * c.hkv * kv.blocks, 1, pack);
    else pack(0, c.b * c.hkv * kv.blocks);
  }
  const int64_t qblocks = (c.sq + c.bq - 1) / c.bq;
  auto f = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t qb = t % qblocks, bh = t / qblocks;
      attend_block(c, kv, q, k, v, mask, out, bh / c.hq, bh % c.hq, qb * c.bq);
    }
  };
  const int64_t tasks = c.b * c.hq * qblocks;
  if (pool) pool->parallel_for(tasks, 1, f);
  else f(0, tasks);
}

bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

bool supports_attention(const Node& node, const std::vector<const Shape*>& in) {
  const DType t = in[0]->dtype();
  if (!float_type(t)) return false;
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] && in[i]->dtype() != t) return false;
  return true;
}

KernelCall build_attention(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const auto& a = node.attr<AttentionAttrs>();
  std::vector<int64_t> qd = in[0]->static_dims(), kd = in[1]->static_dims(), vd = in[2]->static_dims();
  if (qd.size() != 4 || kd.size() != 4 || vd.size() != 4)
    fail(ErrorCategory::Shape, "node '", node.name, "' (attention): malformed operand shapes");
  if (a.bshd)  // the same computation over [B,S,H,D] operands: take the dims heads-first
    for (auto* d : {&qd, &kd, &vd}) std::swap((*d)[1], (*d)[2]);
  if (kd[1] == 0 || qd[1] % kd[1] != 0)
    fail(ErrorCategory::Shape, "node '", node.name, "' (attention): malformed operand shapes");
  AttnCfg c;
  c.type = in[0]->dtype();
  c.b = qd[0], c.hq = qd[1], c.sq = qd[2], c.d = qd[3];
  c.hkv = kd[1], c.sk = kd[2], c.dv = vd[3];
  auto strides = [&](int64_t* st, int64_t h, int64_t s, int64_t d) {
    st[0] = h * s * d;
    st[1] = a.bshd ? d : s * d;
    st[2] = a.bshd ? h * d : d;
  };
  strides(c.q_st, c.hq, c.sq, c.d);
  strides(c.k_st, c.hkv, c.sk, c.d);
  strides(c.v_st, c.hkv, c.sk, c.dv);
  strides(c.o_st, c.hq, c.sq, c.dv);
  c.scale_f64 = a.scale != 0 ? a.scale : 1.0 / std::sqrt(double(std::max<int64_t>(c.d, 1)));
  c.scale = float(c.scale_f64);
  c.causal = a.causal;
  c.n_in = int(in.size());
  if (in.size() > 3 && in[3]) {
    std::vector<int64_t> st;
    if (!broadcast_read_strides(in[3]->static_dims(), {c.b, c.hq, c.sq, c.sk}, st))
      fail(ErrorCategory::Shape, "node '", node.name, "' (attention", a.bshd ? ", bshd" : "", "): mask ", in[3]->str(),
           " does not broadcast to the scores [", c.b, ",", c.hq, ",", c.sq, ",", c.sk, "] of q ", in[0]->str());
    std::copy(st.begin(), st.end(), c.mask_st);
    c.has_mask = true;
  }
  c.bq = std::clamp<int64_t>(c.sq, 1, 48);  // a multiple of every microkernel's mr
  c.bk = 256;
  c.kernels = &isa_kernels(detect_isa());
  c.rows = &row_kernels(detect_isa());
  return make_call(run_attention, std::move(c));
}

// ---------------------------------------------------------------- rotary

struct RotaryCfg {
  DType type = DType::F32;
  int64_t rows = 0;  // B*H*S
  int64_t s = 0, d = 0, half = 0;
  bool interleaved = false;
};

template <class T, class Acc>
void rotate_rows(const RotaryCfg& c, const T* x, const T* cs, const T* sn, T* out, int64_t r0, int64_t r1) {
  auto ld = [&](const T* p, int64_t i) -> Acc {
    if constexpr (std::is_same_v<T, uint16_t>) return Acc(load_as_f32(p, c.type, i));
    else return Acc(p[i]);
  };
  auto st = [&](T* p, int64_t i, Acc v) {
    if constexpr (std::is_same_v<T, uint16_t>) store_from_f32(p, c.type, i, float(v));
    else p[i] = T(v);
  };
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c.d;
    T* orow = out + r * c.d;
    const int64_t pos = r % c.s;
    const T* cr = cs + pos * c.half;
    const T* sr = sn + pos * c.half;
    for (int64_t i = 0; i < c.half; ++i) {
      const int64_t i0 = c.interleaved ? 2 * i : i, i1 = c.interleaved ? 2 * i + 1 : i + c.half;
      const Acc x0 = ld(xr, i0), x1 = ld(xr, i1), co = ld(cr, i), si = ld(sr, i);
      st(orow, i0, x0 * co - x1 * si);
      st(orow, i1, x1 * co + x0 * si);
    }
    if (orow != xr)
      for (int64_t i = 2 * c.half; i < c.d; ++i) orow[i] = xr[i];
  }
}

void run_rotary(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const RotaryCfg& c = *static_cast<const RotaryCfg*>(vcfg);
  auto f = [&](int64_t r0, int64_t r1) {
    switch (c.type) {
      case DType::F64:
        return rotate_rows<double, double>(c, static_cast<const double*>(bufs[0]), static_cast<const double*>(bufs[1]),
                                           static_cast<const double*>(bufs[2]), static_cast<double*>(bufs[3]), r0, r1);
      case DType::F16: case DType::BF16:
        return rotate_rows<uint16_t, float>(c, static_cast<const uint16_t*>(bufs[0]),
                                            static_cast<const uint16_t*>(bufs[1]), static_cast<const uint16_t*>(bufs[2]),
                                            static_cast<uint16_t*>(bufs[3]), r0, r1);
      default:
        return rotate_rows<float, float>(c, static_cast<const float*>(bufs[0]), static_cast<const float*>(bufs[1]),
                                         static_cast<const float*>(bufs[2]), static_cast<float*>(bufs[3]), r0, r1);
    }
  };
  if (ctx.pool && ctx.pool->size() > 1 && c.rows * c.d >= 16384)
    ctx.pool->parallel_for(c.rows, 64, f);
  else
    f(0, c.rows);
}

bool supports_rotary(const Node& node, const std::vector<const Shape*>& in) {
  const DType t = in[0]->dtype();
  return float_type(t) && in[1]->dtype() == t && in[2]->dtype() == t;
}

KernelCall build_rotary(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const std::vector<int64_t> xd = in[0]->static_dims(), cd = in[1]->static_dims(), sd = in[2]->static_dims();
  if (xd.size() != 4 || cd.size() != 2 || cd != sd || cd[0] != xd[2] || 2 * cd[1] > xd[3])
    fail(ErrorCategory::Shape, "node '", node.name, "' (rotary): cos/sin must be [S, R/2] with R <= D");
  RotaryCfg c;
  c.type = in[0]->dtype();
  c.rows = xd[0] * xd[1] * xd[2];
  c.s = xd[2];
  c.d = xd[3];
  c.half = cd[1];
  c.interleaved = node.attr<RotaryAttrs>().interleaved;
  return make_call(run_rotary, std::move(c));
}

}  // namespace

void register_attention_kernels(KernelRegistry& r) {
  r.add(OpKind::Attention, build_attention, supports_attention);
  r.add_prefers_f32(OpKind::Attention, any_half_input);
  r.add(OpKind::Rotary, build_rotary, supports_rotary);
}

}  // namespace rlx::cpu
