#include "backends/cpu/executable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <string_view>
#include <utility>

#include "backends/cpu/huge_pages.h"
#include "ir/op_table.h"
#include "opt/memory_plan.h"
#include "opt/plan_refs.h"

namespace rlx::cpu {

namespace {

std::string node_label(const Node& n) { return detail::concat("node '", n.name, "' (", op_name(n.kind), ")"); }

// Who reads each constant's bytes at run time: the thunks whose inputs overlap its arena
// range (directly or through a view) and the graph outputs placed there. When every such
// read belongs to a kernel that absorbed the constant (KernelCall::absorbed), the constant
// is released as soon as the last one is built: its blob leaves the program's graph and its
// slot, so the bytes are not held next to the kernels' derived copies (prepacked weights),
// and its arena pages are never mapped in.
class ConstantReaders {
 public:
  ConstantReaders(Program& prog, const std::set<std::pair<int32_t, int32_t>>& roots) : prog_(prog) {
    const Graph& g = prog.plan.graph;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      if (n.kind != OpKind::Constant || prog.values[i].empty()) continue;
      const BufRef& r = prog.values[i][0];
      if (r.absent() || r.segment != opt::Segment::Arena || n.outputs[0].bytes() == 0) continue;
      ranges_.push_back({r.offset, r.offset + int64_t(n.outputs[0].bytes()), int32_t(i)});
    }
    if (ranges_.empty()) return;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      if (ir::has_trait(n.kind, ir::kLeaf) || n.kind == OpKind::Constant) continue;
      if (opt::alias_only(prog.plan, int32_t(i), roots)) continue;  // a view reads nothing itself
      for (const Value& v : n.inputs)
        if (v.valid())
          if (Range* c = find(v)) ++c->pending;
    }
    for (const GraphOutput& o : g.outputs())
      if (Range* c = find(o.value)) c->pinned = true;
  }
  // One read of v's constant is absorbed; releases the constant when it was the last.
  void absorbed(const Value& v) {
    Range* c = find(v);
    if (!c || c->pending <= 0 || --c->pending > 0 || c->pinned) return;
    Graph& g = prog_.plan.graph;
    g.mutable_node(c->node).attr<ConstantAttrs>().value = Blob();
    for (Program::ConstantSlot& s : prog_.constants)
      if (s.where.offset == c->begin) s.bytes = Blob();
    released_ += c->end - c->begin;
  }
  int64_t released_bytes() const { return released_; }

 private:
  struct Range {
    int64_t begin, end;
    int32_t node;
    int pending = 0;
    bool pinned = false;
  };
  Range* find(const Value& v) {
    const BufRef& r = prog_.values[size_t(v.node)][size_t(v.out)];
    if (r.absent() || r.segment != opt::Segment::Arena) return nullptr;
    const int64_t b = r.offset, e = r.offset + std::max<int64_t>(int64_t(prog_.plan.graph.type(v).bytes()), 1);
    for (Range& c : ranges_)
      if (b < c.end && c.begin < e) return &c;
    return nullptr;
  }
  Program& prog_;
  std::vector<Range> ranges_;
  int64_t released_ = 0;
};

}  // namespace

std::shared_ptr<Program> compile(opt::Plan plan) {
  auto prog = std::make_shared<Program>();
  prog->plan = std::move(plan);
  const Graph& g = prog->plan.graph;
  opt::PlanBinding bound = opt::bind_plan(prog->plan);
  prog->params = std::move(bound.params);
  prog->values = std::move(bound.values);
  const auto& roots = bound.roots;

  const KernelRegistry& reg = kernel_registry();
  ConstantReaders readers(*prog, roots);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.kind == OpKind::Constant) {
      const Blob& value = n.attr<ConstantAttrs>().value;
      if (value.size() != n.outputs[0].bytes())
        fail(ErrorCategory::Internal, "constant '", n.name, "' holds ", value.size(), " bytes, type ",
             n.outputs[0].str(), " needs ", n.outputs[0].bytes());
      const BufRef& where = prog->values[i][0];
      if (where.absent()) continue;
      if (where.segment != opt::Segment::Arena)
        fail(ErrorCategory::Internal, "memory plan puts constant '", n.name, "' outside the arena");
      prog->constants.push_back({where, value});
      continue;
    }
    if (ir::has_trait(n.kind, ir::kLeaf)) continue;
    bool any_bytes = false;
    for (const Shape& s : n.outputs) any_bytes = any_bytes || s.bytes() > 0;
    if (!any_bytes) continue;  // nothing to write
    if (opt::alias_only(prog->plan, int32_t(i), roots)) {
      ++prog->num_views;
      continue;
    }

    std::vector<const Shape*> in_types;
    for (const Value& v : n.inputs) in_types.push_back(v.valid() ? &g.type(v) : nullptr);
    const KernelEntry* entry = reg.find(n.kind);
    if (!entry || !entry->build) fail(ErrorCategory::Unsupported, "no CPU kernel for ", node_label(n));
    if (!reg.supports(n, in_types)) {
      std::string types;
      for (const Shape* s : in_types) types += (types.empty() ? "" : ", ") + (s ? s->str() : std::string("-"));
      fail(ErrorCategory::Unsupported, "the CPU kernel for ", node_label(n), " does not support inputs (", types, ")");
    }
    KernelCall call;
    try {
      if (entry->build_info) {
        BuildInfo info;
        for (const Value& v : n.inputs) {
          const bool c = v.valid() && g.node(v.node).kind == OpKind::Constant;
          info.const_inputs.push_back(c);
          info.const_values.push_back(c ? &g.node(v.node).attr<ConstantAttrs>().value : nullptr);
        }
        call = entry->build_info(n, in_types, n.outputs, info);
      } else {
        call = entry->build(n, in_types, n.outputs);
      }
    } catch (const Error& e) {
      fail(e.category(), "building the kernel for ", node_label(n), ": ", e.what());
    }
    if (!call.fn) fail(ErrorCategory::Internal, "the CPU kernel builder for ", node_label(n), " gave no function");
    for (int a : call.absorbed) {
      if (a < 0 || size_t(a) >= n.inputs.size() || !n.inputs[size_t(a)].valid() ||
          g.node(n.inputs[size_t(a)].node).kind != OpKind::Constant)
        fail(ErrorCategory::Internal, "the CPU kernel for ", node_label(n), " absorbed input ", a,
             ", which is not a constant");
      readers.absorbed(n.inputs[size_t(a)]);
    }

    Thunk t;
    t.fn = call.fn;
    t.cfg = std::move(call.cfg);
    t.extent_ok = call.extent_ok;
    t.node = int32_t(i);
    t.first_buf = uint32_t(prog->bufs.size());
    for (const Value& v : n.inputs)
      prog->bufs.push_back(v.valid() ? prog->values[size_t(v.node)][size_t(v.out)] : BufRef{});
    for (const BufRef& r : prog->values[i]) prog->bufs.push_back(r);
    t.num_bufs = uint32_t(prog->bufs.size()) - t.first_buf;
    prog->thunks.push_back(std::move(t));
  }
  // The constants released above leave free heap pages that the packed weights in mappings of
  // their own (huge_pages.h) do not reuse: hand them back once, before the first run packs the
  // convolutions' weights (ResNet-50's peak RSS 281 -> 227 MB). Per released constant it cost
  // ResNet-50's first run 200 ms (pages returned, then faulted in again by the next
  // allocations); a build that released little keeps its heap as it is.
  if (readers.released_bytes() >= int64_t(kHugeMin)) release_free_heap();
  return prog;
}

void drop_param_init(Program& program) {
  for (const ParamSlot& ps : program.params) program.plan.graph.mutable_node(ps.node).attr<LeafAttrs>().init = Blob();
}

// ---------------------------------------------------------------- Weights

Weights::Weights(const Program& program) {
  const opt::MemoryPlan& mem = program.plan.memory;
  alignment_ = std::max<int64_t>(mem.alignment, 64);
  mem_ = Arena(mem.weights_bytes, alignment_);
  for (const ParamSlot& ps : program.params) {
    Entry e{ps.name, ps.type, ps.offset, false};
    const Blob& init = program.plan.graph.node(ps.node).attr<LeafAttrs>().init;
    if (!init.empty()) {
      if (init.size() != ps.type.bytes())
        fail(ErrorCategory::InvalidArgument, "param '", ps.name, "': initial data has ", init.size(),
             " bytes, type ", ps.type.str(), " needs ", ps.type.bytes());
      std::memcpy(data(e), init.data(), init.size());
      e.set = true;
    }
    if (ps.type.bytes() == 0) e.set = true;  // nothing to give
    index_.emplace(e.name, entries_.size());
    entries_.push_back(std::move(e));
  }
}

std::shared_ptr<Weights> Weights::copy() const {
  auto w = std::shared_ptr<Weights>(new Weights());
  w->alignment_ = alignment_;
  w->mem_ = Arena(mem_.size(), alignment_);
  if (mem_.size()) std::memcpy(w->mem_.data(), mem_.data(), size_t(mem_.size()));
  w->entries_ = entries_;  // external params stay external (read-only bytes, shared owners)
  w->index_ = index_;
  w->owners_ = owners_;
  return w;
}

const Weights::Entry* Weights::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void Weights::mark_set(const Entry& e) { entries_[size_t(&e - entries_.data())].set = true; }

void Weights::set_external(const Entry& e, const uint8_t* p, std::shared_ptr<const void> owner) {
  Entry& m = entries_[size_t(&e - entries_.data())];
  m.external = p;
  m.set = true;
  if (owner) owners_.push_back(std::move(owner));
  ++epoch_;
}

void Weights::make_owned(const Entry& e) {
  Entry& m = entries_[size_t(&e - entries_.data())];
  if (!m.external) return;
  const uint8_t* src = m.external;
  m.external = nullptr;
  if (m.offset >= 0 && m.type.bytes()) std::memcpy(mem_.data() + m.offset, src, size_t(m.type.bytes()));
  ++epoch_;
}

int64_t Weights::external_bytes() const {
  int64_t n = 0;
  for (const Entry& e : entries_)
    if (e.external) n += e.type.bytes();
  return n;
}

// ---------------------------------------------------------------- Executable

Executable::Executable(std::shared_ptr<const Program> program, int threads)
    : Executable(program, threads, std::make_shared<Weights>(*program)) {}

Executable::Executable(std::shared_ptr<const Program> program, int threads, std::shared_ptr<Weights> w)
    : program_(std::move(program)),
      pool_(std::make_unique<ThreadPool>(std::max(threads, 1))),
      ctx_(std::make_unique<std::array<RunCtx, 2>>()) {
  if (const char* v = std::getenv("RLX_PROFILE"); v && std::string(v) == "1") profile_ = std::make_unique<Profile>();
  const opt::MemoryPlan& mem = program_->plan.memory;
  arena_ = Arena(mem.arena_bytes, std::max<int64_t>(mem.alignment, 64));
  // Constants are read in place from the graph's blobs (which the program keeps): their
  // arena pages are never touched, so a model's initializers are not held twice. Kernels
  // only read them (nothing writes a constant: in-place ops take graph inputs only).
  for (const auto& c : program_->constants)
    if (c.bytes.size())
      remaps_.push_back(Remap{c.where.offset, c.where.offset + int64_t(c.bytes.size()), const_cast<uint8_t*>(c.bytes.data())});
  (*ctx_)[0].pool = pool_.get();
  (*ctx_)[1].pool = pool_.get();
  ptrs_.resize(program_->bufs.size());
  thunks_.resize(program_->thunks.size());
  use_weights(std::move(w));
}

Executable::~Executable() {
  if (!profile_ || profile_->runs < 2) return;
  std::map<std::string, std::pair<double, int>> by_op;
  double total = 0;
  for (size_t i = 0; i < profile_->time.size(); ++i) {
    auto& [t, c] = by_op[std::string(op_name(program_->plan.graph.node(program_->thunks[i].node).kind))];
    t += profile_->time[i];
    ++c;
    total += profile_->time[i];
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [name, tc] : by_op) rows.emplace_back(tc.first, name);
  std::sort(rows.rbegin(), rows.rend());
  const int64_t timed = profile_->runs - 1;  // the first run is not timed
  const double runs = double(timed);
  std::fprintf(stderr, "rlx profile (cpu, %d threads): %lld runs of %zu kernel calls; per run %.3f ms in kernels\n",
               threads(), static_cast<long long>(timed), thunks_.size(), total / runs);
  for (const auto& [t, name] : rows)
    std::fprintf(stderr, "  %-20s %9.3f ms per run  %6.1f%%  (%d calls per run)\n", name.c_str(), t / runs,
                 100 * t / std::max(total, 1e-12), by_op.at(name).second);
  // The slowest calls, with their operand types: what to look at first.
  std::vector<size_t> order(profile_->time.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return profile_->time[a] > profile_->time[b]; });
  const Graph& g = program_->plan.graph;
  size_t top = 8;
  if (const char* v = std::getenv("RLX_PROFILE_TOP")) {  // a count; anything else keeps 8
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 0) top = size_t(n);
  }
  for (size_t r = 0; r < std::min(top, order.size()); ++r) {
    const Node& n = g.node(program_->thunks[order[r]].node);
    std::string types;
    for (const Value& v : n.inputs) types += (types.empty() ? "" : ", ") + (v.valid() ? g.type(v).str() : "-");
    std::fprintf(stderr, "  slowest %zu: %9.3f ms  %s '%s' (%s)\n", r + 1, profile_->time[order[r]] / runs,
                 std::string(op_name(n.kind)).c_str(), n.name.c_str(), types.c_str());
  }
}

int Executable::threads() const { return pool_->size(); }

std::unique_ptr<Executable> Executable::clone() const {
  std::unique_ptr<Executable> c(new Executable(program_, threads(), weights_->copy()));
  c->remaps_ = remaps_;
  c->resolve();
  // Inputs (and handle state kept in input slots) carry over; constants are read in place
  // (the remaps); scratch is recomputed by the next run.
  std::vector<std::pair<int64_t, int64_t>> consts;
  for (const auto& k : program_->constants)
    if (k.bytes.size()) consts.emplace_back(k.where.offset, k.where.offset + int64_t(k.bytes.size()));
  std::sort(consts.begin(), consts.end());
  for (const auto& [b, e] : program_->plan.memory.persistent) {
    int64_t at = b;
    for (const auto& [cb, ce] : consts) {  // the persistent range minus the constants in it
      if (ce <= at || cb >= e) continue;
      if (cb > at) std::memcpy(c->arena_.data() + at, arena_.data() + at, size_t(cb - at));
      at = std::max(at, ce);
    }
    if (e > at) std::memcpy(c->arena_.data() + at, arena_.data() + at, size_t(e - at));
  }
  *c->ctx_ = *ctx_;
  (*c->ctx_)[0].pool = (*c->ctx_)[1].pool = c->pool_.get();
  c->poison_ = poison_;
  return c;
}

void Executable::use_weights(std::shared_ptr<Weights> w) {
  std::vector<uint8_t*> base(program_->params.size(), nullptr);
  for (size_t k = 0; k < program_->params.size(); ++k) {
    const ParamSlot& ps = program_->params[k];
    const Weights::Entry* e = w->find(ps.name);
    if (!e) fail(ErrorCategory::InvalidArgument, "the weights to use have no param '", ps.name, "'");
    if (!(e->type == ps.type))
      fail(ErrorCategory::InvalidArgument, "param '", ps.name, "' is ", ps.type.str(), " here but ", e->type.str(),
           " in the weights to use");
    base[k] = w->data(*e);
  }
  weights_ = std::move(w);
  weights_epoch_ = weights_->epoch();
  param_base_ = std::move(base);
  resolve();
}

void Executable::bind_external(int64_t offset, int64_t bytes, uint8_t* p) {
  remaps_.erase(std::remove_if(remaps_.begin(), remaps_.end(), [&](const Remap& m) { return m.begin == offset; }),
                remaps_.end());
  if (p) remaps_.push_back(Remap{offset, offset + bytes, p});
  resolve();
}

void Executable::resolve() {
  for (size_t i = 0; i < ptrs_.size(); ++i) ptrs_[i] = locate(program_->bufs[i]);
  for (size_t i = 0; i < thunks_.size(); ++i) {
    const Thunk& t = program_->thunks[i];
    thunks_[i] = Resolved{t.fn, t.cfg.get(), ptrs_.data() + t.first_buf, &(*ctx_)[t.extent_ok ? 1 : 0]};
  }
}

void Executable::run() {
  if (weights_->epoch() != weights_epoch_) use_weights(weights_);  // a param moved in or out of place
  if (poison_)
    for (const auto& [b, e] : program_->plan.memory.scratch) std::memset(arena_.data() + b, 0xFF, size_t(e - b));
  size_t i = 0;
  try {
    if (profile_ && profile_->runs++ > 0) {
      // Not the first run: it packs weights once, builds Winograd plans' buffers and touches
      // the arena's pages for the first time (ResNet-50's layer-4 convs took twice their warm
      // time averaged over 24 runs with it).
      profile_->time.resize(thunks_.size());
      for (; i < thunks_.size(); ++i) {
        const Resolved& t = thunks_[i];
        const auto t0 = std::chrono::steady_clock::now();
        t.fn(*t.ctx, t.cfg, t.bufs);
        profile_->time[i] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      }
    } else {
      for (; i < thunks_.size(); ++i) {
        const Resolved& t = thunks_[i];
        t.fn(*t.ctx, t.cfg, t.bufs);
      }
    }
  } catch (const Error& e) {
    const Node& n = program_->plan.graph.node(program_->thunks[i].node);
    // Kernels that already name their node are passed on as they are.
    if (std::string_view(e.what()).find("'" + n.name + "'") != std::string_view::npos) throw;
    fail(e.category(), "running ", node_label(n), ": ", e.what());
  } catch (const std::exception& e) {
    const Node& n = program_->plan.graph.node(program_->thunks[i].node);
    fail(ErrorCategory::Internal, "running ", node_label(n), ": ", e.what());
  }
}

void Executable::set_extent(int64_t actual, int64_t upper) {
  RunCtx& c = (*ctx_)[1];
  if (actual == upper) {
    c.extent_actual = c.extent_upper = 0;  // full runs everywhere
  } else {
    c.extent_actual = actual;
    c.extent_upper = upper;
  }
}

int64_t Executable::release_scratch() {
  int64_t released = 0;
  for (const auto& [b, e] : program_->plan.memory.scratch) released += arena_.release(b, e);
  return released;
}

}  // namespace rlx::cpu
