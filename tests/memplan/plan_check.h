// An independent oracle for memory plans: replays the schedule on a shadow of the arena
// and weights segments in which every byte records which value last wrote it.
//
// Leaves (inputs, constants, params) are written before step 0. At each compute node,
// every output that is not a view writes its own mark first (a kernel may write outputs
// while still reading inputs), then every input and output must still hold the mark it
// expects; a view expects its source's mark. At the end graph outputs and pinned leaves
// must be intact. Returns "" when the plan is sound, else a description of the first
// clobbered value.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "opt/memory_plan.h"
#include "opt/plan.h"

namespace rlx::test_graphs {

inline std::string simulate_plan(const Graph& g, const opt::MemoryPlan& plan) {
  // The arena gets a byte-level shadow. The weights segment is read-only (nothing but
  // params may be written there), so it is tracked as the list of param ranges instead.
  // Shadow cells are `unit` bytes: the gcd of every offset and size, so no value splits one.
  int64_t unit = plan.arena_bytes;
  for (int32_t id = 0; id < int32_t(g.nodes().size()) && id < int32_t(plan.loc.size()); ++id)
    for (size_t o = 0; o < g.node(id).outputs.size() && o < plan.loc[id].size(); ++o)
      if (g.node(id).outputs[o].bytes() > 0 && plan.loc[id][o].offset >= 0)
        unit = std::gcd(unit, std::gcd(plan.loc[id][o].offset, int64_t(g.node(id).outputs[o].bytes())));
  if (unit <= 0) unit = 1;
  std::vector<int32_t> arena(size_t(plan.arena_bytes / unit), -1);
  struct Range { int64_t begin, end; int32_t mark; };
  std::vector<Range> params;
  const auto& nodes = g.nodes();
  std::vector<std::vector<int32_t>> mark(nodes.size());
  int32_t next_mark = 0;
  auto name = [&](Value v) { return "'" + g.node(v.node).name + "':" + std::to_string(v.out); };
  auto bounds = [&](Value v, int64_t& b, int64_t& e) -> std::string {
    const opt::Loc& l = plan.loc[v.node][v.out];
    const int64_t n = int64_t(g.type(v).bytes());
    const int64_t limit = l.segment == opt::Segment::Weights ? plan.weights_bytes : plan.arena_bytes;
    b = l.offset;
    e = l.offset + n;
    if (n > 0 && (l.offset < 0 || e > limit)) return name(v) + " lies outside its segment";
    return "";
  };
  auto write = [&](Value v) -> std::string {
    int64_t b, e;
    if (auto err = bounds(v, b, e); !err.empty()) return err;
    if (e == b) return "";
    if (plan.loc[v.node][v.out].segment == opt::Segment::Weights) {
      if (g.node(v.node).kind != OpKind::Param) return name(v) + " is computed into the weights segment";
      for (const Range& r : params)
        if (r.begin < e && b < r.end) return name(v) + " overlaps another param";
      params.push_back(Range{b, e, mark[v.node][v.out]});
      return "";
    }
    std::fill(arena.begin() + b / unit, arena.begin() + e / unit, mark[v.node][v.out]);
    return "";
  };
  auto check = [&](Value v, const std::string& when) -> std::string {
    int64_t b, e;
    if (auto err = bounds(v, b, e); !err.empty()) return err;
    if (e == b) return "";
    if (plan.loc[v.node][v.out].segment == opt::Segment::Weights) {
      for (const Range& r : params)
        if (r.mark == mark[v.node][v.out] && r.begin <= b && e <= r.end) return "";
      return name(v) + " is not inside the param it reads " + when;
    }
    const int32_t m = mark[v.node][v.out];
    if (std::any_of(arena.begin() + b / unit, arena.begin() + e / unit, [m](int32_t x) { return x != m; }))
      return name(v) + " was clobbered " + when;
    return "";
  };
  auto is_leaf = [](OpKind k) { return k == OpKind::Input || k == OpKind::Param || k == OpKind::Constant; };

  for (int32_t id = 0; id < int32_t(nodes.size()); ++id) {
    mark[id].assign(nodes[id].outputs.size(), -1);
    if (!is_leaf(nodes[id].kind)) continue;
    mark[id][0] = next_mark++;
    if (auto e = write(Value{id, 0}); !e.empty()) return e;
  }
  for (int32_t id = 0; id < int32_t(nodes.size()); ++id) {
    const Node& n = nodes[id];
    if (is_leaf(n.kind)) continue;
    for (int32_t o = 0; o < int32_t(n.outputs.size()); ++o) {
      if (auto v = opt::view_of(g, id, o)) {
        const Value src = n.inputs[v->input];
        mark[id][o] = mark[src.node][src.out];
        const opt::Loc& a = plan.loc[id][o];
        const opt::Loc& b = plan.loc[src.node][src.out];
        if (a.segment != b.segment || a.offset != b.offset + v->byte_offset)
          return "view " + name(Value{id, o}) + " is not at its source + offset";
      } else {
        mark[id][o] = next_mark++;
        if (auto e = write(Value{id, o}); !e.empty()) return e;
      }
    }
    const std::string when = "while node '" + n.name + "' ran";
    for (const Value& in : n.inputs)
      if (in.valid())
        if (auto e = check(in, when); !e.empty()) return e;
    for (int32_t o = 0; o < int32_t(n.outputs.size()); ++o)
      if (auto e = check(Value{id, o}, when); !e.empty()) return e;
  }
  for (const GraphOutput& out : g.outputs())
    if (auto e = check(out.value, "before the end of the run"); !e.empty()) return e;
  for (int32_t id = 0; id < int32_t(nodes.size()); ++id)
    if (is_leaf(nodes[id].kind))
      if (auto e = check(Value{id, 0}, "before the end of the run (pinned)"); !e.empty()) return e;
  return "";
}

// The largest total of simultaneously live arena bytes, derived straight from the graph:
// a root (a value that is not a view) is live from its definition to the last use of
// itself or of any view of it (graph outputs to the end; inputs/constants throughout);
// sizes rounded up to `alignment`.
inline int64_t reference_lower_bound(const Graph& g, int64_t alignment) {
  const auto& nodes = g.nodes();
  const int32_t steps = int32_t(nodes.size());
  std::vector<std::vector<Value>> root(nodes.size());
  struct Live { int64_t bytes; int32_t first, last; };
  std::vector<std::vector<Live>> live(nodes.size());
  for (int32_t id = 0; id < steps; ++id) {
    const Node& n = nodes[id];
    for (const Value& in : n.inputs) {
      if (!in.valid()) continue;
      const Value r = root[in.node][in.out];
      if (r.valid()) live[r.node][r.out].last = std::max(live[r.node][r.out].last, id);
    }
    root[id].assign(n.outputs.size(), Value{});
    live[id].assign(n.outputs.size(), Live{0, id, id});
    const bool pinned = n.kind == OpKind::Input || n.kind == OpKind::Constant;
    for (int32_t o = 0; o < int32_t(n.outputs.size()); ++o) {
      const int64_t b = int64_t(n.outputs[o].bytes());
      if (b == 0 || n.kind == OpKind::Param) continue;
      if (auto v = opt::view_of(g, id, o)) {
        const Value src = n.inputs[v->input];
        root[id][o] = root[src.node][src.out];
        continue;
      }
      root[id][o] = Value{id, o};
      live[id][o] = Live{(b + alignment - 1) / alignment * alignment, pinned ? 0 : id,
                         pinned ? steps - 1 : id};
    }
  }
  for (const GraphOutput& out : g.outputs()) {
    const Value r = root[out.value.node][out.value.out];
    if (r.valid()) live[r.node][r.out].last = steps - 1;
  }
  int64_t best = 0;
  for (int32_t s = 0; s < steps; ++s) {
    int64_t total = 0;
    for (const auto& per_node : live)
      for (const Live& l : per_node)
        if (l.first <= s && s <= l.last) total += l.bytes;
    best = std::max(best, total);
  }
  return best;
}

}  // namespace rlx::test_graphs
