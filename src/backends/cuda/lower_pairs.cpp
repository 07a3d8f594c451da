// Step fusion of the CUDA lowering: two nodes adjacent in the schedule, the second reading
// the first's result, as one launch (lower.h). Each fused kernel rounds as the two ops do
// one after the other, so a run gives the same bits with or without it (RLX_CUDA_FUSE=0
// turns it off). The pairs are the ones an LLM decode step is made of, where every launch
// costs about as much as the small work it does:
//   qmatmul -> add       the residual added as the product is stored (the product's own
//                        buffer stays unwritten: nothing else reads it);
//   cast -> cache_write  f32 K/V rows rounded to the cache type and written into the
//                        cache in the same pass (the rounded rows stored too when another
//                        node reads them: the attention does);
//   rms_norm -> qmatmul  a decode step's single row normalized by every block of the
//                        product into shared memory (the norm's result unwritten: only the
//                        product reads it);
//   rotary, rotary       independent (Q and K): one launch over the items of both;
//   rotary, rotary, cast -> cache_write, cast -> cache_write
//                        (lower_kv_store) Q's rotary, K's rotary rounded and written into
//                        its cache element by element, V's rows into theirs: one launch
//                        where the pairs above take three;
//   the same six, then the kv_attention reading their results
//                        (lower_kv_attention) the attention's blocks rotate the queries
//                        and make the new K / V rows themselves, and write them into the
//                        caches: one launch where the group above and the attention take two;
//   rms_norm -> qmatmul -> fused_elementwise
//                        (lower_norm_swiglu) the gate/up product of a feed-forward and the
//                        SwiGLU program over its two halves: each warp takes a gate row and
//                        its up row and stores silu(gate) * up (the product unwritten).
#include "backends/cuda/lower_util.h"
#include "ir/op_table.h"

namespace rlx::cuda {

namespace {

// rms_norm -> qmatmul as norm_qmatmul runs it (gate_row >= 0: with the SwiGLU after it);
// bufs: the norm's inputs and result, the product's x and w, then `out`.
std::optional<Launch> norm_product(const PairSide& first, const PairSide& second, int64_t gate_row, int out) {
  const Node& a = *first.node;
  const Node& b = *second.node;
  const Shape& x = *first.in[0];
  const int64_t k = b.attr<QMatMulAttrs>().k;
  const bool has_scale = first.in.size() > 1 && first.in[1], has_bias = first.in.size() > 2 && first.in[2];
  if (x.dtype() != DType::F32 || has_bias || (has_scale && first.in[1]->dtype() != DType::F32) || x.numel() != k ||
      norm_cols(a, x) != k || k > kNormQMatMulMaxK)
    return std::nullopt;
  const QMatMulArgs q = qmatmul_args(b, second.in, (*second.out)[0].numel());  // m = 1 (checked above)
  if (gate_row >= 0 && (q.n % 2 != 0 || (gate_row != 0 && gate_row != q.n / 2))) return std::nullopt;
  const float eps = float(a.attr<NormAttrs>().epsilon);
  const int w = int(first.in.size()) + 2;  // the weights' buf: after the norm's inputs and result, the product's x
  const unsigned grid = norm_qmatmul_grid(q, gate_row >= 0);
  const Node* np = &b;
  return Launch([np, q, grid, eps, has_scale, w, out, gate_row](const LaunchCtx& c, void* const* p) {
    QMatMulArgs qs = q;
    qs.scale_settled = has_scale && c.is_settled(1);
    check(norm_qmatmul(qs, grid, static_cast<const float*>(p[0]), has_scale ? static_cast<const float*>(p[1]) : nullptr, eps,
                       static_cast<const uint8_t*>(p[w]), static_cast<float*>(p[out]), c.stream, gate_row),
          gate_row >= 0 ? "rms_norm+qmatmul+silu*mul kernel" : "rms_norm+qmatmul kernel", *np);
  });
}

}  // namespace

std::optional<Launch> lower_norm_swiglu(const PairSide& norm, const PairSide& product, const PairSide& program,
                                        int64_t gate_row) {
  if (norm.node->kind != OpKind::RmsNorm || product.node->kind != OpKind::QMatMul || !swiglu_operands(*program.node))
    return std::nullopt;
  const Shape& h = (*program.out)[0];
  if (h.dtype() != DType::F32 || !h.is_static() || 2 * h.numel() != (*product.out)[0].numel() ||
      (*product.out)[0].dtype() != DType::F32)
    return std::nullopt;
  // bufs: the norm's inputs and result | x, w, product | gate/up halves, h
  return norm_product(norm, product, gate_row, int(norm.in.size()) + 6);
}

std::optional<Launch> lower_pair(const PairSide& first, const PairSide& second, int fed, bool sole_reader) {
  const Node& a = *first.node;
  const Node& b = *second.node;
  const Node* np = &b;
  if (a.kind == OpKind::QMatMul && b.kind == OpKind::Add && sole_reader && fed >= 0 && fed < 2) {
    // bufs: x, w, product | lhs, rhs, sum
    const Shape* r = second.in[size_t(1 - fed)];
    const Shape& y = (*second.out)[0];
    if (!r || y.dtype() != DType::F32 || r->dtype() != DType::F32 || !r->is_static() || !y.is_static() ||
        r->static_dims() != y.static_dims() || (*first.out)[0].numel() != y.numel())
      return std::nullopt;
    const QMatMulArgs q = qmatmul_args(a, first.in, y.numel());
    const int res = 3 + (1 - fed);
    return Launch([np, q, res](const LaunchCtx& c, void* const* p) {
      QMatMulArgs qs = q;
      qs.residual_settled = c.is_settled(res);
      check(qmatmul(qs, static_cast<const float*>(p[0]), static_cast<const uint8_t*>(p[1]),
                    static_cast<const float*>(p[res]), static_cast<float*>(p[5]), c.stream),
            "qmatmul+add kernel", *np);
    });
  }
  if (a.kind == OpKind::Cast && b.kind == OpKind::CacheWrite && fed == 1) {
    // bufs: rows (f32), rounded | cache, rounded, past, cache out
    const DType to = a.attr<CastAttrs>().to;
    if (!first.in[0] || first.in[0]->dtype() != DType::F32 || (to != DType::F16 && to != DType::BF16) ||
        !second.in[0] || second.in[0]->dtype() != to)
      return std::nullopt;
    const CacheWriteArgs w = cache_write_args(second.in);
    const ET et = to == DType::F16 ? ET::F16 : ET::BF16;
    return Launch([np, w, et, sole_reader](const LaunchCtx& c, void* const* p) {
      check(cache_write_cast(w, et, p[2], static_cast<const float*>(p[0]), sole_reader ? nullptr : p[1],
                             static_cast<const int64_t*>(p[4]), p[5],
                             c.err, c.step, c.stream),
            "cast+cache_write kernel", *np);
    });
  }
  if (a.kind == OpKind::RmsNorm && b.kind == OpKind::QMatMul && fed == 0 && sole_reader)
    return norm_product(first, second, -1, int(first.in.size()) + 3);  // bufs: x, scale | normalized, w, product
  if (a.kind == OpKind::Rotary && b.kind == OpKind::Rotary && fed == -1) {
    // bufs: x, cos, sin, y | x, cos, sin, y
    const auto ra = rotary_args(a, first.in), rb = rotary_args(b, second.in);
    return Launch([np, ra, rb](const LaunchCtx& c, void* const* p) {
      auto ptrs = [p](int o) {
        return RotaryPtrs{static_cast<const float*>(p[o]), static_cast<const float*>(p[o + 1]),
                          static_cast<const float*>(p[o + 2]), static_cast<float*>(p[o + 3])};
      };
      check(rotary_pair(ra, ptrs(0), rb, ptrs(4), c.stream), "rotary pair kernel", *np);
    });
  }
  return std::nullopt;
}

namespace {

// What lower_kv_store and lower_kv_attention share: the six nodes' kernel arguments and the
// places of their bufs; nullopt when the dtypes or shapes do not fit kv_store.
struct KvStoreParts {
  RotaryArgs qa, ka;
  CacheWriteArgs kw, vw;
  ET et = ET::F16;
  int bq = 0, bk = 0, pk = 0, pv = 0;  // bufs: Q's and K's rotary, K's and V's cast -> cache_write
  // The K and V cache writes' arguments, their positions read before the wait where settled.
  std::pair<CacheWriteArgs, CacheWriteArgs> writes(const LaunchCtx& c) const {
    CacheWriteArgs ks = kw, vs = vw;
    ks.past_settled = c.is_settled(pk + 4);
    vs.past_settled = c.is_settled(pv + 4);
    return {ks, vs};
  }
};
std::optional<KvStoreParts> kv_store_parts(const PairSide* s, int rk, int ck) {  // s: the six nodes
  const PairSide& rq_side = s[1 - rk];
  const PairSide& rk_side = s[rk];
  const PairSide& kc = s[2 + 2 * ck];
  const PairSide& kw_side = s[3 + 2 * ck];
  const PairSide& vc = s[2 + 2 * (1 - ck)];
  const PairSide& vw_side = s[3 + 2 * (1 - ck)];
  const DType to = kc.node->attr<CastAttrs>().to;
  auto f32 = [](const Shape* x) { return x && x->dtype() == DType::F32 && x->is_static(); };
  if (!f32(rq_side.in[0]) || !f32(rk_side.in[0]) || !f32(kc.in[0]) || !f32(vc.in[0]) || (to != DType::F16 && to != DType::BF16) ||
      vc.node->attr<CastAttrs>().to != to)
    return std::nullopt;
  for (const PairSide* w : {&kw_side, &vw_side})
    if (!w->in[0] || !w->in[1] || w->in[0]->dtype() != to || w->in[1]->dtype() != to || !w->in[0]->is_static() ||
        !w->in[1]->is_static())
      return std::nullopt;
  KvStoreParts r;
  r.qa = rotary_args(*rq_side.node, rq_side.in), r.ka = rotary_args(*rk_side.node, rk_side.in);
  r.kw = cache_write_args(kw_side.in), r.vw = cache_write_args(vw_side.in);
  // K's elements go from the rotary's flat index straight to the cache write's.
  if ((*rk_side.out)[0].numel() != kc.in[0]->numel() || r.kw.rows() != kc.in[0]->numel() ||
      r.vw.rows() != vc.in[0]->numel())
    return std::nullopt;
  r.et = to == DType::F16 ? ET::F16 : ET::BF16;
  // bufs: rotary 0 and 1 (x, cos, sin, y) at 0 and 4; pair 0 (cast x, y; cache, rows, past,
  // out) at 8, pair 1 at 14.
  r.bq = 4 * (1 - rk), r.bk = 4 * rk, r.pk = 8 + 6 * ck, r.pv = 8 + 6 * (1 - ck);
  return r;
}

// The six nodes' pointers; a result with no other reader (yk_sole etc.) null. Q's rotated
// rows are always there (the kv_store kernel writes them; the fused attention reads Q's
// input instead).
KvStorePtrs kv_store_ptrs(const KvStoreParts& r, void* const* p, bool yk_sole, bool k_sole, bool v_sole) {
  auto f = [p](int i) { return static_cast<float*>(p[i]); };
  KvStorePtrs b;
  b.q = RotaryPtrs{f(r.bq), f(r.bq + 1), f(r.bq + 2), f(r.bq + 3)};
  b.k = RotaryPtrs{f(r.bk), f(r.bk + 1), f(r.bk + 2), yk_sole ? nullptr : f(r.bk + 3)};
  b.k_rounded = k_sole ? nullptr : p[r.pk + 1];
  b.k_cache = p[r.pk + 2];
  b.k_past = static_cast<const int64_t*>(p[r.pk + 4]);
  b.k_out = p[r.pk + 5];
  b.v = f(r.pv);
  b.v_rounded = v_sole ? nullptr : p[r.pv + 1];
  b.v_cache = p[r.pv + 2];
  b.v_past = static_cast<const int64_t*>(p[r.pv + 4]);
  b.v_out = p[r.pv + 5];
  return b;
}

}  // namespace

std::optional<Launch> lower_kv_store(const PairSide (&s)[6], int rk, int ck, bool yk_sole, bool k_sole, bool v_sole) {
  const std::optional<KvStoreParts> r = kv_store_parts(s, rk, ck);
  if (!r) return std::nullopt;
  const Node* np = s[3 + 2 * ck].node;
  return Launch([=, r = *r](const LaunchCtx& c, void* const* p) {
    const KvStorePtrs b = kv_store_ptrs(r, p, yk_sole, k_sole, v_sole);
    const auto [ks, vs] = r.writes(c);
    check(kv_store(r.qa, r.ka, ks, vs, r.et, b, c.err, c.step, c.stream), "rotary+kv_store kernel", *np);
  });
}

std::optional<Launch> lower_kv_attention(const PairSide (&s)[7], int rk, int ck) {
  const std::optional<KvStoreParts> r = kv_store_parts(s, rk, ck);
  const PairSide& at = s[6];
  if (!r || r->et != ET::F16 || !at.in[0] || !at.in[1] || at.in[1]->dtype() != DType::F16 ||
      (*at.out)[0].dtype() != DType::F32)
    return std::nullopt;
  const KvAttentionArgs a = kv_attention_args(*at.node, at.in);
  const Node* np = s[3 + 2 * ck].node;
  // bufs: the six nodes' at 0 .. 19, then the attention's q, caches, new rows, past at 20 ..
  // 25 and its result at 26.
  return Launch([=, r = *r](const LaunchCtx& c, void* const* p) {
    const KvStorePtrs b = kv_store_ptrs(r, p, true, false, false);
    const auto [ks, vs] = r.writes(c);
    KvAttentionArgs as = a;
    as.past_settled = c.is_settled(25);
    check(kv_store_attention(r.qa, r.ka, ks, vs, b, as, static_cast<float*>(p[26]), c.err, c.step, c.stream),
          "rotary+kv_store+kv_attention kernel", *np);
  });
}

}  // namespace rlx::cuda
