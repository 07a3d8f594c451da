// rlx check FILE: parse, verify, compile; print what the compiler did.
#include <iostream>

#include "cli.h"

namespace rlx::cli {

namespace {
void section(const std::string& title, const std::string& body) {
  std::cout << "== " << title << " ==\n" << (body.empty() ? "(nothing)\n" : body);
  if (!body.empty() && body.back() != '\n') std::cout << "\n";
}

std::string leaf_list(const CompiledGraph& net, const std::vector<std::string>& names, bool inputs) {
  std::string s;
  for (const std::string& n : names) {
    if (!s.empty()) s += ", ";
    s += n;
    if (inputs) s.append(" ").append(net.input_type(n).str());
  }
  return s.empty() ? "(none)" : s;
}
}  // namespace

int cmd_check(const Args& args) {
  const std::string& path = args.positional[0];
  CompileOptions opts = compile_options_from(args);
  Graph g = load_model(path, opts);  // drops the bindings an importer used up
  verify_graph(g);
  std::cout << "graph '" << g.name() << "': " << g.nodes().size() << " nodes, verified\n";
  CompiledGraph net = Session(device_named(args.get("--device", "cpu"), "--device"), opts).compile(g);
  const CompileReport& r = net.report();
  std::cout << "inputs: " << leaf_list(net, net.input_names(), true) << "\n";
  std::string outs;
  for (int i = 0; i < int(net.output_names().size()); ++i)
    outs += (i ? ", " : "") + net.output_names()[size_t(i)] + " " + net.output_type(i).str();
  std::cout << "outputs: " << (outs.empty() ? "(none)" : outs) << "\n";
  std::cout << "params: " << leaf_list(net, net.param_names(), false) << "\n";
  section("passes", r.passes);
  section("dispatch", r.dispatch);
  if (args.has("--verbose")) {
    section("fusion", r.fusion);
  } else {
    section("fusion (per pass; --verbose lists every rewrite and every candidate left apart, with the reason)",
            r.fusion_summary);
  }
  section("memory", r.memory);
  std::cout << "compiled: " << net.graph().nodes().size() << " nodes, " << r.num_thunks << " kernel calls, arena "
            << r.arena_bytes << " bytes (lower bound " << r.lower_bound_bytes << "), weights " << r.weight_bytes
            << " bytes\n";
  return 0;
}

}  // namespace rlx::cli
