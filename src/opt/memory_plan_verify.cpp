// verify_memory_plan: re-derives every value's lifetime from the graph (not from the
// plan's own buffer list) and checks the locations the plan hands to backends.
//
// The hazard model: a node reads its inputs while writing its outputs, so a value is
// busy over the inclusive step range [definition, last use] (graph outputs to the last
// step, inputs/constants/params over the whole run). Values sharing a root through
// views may overlap; any other two values may not share a byte while both are busy.
#include <algorithm>
#include <string>
#include <vector>

#include "opt/memory_plan.h"
#include "opt/passes.h"

namespace rlx::opt {
namespace {

struct Span {
  int32_t node = -1, out = 0;
  int32_t root = -1;  // dense id of the root value (views share their source's)
  Segment segment = Segment::Arena;
  int64_t begin = 0, end = 0;  // bytes
  int32_t first = 0, last = 0;  // steps
};

std::string who(const Graph& g, const Span& s) {
  return "'" + g.node(s.node).name + "':" + std::to_string(s.out);
}

std::string where(const Span& s) {
  return std::string(s.segment == Segment::Weights ? "weights" : "arena") + " [" +
         std::to_string(s.begin) + ", " + std::to_string(s.end) + ")";
}

[[noreturn]] void broken(const std::string& what) {
  fail(ErrorCategory::Internal, "memory plan: ", what);
}

bool overlap(const Span& a, const Span& b) {
  return a.segment == b.segment && a.begin < b.end && b.begin < a.end;
}

bool inside(int64_t b, int64_t e, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  for (const auto& r : ranges)
    if (r.first <= b && e <= r.second) return true;
  return false;
}

void check_partition(const MemoryPlan& plan) {
  std::vector<std::pair<int64_t, int64_t>> all = plan.persistent;
  all.insert(all.end(), plan.scratch.begin(), plan.scratch.end());
  std::sort(all.begin(), all.end());
  int64_t cursor = 0;
  for (const auto& [b, e] : all) {
    if (b != cursor || e <= b)
      broken("persistent and scratch ranges do not tile [0, " + std::to_string(plan.arena_bytes) +
             ") at byte " + std::to_string(cursor));
    cursor = e;
  }
  if (cursor != plan.arena_bytes)
    broken("persistent and scratch ranges end at " + std::to_string(cursor) + ", arena is " +
           std::to_string(plan.arena_bytes) + " bytes");
}

}  // namespace

void verify_memory_plan(const Graph& g, const MemoryPlan& plan) {
  const auto& nodes = g.nodes();
  const int32_t n_steps = int32_t(nodes.size());
  const int32_t end = std::max<int32_t>(n_steps - 1, 0);
  if (plan.loc.size() != nodes.size())
    broken("has locations for " + std::to_string(plan.loc.size()) + " nodes, graph has " +
           std::to_string(nodes.size()));
  check_partition(plan);

  // Pass 1: one span per non-empty value, roots through views, segment and bounds.
  std::vector<std::vector<int32_t>> span_of(nodes.size());
  std::vector<Span> spans;
  for (int32_t id = 0; id < n_steps; ++id) {
    const Node& n = nodes[id];
    if (plan.loc[id].size() != n.outputs.size())
      broken("node '" + n.name + "' has " + std::to_string(plan.loc[id].size()) +
             " locations for " + std::to_string(n.outputs.size()) + " outputs");
    span_of[id].assign(n.outputs.size(), -1);
    for (int32_t o = 0; o < int32_t(n.outputs.size()); ++o) {
      const Shape& t = n.outputs[o];
      if (!t.is_static()) broken("node '" + n.name + "' has unbound dims " + t.str());
      const int64_t bytes = int64_t(t.bytes());
      if (bytes == 0) continue;
      const Loc& l = plan.loc[id][o];
      Span s;
      s.node = id;
      s.out = o;
      s.segment = l.segment;
      s.begin = l.offset;
      s.end = l.offset + bytes;
      s.first = s.last = id;
      s.root = int32_t(spans.size());
      if (l.offset < 0) broken("'" + n.name + "':" + std::to_string(o) + " has no location");
      const int64_t limit = l.segment == Segment::Weights ? plan.weights_bytes : plan.arena_bytes;
      if (s.end > limit)
        broken(who(g, s) + " at " + where(s) + " runs past the segment end " + std::to_string(limit));
      const bool is_leaf = n.kind == OpKind::Input || n.kind == OpKind::Constant || n.kind == OpKind::Param;
      if (is_leaf) {
        s.first = 0;
        s.last = end;
      }
      if (n.kind == OpKind::Param && l.segment != Segment::Weights)
        broken("param " + who(g, s) + " is not in the weights segment");
      if ((n.kind == OpKind::Input || n.kind == OpKind::Constant) &&
          (l.segment != Segment::Arena || !inside(s.begin, s.end, plan.persistent)))
        broken(who(g, s) + " is pinned but " + where(s) + " is not in a persistent range");
      if (auto v = view_of(g, id, o)) {
        const Value src = n.inputs[v->input];
        const int32_t si = span_of[src.node][src.out];
        if (si >= 0) {
          const Span& from = spans[si];
          if (from.segment != s.segment || from.begin + v->byte_offset != s.begin)
            broken("view " + who(g, s) + " at " + where(s) + " is not at its source " +
                   who(g, from) + " " + where(from) + " + " + std::to_string(v->byte_offset));
          s.root = from.root;
        }
      } else {  // a root buffer
        if (plan.alignment > 0 && s.begin % plan.alignment != 0)
          broken(who(g, s) + " at " + where(s) + " is not aligned to " +
                 std::to_string(plan.alignment));
      }
      if (s.root == int32_t(spans.size()) && !is_leaf && l.segment != Segment::Arena)
        broken(who(g, s) + " is computed but placed in the weights segment");
      span_of[id][o] = int32_t(spans.size());
      spans.push_back(s);
    }
  }

  // Pass 2: uses extend lifetimes; a node's own outputs must not overlap its inputs.
  for (int32_t id = 0; id < n_steps; ++id) {
    const Node& n = nodes[id];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value in = n.inputs[i];
      if (!in.valid()) continue;
      if (in.node < 0 || in.node >= id || in.out >= int32_t(span_of[in.node].size()))
        broken("node '" + n.name + "' input " + std::to_string(i) + " names no earlier value");
      const int32_t si = span_of[in.node][in.out];
      if (si < 0) continue;
      Span& src = spans[si];
      src.last = std::max(src.last, id);
      for (int32_t o = 0; o < int32_t(n.outputs.size()); ++o) {
        const int32_t so = span_of[id][o];
        if (so < 0) continue;
        const Span& dst = spans[so];
        if (dst.root == src.root || !overlap(dst, src)) continue;
        broken("node '" + n.name + "' output " + std::to_string(o) + " at " + where(dst) +
               " overlaps its input " + std::to_string(i) + " " + who(g, src) + " at " + where(src));
      }
    }
  }
  for (const GraphOutput& go : g.outputs()) {
    const Value v = go.value;
    if (!v.valid() || v.node >= n_steps || v.out >= int32_t(span_of[v.node].size()))
      broken("graph output '" + go.name + "' names no value");
    if (span_of[v.node][v.out] >= 0) spans[span_of[v.node][v.out]].last = end;
  }

  // Pass 3: no two busy values of different roots share a byte.
  std::vector<int32_t> by_begin(spans.size());
  for (size_t k = 0; k < spans.size(); ++k) by_begin[k] = int32_t(k);
  std::sort(by_begin.begin(), by_begin.end(), [&](int32_t a, int32_t b) {
    if (spans[a].segment != spans[b].segment) return spans[a].segment < spans[b].segment;
    return spans[a].begin < spans[b].begin;
  });
  for (size_t x = 0; x < by_begin.size(); ++x) {
    const Span& a = spans[by_begin[x]];
    for (size_t y = x + 1; y < by_begin.size(); ++y) {
      const Span& b = spans[by_begin[y]];
      if (b.segment != a.segment || b.begin >= a.end) break;
      if (a.root == b.root || a.last < b.first || b.last < a.first) continue;
      broken(who(g, a) + " (steps " + std::to_string(a.first) + ".." + std::to_string(a.last) +
             ", " + where(a) + ") and " + who(g, b) + " (steps " + std::to_string(b.first) + ".." +
             std::to_string(b.last) + ", " + where(b) + ") overlap while both are live");
    }
  }
}

}  // namespace rlx::opt
