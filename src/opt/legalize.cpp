// legalize: makes every node something the backend claims. An f16/bf16 node the backend
// claims but prefers to run in f32 (BackendClaims::prefers_f32) is wrapped in casts when it
// claims the f32 form. For a node it does not
// claim: (1) an f16/bf16 node the backend runs in f32 is wrapped in casts; (2) else a
// known decomposition is emitted, each primitive legalized in turn; (3) else the node
// is unsupported. All unsupported nodes are collected and reported in one
// Error(Unsupported). The dispatch report says, per op kind of the input graph, how
// many nodes run native, native in f32, decomposed (into which kinds), unsupported.
// Empty claims.supports means "supports everything".
#include <map>
#include <set>
#include <sstream>

#include "opt/decompose.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

// Unsupported nodes named one by one in legalize's error; the rest are counted by kind.
constexpr size_t kListedFailures = 16;

constexpr int kMaxDepth = 12;  // decompositions nest a few levels; deeper means a cycle

bool is_low(DType t) { return t == DType::F16 || t == DType::BF16; }

struct Record {  // what happened to one node of the input graph
  bool unsupported = false, decomposed = false, via_f32 = false;
  std::set<OpKind> into;  // kinds emitted natively by its decomposition
  std::vector<std::string> notes;
};

class Legalizer final : public Emitter {
 public:
  Legalizer(Rewriter& rw, const BackendClaims& claims) : rw_(rw), claims_(claims) {}

  Graph& graph() override { return rw_.dst(); }

  std::vector<Value> emit(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) override {
    return place(make_node(graph(), kind, std::move(inputs), std::move(attrs), name), depth_ + 1);
  }

  // Legalizes one source node (inputs already remapped); returns the record.
  Record run(Node n) {
    Record rec;
    rec_ = &rec;
    depth_ = 0;
    outputs_ = place(std::move(n), 0);
    rec_ = nullptr;
    return rec;
  }
  const std::vector<Value>& outputs() const { return outputs_; }

 private:
  bool supports(const Node& n) const {
    if (!claims_.supports) return true;
    return claims_.supports(n, input_types(rw_.dst(), n));
  }

  std::vector<Value> append(Node n) {
    size_t count = n.outputs.size();
    int32_t id = rw_.dst().append_node(std::move(n));
    std::vector<Value> outs;
    for (size_t o = 0; o < count; ++o) outs.push_back(Value{id, int32_t(o)});
    return outs;
  }

  std::vector<Value> place(Node n, int depth) {
    if (ir::has_trait(n.kind, ir::kLeaf)) return append(std::move(n));
    if (supports(n)) {
      if (n.kind != OpKind::Cast && claims_.prefers_f32 && touches_low(n) &&
          claims_.prefers_f32(n, input_types(rw_.dst(), n)))
        if (auto r = try_f32(n, depth)) return *r;
      if (depth > 0) rec_->into.insert(n.kind);
      return append(std::move(n));
    }
    if (depth > kMaxDepth) {
      rec_->notes.push_back("decomposition nests too deeply at " + std::string(op_name(n.kind)));
    } else {
      if (n.kind != OpKind::Cast && touches_low(n))
        if (auto r = try_f32(n, depth)) return *r;
      if (has_decomposition(n.kind)) {
        std::string why;
        int saved = depth_;
        depth_ = depth;
        auto r = decompose(*this, n, &why);
        depth_ = saved;
        if (r) {
          check_types(n, *r);
          rec_->decomposed = true;
          return *r;
        }
        if (!why.empty()) rec_->notes.push_back(why);
      }
    }
    rec_->unsupported = true;
    if (depth > 0)
      rec_->notes.push_back("needs " + std::string(op_name(n.kind)) + (n.name.empty() ? "" : " '" + n.name + "'") +
                            " (" + types_str(rw_.dst(), n.inputs) + ")");
    return append(std::move(n));
  }

  bool touches_low(const Node& n) const {
    for (Value v : n.inputs)
      if (v.valid() && is_low(rw_.dst().type(v).dtype())) return true;
    for (const Shape& s : n.outputs)
      if (is_low(s.dtype())) return true;
    return false;
  }

  // The node computed in f32 between casts, when the backend claims that form.
  std::optional<std::vector<Value>> try_f32(const Node& n, int depth) {
    Graph& d = rw_.dst();
    std::vector<Shape> f32_in;
    for (Value v : n.inputs) {
      if (!v.valid()) { f32_in.emplace_back(); continue; }
      const Shape& t = d.type(v);
      f32_in.push_back(is_low(t.dtype()) ? t.with_dtype(DType::F32) : t);
    }
    std::vector<const Shape*> ptrs;
    for (size_t i = 0; i < n.inputs.size(); ++i) ptrs.push_back(n.inputs[i].valid() ? &f32_in[i] : nullptr);
    Node probe = n;
    if (auto* f = std::get_if<FusedElementwiseAttrs>(&probe.attrs))
      for (auto& op : f->program)
        if (is_low(op.type)) op.type = DType::F32;
    try {
      probe.outputs = ir::infer_outputs(probe, ptrs);
    } catch (const Error&) {
      return std::nullopt;
    }
    if (claims_.supports && !claims_.supports(probe, ptrs)) return std::nullopt;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value v = n.inputs[i];
      if (v.valid() && is_low(d.type(v).dtype()))
        probe.inputs[i] = place(make_node(d, OpKind::Cast, {v}, CastAttrs{DType::F32}, sub_name(n.name, "to_f32")), depth + 1)[0];
    }
    probe.name = sub_name(n.name, "f32");
    // Re-check with the real inputs: the claim may depend on more than types.
    if (!supports(probe)) return std::nullopt;
    std::vector<Value> f = append(probe);
    if (depth > 0) rec_->into.insert(n.kind);
    else rec_->via_f32 = true;
    std::vector<Value> outs;
    for (size_t o = 0; o < f.size(); ++o) {
      DType want = n.outputs[o].dtype();
      if (d.type(f[o]).dtype() == want) { outs.push_back(f[o]); continue; }
      std::string nm = o == 0 ? n.name : sub_name(n.name, "out" + std::to_string(o));
      outs.push_back(place(make_node(d, OpKind::Cast, {f[o]}, CastAttrs{want}, nm), depth + 1)[0]);
    }
    return outs;
  }

  void check_types(const Node& n, const std::vector<Value>& r) const {
    if (r.size() != n.outputs.size())
      fail(ErrorCategory::Internal, "legalize: decomposition of '", n.name, "' gave ", r.size(), " outputs");
    for (size_t o = 0; o < r.size(); ++o)
      if (!(rw_.dst().type(r[o]) == n.outputs[o]))
        fail(ErrorCategory::Internal, "legalize: decomposition of ", op_name(n.kind), " '", n.name, "' gives ",
             rw_.dst().type(r[o]).str(), ", the node has ", n.outputs[o].str());
  }

  Rewriter& rw_;
  const BackendClaims& claims_;
  Record* rec_ = nullptr;
  int depth_ = 0;
  std::vector<Value> outputs_;
};

struct KindStats {
  int native = 0, via_f32 = 0, decomposed = 0, unsupported = 0;
  std::set<OpKind> into;
};

std::string kinds_str(const std::set<OpKind>& kinds) {
  // std::set<OpKind> iterates in op-table order.
  std::string s;
  for (OpKind k : kinds) {
    if (!s.empty()) s += ", ";
    s += op_name(k);
  }
  return s;
}

std::string dispatch_text(const std::string& backend, const std::map<OpKind, KindStats>& stats) {
  int totals[4] = {0, 0, 0, 0};
  for (const auto& [k, s] : stats) {
    totals[0] += s.native;
    totals[1] += s.via_f32;
    totals[2] += s.decomposed;
    totals[3] += s.unsupported;
  }
  std::ostringstream os;
  os << "dispatch (backend '" << backend << "'): " << totals[0] << " native, " << totals[1] << " native in f32, "
     << totals[2] << " decomposed, " << totals[3] << " unsupported\n";
  for (const auto& [k, s] : stats) {
    os << "  " << op_name(k) << ":";
    const char* sep = " ";
    if (s.native) { os << sep << "native " << s.native; sep = ", "; }
    if (s.via_f32) { os << sep << "native in f32 " << s.via_f32; sep = ", "; }
    if (s.decomposed) { os << sep << "decomposed " << s.decomposed << " (into " << kinds_str(s.into) << ")"; sep = ", "; }
    if (s.unsupported) os << sep << "unsupported " << s.unsupported;
    os << "\n";
  }
  return os.str();
}

}  // namespace

Graph legalize(const Graph& g, const BackendClaims& claims, std::string* dispatch_report) {
  Rewriter rw(g);
  Legalizer lz(rw, claims);
  std::map<OpKind, KindStats> stats;
  std::vector<std::string> failures;
  std::map<std::string, int> failed_kinds;  // past the listed ones: op name -> count
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& src = nodes[i];
    if (ir::has_trait(src.kind, ir::kLeaf)) {
      rw.copy(int32_t(i));
      continue;
    }
    Node n = src;
    n.name = rw.name_of(int32_t(i));
    n.inputs = rw.map_inputs(src);
    n.outputs = ir::infer_outputs(n, input_types(rw.dst(), n));
    std::string in_types = types_str(rw.dst(), n.inputs);
    Record rec = lz.run(std::move(n));
    rw.replace(int32_t(i), lz.outputs());
    KindStats& ks = stats[src.kind];
    if (rec.unsupported) {
      ks.unsupported++;
      std::string line = std::string(op_name(src.kind)) + " '" + src.name + "' (inputs " + in_types + ")";
      for (size_t j = 0; j < rec.notes.size(); ++j) line += (j ? "; " : ": ") + rec.notes[j];
      if (failures.size() >= kListedFailures) failed_kinds[std::string(op_name(src.kind))]++;
      failures.push_back(line);
    } else if (rec.decomposed) {
      ks.decomposed++;
      ks.into.insert(rec.into.begin(), rec.into.end());
    } else if (rec.via_f32) {
      ks.via_f32++;
    } else {
      ks.native++;
    }
  }
  const std::string backend = claims.name.empty() ? "?" : claims.name;
  if (dispatch_report) *dispatch_report = dispatch_text(backend, stats);
  if (!failures.empty()) {
    std::ostringstream os;
    os << "legalize: backend '" << backend << "' cannot run " << failures.size() << " node"
       << (failures.size() == 1 ? "" : "s") << " of graph '" << g.name() << "':";
    for (size_t i = 0; i < failures.size() && i < kListedFailures; ++i) os << "\n  " << failures[i];
    if (failures.size() > kListedFailures) {  // a whole model on the wrong backend: one screen, not thousands of lines
      os << "\n  ... and " << failures.size() - kListedFailures << " more:";
      const char* sep = " ";
      for (const auto& [kind, n] : failed_kinds) {
        os << sep << kind << " x" << n;
        sep = ", ";
      }
    }
    fail(ErrorCategory::Unsupported, os.str());
  }
  return dce(rw.finish());
}

}  // namespace rlx::opt
