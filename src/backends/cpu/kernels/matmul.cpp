// matmul (numpy semantics: 1-D operands, batch broadcasting) and fused_matmul
// (act(a @ b + bias)). Float types run on sgemm (F16/BF16 converted while packing and in
// the epilogue), F64 on dgemm, integers on blocked loops with wrapping 64-bit sums.
// Bias and activation are applied per finished tile inside the GEMM while it is hot.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "ir/dims.h"

namespace rlx::cpu {
namespace {

struct MatmulCfg {
  DType type = DType::F32;  // a, b and out share it (shape inference requires it)
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;                 // output matrices (after folding)
  std::vector<int64_t> a_off, b_off;  // element offset of each output batch's operands
  bool folded = false;               // batches of a folded into M (b shared by all)
  int64_t m_orig = 0;                // M before folding (for bias row lookup)
  // Active extent: out dim 0 maps to `per_lead` units (rows of M when folded or
  // unbatched, else batches).
  int64_t lead = 0, per_lead = 0;
  bool lead_is_rows = false;
  // fused_matmul epilogue
  bool has_bias = false;
  int n_in = 2;  // node inputs (the output pointer follows them)
  std::vector<int64_t> bias_off;  // per (unfolded) batch
  int64_t bias_rs = 0, bias_cs = 0;
  Activation act = Activation::None;
  float alpha = 0;
  // A constant f32 B packed once at build in sgemm's panel layout (pack_b_full), shared by
  // runs and clones; the constant itself is then released (KernelCall::absorbed). Packing B
  // on every call cost about a quarter of a transformer product's microkernel time.
  std::shared_ptr<const std::vector<float>> b_packed;
  const IsaKernels* kernels = nullptr;
  const RowKernels* rows = nullptr;  // the epilogue activation
};

// Contiguous strides of `dims`, with 0 where the dim is 1 (broadcast).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st;
  broadcast_read_strides(dims, dims, st);  // dims always broadcast to themselves
  return st;
}

// For each index of `out_batch` (row-major), sum of index * stride.
std::vector<int64_t> offsets_from_strides(const std::vector<int64_t>& out_batch, const std::vector<int64_t>& st) {
  int64_t total = 1;
  for (int64_t d : out_batch) total *= d;
  std::vector<int64_t> offs(size_t(total), 0);
  std::vector<int64_t> idx(out_batch.size(), 0);
  for (int64_t b = 0; b < total; ++b) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * st[d];
    offs[size_t(b)] = o;
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < out_batch[d]) break;
      idx[d] = 0;
    }
  }
  return offs;
}

// Offsets of an operand whose batch dims `op_batch` broadcast (right-aligned) to
// `out_batch`; each operand matrix holds `unit` elements.
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& out_batch, std::vector<int64_t> op_batch,
                                   int64_t unit) {
  op_batch.insert(op_batch.begin(), out_batch.size() - op_batch.size(), 1);
  std::vector<int64_t> st = broadcast_strides(op_batch);
  for (int64_t& x : st) x *= unit;
  return offsets_from_strides(out_batch, st);
}

// ---------------------------------------------------------------- float epilogue

struct TileCtx {
  const MatmulCfg* cfg;
  int64_t batch;       // unfolded batch index of this GEMM (folded: derived per row)
  const void* bias;
  void* out;           // typed output of this GEMM when C is an F32 workspace, else nullptr
};

void tile_epilogue(const void* vctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t m, int64_t n) {
  const TileCtx& t = *static_cast<const TileCtx*>(vctx);
  const MatmulCfg& cfg = *t.cfg;
  for (int64_t r = 0; r < m; ++r) {
    float* row = c + r * ldc;
    const int64_t gi = i0 + r;
    if (t.bias) {
      const int64_t b = cfg.folded ? gi / cfg.m_orig : t.batch;
      const int64_t i = cfg.folded ? gi % cfg.m_orig : gi;
      const int64_t off = cfg.bias_off[size_t(b)] + i * cfg.bias_rs + j0 * cfg.bias_cs;
      if (cfg.type == DType::F32 && cfg.bias_cs == 1) {
        const float* bp = static_cast<const float*>(t.bias) + off;
        for (int64_t j = 0; j < n; ++j) row[j] += bp[j];
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] += load_as_f32(t.bias, cfg.type, off + j * cfg.bias_cs);
      }
    }
    cfg.rows->activate(row, n, cfg.act, cfg.alpha);
    if (t.out)
      for (int64_t j = 0; j < n; ++j) store_from_f32(t.out, cfg.type, gi * cfg.n + j0 + j, row[j]);
  }
}

thread_local std::vector<float> tl_workspace;

// One GEMM of the (possibly folded) batch: rows [0, m) of output batch `b`.
void float_gemm(const MatmulCfg& cfg, ThreadPool* pool, const void* a, const void* b, const void* bias,
                void* out, int64_t batch, int64_t m) {
  const size_t esz = dtype_size(cfg.type);
  SgemmProblem p;
  p.m = m;
  p.n = cfg.n;
  p.k = cfg.k;
  p.a = {static_cast<const uint8_t*>(a) + cfg.a_off[size_t(batch)] * esz, cfg.type, cfg.k, 1};
  if (cfg.b_packed) p.b_packed = cfg.b_packed->data();
  else p.b = {static_cast<const uint8_t*>(b) + cfg.b_off[size_t(batch)] * esz, cfg.type, cfg.n, 1};
  void* out_b = static_cast<uint8_t*>(out) + batch * cfg.m * cfg.n * esz;
  TileCtx t{&cfg, batch, bias, nullptr};
  if (cfg.type == DType::F32) {
    p.c = static_cast<float*>(out_b);
  } else {
    if (tl_workspace.size() < size_t(m * cfg.n)) tl_workspace.resize(size_t(m * cfg.n));
    p.c = tl_workspace.data();
    t.out = out_b;
  }
  p.ldc = cfg.n;
  if (bias || cfg.act != Activation::None || t.out) {
    p.epilogue = tile_epilogue;
    p.epilogue_ctx = &t;
  }
  sgemm(p, pool, *cfg.kernels);
}

// ---------------------------------------------------------------- f64 and integers

void f64_gemm(const MatmulCfg& cfg, ThreadPool* pool, const void* a, const void* b, const void* bias,
              void* out, int64_t batch, int64_t m) {
  DgemmProblem p;
  p.m = m;
  p.n = cfg.n;
  p.k = cfg.k;
  p.a = static_cast<const double*>(a) + cfg.a_off[size_t(batch)];
  p.rsa = cfg.k;
  p.b = static_cast<const double*>(b) + cfg.b_off[size_t(batch)];
  p.rsb = cfg.n;
  p.c = static_cast<double*>(out) + batch * cfg.m * cfg.n;
  p.ldc = cfg.n;
  dgemm(p, pool);
  if (!bias && cfg.act == Activation::None) return;
  const double* bp = static_cast<const double*>(bias);
  for (int64_t gi = 0; gi < m; ++gi) {
    const int64_t bb = cfg.folded ? gi / cfg.m_orig : batch, i = cfg.folded ? gi % cfg.m_orig : gi;
    double* row = p.c + gi * cfg.n;
    for (int64_t j = 0; j < cfg.n; ++j) {
      double v = row[j];
      if (bp) v += bp[cfg.bias_off[size_t(bb)] + i * cfg.bias_rs + j * cfg.bias_cs];
      row[j] = activate_scalar<double>(v, cfg.act, cfg.alpha);
    }
  }
}

// Integer products wrap like numpy's fixed-width arithmetic: sums are taken modulo 2^64
// and then narrowed, which equals wrapping in the element type.
template <class T>
void int_gemm(const MatmulCfg& cfg, ThreadPool* pool, const void* a, const void* b, const void* bias,
              void* out, int64_t batch, int64_t m) {
  const T* A = static_cast<const T*>(a) + cfg.a_off[size_t(batch)];
  const T* B = static_cast<const T*>(b) + cfg.b_off[size_t(batch)];
  const T* bp = static_cast<const T*>(bias);
  T* C = static_cast<T*>(out) + batch * cfg.m * cfg.n;
  const int64_t n = cfg.n, k = cfg.k;
  auto rows = [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> acc(static_cast<size_t>(n));
    for (int64_t gi = r0; gi < r1; ++gi) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t kk = 0; kk < k; ++kk) {
        const uint64_t aik = uint64_t(int64_t(A[gi * k + kk]));
        const T* bk = B + kk * n;
        for (int64_t j = 0; j < n; ++j) acc[size_t(j)] += aik * uint64_t(int64_t(bk[j]));
      }
      const int64_t bb = cfg.folded ? gi / cfg.m_orig : batch, i = cfg.folded ? gi % cfg.m_orig : gi;
      for (int64_t j = 0; j < n; ++j) {
        uint64_t v = acc[size_t(j)];
        if (bp) v += uint64_t(int64_t(bp[cfg.bias_off[size_t(bb)] + i * cfg.bias_rs + j * cfg.bias_cs]));
        C[gi * n + j] = T(v);
      }
    }
  };
  if (pool && pool->size() > 1 && m * n * k >= 32 * 32 * 32)
    pool->parallel_for(m, 4, rows);
  else
    rows(0, m);
}

using GemmFn = void (*)(const MatmulCfg&, ThreadPool*, const void*, const void*, const void*, void*, int64_t,
                        int64_t);

GemmFn gemm_for(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return float_gemm;
    case DType::F64: return f64_gemm;
    case DType::I8: return int_gemm<int8_t>;
    case DType::I16: return int_gemm<int16_t>;
    case DType::I32: return int_gemm<int32_t>;
    case DType::I64: return int_gemm<int64_t>;
    case DType::U8: return int_gemm<uint8_t>;
    case DType::U32: return int_gemm<uint32_t>;
    default: return nullptr;
  }
}

// ---------------------------------------------------------------- kernel

void run_matmul(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const MatmulCfg& cfg = *static_cast<const MatmulCfg*>(vcfg);
  const void* a = bufs[0];
  const void* b = bufs[1];
  const void* bias = cfg.has_bias ? bufs[2] : nullptr;
  void* out = bufs[cfg.n_in];
  const GemmFn gemm = gemm_for(cfg.type);

  int64_t m = cfg.m, batch = cfg.batch;
  if (cfg.lead > 0) {
    const int64_t units = ctx.rows(cfg.lead) * cfg.per_lead;
    if (cfg.lead_is_rows) m = units;
    else batch = units;
  }
  if (m <= 0 || batch <= 0 || cfg.n <= 0) return;

  ThreadPool* pool = ctx.pool;
  const int64_t threads = pool ? pool->size() : 1;
  const double flops = double(m) * double(cfg.n) * double(std::max<int64_t>(cfg.k, 1));
  // Many small GEMMs: one per task. Otherwise one parallel GEMM at a time. Each output
  // element is computed the same way either way.
  if (batch > 1 && threads > 1 && (batch >= 2 * threads || flops < 96.0 * 96.0 * 96.0)) {
    pool->parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t bi = b0; bi < b1; ++bi) gemm(cfg, nullptr, a, b, bias, out, bi, m);
    });
    return;
  }
  for (int64_t bi = 0; bi < batch; ++bi) gemm(cfg, pool, a, b, bias, out, bi, m);
}

bool supports_matmul(const Node& node, const std::vector<const Shape*>& in) {
  if (!in[0] || !in[1]) return false;
  const DType t = in[0]->dtype();
  if (in[1]->dtype() != t || !gemm_for(t)) return false;
  if (in.size() > 2 && in[2] && in[2]->dtype() != t) return false;
  return true;
}

KernelCall build_matmul(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const bool fused = node.kind == OpKind::FusedMatMul;
  const std::vector<int64_t> ad = in[0]->static_dims(), bd = in[1]->static_dims();
  const std::vector<int64_t> od = out[0].static_dims();
  if (ad.empty() || bd.empty())
    fail(ErrorCategory::Shape, "node '", node.name, "' (", op_name(node.kind), "): operands must have rank >= 1");
  MatmulCfg cfg;
  cfg.type = in[0]->dtype();
  cfg.n_in = int(in.size());
  cfg.k = ad.back();
  cfg.m = ad.size() >= 2 ? ad[ad.size() - 2] : 1;
  cfg.n = bd.size() >= 2 ? bd.back() : 1;
  const std::vector<int64_t> abatch(ad.begin(), ad.end() - std::min<size_t>(ad.size(), 2));
  const std::vector<int64_t> bbatch(bd.begin(), bd.end() - std::min<size_t>(bd.size(), 2));
  const size_t out_batch_rank = od.size() - (ad.size() >= 2 ? 1 : 0) - (bd.size() >= 2 ? 1 : 0);
  const std::vector<int64_t> obatch(od.begin(), od.begin() + out_batch_rank);
  if (abatch.size() > obatch.size() || bbatch.size() > obatch.size())
    fail(ErrorCategory::Internal, "node '", node.name, "': matmul output rank does not match its operands");
  cfg.a_off = batch_offsets(obatch, abatch, cfg.m * cfg.k);
  cfg.b_off = batch_offsets(obatch, bbatch, cfg.k * cfg.n);
  cfg.batch = int64_t(cfg.a_off.size());
  cfg.m_orig = cfg.m;

  if (fused) {
    const auto& attrs = node.attr<FusedMatMulAttrs>();
    cfg.act = attrs.activation;
    cfg.alpha = float(attrs.alpha);
    if (in.size() > 2 && in[2]) {
      // Bias broadcasts to out; view out as [batch..., M, N] (M or N may be absent).
      std::vector<int64_t> bias_dims = in[2]->static_dims();
      std::vector<int64_t> full(od.size(), 1);
      std::copy(bias_dims.begin(), bias_dims.end(), full.end() - int64_t(bias_dims.size()));
      const std::vector<int64_t> st = broadcast_strides(full);
      const size_t nb = out_batch_rank;
      const bool has_m = ad.size() >= 2, has_n = bd.size() >= 2;
      cfg.bias_rs = has_m ? st[nb] : 0;
      cfg.bias_cs = has_n ? st[nb + (has_m ? 1 : 0)] : 0;
      cfg.bias_off = offsets_from_strides(obatch, std::vector<int64_t>(st.begin(), st.begin() + int64_t(nb)));
      cfg.has_bias = true;
    }
  }
  if (cfg.bias_off.empty()) cfg.bias_off.assign(size_t(cfg.batch), 0);

  // Fold the batch into M when b is shared and a's batches are consecutive.
  bool b_shared = std::all_of(cfg.b_off.begin(), cfg.b_off.end(), [](int64_t o) { return o == 0; });
  bool a_dense = true;
  for (int64_t bi = 0; bi < cfg.batch; ++bi) a_dense = a_dense && cfg.a_off[size_t(bi)] == bi * cfg.m * cfg.k;
  if (cfg.batch > 1 && b_shared && a_dense && ad.size() >= 2) {
    cfg.folded = true;
    cfg.m = cfg.batch * cfg.m;
    cfg.a_off.assign(1, 0);
    cfg.b_off.assign(1, 0);
  }

  // Active extent on output dim 0 (only meaningful with rank >= 2 outputs).
  if (od.size() >= 2) {
    cfg.lead = od[0];
    int64_t inner = 1;
    if (out_batch_rank >= 1) {
      for (size_t d = 1; d < out_batch_rank; ++d) inner *= od[d];
      cfg.lead_is_rows = cfg.folded;
      cfg.per_lead = cfg.folded ? inner * cfg.m_orig : inner;
    } else {
      cfg.lead_is_rows = true;  // out dim 0 is M itself
      cfg.per_lead = 1;
    }
  }
  const bool extent_ok = cfg.lead > 0;
  cfg.kernels = &isa_kernels(detect_isa());
  cfg.rows = &row_kernels(detect_isa());
  if (cfg.folded) cfg.batch = 1;
  return make_call(run_matmul, std::move(cfg), extent_ok);
}

// build_matmul, with a constant f32 B (one matrix for every batch) packed once where the
// product goes through sgemm's panels: M and N past the dot / GEMV kernels' sizes (those
// read B as it is), and a padded copy no more than 1/8 larger than B.
KernelCall build_matmul_info(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                             const BuildInfo& info) {
  KernelCall call = build_matmul(node, in, out);
  const auto& c = *static_cast<const MatmulCfg*>(call.cfg.get());
  if (c.type != DType::F32 || info.const_values.size() < 2 || !info.const_values[1]) return call;
  const Blob& b = *info.const_values[1];
  if (int64_t(b.size()) != c.k * c.n * 4) return call;  // B is one matrix, not a batch of them
  if (!std::all_of(c.b_off.begin(), c.b_off.end(), [](int64_t o) { return o == 0; })) return call;
  const int64_t floats = packed_b_floats(*c.kernels, c.k, c.n);
  if (c.m <= 4 || c.n <= 4 || c.k < 16 || floats * 8 > c.k * c.n * 9) return call;
  MatmulCfg with = c;
  auto packed = std::make_shared<std::vector<float>>(size_t(floats));
  pack_b_full(*c.kernels, GemmOperand{b.data(), DType::F32, c.n, 1}, c.k, c.n, packed->data());
  with.b_packed = std::move(packed);
  KernelCall out_call = make_call(run_matmul, std::move(with), call.extent_ok);
  out_call.absorbed = {1};
  return out_call;
}

}  // namespace

void register_matmul_kernels(KernelRegistry& r) {
  r.add(OpKind::MatMul, build_matmul, supports_matmul);
  r.add(OpKind::FusedMatMul, build_matmul, supports_matmul);
  r.add_build_info(OpKind::MatMul, build_matmul_info);
  r.add_build_info(OpKind::FusedMatMul, build_matmul_info);
  r.add_prefers_f32(OpKind::MatMul, any_half_input);
  r.add_prefers_f32(OpKind::FusedMatMul, any_half_input);
}

}  // namespace rlx::cpu
