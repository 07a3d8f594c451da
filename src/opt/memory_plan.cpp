// plan-memory: liveness over the schedule (node order), views aliased onto their roots,
// params in the weights segment, everything else packed into one arena.
//
// Lifetimes are inclusive step ranges [first, last]: a node at step s reads its inputs and
// writes its outputs during step s, so an input used at s (last >= s) always conflicts
// with an output defined at s (first == s). That is what keeps outputs off their own
// inputs. A joint run (nodes a backend runs as one launch) counts as one step [a, b] for
// this: what any of its nodes reads lives to b, what any writes from a. The only sharing is
// through view_of (views, and in-place ops such as cache_write on a graph input, which
// memory_plan.h describes).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>

#include "ir/op_table.h"
#include "opt/memory_plan.h"
#include "opt/passes.h"

namespace rlx::opt {
namespace {

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }  // x <= 2^62, a <= 2^20

// a + b, or Error(ResourceExhausted) when a segment's planned size leaves int64.
int64_t sum_or_fail(int64_t a, int64_t b, const char* segment) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(ErrorCategory::ResourceExhausted, "plan-memory: the ", segment, " would exceed 2^63 bytes");
  return r;
}

bool pinned(BufferRole r) {
  return r == BufferRole::Input || r == BufferRole::Constant || r == BufferRole::Param;
}

// Where each value lives before placement: its root buffer and the offset inside it.
struct Liveness {
  std::vector<std::vector<int32_t>> root;    // [node][out] -> index in buffers, -1 if zero-size
  std::vector<std::vector<int64_t>> offset;  // [node][out] -> byte offset inside the root
  std::vector<Buffer> buffers;
};

Liveness analyze(const Graph& g, const std::vector<std::pair<int32_t, int32_t>>& joint) {
  const auto& nodes = g.nodes();
  const int32_t n_steps = int32_t(nodes.size());
  const int32_t end = std::max<int32_t>(n_steps - 1, 0);
  // Each node's step range: its own id, or the whole joint run it is in.
  std::vector<int32_t> span_first(nodes.size()), span_last(nodes.size());
  std::iota(span_first.begin(), span_first.end(), 0);
  std::iota(span_last.begin(), span_last.end(), 0);
  for (const auto& [a, b] : joint) {
    if (a < 0 || b < a || b >= n_steps)
      fail(ErrorCategory::Internal, "plan-memory: joint steps ", a, "..", b, " are not a run of the ", n_steps, " nodes");
    for (int32_t i = a; i <= b; ++i) {
      span_first[size_t(i)] = std::min(span_first[size_t(i)], a);
      span_last[size_t(i)] = std::max(span_last[size_t(i)], b);
    }
  }
  Liveness lv;
  lv.root.resize(nodes.size());
  lv.offset.resize(nodes.size());
  for (int32_t id = 0; id < n_steps; ++id) {
    const Node& n = nodes[id];
    for (const Value& in : n.inputs) {
      if (!in.valid()) continue;
      if (in.node >= id)
        fail(ErrorCategory::Internal, "plan-memory: node '", n.name, "' uses node ", in.node,
             " which does not precede it");
      const int32_t r = lv.root[in.node][in.out];
      if (r >= 0) lv.buffers[r].last = std::max(lv.buffers[r].last, span_last[size_t(id)]);
    }
    lv.root[id].assign(n.outputs.size(), -1);
    lv.offset[id].assign(n.outputs.size(), 0);
    for (int32_t o = 0; o < int32_t(n.outputs.size()); ++o) {
      const Shape& s = n.outputs[o];
      if (!s.is_static())
        fail(ErrorCategory::Shape, "plan-memory: node '", n.name, "' output ", o, " has type ",
             s.str(), " with unbound dims (bind dims before planning)");
      const int64_t bytes = int64_t(s.bytes());
      if (bytes == 0) continue;
      if (auto v = view_of(g, id, o)) {
        const Value src = n.inputs[v->input];
        const int32_t r = lv.root[src.node][src.out];
        if (r >= 0) {
          lv.root[id][o] = r;
          lv.offset[id][o] = lv.offset[src.node][src.out] + v->byte_offset;
          continue;
        }
      }
      Buffer b;
      b.node = id;
      b.out = o;
      b.bytes = bytes;
      b.first = span_first[size_t(id)];
      b.last = id;
      switch (n.kind) {
        case OpKind::Input: b.role = BufferRole::Input; break;
        case OpKind::Constant: b.role = BufferRole::Constant; break;
        case OpKind::Param: b.role = BufferRole::Param; break;
        default: b.role = BufferRole::Scratch; break;
      }
      if (pinned(b.role)) {
        b.first = 0;
        b.last = end;
      }
      lv.root[id][o] = int32_t(lv.buffers.size());
      lv.buffers.push_back(b);
    }
  }
  for (const GraphOutput& go : g.outputs()) {
    const Value v = go.value;
    if (!v.valid() || v.node >= n_steps || v.out >= int32_t(lv.root[v.node].size()))
      fail(ErrorCategory::Internal, "plan-memory: graph output '", go.name, "' names no value");
    const int32_t r = lv.root[v.node][v.out];
    if (r < 0) continue;
    Buffer& b = lv.buffers[r];
    if (b.role == BufferRole::Scratch) b.role = BufferRole::Output;
    b.last = end;
  }
  return lv;
}

struct Item {
  int64_t size;  // aligned
  int32_t first, last;
  bool pinned;
};

bool conflict(const Item& a, const Item& b) { return a.first <= b.last && b.first <= a.last; }

// Places items in `order`; each goes into the best-fitting (or the lowest) gap among the
// already placed items whose lifetimes intersect its own. Returns the arena size.
int64_t place(const std::vector<Item>& items, const std::vector<int>& order, bool best_fit,
              std::vector<int64_t>& offsets) {
  offsets.assign(items.size(), -1);
  std::vector<int> placed;  // sorted by offset
  int64_t arena = 0;
  for (int i : order) {
    const Item& it = items[i];
    int64_t cursor = 0, best = -1, best_gap = 0;
    for (int j : placed) {
      if (!conflict(it, items[j])) continue;
      const int64_t off = offsets[j];
      if (off > cursor) {
        const int64_t gap = off - cursor;
        if (gap >= it.size && (best < 0 || gap < best_gap)) {
          best = cursor;
          best_gap = gap;
          if (!best_fit) break;
        }
      }
      cursor = std::max(cursor, off + items[j].size);
    }
    const int64_t at = best >= 0 ? best : cursor;
    offsets[i] = at;
    arena = std::max(arena, at + it.size);
    auto pos = std::lower_bound(placed.begin(), placed.end(), at,
                                [&](int j, int64_t v) { return offsets[j] < v; });
    placed.insert(pos, i);
  }
  return arena;
}

// Candidate orders: pinned buffers always first (they conflict with everything), then
// the rest by one of several keys; the caller keeps whichever packs tightest.
std::vector<std::vector<int>> candidate_orders(const std::vector<Item>& items) {
  auto len = [&](int i) { return int64_t(items[i].last) - items[i].first + 1; };
  using Less = std::function<bool(int, int)>;
  const std::vector<Less> keys = {
      [&](int a, int b) {  // largest first
        if (items[a].size != items[b].size) return items[a].size > items[b].size;
        if (len(a) != len(b)) return len(a) > len(b);
        return items[a].first < items[b].first;
      },
      [&](int a, int b) {  // longest-lived first
        if (len(a) != len(b)) return len(a) > len(b);
        if (items[a].size != items[b].size) return items[a].size > items[b].size;
        return items[a].first < items[b].first;
      },
      [&](int a, int b) {  // by lifetime start (linear scan)
        if (items[a].first != items[b].first) return items[a].first < items[b].first;
        return items[a].size > items[b].size;
      },
      [&](int a, int b) {  // largest area (bytes x steps)
        const double aa = double(items[a].size) * len(a), bb = double(items[b].size) * len(b);
        if (aa != bb) return aa > bb;
        return items[a].first < items[b].first;
      },
  };
  std::vector<std::vector<int>> orders;
  for (const Less& key : keys) {
    std::vector<int> o(items.size());
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(), [&](int a, int b) {
      if (items[a].pinned != items[b].pinned) return items[a].pinned;
      return key(a, b);
    });
    orders.push_back(std::move(o));
  }
  return orders;
}

int64_t lower_bound_of(const std::vector<Item>& items, int32_t n_steps) {
  std::vector<int64_t> delta(size_t(n_steps) + 1, 0);
  for (const Item& it : items) {
    delta[it.first] += it.size;
    delta[it.last + 1] -= it.size;
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) peak = std::max(peak, live += d);
  return peak;
}

// Tries every candidate order with best-fit and first-fit placement, then, while the
// arena is above the lower bound, a bounded local search that swaps one to three pairs
// of non-pinned buffers in the best order (equal results are accepted, to walk across
// plateaus). The random source has a fixed seed: a given build always plans a graph the
// same way.
int64_t pack(const std::vector<Item>& items, int64_t lower_bound, std::vector<int64_t>& best_offsets) {
  std::vector<int64_t> offsets;
  std::vector<int> best_order;
  bool best_fit_of_best = true;
  int64_t best = -1;
  auto attempt = [&](const std::vector<int>& order, bool best_fit) {
    const int64_t arena = place(items, order, best_fit, offsets);
    const bool improved = best < 0 || arena < best;
    if (improved) best_offsets = offsets;
    if (improved || arena == best) {
      best = arena;
      best_order = order;
      best_fit_of_best = best_fit;
    }
    return improved;
  };
  // The quadratic placement bounds the work: very large graphs keep the first order only.
  auto orders = candidate_orders(items);
  if (items.size() > 4000) orders.resize(1);
  for (const auto& order : orders)
    for (bool best_fit : {true, false})
      if (best > lower_bound || best < 0) attempt(order, best_fit);

  size_t n_pinned = 0;
  for (const Item& it : items) n_pinned += it.pinned;
  const size_t n_free = items.size() - n_pinned;
  if (best <= lower_bound || n_free < 2) return std::max<int64_t>(best, 0);
  const double work = double(items.size()) * double(items.size()) + 1.0;
  const int rounds = int(std::min(400.0, 3e7 / work));
  std::mt19937 rng(0x5eed);
  std::uniform_int_distribution<size_t> pos(n_pinned, items.size() - 1);
  for (int r = 0; r < rounds && best > lower_bound; ++r) {
    std::vector<int> order = best_order;
    const int swaps = 1 + int(rng() % 3);
    for (int k = 0; k < swaps; ++k) std::swap(order[pos(rng)], order[pos(rng)]);
    attempt(order, best_fit_of_best);
  }
  return best;
}

std::vector<std::pair<int64_t, int64_t>> merge_ranges(std::vector<std::pair<int64_t, int64_t>> r) {
  std::sort(r.begin(), r.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, int64_t alignment, const std::vector<std::pair<int32_t, int32_t>>& joint) {
  if (alignment <= 0 || alignment > (int64_t(1) << 20))
    fail(ErrorCategory::InvalidArgument, "plan-memory: alignment must be in 1..2^20, got ", alignment);
  Liveness lv = analyze(g, joint);
  MemoryPlan plan;
  plan.alignment = alignment;
  const int32_t n_steps = int32_t(g.nodes().size());

  // Weights: params from offset 0, each aligned, the smaller ones first (by size, then node
  // order). A backend may map the segment in 2 MiB pages, of which any byte written makes the
  // whole page resident; params given as external bytes (a model's matrices read in place
  // from a mapped file) are never written, so the vectors written beside them must not be
  // spread over the matrices' pages: an LLM's norm weights, one between each layer's
  // matrices, made 92 MB of a 135M model's segment resident in node order.
  std::vector<int> param_ids;
  for (int b = 0; b < int(lv.buffers.size()); ++b)
    if (lv.buffers[b].role == BufferRole::Param) param_ids.push_back(b);
  std::stable_sort(param_ids.begin(), param_ids.end(),
                   [&](int a, int b) { return lv.buffers[a].bytes < lv.buffers[b].bytes; });
  for (int b : param_ids) {
    Buffer& buf = lv.buffers[b];
    buf.offset = plan.weights_bytes;
    plan.weights_bytes = sum_or_fail(plan.weights_bytes, align_up(buf.bytes, alignment), "weights segment");
  }
  std::vector<int> arena_ids;
  std::vector<Item> items;
  int64_t items_total = 0;
  for (int b = 0; b < int(lv.buffers.size()); ++b) {
    const Buffer& buf = lv.buffers[b];
    if (buf.role == BufferRole::Param) continue;
    arena_ids.push_back(b);
    items.push_back(Item{align_up(buf.bytes, alignment), buf.first, buf.last, pinned(buf.role)});
    // Every offset the packer can produce is at most the sum of all sizes: bounding the sum
    // bounds all of its arithmetic.
    items_total = sum_or_fail(items_total, items.back().size, "activation arena");
  }

  plan.lower_bound_bytes = lower_bound_of(items, n_steps);
  std::vector<int64_t> best_offsets;
  const int64_t best = pack(items, plan.lower_bound_bytes, best_offsets);
  plan.arena_bytes = std::max<int64_t>(best, 0);

  std::vector<std::pair<int64_t, int64_t>> persistent;
  for (size_t k = 0; k < arena_ids.size(); ++k) {
    Buffer& buf = lv.buffers[arena_ids[k]];
    buf.offset = best_offsets[k];
    if (buf.role == BufferRole::Constant) plan.constant_bytes += buf.bytes;
    if (buf.role == BufferRole::Input || buf.role == BufferRole::Constant)
      persistent.emplace_back(buf.offset, buf.offset + items[k].size);
  }
  plan.persistent = merge_ranges(std::move(persistent));
  int64_t cursor = 0;
  for (const auto& [b, e] : plan.persistent) {
    if (b > cursor) plan.scratch.emplace_back(cursor, b);
    cursor = e;
  }
  if (cursor < plan.arena_bytes) plan.scratch.emplace_back(cursor, plan.arena_bytes);

  plan.loc.resize(g.nodes().size());
  for (int32_t id = 0; id < n_steps; ++id) {
    const Node& n = g.node(id);
    plan.loc[id].resize(n.outputs.size());
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      Loc& l = plan.loc[id][o];
      const int32_t r = lv.root[id][o];
      if (r < 0) {
        l.segment = n.kind == OpKind::Param ? Segment::Weights : Segment::Arena;
        continue;
      }
      const Buffer& buf = lv.buffers[r];
      l.segment = buf.role == BufferRole::Param ? Segment::Weights : Segment::Arena;
      l.offset = buf.offset + lv.offset[id][o];
    }
  }
  plan.buffers = std::move(lv.buffers);
  return plan;
}

namespace {
const char* role_name(BufferRole r) {
  switch (r) {
    case BufferRole::Scratch: return "scratch";
    case BufferRole::Input: return "input";
    case BufferRole::Output: return "output";
    case BufferRole::Param: return "param";
    case BufferRole::Constant: return "constant";
  }
  return "?";
}
}  // namespace

std::string MemoryPlan::report(const Graph& g, int top) const {
  std::ostringstream os;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3f",
                lower_bound_bytes > 0 ? double(arena_bytes) / double(lower_bound_bytes) : 1.0);
  // Weights are what a model carries: params (weights segment) and constants such as
  // ONNX initializers (placed in the arena's persistent part, so the arena figure holds them too).
  os << "weights " << weights_bytes + constant_bytes << " bytes: params " << weights_bytes
     << " bytes (weights segment), constants " << constant_bytes << " bytes (in the arena)\n";
  os << "arena " << arena_bytes << " bytes, lower bound " << lower_bound_bytes << " bytes (ratio "
     << ratio << "); activations and inputs " << arena_bytes - constant_bytes << " bytes\n";
  auto list = [&](const char* what, bool constants, int n) {
    std::vector<const Buffer*> sel;
    for (const Buffer& b : buffers)
      if (b.role != BufferRole::Param && (b.role == BufferRole::Constant) == constants) sel.push_back(&b);
    std::stable_sort(sel.begin(), sel.end(), [](const Buffer* a, const Buffer* b) { return a->bytes > b->bytes; });
    const size_t shown = std::min(sel.size(), size_t(std::max(n, 0)));
    if (shown > 0) os << "top " << shown << " of " << sel.size() << " " << what << ":\n";
    for (size_t i = 0; i < shown; ++i) {
      const Buffer& b = *sel[i];
      const bool named = b.node >= 0 && b.node < int32_t(g.nodes().size());
      os << "  " << (named ? g.node(b.node).name : std::string("?")) << ":" << b.out << "  " << b.bytes
         << " bytes @" << b.offset << "  steps " << b.first << ".." << b.last << "  " << role_name(b.role) << "\n";
    }
  };
  list("arena buffers (activations, inputs)", false, top);
  list("constants", true, std::min(top, 3));
  return os.str();
}

}  // namespace rlx::opt
