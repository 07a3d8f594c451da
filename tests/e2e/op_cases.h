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
// compared with `want` (rtol/atol per element; integer and bool outputs exactly).
inline void check_op(const std::string& what, const std::vector<T>& ins, const BuildFn& build,
                     const std::vector<T>& want, double rtol = 2e-5, double atol = 1e-6,
                     const CompileOptions& opts = default_options()) {
  Graph g("e2e_" + what);
  std::vector<Value> xs;
  Feeds feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    xs.push_back(g.input(name, ins[i].shape()));
    feeds[name] = ins[i];
  }
  g.set_outputs(build(g, xs));
  std::vector<T> got;
  try {
    got = run_graph(g, feeds, {}, opts);
  } catch (const Error& e) {
    FAIL() << what << ": " << e.what();
  }
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    EXPECT_EQ(got[o].dtype, want[o].dtype) << what << " output " << o;
    const bool exact = !is_float(want[o].dtype);
    expect_close(got[o], want[o], exact ? 0 : rtol, exact ? 0 : atol, what + " output " + std::to_string(o));
  }
}

}  // namespace rlx::e2e
