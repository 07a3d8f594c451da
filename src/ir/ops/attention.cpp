// Transformer blocks: scaled dot-product attention (grouped heads, additive mask,
// causal) and rotary position embedding, as documented in ops.def.
#include <cmath>

#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

namespace {
// [B,S,H,D] <-> [B,H,S,D]: the same swap both ways.
std::vector<Dim> swap_heads(const std::vector<Dim>& d) { return {d[0], d[2], d[1], d[3]}; }
}  // namespace

// attention(q[B,Hq,Sq,D], k[B,Hkv,Sk,D], v[B,Hkv,Sk,Dv], mask?) -> [B,Hq,Sq,Dv]
// (bshd: every one of the four [B,S,H,D]; checked in the heads-first order below)
std::vector<Shape> infer_attention(const InferCtx& ctx) {
  const Shape& q = ctx.input(0);
  const Shape& k = ctx.input(1);
  const Shape& v = ctx.input(2);
  const auto& a = ctx.node.attr<AttentionAttrs>();
  require_rank(ctx, q, 4, "q (input 0)");
  require_rank(ctx, k, 4, "k (input 1)");
  require_rank(ctx, v, 4, "v (input 2)");
  check_float_only(ctx);
  require_same_dtype(ctx, k, "k (input 1)", q, "q (input 0)");
  require_same_dtype(ctx, v, "v (input 2)", q, "q (input 0)");
  if (!std::isfinite(a.scale)) ctx.error("scale must be finite, got ", a.scale);
  const std::vector<Dim> qd = a.bshd ? swap_heads(q.dims()) : q.dims();
  const std::vector<Dim> kd = a.bshd ? swap_heads(k.dims()) : k.dims();
  const std::vector<Dim> vd = a.bshd ? swap_heads(v.dims()) : v.dims();
  require_same_dim(ctx, kd[0], "k batch", qd[0], "q batch");
  require_same_dim(ctx, vd[0], "v batch", qd[0], "q batch");
  require_same_dim(ctx, vd[1], "v heads", kd[1], "k heads");
  require_same_dim(ctx, vd[2], "v sequence", kd[2], "k sequence");
  require_same_dim(ctx, kd[3], "k head dim", qd[3], "q head dim");
  Dim hq = qd[1], hkv = kd[1];
  if (!(hq == hkv)) {
    if (hq.is_symbolic() || hkv.is_symbolic())
      ctx.error("q heads ", dim_str(hq), " and k heads ", dim_str(hkv), " may not divide; bind the symbols first");
    if (hkv.raw() == 0 || hq.raw() % hkv.raw() != 0)
      ctx.error("q heads ", hq.raw(), " must be a multiple of k/v heads ", hkv.raw());
  }
  Dim sq = qd[2], sk = kd[2];
  if (a.causal && sq.is_static() && sk.is_static() && sq.raw() > sk.raw())
    ctx.error("causal attention needs at most as many queries (", sq.raw(), ") as keys (", sk.raw(), ")");
  if (ctx.has(3)) {
    const Shape& m = ctx.input(3);
    require_same_dtype(ctx, m, "mask (input 3)", q, "q (input 0)");
    std::vector<Dim> scores{qd[0], hq, sq, sk};
    if (!broadcasts_to(m.dims(), scores))
      ctx.error("mask ", m.str(), " does not broadcast to the scores ", dims_str(scores));
  }
  if (a.bshd) return {q.with_dims({qd[0], sq, hq, vd[3]})};
  return {q.with_dims({qd[0], hq, sq, vd[3]})};
}

std::vector<Shape> infer_kv_attention(const InferCtx& ctx) {
  const Shape& q = ctx.input(0);
  const Shape& kc = ctx.input(1);
  const Shape& vc = ctx.input(2);
  const Shape& kn = ctx.input(3);
  const Shape& vn = ctx.input(4);
  const Shape& past = ctx.input(5);
  if (!std::isfinite(ctx.node.attr<AttentionAttrs>().scale)) ctx.error("scale must be finite");
  if (ctx.node.attr<AttentionAttrs>().causal) ctx.error("causal is implied (new rows see the rows before them)");
  require_rank(ctx, q, 4, "q (input 0)");
  if (q.dtype() != DType::F32) ctx.error("q (input 0) must be f32, got ", q.str());
  const char* names[] = {"k_cache (input 1)", "v_cache (input 2)", "k_new (input 3)", "v_new (input 4)"};
  const Shape* kv[] = {&kc, &vc, &kn, &vn};
  for (int i = 0; i < 4; ++i) {
    require_rank(ctx, *kv[i], 4, names[i]);
    if (kv[i]->dtype() != DType::F16 && kv[i]->dtype() != DType::F32) ctx.error(names[i], " must be f16 or f32");
    require_same_dtype(ctx, *kv[i], names[i], kc, names[0]);
    require_same_dim(ctx, kv[i]->dims()[0], names[i], q.dims()[0], "the batch of q");
    require_same_dim(ctx, kv[i]->dims()[1], names[i], kc.dims()[1], "the heads of k_cache");
    require_same_dim(ctx, kv[i]->dims()[3], names[i], q.dims()[3], "the head dim of q");
  }
  require_same_dim(ctx, vc.dims()[2], "v_cache rows", kc.dims()[2], "k_cache rows");
  require_same_dim(ctx, kn.dims()[2], "k_new rows", q.dims()[2], "the queries of q");
  require_same_dim(ctx, vn.dims()[2], "v_new rows", q.dims()[2], "the queries of q");
  if (past.rank() != 1 || past.dtype() != DType::I64) ctx.error("past (input 5) must be i64[B], got ", past.str());
  require_same_dim(ctx, past.dims()[0], "past", q.dims()[0], "the batch of q");
  Dim hq = q.dims()[1], hkv = kc.dims()[1];
  if (hq.is_static() && hkv.is_static() && (hkv.raw() == 0 || hq.raw() % hkv.raw() != 0))
    ctx.error("q heads ", hq.raw(), " must be a multiple of k/v heads ", hkv.raw());
  return {q};
}

// cache_write(cache[B,H,C,D], rows[B,H,T,D], past i64[B]) -> cache's type.
std::vector<Shape> infer_cache_write(const InferCtx& ctx) {
  const Shape& c = ctx.input(0);
  const Shape& r = ctx.input(1);
  const Shape& past = ctx.input(2);
  require_rank(ctx, c, 4, "cache (input 0)");
  require_rank(ctx, r, 4, "rows (input 1)");
  require_same_dtype(ctx, r, "rows (input 1)", c, "cache (input 0)");
  require_same_dim(ctx, r.dims()[0], "rows (input 1) batch", c.dims()[0], "the batch of the cache");
  require_same_dim(ctx, r.dims()[1], "rows (input 1) heads", c.dims()[1], "the heads of the cache");
  require_same_dim(ctx, r.dims()[3], "rows (input 1) width", c.dims()[3], "the row width of the cache");
  if (r.dims()[2].is_static() && c.dims()[2].is_static() && r.dims()[2].raw() > c.dims()[2].raw())
    ctx.error("rows (input 1) has ", r.dims()[2].raw(), " rows, more than the cache's ", c.dims()[2].raw());
  if (past.rank() != 1 || past.dtype() != DType::I64) ctx.error("past (input 2) must be i64[B], got ", past.str());
  require_same_dim(ctx, past.dims()[0], "past", c.dims()[0], "the batch of the cache");
  return {c};
}

// rotary(x[B,H,S,D], cos[S,R/2], sin[S,R/2]) -> x's type; rotates the first R of D.
std::vector<Shape> infer_rotary(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& c = ctx.input(1);
  const Shape& s = ctx.input(2);
  require_rank(ctx, x, 4, "x (input 0)");
  check_float_only(ctx);
  require_rank(ctx, c, 2, "cos (input 1)");
  require_same_dtype(ctx, c, "cos (input 1)", x, "x (input 0)");
  if (!(s == c)) ctx.error("sin ", s.str(), " must match cos ", c.str());
  require_same_dim(ctx, c.dims()[0], "cos rows", x.dims()[2], "the sequence length of x");
  int64_t half = static_dim(ctx, c.dims()[1], "the rotary half width (cos dim 1)");
  int64_t d = static_dim(ctx, x.dims()[3], "the head dim of x");
  if (half < 1 || half > d / 2)
    ctx.error("rotary width 2*", half, " must be in [2, head dim ", d, "]");
  return {x};
}

}  // namespace rlx::ir
