// What a backend reads off a Plan to bind its buffers, written once for every backend:
// the plan checked against its graph, the params in node order with their place in the
// weights segment, each value's place (an arena offset, or a param and the offset inside
// it), and which nodes need no kernel because the planner placed them inside an input.
// Every inconsistency between the plan and the graph is Error(Internal) naming the node.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "opt/plan.h"

namespace rlx::opt {

struct ValueRef {
  Segment segment = Segment::Arena;
  int32_t param = -1;   // the weights segment: index into the param slots
  int64_t offset = -1;  // bytes (in the arena, or inside the param); < 0: absent
  bool absent() const { return offset < 0; }
};

struct ParamSlot {
  std::string name;     // public param name
  int32_t node = -1;    // node id in the plan graph
  Shape type;
  int64_t offset = -1;  // offset in the plan's weights layout (-1 when empty)
};

struct PlanBinding {
  std::vector<ParamSlot> params;              // the graph's params in node order, in the weights segment
  std::vector<std::vector<ValueRef>> values;  // [node][out]: where each value lives
  std::set<std::pair<int32_t, int32_t>> roots;  // the outputs with a buffer of their own (the rest alias)
};
// Checks that the memory plan covers every node and output and every type is static, then
// resolves the params and every value.
PlanBinding bind_plan(const Plan& p);
// True when every non-empty output of `node` is an alias the planner placed inside an input
// (checked against view_of and its offset): the node needs no kernel. In-place ops
// (kInPlace) always run, since they write the bytes they share.
bool alias_only(const Plan& p, int32_t node, const std::set<std::pair<int32_t, int32_t>>& roots);

}  // namespace rlx::opt
