// ai.onnx.ml ops: ArrayFeatureExtractor (a gather along the last axis; a 1-D input is one
// row, so its result is [1, k] as the operator defines), Binarizer (1 where X > threshold,
// else 0, in X's type) and TreeEnsemble (below).
#include <cmath>
#include <functional>

#include "io/onnx/ops_table.h"
#include "io/onnx/tensor.h"

namespace rlx::onnx {

std::vector<Value> lower_array_feature_extractor(NodeCtx& c) {
  Value x = c.in(0);
  if (c.rank(0) == 0) c.invalid("X must have rank >= 1, got ", c.type(0).str());
  if (c.dtype(1) != DType::I64) c.invalid("Y (the indices) must be int64, got ", dtype_name(c.dtype(1)));
  if (c.rank(0) == 1) x = c.reshape(x, {1, c.dims(0)[0]});
  Value idx = c.reshape(c.in(1), {c.type(1).numel()});
  const int64_t axis = int64_t(c.vdims(x).size()) - 1;
  return {c.op(OpKind::Gather, {x, idx}, AxisAttrs{axis})};
}

std::vector<Value> lower_binarizer(NodeCtx& c) {
  const DType t = c.dtype(0);
  if (!is_float(t) && t != DType::I32 && t != DType::I64) c.invalid("X must be a float or int32/int64, got ", dtype_name(t));
  Value above = c.op(OpKind::Greater, {c.in(0), c.scalar(double(float(c.attr_float("threshold", 0))), t)});
  return {c.op(OpKind::Where, {above, c.scalar(1, t), c.scalar(0, t)})};
}

// TreeEnsemble (opset 5): every row of X [N, F] walks every tree from its root; interior
// node i compares X[row, featureid_i] with split_i by mode_i (0 <=, 1 <, 2 >=, 3 >, 4 ==,
// 5 !=, 6 member of the node's set: its run of membership_values up to a NaN) and goes to
// its true or false child, which is a node or, where the *leafs flag says so, a leaf; leaf j
// adds weight_j to target targetid_j. The walk is unrolled to the deepest path of the
// (constant) trees, all trees at once as [N, trees] gathers, so the graph stays static; the
// leaves reached are summed per target (SUM), or averaged over the trees (AVERAGE), then
// post_transform (NONE, LOGISTIC, SOFTMAX). MIN / MAX aggregation and the SOFTMAX_ZERO /
// PROBIT transforms are refused by name.
std::vector<Value> lower_tree_ensemble(NodeCtx& c) {
  if (c.rank(0) != 2 || !is_float(c.dtype(0))) c.invalid("X must be a 2-D float tensor, got ", c.type(0).str());
  const DType t = c.dtype(0);
  const auto xd = c.dims(0);
  const int64_t rows = xd[0], features = xd[1];
  auto ints = [&](const char* name) { return c.attr_ints(name); };
  auto reals = [&](const char* name) {
    auto a = c.attr_tensor(name);
    if (!a) c.invalid("needs the tensor attribute '", name, "'");
    return tensor_to_f64(*a);
  };
  const auto feat = ints("nodes_featureids"), tnode = ints("nodes_truenodeids"), fnode = ints("nodes_falsenodeids"),
             tleaf = ints("nodes_trueleafs"), fleaf = ints("nodes_falseleafs"), roots = ints("tree_roots"),
             target = ints("leaf_targetids");
  const auto split = reals("nodes_splits"), weight = reals("leaf_weights");
  std::vector<double> modes_d = c.has_attr("nodes_modes") ? reals("nodes_modes") : std::vector<double>(feat.size(), 0);
  const size_t n = feat.size(), leaves = target.size();
  const int64_t targets = c.attr_int("n_targets", 0);
  for (const auto* v : {&tnode, &fnode, &tleaf, &fleaf})
    if (v->size() != n) c.invalid("the nodes_* attributes must all have ", n, " entries");
  if (split.size() != n || modes_d.size() != n) c.invalid("nodes_splits and nodes_modes must have ", n, " entries");
  if (weight.size() != leaves) c.invalid("leaf_weights must have one entry per leaf (", leaves, ")");
  if (n == 0 || leaves == 0 || roots.empty() || targets <= 0) c.invalid("needs nodes, leaves, tree_roots and n_targets");
  const int64_t agg = c.attr_int("aggregate_function", 1), post = c.attr_int("post_transform", 0);
  if (agg != 0 && agg != 1) c.unsupported("aggregate_function ", agg, " (only AVERAGE 0 and SUM 1 are lowered)");
  if (post != 0 && post != 1 && post != 2) c.unsupported("post_transform ", post, " (NONE, SOFTMAX and LOGISTIC are lowered)");
  std::vector<int64_t> mode(n);
  for (size_t i = 0; i < n; ++i) {
    mode[i] = int64_t(modes_d[i]);
    if (mode[i] < 0 || mode[i] > 6) c.invalid("node ", i, " has mode ", mode[i], " (0..6)");
    if (feat[i] < 0 || feat[i] >= features) c.invalid("node ", i, " reads feature ", feat[i], " of ", features);
    for (int side = 0; side < 2; ++side) {
      const int64_t to = side ? fnode[i] : tnode[i];
      const bool leaf = (side ? fleaf[i] : tleaf[i]) != 0;
      if (to < 0 || to >= int64_t(leaf ? leaves : n))
        c.invalid("node ", i, "'s ", side ? "false" : "true", " child ", to, " is not a ", leaf ? "leaf" : "node");
    }
  }
  for (int64_t r : roots)
    if (r < 0 || r >= int64_t(n)) c.invalid("tree root ", r, " is not a node");
  for (int64_t tg : target)
    if (tg < 0 || tg >= targets) c.invalid("leaf target ", tg, " is outside n_targets ", targets);
  // Each member node's set: its run of membership_values up to a NaN, in node order.
  std::vector<std::vector<double>> sets(n);
  size_t members = 0;
  for (int64_t m : mode) members += m == 6;
  if (members) {
    const auto mv = reals("membership_values");
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      if (mode[i] != 6) continue;
      while (at < mv.size() && !std::isnan(mv[at])) sets[i].push_back(mv[at++]);
      if (at >= mv.size()) c.invalid("membership_values has fewer NaN-ended sets than the ", members, " member nodes");
      ++at;
    }
  }
  // The deepest path (interior nodes) from any root; a cycle is invalid.
  std::vector<int> state(n, 0);
  std::vector<int64_t> depth(n, 0);
  std::function<int64_t(size_t)> deep = [&](size_t i) -> int64_t {
    if (state[i] == 1) c.invalid("the trees have a cycle through node ", i);
    if (state[i] == 2) return depth[i];
    state[i] = 1;
    int64_t d = 0;
    if (!tleaf[i]) d = std::max(d, deep(size_t(tnode[i])));
    if (!fleaf[i]) d = std::max(d, deep(size_t(fnode[i])));
    state[i] = 2;
    return depth[i] = d + 1;
  };
  int64_t steps = 0;
  for (int64_t r : roots) steps = std::max(steps, deep(size_t(r)));

  const int64_t trees = int64_t(roots.size());
  size_t widest = 1;
  for (const auto& st : sets) widest = std::max(widest, st.size());
  std::vector<double> memb(n * widest, std::nan(""));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < sets[i].size(); ++j) memb[i * widest + j] = sets[i][j];
  const int64_t nn = int64_t(n), w = int64_t(widest);
  auto i64c = [&](const std::vector<int64_t>& v) { return c.im.constant(make_i64({int64_t(v.size())}, v)); };
  Value feat_c = i64c(feat), mode_c = i64c(mode), tnode_c = i64c(tnode), fnode_c = i64c(fnode);
  Value tleaf_c = i64c(tleaf), fleaf_c = i64c(fleaf);
  Value split_c = c.im.constant(make_tensor(t, {nn}, split)), memb_c = c.im.constant(make_tensor(t, {nn, w}, memb));
  std::vector<int64_t> base(c.host_size(rows));
  for (int64_t r = 0; r < rows; ++r) base[size_t(r)] = r * features;
  Value row_base = c.im.constant(make_i64({rows, 1}, base));
  Value flat_x = c.reshape(c.in(0), {rows * features});
  auto gather = [&](Value table, Value idx) { return c.op(OpKind::Gather, {table, idx}, AxisAttrs{0}); };
  auto is = [&](Value m, int64_t k) { return c.op(OpKind::Equal, {m, c.scalar(double(k), DType::I64)}); };

  Value cur = c.expand(c.reshape(i64c(roots), {1, trees}), {rows, trees});
  Value leaf = c.full({rows, trees}, 0, DType::I64);
  Value done = c.op(OpKind::Equal, {leaf, c.scalar(1, DType::I64)});  // all false
  for (int64_t s = 0; s < steps; ++s) {
    Value x = gather(flat_x, c.op(OpKind::Add, {row_base, gather(feat_c, cur)}));  // [rows, trees]
    Value sp = gather(split_c, cur), m = gather(mode_c, cur);
    Value member = c.reduce(OpKind::ReduceMax,
                            c.cast(c.op(OpKind::Equal, {gather(memb_c, cur), c.unsqueeze(x, {2})}), DType::I64), {2},
                            false);
    Value go = c.op(OpKind::NotEqual, {member, c.scalar(0, DType::I64)});
    const OpKind cmp[6] = {OpKind::LessEqual, OpKind::Less, OpKind::GreaterEqual, OpKind::Greater, OpKind::Equal,
                           OpKind::NotEqual};
    for (int k = 5; k >= 0; --k) go = c.op(OpKind::Where, {is(m, k), c.op(cmp[k], {x, sp}), go});
    Value next = c.op(OpKind::Where, {go, gather(tnode_c, cur), gather(fnode_c, cur)});
    Value to_leaf = c.op(OpKind::NotEqual, {c.op(OpKind::Where, {go, gather(tleaf_c, cur), gather(fleaf_c, cur)}),
                                            c.scalar(0, DType::I64)});
    Value arrive = c.op(OpKind::And, {to_leaf, c.op(OpKind::Not, {done})});
    leaf = c.op(OpKind::Where, {arrive, next, leaf});
    done = c.op(OpKind::Or, {done, to_leaf});
    cur = c.op(OpKind::Where, {done, c.scalar(0, DType::I64), next});  // finished rows park on node 0
  }
  // Leaf j's weight in its target's column; gathered per reached leaf, summed over trees.
  std::vector<double> contrib(c.host_size(int64_t(leaves) * targets), 0.0);
  for (size_t j = 0; j < leaves; ++j) contrib[j * size_t(targets) + size_t(target[j])] += weight[j];
  Value table = c.im.constant(make_tensor(t, {int64_t(leaves), targets}, contrib));
  Value y = c.reduce(OpKind::ReduceSum, gather(table, leaf), {1}, false);  // [rows, targets]
  if (agg == 0) y = c.op(OpKind::Div, {y, c.scalar(double(trees), t)});
  if (post == 1) y = c.op(OpKind::Softmax, {y}, AxisAttrs{-1});
  if (post == 2) y = c.op(OpKind::Sigmoid, {y});
  return {y};
}

}  // namespace rlx::onnx
