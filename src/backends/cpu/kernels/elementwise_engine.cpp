// Layout (broadcast strides), program building (slot allocation) and execution of
// elementwise programs; see elementwise_engine.h.
#include "backends/cpu/kernels/elementwise_engine.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/thread_pool.h"
#include "rlx/error.h"

namespace rlx::cpu::ew {

Layout make_layout(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& in,
                   const std::string& who) {
  const int r = int(out.size());
  const size_t ni = in.size();
  std::vector<std::vector<int64_t>> full(ni, std::vector<int64_t>(size_t(r), 0));
  for (size_t i = 0; i < ni; ++i) {
    const auto& d = in[i];
    if (int(d.size()) > r)
      fail(ErrorCategory::Shape, who, ": input ", i, " has rank ", d.size(), " > output rank ", r);
    int64_t stride = 1;
    for (int a = r - 1, b = int(d.size()) - 1; a >= 0; --a, --b) {
      const int64_t size = b >= 0 ? d[size_t(b)] : 1;
      if (size != out[size_t(a)] && size != 1)
        fail(ErrorCategory::Shape, who, ": input ", i, " dim ", b, " (", size,
             ") does not broadcast to output dim ", a, " (", out[size_t(a)], ")");
      full[i][size_t(a)] = (size == 1) ? 0 : stride;
      stride *= size;
    }
  }
  Layout l;
  l.numel = 1;
  for (int64_t d : out) l.numel *= d;
  l.strides.assign(ni, {});
  for (int a = 0; a < r; ++a) {
    const int64_t size = out[size_t(a)];
    if (size == 1) continue;
    // Merge with the previous kept dim when every input is linear across both.
    bool merge = !l.dims.empty();
    for (size_t i = 0; merge && i < ni; ++i)
      merge = l.strides[i].back() == full[i][size_t(a)] * size;
    if (merge) {
      l.dims.back() *= size;
      for (size_t i = 0; i < ni; ++i) l.strides[i].back() = full[i][size_t(a)];
    } else {
      l.dims.push_back(size);
      for (size_t i = 0; i < ni; ++i) l.strides[i].push_back(full[i][size_t(a)]);
    }
  }
  if (l.dims.empty()) {  // every dim is 1: one element
    l.dims.push_back(1);
    for (size_t i = 0; i < ni; ++i) l.strides[i].push_back(1);
  }
  return l;
}

namespace {

bool resolve_all(const std::vector<InstrSpec>& specs, const std::vector<DType>& in, Isa isa,
                 std::vector<SegOp>& ops, std::string& why) {
  const int ni = int(in.size());
  ops.resize(specs.size());
  if (specs.empty()) {
    why = "empty program";
    return false;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const InstrSpec& s = specs[i];
    std::vector<DType> args;
    for (int32_t a : s.args) {
      if (a < 0 || a >= ni + int(i)) {
        why = "instruction " + std::to_string(i) + " (" + std::string(op_name(s.kind)) +
              ") uses operand " + std::to_string(a) + ", not defined before it";
        return false;
      }
      args.push_back(a < ni ? in[size_t(a)] : specs[size_t(a - ni)].type);
    }
    if (!resolve_op(s.kind, args, s.type, s.alpha, s.beta, isa, ops[i], why)) {
      if (specs.size() > 1) why = "instruction " + std::to_string(i) + ": " + why;
      return false;
    }
  }
  return true;
}

}  // namespace

bool program_supported(const std::vector<InstrSpec>& specs, const std::vector<DType>& in,
                       std::string& why) {
  std::vector<SegOp> ops;
  return resolve_all(specs, in, Isa::Scalar, ops, why);
}

namespace {

// Fills cfg.chain where the program is one (ProgramCfg::chain says when): hardswish as
// Add, Clip, Mul, Div, a batch norm's Mul and Add, a sigmoid gate. As a pass over a block per
// instruction each step cost about two cycles a vector (loads and stores of the block); in
// registers, the hardswish of a 32x160x160 map 0.168 -> 0.083 ms on one thread (a lone Add:
// 0.054), PP-OCRv4 det 320 7.67 -> 7.03 ms, rec 8.19 -> 7.45 (alternated).
void find_chain(ProgramCfg& cfg, const std::vector<int32_t>& last_use, DType out, Isa isa) {
  const int ni = cfg.num_inputs;
  if (isa == Isa::Scalar || out != DType::F32 || ni > kMaxChainInputs || cfg.instrs.empty()) return;
  const F32VecTable& t = isa == Isa::Avx512 ? f32_vec_table_avx512() : f32_vec_table_avx2();
  if (!t.chain) return;
  std::vector<ChainStep> steps;
  int seed = -1;
  for (size_t i = 0; i < cfg.instrs.size(); ++i) {
    const Instr& ins = cfg.instrs[i];
    const SegOp& op = ins.op;
    if (ins.scalar || op.finish || op.out != DType::F32) return;
    for (int a = 0; a < op.arity; ++a)
      if (op.stage[a]) return;
    const int32_t prev = i == 0 ? -1 : ni + int32_t(i) - 1;
    if (i > 0 && last_use[i - 1] != int32_t(i)) return;  // the previous result feeds this step only
    auto vector_input = [&](int32_t a) { return a >= 0 && a < ni && !cfg.in_scalar[size_t(a)]; };
    ChainStep st;
    st.kind = op.kind;
    st.params = op.params;
    if (op.form == Form::Unary) {
      if (op.unary != t.unary[size_t(op.kind)]) return;  // the scalar span, or none: not a vector op
      const int32_t a = ins.args[0];
      if (i == 0 ? !vector_input(a) : a != prev) return;
      if (i == 0) seed = a;
    } else if (op.form == Form::Binary) {
      if (op.binary.vv != t.binary[size_t(op.kind)].vv) return;
      const int32_t a = ins.args[0], b = ins.args[1];
      st.binary = true;
      if (i == 0) {
        if (vector_input(a) && b < ni) seed = a, st.operand = b;
        else if (vector_input(b) && a < ni) seed = b, st.operand = a, st.operand_first = true;
        else return;
      } else if (a == prev && b >= 0 && b < ni) {
        st.operand = b;
      } else if (b == prev && a >= 0 && a < ni) {
        st.operand = a;
        st.operand_first = true;
      } else {
        return;
      }
    } else {
      return;
    }
    steps.push_back(st);
  }
  cfg.chain = std::move(steps);
  cfg.chain_seed = seed;
  cfg.chain_fn = t.chain;
}

}  // namespace

ProgramCfg build_program(const std::vector<InstrSpec>& specs,
                         const std::vector<const Shape*>& in, const Shape& out,
                         const std::string& who, Isa isa) {
  ProgramCfg cfg;
  const int ni = int(in.size());
  std::vector<DType> dtypes;
  std::vector<std::vector<int64_t>> in_dims;
  for (int i = 0; i < ni; ++i) {
    if (!in[size_t(i)]) fail(ErrorCategory::InvalidArgument, who, ": input ", i, " is absent");
    dtypes.push_back(in[size_t(i)]->dtype());
    in_dims.push_back(in[size_t(i)]->static_dims());
    cfg.in_esize.push_back(dtype_size(in[size_t(i)]->dtype()));
  }
  std::vector<SegOp> ops;
  std::string why;
  if (!resolve_all(specs, dtypes, isa, ops, why)) fail(ErrorCategory::Unsupported, who, ": ", why);
  if (specs.back().type != out.dtype())
    fail(ErrorCategory::Internal, who, ": program result ", dtype_name(specs.back().type),
         " differs from the output type ", dtype_name(out.dtype()));

  if (ni + int(specs.size()) > kMaxValues)
    fail(ErrorCategory::Unsupported, who, ": ", ni, " inputs + ", specs.size(),
         " instructions exceed the CPU limit of ", kMaxValues, " values");
  const std::vector<int64_t> out_dims = out.static_dims();
  cfg.num_inputs = ni;
  cfg.layout = make_layout(out_dims, in_dims, who);
  if (int(cfg.layout.dims.size()) > kMaxRank)
    fail(ErrorCategory::Unsupported, who, ": broadcast pattern needs rank ", cfg.layout.dims.size(),
         " > ", kMaxRank);
  cfg.out_esize = dtype_size(out.dtype());
  for (int i = 0; i < ni; ++i) cfg.in_scalar.push_back(cfg.layout.strides[size_t(i)].back() == 0);
  if (!out_dims.empty() && out_dims[0] > 0) {
    cfg.lead = out_dims[0];
    cfg.lead_elems = cfg.layout.numel / out_dims[0];
  }

  // Slots: a result lives from its instruction to its last use; freed slots are reused,
  // but never by the instruction that reads them (converts are not in-place safe).
  const size_t n = specs.size();
  std::vector<int32_t> last_use(n, -1);
  for (size_t i = 0; i < n; ++i)
    for (int32_t a : specs[i].args)
      if (a >= ni) last_use[size_t(a - ni)] = int32_t(i);
  std::vector<int32_t> free_slots;
  int cost = 0;
  for (size_t i = 0; i < n; ++i) {
    Instr ins;
    ins.op = ops[i];
    cost += ops[i].cost;
    bool scalar = true;
    for (size_t k = 0; k < specs[i].args.size(); ++k) {
      const int32_t a = specs[i].args[k];
      ins.args[k] = a;
      scalar = scalar && (a < ni ? bool(cfg.in_scalar[size_t(a)]) : cfg.instrs[size_t(a - ni)].scalar);
    }
    ins.scalar = scalar;
    const bool final_direct = i + 1 == n && !scalar;
    if (!final_direct) {
      if (free_slots.empty()) {
        ins.slot = cfg.num_slots++;
      } else {
        ins.slot = free_slots.back();
        free_slots.pop_back();
      }
    }
    for (int32_t a : specs[i].args)
      if (a >= ni && last_use[size_t(a - ni)] == int32_t(i)) {
        const int32_t s = cfg.instrs[size_t(a - ni)].slot;
        if (std::find(free_slots.begin(), free_slots.end(), s) == free_slots.end())
          free_slots.push_back(s);
      }
    cfg.instrs.push_back(ins);
  }
  // About 16K cheap element-ops per chunk; a multiple of kBlock keeps blocks whole.
  cfg.grain = std::max<int64_t>(kBlock, (16384 / std::max(cost, 1)) / kBlock * kBlock);
  find_chain(cfg, last_use, out.dtype(), isa);
  return cfg;
}

namespace {

struct Scratch {
  alignas(64) unsigned char stage[3][kBlock * kMaxElemBytes];
  alignas(64) unsigned char res[kBlock * kMaxElemBytes];
  std::vector<unsigned char> slots;
};

inline void apply(const SegOp& op, const void* const* args, const bool* sc, void* out, int64_t m,
                  Scratch& s) {
  const void* a[3] = {args[0], args[1], args[2]};
  for (int i = 0; i < op.arity; ++i)
    if (op.stage[i]) {
      op.stage[i](args[i], s.stage[i], sc[i] ? 1 : m);
      a[i] = s.stage[i];
    }
  void* r = op.finish ? static_cast<void*>(s.res) : out;
  switch (op.form) {
    case Form::Unary: op.unary(a[0], r, m, op.params); break;
    case Form::Convert: op.convert(a[0], r, m); break;
    case Form::Binary:
      if (sc[0] == sc[1]) op.binary.vv(a[0], a[1], r, m, op.params);  // both scalar: m == 1
      else if (sc[1]) op.binary.vs(a[0], a[1], r, m, op.params);
      else op.binary.sv(a[0], a[1], r, m, op.params);
      break;
    case Form::Where:
      op.where(a[0], a[1], a[2], r, m, unsigned(sc[0]) | unsigned(sc[1]) << 1 | unsigned(sc[2]) << 2);
      break;
  }
  if (op.finish) op.finish(s.res, out, m);
}

void run_range(const ProgramCfg& c, void* const* bufs, int64_t begin, int64_t end) {
  thread_local Scratch scratch;
  Scratch& s = scratch;
  const size_t slot_bytes = size_t(kBlock) * kMaxElemBytes;
  if (s.slots.size() < size_t(c.num_slots) * slot_bytes) s.slots.resize(size_t(c.num_slots) * slot_bytes);

  const Layout& L = c.layout;
  const int r = int(L.dims.size());
  const int ni = c.num_inputs;
  const int64_t inner = L.dims[size_t(r - 1)];
  unsigned char* out = static_cast<unsigned char*>(bufs[ni]);
  int64_t idx[kMaxRank];  // outer multi-index
  int64_t row = begin / inner, j = begin % inner;
  for (int d = r - 2; d >= 0; --d) {
    idx[d] = row % L.dims[size_t(d)];
    row /= L.dims[size_t(d)];
  }
  const unsigned char* base[kMaxValues];
  const void* vals_ptr[kMaxValues];
  bool vals_scalar[kMaxValues];
  for (int i = 0; i < ni; ++i) vals_scalar[i] = c.in_scalar[size_t(i)];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(inner - j, end - pos);
    for (int i = 0; i < ni; ++i) {
      int64_t off = 0;
      const auto& st = L.strides[size_t(i)];
      for (int d = 0; d < r - 1; ++d) off += idx[d] * st[size_t(d)];
      off += j * st[size_t(r - 1)];
      base[i] = static_cast<const unsigned char*>(bufs[i]) + off * int64_t(c.in_esize[size_t(i)]);
    }
    if (c.chain_fn) {
      c.chain_fn(c.chain.data(), int(c.chain.size()), reinterpret_cast<const void* const*>(base), vals_scalar,
                 c.chain_seed, reinterpret_cast<float*>(out + pos * int64_t(c.out_esize)), len);
    } else {
      for (int64_t b = 0; b < len; b += kBlock) {
        const int64_t m = std::min(kBlock, len - b);
        for (int i = 0; i < ni; ++i)
          vals_ptr[i] = vals_scalar[i] ? base[i] : base[i] + b * int64_t(c.in_esize[size_t(i)]);
        unsigned char* out_seg = out + (pos + b) * int64_t(c.out_esize);
        for (size_t k = 0; k < c.instrs.size(); ++k) {
          const Instr& ins = c.instrs[k];
          const void* args[3] = {nullptr, nullptr, nullptr};
          bool sc[3] = {false, false, false};
          for (int a = 0; a < ins.op.arity; ++a) {
            args[a] = vals_ptr[ins.args[a]];
            sc[a] = vals_scalar[ins.args[a]];
          }
          void* dst = ins.slot < 0 ? static_cast<void*>(out_seg) : s.slots.data() + size_t(ins.slot) * slot_bytes;
          apply(ins.op, args, sc, dst, ins.scalar ? 1 : m, s);
          vals_ptr[ni + int(k)] = dst;
          vals_scalar[ni + int(k)] = ins.scalar;
        }
        const Instr& last = c.instrs.back();
        if (last.slot >= 0) {  // result held in a slot: a broadcast scalar or not yet in place
          const unsigned char* src = s.slots.data() + size_t(last.slot) * slot_bytes;
          const size_t e = c.out_esize;
          if (last.scalar)
            for (int64_t q = 0; q < m; ++q) std::memcpy(out_seg + q * int64_t(e), src, e);
          else
            std::memcpy(out_seg, src, size_t(m) * e);
        }
      }
    }
    pos += len;
    j += len;
    if (j == inner) {
      j = 0;
      for (int d = r - 2; d >= 0; --d) {
        if (++idx[d] < L.dims[size_t(d)]) break;
        idx[d] = 0;
      }
    }
  }
}

}  // namespace

void run_program(const RunCtx& ctx, const void* cfgp, void* const* bufs) {
  const ProgramCfg& c = *static_cast<const ProgramCfg*>(cfgp);
  int64_t n = c.layout.numel;
  if (c.lead > 0) n = ctx.rows(c.lead) * c.lead_elems;
  if (n <= 0) return;
  if (ctx.pool && n > c.grain) {
    ctx.pool->parallel_for(n, c.grain, [&](int64_t b, int64_t e) { run_range(c, bufs, b, e); });
  } else {
    run_range(c, bufs, 0, n);
  }
}

}  // namespace rlx::cpu::ew
