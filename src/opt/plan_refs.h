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

// The memory plan covers every node and output; every output type is static.
void check_plan(const Plan& p);
// The graph's params in node order, each checked to lie in the weights segment.
std::vector<ParamSlot> param_slots(const Plan& p);
// Where output `out` of `node` lives.
ValueRef value_ref(const Plan& p, const std::vector<ParamSlot>& params, int32_t node, int32_t out);
// The outputs that own a buffer of their own (every other non-empty output is an alias).
std::set<std::pair<int32_t, int32_t>> root_values(const Plan& p);
// True when every non-empty output of `node` is an alias the planner placed inside an input
// (checked against view_of and its offset): the node needs no kernel. In-place ops
// (kInPlace) always run, since they write the bytes they share.
bool alias_only(const Plan& p, int32_t node, const std::set<std::pair<int32_t, int32_t>>& roots);

}  // namespace rlx::opt
