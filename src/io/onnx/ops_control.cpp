// Control flow: If (a constant condition inlines its branch; otherwise both branches
// are computed and selected with where), Loop and Scan (unrolled while importing: the
// trip count and the loop condition must fold to constants; Scan before opset 9 per
// batch entry).
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {
constexpr int64_t kMaxUnroll = 4096;
}

std::vector<Value> lower_if(NodeCtx& c) {
  const pb::GraphProto* then_g = c.attr_graph("then_branch");
  const pb::GraphProto* else_g = c.attr_graph("else_branch");
  if (!then_g || !else_g) c.invalid("needs then_branch and else_branch graphs");
  if (c.is_const(0)) {
    bool cond = c.const_reals(0, "cond").at(0) != 0;
    return c.im.import_body(cond ? *then_g : *else_g, {});
  }
  // A condition computed at run time: both branches run and where() selects. A branch
  // that does not import for these shapes means the condition must be known first.
  std::vector<Value> a, b;
  try {
    a = c.im.import_body(*then_g, {});
    b = c.im.import_body(*else_g, {});
  } catch (const ConstantRequiredError&) {
    throw;
  } catch (const Error& e) {
    throw ConstantRequiredError(detail::concat("ONNX ", c.where(), ": the condition must be known to import (a branch fails: ",
                                               e.what(), ")"),
                                c.node.input(0));
  }
  if (a.size() != b.size()) c.invalid("branches have different output counts");
  Value cond = c.reshape(c.in(0), {});
  std::vector<Value> out;
  for (size_t i = 0; i < a.size(); ++i) {
    const Shape& ta = c.g.type(a[i]);
    const Shape& tb = c.g.type(b[i]);
    if (!(ta == tb))
      throw ConstantRequiredError(detail::concat("ONNX ", c.where(), ": the condition must be known to import (branch outputs ",
                                                 ta.str(), " and ", tb.str(), " differ)"),
                                  c.node.input(0));
    out.push_back(c.op(OpKind::Where, {cond, a[i], b[i]}));
  }
  return out;
}

std::vector<Value> lower_loop(NodeCtx& c) {
  const pb::GraphProto* body = c.attr_graph("body");
  if (!body) c.invalid("needs a body graph");
  int64_t max_trip = kMaxUnroll + 1;
  bool has_max = c.has(0);
  if (has_max) max_trip = c.const_ints(0, "M").at(0);
  bool cond = true;
  if (c.has(1)) cond = c.const_reals(1, "cond").at(0) != 0;
  if (!has_max && !c.has(1)) c.unsupported("an infinite loop (neither M nor cond)");
  int n_state = c.num_inputs() - 2;
  std::vector<Value> state;
  for (int i = 0; i < n_state; ++i) state.push_back(c.in(i + 2));
  int n_scan = body->output_size() - 1 - n_state;
  if (n_scan < 0) c.invalid("body has too few outputs");
  std::vector<std::vector<Value>> scans(c.host_size(n_scan));
  int64_t it = 0;
  for (; it < max_trip && cond; ++it) {
    if (it >= kMaxUnroll) c.unsupported("more than ", kMaxUnroll, " iterations to unroll");
    std::vector<Value> in{c.im.constant(make_i64({}, {it})), c.im.constant(make_tensor(DType::Bool, {}, {1.0}))};
    in.insert(in.end(), state.begin(), state.end());
    std::vector<Value> out = c.im.import_body(*body, in);
    auto ct = c.im.const_tensor(out[0]);
    if (!ct) c.unsupported("the loop condition does not fold to a constant (data-dependent trip count)");
    cond = tensor_to_f64(*ct).at(0) != 0;
    for (int i = 0; i < n_state; ++i) state[size_t(i)] = out[size_t(1 + i)];
    for (int i = 0; i < n_scan; ++i) scans[size_t(i)].push_back(out[size_t(1 + n_state + i)]);
  }
  std::vector<Value> result = state;
  for (int i = 0; i < n_scan; ++i) {
    if (scans[size_t(i)].empty()) c.unsupported("a loop with zero iterations and scan outputs");
    std::vector<Value> parts;
    for (Value v : scans[size_t(i)]) parts.push_back(c.unsqueeze(v, {0}));
    result.push_back(c.concat(parts, 0));
  }
  for (auto& v : result) v = c.op(OpKind::Identity, {v});
  return result;
}

namespace {

// Scan before opset 9: inputs [sequence_lens], states [batch, ...], scan inputs [batch,
// seq, ...] (scanned along axis 1, `directions` per input); the body runs over each batch
// entry's sequence on its own: states without the batch dim, one step's slice of every
// scan input. Outputs: the final states and the per-step outputs in step order, each
// stacked back over the batch. sequence_lens must be absent or every entry the full
// length (shorter sequences would need padded outputs: refused).
std::vector<Value> scan_batched(NodeCtx& c, const pb::GraphProto& body) {
  const int64_t m = c.attr_int("num_scan_inputs", 0);
  const int64_t n_state = int64_t(c.num_inputs()) - 1 - m;
  if (m <= 0 || n_state < 0) c.invalid("bad num_scan_inputs");
  const std::vector<int64_t> dirs = c.attr_ints("directions", std::vector<int64_t>(size_t(m), 0));
  if (int64_t(dirs.size()) != m) c.invalid("directions must have num_scan_inputs entries");
  std::vector<Value> xs;
  int64_t batch = -1, steps = -1;
  for (int64_t j = 0; j < m; ++j) {
    Value x = c.in(int(1 + n_state + j));
    auto d = c.vdims(x);
    if (d.size() < 2) c.invalid("scan input ", j, " must be [batch, sequence, ...]");
    if ((batch >= 0 && d[0] != batch) || (steps >= 0 && d[1] != steps)) c.invalid("scan inputs differ in batch or length");
    batch = d[0];
    steps = d[1];
    xs.push_back(x);
  }
  if (c.has(0))
    for (int64_t len : c.const_ints(0, "sequence_lens"))
      if (len != steps) c.unsupported("sequence_lens below the scan length (", len, " of ", steps, ")");
  if (steps > kMaxUnroll || batch * steps > kMaxUnroll) c.unsupported("more than ", kMaxUnroll, " steps to unroll");
  auto row = [&](Value v, int64_t b) {  // entry b without its batch dim
    auto d = c.vdims(v);
    if (d.empty() || d[0] != batch) c.invalid("every state and scan input must lead with the batch dim ", batch);
    Value s = c.slice(v, {b}, {b + 1}, {0});
    d.erase(d.begin());
    return c.reshape(s, d);
  };
  const int64_t k = body.output_size() - n_state;
  if (k < 0) c.invalid("the body gives fewer outputs than there are states");
  std::vector<std::vector<Value>> final_states(c.host_size(n_state)), scans(c.host_size(k));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> state;
    for (int64_t i = 0; i < n_state; ++i) state.push_back(row(c.in(int(1 + i)), b));
    std::vector<Value> seq;
    for (Value x : xs) seq.push_back(row(x, b));
    std::vector<std::vector<Value>> outs(c.host_size(k));
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<Value> in = state;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t pos = dirs[size_t(j)] ? steps - 1 - t : t;
        Value sl = c.slice(seq[size_t(j)], {pos}, {pos + 1}, {0});
        auto d = c.vdims(sl);
        d.erase(d.begin());
        in.push_back(c.reshape(sl, d));
      }
      std::vector<Value> o = c.im.import_body(body, in);
      for (int64_t i = 0; i < n_state; ++i) state[size_t(i)] = o[size_t(i)];
      for (int64_t i = 0; i < k; ++i) outs[size_t(i)].push_back(c.unsqueeze(o[size_t(n_state + i)], {0}));
    }
    for (int64_t i = 0; i < n_state; ++i) final_states[size_t(i)].push_back(c.unsqueeze(state[size_t(i)], {0}));
    for (int64_t i = 0; i < k; ++i) {
      if (outs[size_t(i)].empty()) c.unsupported("a scan of length 0");
      scans[size_t(i)].push_back(c.unsqueeze(c.concat(outs[size_t(i)], 0), {0}));
    }
  }
  if (batch <= 0) c.unsupported("a scan over an empty batch");
  std::vector<Value> result;
  for (auto& parts : final_states) result.push_back(c.op(OpKind::Identity, {c.concat(parts, 0)}));
  for (auto& parts : scans) result.push_back(c.op(OpKind::Identity, {c.concat(parts, 0)}));
  return result;
}

}  // namespace

std::vector<Value> lower_scan(NodeCtx& c) {
  const pb::GraphProto* body = c.attr_graph("body");
  if (!body) c.invalid("needs a body graph");
  if (c.opset < 9) return scan_batched(c, *body);
  int64_t m = c.attr_int("num_scan_inputs", 0);
  int n_in = c.num_inputs();
  int64_t n_state = n_in - m;
  if (m <= 0 || n_state < 0) c.invalid("bad num_scan_inputs");
  std::vector<int64_t> in_axes = c.attr_ints("scan_input_axes", std::vector<int64_t>(size_t(m), 0));
  std::vector<int64_t> in_dirs = c.attr_ints("scan_input_directions", std::vector<int64_t>(size_t(m), 0));
  int64_t k = body->output_size() - n_state;
  std::vector<int64_t> out_axes = c.attr_ints("scan_output_axes", std::vector<int64_t>(size_t(k), 0));
  std::vector<int64_t> out_dirs = c.attr_ints("scan_output_directions", std::vector<int64_t>(size_t(k), 0));
  std::vector<Value> state;
  for (int64_t i = 0; i < n_state; ++i) state.push_back(c.in(int(i)));
  int64_t steps = -1;
  std::vector<Value> xs;
  std::vector<int64_t> axes;
  for (int64_t j = 0; j < m; ++j) {
    Value x = c.in(int(n_state + j));
    int64_t r = int64_t(c.vdims(x).size());
    int64_t a = c.axis(in_axes[size_t(j)], r);
    int64_t len = c.vdims(x)[size_t(a)];
    if (steps >= 0 && len != steps) c.invalid("scan inputs differ in sequence length");
    steps = len;
    xs.push_back(x);
    axes.push_back(a);
  }
  if (steps > kMaxUnroll) c.unsupported("more than ", kMaxUnroll, " steps to unroll");
  std::vector<std::vector<Value>> outs(c.host_size(k));
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Value> in = state;
    for (int64_t j = 0; j < m; ++j) {
      int64_t pos = in_dirs[size_t(j)] ? steps - 1 - t : t;
      Value s = c.slice(xs[size_t(j)], {pos}, {pos + 1}, {axes[size_t(j)]});
      auto d = c.vdims(s);
      d.erase(d.begin() + axes[size_t(j)]);
      in.push_back(c.reshape(s, d));
    }
    std::vector<Value> o = c.im.import_body(*body, in);
    for (int64_t i = 0; i < n_state; ++i) state[size_t(i)] = o[size_t(i)];
    for (int64_t i = 0; i < k; ++i) outs[size_t(i)].push_back(o[size_t(n_state + i)]);
  }
  std::vector<Value> result;
  for (Value v : state) result.push_back(c.op(OpKind::Identity, {v}));
  for (int64_t i = 0; i < k; ++i) {
    if (outs[size_t(i)].empty()) c.unsupported("a scan of length 0");
    auto& parts = outs[size_t(i)];
    if (out_dirs[size_t(i)]) std::reverse(parts.begin(), parts.end());
    int64_t r = int64_t(c.vdims(parts[0]).size()) + 1;
    int64_t a = c.axis(out_axes[size_t(i)], r);
    std::vector<Value> un;
    for (Value v : parts) un.push_back(c.unsqueeze(v, {a}));
    result.push_back(c.op(OpKind::Identity, {c.concat(un, a)}));
  }
  return result;
}

}  // namespace rlx::onnx
