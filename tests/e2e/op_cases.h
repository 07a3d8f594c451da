// The per-op case table of the end-to-end op tests. Each ops_*_test.cpp registers, per
// OpKind, one or more cases (build a small graph with that op, compile through Session,
// run, compare with a reference); ops_coverage_test.cpp runs the cases of every kind in
// rlx::ir::all_ops() and fails for a kind that has none, so a new op needs a case here.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "e2e_ref.h"
#include "e2e_util.h"

namespace rlx::e2e {

struct OpCase {
  std::string name;
  std::function<void()> run;
};

inline std::map<OpKind, std::vector<OpCase>>& op_cases() {
  static std::map<OpKind, std::vector<OpCase>> table;
  return table;
}

// Used at namespace scope: `const bool kReg = register_cases({...});`
inline bool register_cases(std::vector<std::pair<OpKind, OpCase>> cases) {
  for (auto& [k, c] : cases) op_cases()[k].push_back(std::move(c));
  return true;
}

using BuildFn = std::function<std::vector<Value>(Graph&, const std::vector<Value>&)>;

// Graph with inputs x0..xn (types from `ins`), outputs from `build`; compiled, run and
// compared with `want` (rtol/atol per element; integer and bool outputs exactly). Runs
// twice: all passes on with 2 threads, and passes off with 1 thread; both must match
// the reference and each other bit for bit.
inline void check_op(const std::string& what, const std::vector<T>& ins, const BuildFn& build,
                     const std::vector<T>& want, double rtol = 2e-5, double atol = 1e-6) {
  Graph g("e2e_" + what);
  std::vector<Value> xs;
  Feeds feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    xs.push_back(g.input(name, ins[i].shape()));
    feeds[name] = ins[i];
  }
  try {
    g.set_outputs(build(g, xs));
  } catch (const Error& e) {
    FAIL() << what << ": building the graph: " << e.what();
  }
  const CompileOptions configs[2] = {default_options(2), passes_off(default_options(1))};
  std::vector<T> got[2];
  for (int c = 0; c < 2; ++c) {
    const std::string run = what + (c ? " (passes off, 1 thread)" : " (passes on, 2 threads)");
    try {
      got[c] = run_graph(g, feeds, {}, configs[c]);
    } catch (const Error& e) {
      FAIL() << run << ": " << e.what();
    }
    ASSERT_EQ(got[c].size(), want.size()) << run;
    for (size_t o = 0; o < want.size(); ++o) {
      EXPECT_EQ(got[c][o].dtype, want[o].dtype) << run << " output " << o;
      const bool exact = !is_float(want[o].dtype);
      expect_close(got[c][o], want[o], exact ? 0 : rtol, exact ? 0 : atol, run + " output " + std::to_string(o));
    }
  }
  for (size_t o = 0; o < want.size(); ++o)
    expect_bitwise_equal(got[0][o], got[1][o], what + ": configs differ, output " + std::to_string(o));
}

}  // namespace rlx::e2e
