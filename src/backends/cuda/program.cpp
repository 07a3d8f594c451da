#include "backends/cuda/program.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "backends/cuda/lower_util.h"
#include "ir/op_table.h"
#include "opt/plan_refs.h"

namespace rlx::cuda {

namespace {

bool same_place(const Ref& a, const Ref& b) {
  return a.segment == b.segment && a.param == b.param && a.offset == b.offset;
}

// What step fusion (lower_pair) needs to know about the value a node's single result is:
// which input of the next step reads it, and whether anything else does. Views the planner
// placed at the same bytes (alias-only nodes, no step) are seen through.
struct Readers {
  const Graph& g;
  const std::vector<std::vector<Ref>>& values;
  const std::vector<char>& alias;  // [node]: an alias-only view, no step

  // u seen through alias-only views: each view's input in turn, until `stop` or a value
  // that a step computes.
  Value through_views(Value u, Value stop) const {
    while (u.valid() && !(u == stop) && alias[size_t(u.node)] && !g.node(u.node).inputs.empty())
      u = g.node(u.node).inputs[0];
    return u;
  }
  // The index of `reader`'s input that reads `v` (itself, or a view of it at the same
  // bytes); -1 when none, -2 when more than one does.
  int fed(Value v, int32_t reader) const {
    int found = -1;
    const Node& n = g.node(reader);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Value in = n.inputs[k];
      const Ref* at = in.valid() ? &values[size_t(in.node)][size_t(in.out)] : nullptr;
      const Value u = through_views(in, v);
      if (!(u == v) || !at || !same_place(*at, values[size_t(v.node)][size_t(v.out)]) ||
          g.type(in).bytes() != g.type(v).bytes())
        continue;
      if (found != -1) return -2;
      found = int(k);
    }
    return found;
  }
  // True when `reader` is the only node reading `v` (views seen through) and no graph output
  // is `v` or a view of it.
  bool sole(Value v, int32_t reader) const { return only_read_by(v, reader, reader); }
  // The same with two readers allowed (r1 may equal r0).
  bool only_read_by(Value v, int32_t r0, int32_t r1) const {
    for (const GraphOutput& o : g.outputs())
      if (o.value == v) return false;
    for (size_t m = 0; m < g.nodes().size(); ++m) {
      const Node& n = g.nodes()[m];
      if (std::find(n.inputs.begin(), n.inputs.end(), v) == n.inputs.end() || int32_t(m) == r0 || int32_t(m) == r1)
        continue;
      if (!alias[m]) return false;
      for (size_t o = 0; o < n.outputs.size(); ++o)
        if (!only_read_by(Value{int32_t(m), int32_t(o)}, r0, r1)) return false;
    }
    return true;
  }
};

// Kinds whose launches are rlx's own kernels only (no cuBLAS / cuDNN), each waiting for its
// predecessor before it lets a successor start (device_util.cuh), or plain launches: a
// decode step's kinds. Other kinds' steps leave what came before them unsettled.
bool own_kernels(OpKind k) {
  switch (k) {
    case OpKind::QMatMul:
    case OpKind::QMatMulId:
    case OpKind::RmsNorm:
    case OpKind::Rotary:
    case OpKind::Cast:
    case OpKind::CacheWrite:
    case OpKind::KvAttention:
    case OpKind::Add:
    case OpKind::FusedElementwise:
    case OpKind::ArgMax:
    case OpKind::Gather:
      return true;
    default:
      return false;
  }
}

bool fusion_on() {
  const char* v = std::getenv("RLX_CUDA_FUSE");
  return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace

std::vector<uint64_t> settled_refs(const std::vector<StepBytes>& steps) {
  std::vector<uint64_t> out(steps.size(), 0);
  std::vector<StepBytes::Range> open;  // written by launches that may still run when the next step's kernels start
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepBytes& st = steps[s];
    for (size_t i = 0; s > 0 && i < st.refs.size() && i < 64; ++i) {
      if (std::none_of(open.begin(), open.end(), [&](const StepBytes::Range& w) { return overlaps(st.refs[i], w); }))
        out[s] |= uint64_t(1) << i;
    }
    if (st.waits) open.clear();
    open.insert(open.end(), st.writes.begin(), st.writes.end());
  }
  return out;
}

std::vector<std::pair<int32_t, int32_t>> joint_steps(const Graph& g) {
  std::vector<std::pair<int32_t, int32_t>> runs;
  if (!fusion_on()) return runs;
  auto producer = [&](Value v, OpKind k) { return v.valid() && g.node(v.node).kind == k ? v.node : -1; };
  for (size_t a = 0; a < g.nodes().size(); ++a) {
    const Node& n = g.nodes()[a];
    if (n.kind != OpKind::KvAttention || n.inputs.size() != 6 || !n.inputs[1].valid() ||
        g.type(n.inputs[1]).dtype() != DType::F16)
      continue;
    const int32_t rq = producer(n.inputs[0], OpKind::Rotary), wk = producer(n.inputs[1], OpKind::CacheWrite),
                  wv = producer(n.inputs[2], OpKind::CacheWrite), ck = producer(n.inputs[3], OpKind::Cast),
                  cv = producer(n.inputs[4], OpKind::Cast);
    if (rq < 0 || wk < 0 || wv < 0 || ck < 0 || cv < 0 || g.node(ck).inputs.empty()) continue;
    const int32_t rk = producer(g.node(ck).inputs[0], OpKind::Rotary);
    if (rk >= 0) runs.emplace_back(std::min({rq, rk, ck, wk, cv, wv}), int32_t(a));
  }
  return runs;
}

std::shared_ptr<Program> compile_program(opt::Plan plan, const LowerOptions& opts) {
  auto prog = std::make_shared<Program>();
  prog->plan = std::move(plan);
  const Graph& g = prog->plan.graph;
  opt::PlanBinding bound = opt::bind_plan(prog->plan);
  prog->params = std::move(bound.params);
  prog->values = std::move(bound.values);
  const auto& roots = bound.roots;

  // The nodes that get a step, in schedule order; the rest are constants, leaves, empty
  // results and views placed inside their input.
  std::vector<size_t> stepping;
  std::vector<char> alias(g.nodes().size(), 0);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.kind == OpKind::Constant) {
      const Ref& where = prog->values[i][0];
      if (!where.absent()) prog->constants.push_back({where, n.attr<ConstantAttrs>().value});
      continue;
    }
    if (ir::has_trait(n.kind, ir::kLeaf)) continue;
    bool any_bytes = false;
    for (const Shape& s : n.outputs) any_bytes = any_bytes || s.bytes() > 0;
    if (!any_bytes) continue;
    if (opt::alias_only(prog->plan, int32_t(i), roots)) {
      alias[i] = 1;
      continue;
    }
    stepping.push_back(i);
  }

  auto side = [&](size_t i) {
    PairSide s;
    s.node = &g.nodes()[i];
    for (const Value& v : s.node->inputs) s.in.push_back(v.valid() ? &g.type(v) : nullptr);
    s.out = &s.node->outputs;
    return s;
  };
  const Readers readers{g, prog->values, alias};
  // One launch runs both nodes at once, so the second's results must not land on bytes the
  // first still reads (the planner may give them an input whose last reader is the first),
  // nor the two write over each other; for an independent pair (fed -1) the first's results
  // must not be the second's inputs either.
  // The arena bytes of value v (none outside the arena: weights and handles are never a
  // step's result), appended to r.
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  auto range_of = [&](Value v, Ranges& r) {
    const Ref& at = prog->values[size_t(v.node)][size_t(v.out)];
    if (!at.absent() && at.segment == opt::Segment::Arena && g.type(v).bytes())
      r.emplace_back(at.offset, at.offset + int64_t(g.type(v).bytes()));
  };
  auto bytes_of = [&](size_t node, bool outputs) {
    Ranges r;
    const Node& n = g.nodes()[node];
    if (outputs) {
      for (size_t o = 0; o < n.outputs.size(); ++o) range_of(Value{int32_t(node), int32_t(o)}, r);
    } else {
      for (const Value& v : n.inputs)
        if (v.valid()) range_of(v, r);
    }
    return r;
  };
  auto disjoint = [](const Ranges& a, const Ranges& b) {
    for (const auto& x : a)
      for (const auto& y : b)
        if (overlaps(x, y)) return false;
    return true;
  };
  // (When nothing else reads the first's result, the fused kernel leaves it unwritten.)
  auto apart = [&](size_t i, size_t j, int fed, bool sole) {
    const auto out_j = bytes_of(j, true), out_i = bytes_of(i, true);
    if (!disjoint(out_j, bytes_of(i, false))) return false;
    if (fed >= 0 && sole) return true;
    return disjoint(out_j, out_i) && (fed >= 0 || disjoint(out_i, bytes_of(j, false)));
  };
  // Six steps of a decode step (kv_match): rotary, rotary, cast -> cache_write, cast ->
  // cache_write, one rotary feeding one cast (K's chain), inside the window no other link.
  struct KvMatch {
    size_t n[6];
    Value y[6];
    int rk = -1, ck = -1, kc = 0, vc = 0;  // K's rotary and pair; the K and V casts' places
  };
  auto kv_match = [&](size_t k) -> std::optional<KvMatch> {
    if (k + 5 >= stepping.size()) return std::nullopt;
    static constexpr OpKind kinds[6] = {OpKind::Rotary, OpKind::Rotary, OpKind::Cast, OpKind::CacheWrite, OpKind::Cast,
                                        OpKind::CacheWrite};
    KvMatch m;
    for (int t = 0; t < 6; ++t) {
      m.n[t] = stepping[k + size_t(t)];
      if (g.nodes()[m.n[t]].kind != kinds[t] || g.nodes()[m.n[t]].outputs.size() != 1) return std::nullopt;
      m.y[t] = Value{int32_t(m.n[t]), 0};
    }
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c)
        if (readers.fed(m.y[r], int32_t(m.n[2 + 2 * c])) == 0) m.rk = r, m.ck = c;
    if (m.rk < 0) return std::nullopt;
    // Inside the window only the three links read a result of it: the K rotary's by its
    // cast (as input 0), each cast's by its cache write (as the rows, input 1).
    m.kc = 2 + 2 * m.ck, m.vc = 2 + 2 * (1 - m.ck);
    for (int a = 0; a < 6; ++a)
      for (int b = a + 1; b < 6; ++b) {
        const int want = (a == m.rk && b == m.kc) ? 0 : ((a == 2 && b == 3) || (a == 4 && b == 5)) ? 1 : -1;
        if (readers.fed(m.y[a], int32_t(m.n[b])) != want) return std::nullopt;
      }
    return m;
  };
  // What such a launch writes (`writes`: results with another reader, the caches, and any
  // more the caller adds) must miss everything the six read (the rotaries' inputs, V's rows,
  // the caches and positions) and itself; a cache written in place is its own input.
  auto kv_apart = [&](const KvMatch& m, Ranges writes) {
    for (int t : {3, 5}) range_of(m.y[t], writes);
    Ranges reads;
    for (int t : {0, 1})
      for (const Value& v : g.nodes()[m.n[t]].inputs) range_of(v, reads);
    range_of(g.nodes()[m.n[m.vc]].inputs[0], reads);
    for (int t : {3, 5}) range_of(g.nodes()[m.n[t]].inputs[2], reads);
    for (size_t a = 0; a < writes.size(); ++a)
      for (size_t b = a + 1; b < writes.size(); ++b)
        if (!disjoint({writes[a]}, {writes[b]})) return false;
    if (!disjoint(writes, reads)) return false;
    // A cache is read only by its own write (the copy when its output is elsewhere): it may
    // share bytes with that output alone (in place), no other write.
    for (int t : {3, 5}) {
      Ranges cache, own;
      range_of(g.nodes()[m.n[t]].inputs[0], cache);
      range_of(m.y[t], own);
      for (const auto& w : writes)
        if (!disjoint(cache, {w}) && !(own.size() == 1 && w == own[0] && cache[0] == w)) return false;
    }
    return true;
  };
  // The six as one launch (lower_kv_store).
  auto kv_store_at = [&](size_t k) -> std::optional<Launch> {
    const std::optional<KvMatch> m = kv_match(k);
    if (!m) return std::nullopt;
    const int rk = m->rk, kc = m->kc, vc = m->vc;
    const bool yk_sole = readers.sole(m->y[rk], int32_t(m->n[kc])),
               k_sole = readers.sole(m->y[kc], int32_t(m->n[kc + 1])),
               v_sole = readers.sole(m->y[vc], int32_t(m->n[vc + 1]));
    Ranges writes;
    for (int t : {0, 1})
      if (!(t == rk && yk_sole)) range_of(m->y[t], writes);
    if (!k_sole) range_of(m->y[kc], writes);
    if (!v_sole) range_of(m->y[vc], writes);
    if (!kv_apart(*m, writes)) return std::nullopt;
    PairSide sides[6];
    for (int t = 0; t < 6; ++t) sides[t] = side(m->n[t]);
    return lower_kv_store(sides, rk, m->ck, yk_sole, k_sole, v_sole);
  };
  // The six and the kv_attention after them as one launch (lower_kv_attention): the
  // attention reads Q's rotary (its only reader), the caches, the casts' results (read by
  // their cache writes and it alone) and the caches' position. Its result is written while
  // the launch still reads the six's inputs, and its fallback (two launches) writes Q's
  // rotary and the casts' results too: all of that must miss what the six read.
  auto kv_attention_at = [&](size_t k) -> std::optional<Launch> {
    if (k + 6 >= stepping.size()) return std::nullopt;
    const std::optional<KvMatch> m = kv_match(k);
    const size_t a = stepping[k + 6];
    const Node& at = g.nodes()[a];
    if (!m || at.kind != OpKind::KvAttention || at.outputs.size() != 1 || at.inputs.size() != 6) return std::nullopt;
    const int rk = m->rk, kc = m->kc, vc = m->vc, rq = 1 - rk;
    const int32_t ai = int32_t(a);
    const Value past = at.inputs[5];
    if (readers.fed(m->y[rq], ai) != 0 || readers.fed(m->y[kc + 1], ai) != 1 || readers.fed(m->y[vc + 1], ai) != 2 ||
        readers.fed(m->y[kc], ai) != 3 || readers.fed(m->y[vc], ai) != 4 || !past.valid() ||
        !(g.nodes()[m->n[kc + 1]].inputs[2] == past) || !(g.nodes()[m->n[vc + 1]].inputs[2] == past) ||
        !readers.sole(m->y[rq], ai) || !readers.sole(m->y[rk], int32_t(m->n[kc])) ||
        !readers.only_read_by(m->y[kc], int32_t(m->n[kc + 1]), ai) ||
        !readers.only_read_by(m->y[vc], int32_t(m->n[vc + 1]), ai))
      return std::nullopt;
    Ranges writes;
    for (const Value v : {m->y[rq], m->y[kc], m->y[vc], Value{ai, 0}}) range_of(v, writes);
    if (!kv_apart(*m, writes)) return std::nullopt;
    PairSide sides[7];
    for (int t = 0; t < 6; ++t) sides[t] = side(m->n[t]);
    sides[6] = side(a);
    return lower_kv_attention(sides, rk, m->ck);
  };
  // rms_norm -> qmatmul -> the SwiGLU program over the product's two halves (through views at
  // its bytes), as one launch (lower_norm_swiglu): the norm's and the product's results
  // are read by nothing else (left unwritten), and the SwiGLU's result, written while
  // other blocks still read the norm's inputs, must miss them.
  auto norm_swiglu_at = [&](size_t k) -> std::optional<Launch> {
    if (k + 2 >= stepping.size()) return std::nullopt;
    const size_t i = stepping[k], j = stepping[k + 1], l = stepping[k + 2];
    const Node& c = g.nodes()[l];
    const auto ops = swiglu_operands(c);
    if (g.nodes()[i].kind != OpKind::RmsNorm || g.nodes()[j].kind != OpKind::QMatMul || !ops ||
        g.nodes()[i].outputs.size() != 1 || g.nodes()[j].outputs.size() != 1 || c.outputs.size() != 1)
      return std::nullopt;
    const Value normed{int32_t(i), 0}, product{int32_t(j), 0};
    if (readers.fed(normed, int32_t(j)) != 0 || !readers.sole(normed, int32_t(j)) || !readers.sole(product, int32_t(l)))
      return std::nullopt;
    const Ref& at = prog->values[j][0];
    const int64_t half = int64_t(g.type(product).bytes()) / 2;
    int64_t offs[2] = {-1, -1};
    for (int t = 0; t < 2; ++t) {
      const Value in = c.inputs[size_t(t)];
      if (!in.valid() || !(readers.through_views(in, product) == product)) return std::nullopt;
      const Ref& r = prog->values[size_t(in.node)][size_t(in.out)];
      if (r.segment != at.segment || r.param != at.param || int64_t(g.type(in).bytes()) != half) return std::nullopt;
      offs[t] = r.offset - at.offset;
      if (offs[t] != 0 && offs[t] != half) return std::nullopt;
    }
    if (offs[0] == offs[1]) return std::nullopt;
    Ranges writes, reads;
    range_of(Value{int32_t(l), 0}, writes);
    for (const Value& v : g.nodes()[i].inputs)
      if (v.valid()) range_of(v, reads);
    if (!disjoint(writes, reads)) return std::nullopt;
    const int64_t rows = g.type(product).numel();
    return lower_norm_swiglu(side(i), side(j), side(l), offs[ops->first] == 0 ? 0 : rows / 2);
  };
  // Appends st over the nodes stepping[k .. k + count): its refs (bufs: each node's inputs,
  // then its results) and, for settled_refs, what they and the step's writes span in the
  // arena; the step waits when every node is of own_kernels' kinds and has no empty input
  // (an empty input may make its launch enqueue nothing).
  std::vector<StepBytes> step_bytes;
  auto push_step = [&](Step st, size_t k, size_t count) {
    StepBytes b;
    b.waits = true;
    auto add = [&](Value v) {
      prog->refs.push_back(v.valid() ? prog->values[size_t(v.node)][size_t(v.out)] : Ref{});
      Ranges r;
      if (v.valid()) range_of(v, r);
      b.refs.push_back(r.empty() ? StepBytes::Range{0, 0} : r[0]);
    };
    st.first = uint32_t(prog->refs.size());
    for (size_t t = 0; t < count; ++t) {
      const size_t i = stepping[k + t];
      const Node& n = g.nodes()[i];
      b.waits = b.waits && own_kernels(n.kind);
      for (const Value& v : n.inputs) {
        add(v);
        if (v.valid() && g.type(v).bytes() == 0) b.waits = false;
      }
      for (size_t o = 0; o < n.outputs.size(); ++o) add(Value{int32_t(i), int32_t(o)});
      const Ranges w = bytes_of(i, true);
      b.writes.insert(b.writes.end(), w.begin(), w.end());
    }
    st.count = uint32_t(prog->refs.size()) - st.first;
    prog->steps.push_back(std::move(st));
    step_bytes.push_back(std::move(b));
  };
  const bool fuse = fusion_on();
  // A group's launch as one step over stepping[k .. k + count); a device error names the
  // group's node `named` (an index into the group).
  auto push_group = [&](Launch l, size_t k, size_t count, size_t named, const char* label) {
    Step st;
    st.fn = std::move(l);
    st.node = int32_t(stepping[k + named]);
    st.fused = int32_t(stepping[k]);
    st.label = label;
    push_step(std::move(st), k, count);
  };
  for (size_t k = 0; k < stepping.size(); ++k) {
    const size_t i = stepping[k];
    const PairSide here = side(i);
    if (fuse) {
      if (auto l = kv_attention_at(k)) {  // errors name the first cache write (the range check), as the six's
        push_group(std::move(*l), k, 7, 3, "rotary+kv_store+kv_attention");
        k += 6;
        continue;
      }
      if (auto l = kv_store_at(k)) {  // errors name the first cache write (the range check)
        push_group(std::move(*l), k, 6, 3, "rotary+kv_store");
        k += 5;
        continue;
      }
      if (auto l = norm_swiglu_at(k)) {  // errors name the product
        push_group(std::move(*l), k, 3, 1, "rms_norm+qmatmul+silu*mul");
        k += 2;
        continue;
      }
    }
    if (fuse && k + 1 < stepping.size() && here.node->outputs.size() == 1) {
      const size_t j = stepping[k + 1];
      const Value v{int32_t(i), 0};
      const int fed = readers.fed(v, int32_t(j));
      const bool sole = fed >= 0 && readers.sole(v, int32_t(j));
      if (fed != -2 && apart(i, j, fed, sole)) {
        if (auto l = lower_pair(here, side(j), fed, sole)) {  // errors name the second (a cache write's range check)
          push_group(std::move(*l), k, 2, 1, nullptr);
          ++k;
          continue;
        }
      }
    }
    Step st;
    LowerOptions lo = opts;
    lo.uses_dnn = &prog->uses_dnn;
    st.fn = lower(*here.node, here.in, here.node->outputs, lo);
    prog->scratch_bytes = std::max(prog->scratch_bytes, scratch_need(*here.node, here.in, here.node->outputs, opts));
    st.node = int32_t(i);
    push_step(std::move(st), k, 1);
  }
  const std::vector<uint64_t> settled = settled_refs(step_bytes);
  for (size_t s = 0; s < prog->steps.size(); ++s) prog->steps[s].settled = settled[s];
  return prog;
}

}  // namespace rlx::cuda
