// The text form of a Graph: readable, and parses back to an equal graph.
// It is the format of golden tests, `rlx check`, `.rlx` files and bug reports.
#pragma once
#include <string>
#include <string_view>

#include "rlx/graph.h"

namespace rlx {

std::string print_graph(const Graph& g);
// Throws Error(Parse) naming `source` and the line:column at fault.
Graph parse_graph(std::string_view text, std::string_view source = "<text>");
Graph load_graph_file(const std::string& path);
// Structural equality: same nodes, kinds, attrs, types, names, outputs.
bool graphs_equal(const Graph& a, const Graph& b);
// Checks topological order, arity, re-infers every node's outputs and compares.
// Throws Error(Verify) naming the first node at fault.
void verify_graph(const Graph& g);

}  // namespace rlx
