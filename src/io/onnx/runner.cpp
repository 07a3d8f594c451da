// OnnxRunner: import + compile per concrete input shapes, cached by those shapes.
#include <algorithm>
#include <iostream>
#include <list>
#include <mutex>
#include <optional>
#include <set>

#include "io/onnx/host_eval.h"
#include "io/onnx/importer.h"
#include "ir/dims.h"
#include "runtime/typed_io.h"

namespace rlx::onnx {

namespace {
constexpr size_t kMaxCached = 32;
// Inputs bound by value when a compile needs one: small ones only.
constexpr int64_t kMaxValueElements = 4096;

std::string shape_key(const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::string k;
  for (const auto& [name, dims] : shapes) {
    k += name;
    k += ':';
    for (int64_t d : dims) k += std::to_string(d) + ",";
    k += ';';
  }
  return k;
}

// The values between segments, by name: numeric tensors the compiled segments read, and
// host values (strings, sequences, optionals) only host nodes read.
using Env = std::map<std::string, OnnxValue>;

// One compiled segment of the model for one key (the whole model unless a node's output
// shape depends on run-time values: then the segments after it hang off this one, keyed
// by the shapes they are fed).
struct Stage {
  Segment seg;
  std::shared_ptr<CompiledGraph> cg;  // null when the segment computes nothing
  // The next segment's inputs bound by value (the value the segment stopped for; inputs a
  // later import asked for), and its compiled forms, most recently used first.
  // `tier` widens the binding as OnnxRunner's first import does: 1 small integer / bool
  // inputs, 2 all small inputs, 3 also segments that end before a value they compute.
  std::set<std::string> by_value;
  int tier = 0;
  std::list<std::pair<std::string, std::shared_ptr<Stage>>> next;
  // A first stage that is the whole model (compiled, no segment after it, its inputs the
  // model's): for each graph output, its index among the segment's outputs (OnnxRunner::run's
  // direct path); unset otherwise. Set once, when the stage is built.
  std::optional<std::vector<size_t>> whole;
};

}  // namespace

struct OnnxRunner::Impl {
  OnnxModel model;
  Session session;
  ImportOptions opts;
  // Most recently used first. Shared: a graph handed out by compiled() outlives its eviction.
  std::list<std::pair<std::string, std::shared_ptr<Stage>>> cache;
  // 0: none; 1: small integer/bool inputs; 2: all small inputs (see onnx.h); 3: also
  // segments that end before a value the model computes (Split::HostNodesAndValues).
  int by_value = 0;

  std::shared_ptr<Stage> first_stage(const std::map<std::string, std::vector<int64_t>>& shapes,
                                     const std::map<std::string, TypedTensor>& values, Split split);
  // run() of a model that compiles whole for these input shapes (one segment, no input bound
  // by value, every output computed by the graph) with each input in its declared dtype: the
  // caller's tensors go to the compiled graph as they are. The general path below copies each
  // input twice on the way (into an OnnxValue, then into the segment feed): PP-OCRv4 det 640's
  // 4.9 MB input, 10 MB of copying a run. nullopt where any condition fails (the general path
  // then runs, and reports what is wrong with the inputs).
  std::optional<std::vector<TypedTensor>> run_whole(const std::map<std::string, TypedTensor>& inputs);
  std::shared_ptr<Stage> next_stage(Stage& prev, int begin, const Env& env);
  // Imports a segment with `import(importer)` and compiles it (no graph: a segment that
  // computes nothing).
  template <class Import>
  std::shared_ptr<Stage> build(Import&& import);
};

template <class Import>
std::shared_ptr<Stage> OnnxRunner::Impl::build(Import&& import) {
  if (!model.source) fail(ErrorCategory::InvalidArgument, "OnnxRunner: the model was not loaded");
  Graph g(model.source->model.graph().name().empty() ? "onnx" : model.source->model.graph().name());
  Importer im(*model.source, opts, g);
  auto st = std::make_shared<Stage>();
  try {
    st->seg = import(im);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // e.g. protobuf checks or allocation failures on hostile models
    fail(ErrorCategory::Parse, model.path, ": the model could not be imported: ", e.what());
  }
  if (!st->seg.bind.empty()) st->by_value.insert(st->seg.bind);
  // From here the graph holds the weights it reads, the source only weakly: what the
  // backend repacks and releases while it compiles is freed as it goes.
  release_initializers(*model.source);
  if (!g.outputs().empty()) st->cg = std::make_shared<CompiledGraph>(session.compile(std::move(g)));
  // The host node this segment stops before belongs in the dispatch report too: no backend
  // runs it (strings, sequences, optionals, or an output shape that depends on values).
  if (st->seg.host_node() && apply_env(session.options()).dispatch_report) {
    const pb::NodeProto& n = model.source->model.graph().node(st->seg.end);
    std::cerr << "[rlx] dispatch report: node '" << (!n.name().empty() ? n.name() : n.output_size() ? n.output(0) : n.op_type()) << "' ("
              << n.op_type() << ") runs on the host between compiled segments\n";
  }
  return st;
}

OnnxRunner::OnnxRunner(OnnxModel model, Session session, ImportOptions opts)
    : impl_(std::make_unique<Impl>(Impl{std::move(model), std::move(session), opts, {}})) {
  // The runner imports per concrete shapes: the model's own import would only pin every
  // weight (the compiled graphs hold what they read; see ModelSource).
  impl_->model.graph = Graph();
}
OnnxRunner::~OnnxRunner() = default;
OnnxRunner::OnnxRunner(OnnxRunner&&) noexcept = default;

const OnnxModel& OnnxRunner::model() const { return impl_->model; }
size_t OnnxRunner::cache_size() const { return impl_->cache.size(); }

namespace {

// Tier 1 binds small integer and bool inputs (shapes, axes, flags); tier 2 every small input.
bool binds_at(const TypedTensor& t, int tier) {
  const bool shape_like = is_integer(t.dtype) || t.dtype == DType::Bool;
  return dims_numel(t.dims) <= kMaxValueElements && (tier >= 2 || shape_like);  // dims checked when fed
}

std::map<std::string, TypedTensor> value_inputs(const std::map<std::string, TypedTensor>& feed, int tier) {
  std::map<std::string, TypedTensor> v;
  for (const auto& [name, t] : feed)
    if (binds_at(t, tier)) v[name] = t;
  return v;
}

// "f32[1,3,s,s]"-style text of a declared input (symbolic dims by their names, "?" if unnamed).
std::string info_str(const OnnxValueInfo& info) {
  std::string s = std::string(dtype_name(info.dtype)) + "[";
  for (size_t i = 0; i < info.dims.size(); ++i) {
    if (i) s += ",";
    if (info.dims[i] >= 0) s += std::to_string(info.dims[i]);
    else s += i < info.dim_params.size() && !info.dim_params[i].empty() ? info.dim_params[i] : "?";
  }
  return s + "]";
}

std::string value_key(const std::map<std::string, TypedTensor>& values) {
  std::string k;
  for (const auto& [name, t] : values) {
    k += name + "=" + std::to_string(int(t.dtype)) + ":";
    k.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    k += ';';
  }
  return k;
}

// The compiled graph of a stage that runs the whole model.
std::shared_ptr<CompiledGraph> whole(const Stage& st, const std::string& path) {
  if (st.seg.end >= 0)
    fail(ErrorCategory::Unsupported, path, ": the model runs in segments (node ", st.seg.end,
         " of the main graph needs run-time values to import); run it with OnnxRunner::run");
  return st.cg;
}

template <class List>
void remember(List& list, std::string key, typename List::value_type::second_type v) {
  list.emplace_front(std::move(key), std::move(v));
  if (list.size() > kMaxCached) list.pop_back();
}

template <class List>
typename List::value_type::second_type recall(List& list, const std::string& key) {
  for (auto it = list.begin(); it != list.end(); ++it)
    if (it->first == key) {
      list.splice(list.begin(), list, it);
      return list.front().second;
    }
  return nullptr;
}

bool host_kind(const OnnxValueInfo& info) { return info.kind != ValueKind::Tensor || info.onnx_type == 8; }

std::string kind_name(const OnnxValueInfo& info) {
  switch (info.kind) {
    case ValueKind::Sequence: return "a sequence";
    case ValueKind::Optional: return "an optional";
    case ValueKind::Map: return "a map";
    case ValueKind::Tensor: break;
  }
  return info.onnx_type == 8 ? "a string tensor" : "a tensor";
}

// The model's inputs with their types (or kinds), for messages.
std::string known_inputs(const OnnxModel& m) {
  std::string s;
  for (const auto& info : m.inputs)
    s += (s.empty() ? "" : ", ") + info.name + " " + (host_kind(info) ? kind_name(info) : info_str(info));
  return s.empty() ? std::string("none") : s;
}

// Fails unless every key of `named` is an input of the model: a misspelt name would otherwise
// be ignored (run: the input missing; compiled: the graph compiled for the declared dims).
template <class Map>
void check_input_names(const OnnxModel& m, const Map& named, const std::string& where) {
  for (const auto& [name, v] : named) {
    (void)v;
    bool found = false;
    for (const auto& info : m.inputs) found = found || info.name == name;
    if (!found)
      fail(ErrorCategory::InvalidArgument, m.path, ": ", where, "the model has no input '", name, "' (its inputs: ",
           known_inputs(m), ")");
  }
}

}  // namespace

std::shared_ptr<CompiledGraph> OnnxRunner::compiled(const std::map<std::string, std::vector<int64_t>>& shapes) {
  check_input_names(impl_->model, shapes, "OnnxRunner::compiled: ");
  // A graph compiled for these shapes with inputs bound by value counts too (the most
  // recently used one).
  std::string prefix = shape_key(shapes) + "|";
  auto& cache = impl_->cache;
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->first.compare(0, prefix.size(), prefix) == 0) return whole(*it->second, impl_->model.path);
  return compiled_for(shapes, {});
}

std::shared_ptr<CompiledGraph> OnnxRunner::compiled_for(const std::map<std::string, std::vector<int64_t>>& shapes,
                                                        const std::map<std::string, TypedTensor>& values) {
  check_input_names(impl_->model, shapes, "OnnxRunner::compiled_for: ");
  check_input_names(impl_->model, values, "OnnxRunner::compiled_for: ");
  return whole(*impl_->first_stage(shapes, values, Split::HostNodes), impl_->model.path);
}

std::shared_ptr<Stage> OnnxRunner::Impl::first_stage(const std::map<std::string, std::vector<int64_t>>& shapes,
                                                     const std::map<std::string, TypedTensor>& values, Split split) {
  std::string key = shape_key(shapes) + "|" + value_key(values);
  if (auto st = recall(cache, key)) return st;
  auto st = build([&](Importer& im) { return im.import_main(shapes, values, split); });
  if (st->cg && st->seg.end < 0) {
    const std::vector<std::string> names = st->cg->input_names();
    bool all = names.size() == model.inputs.size();
    for (const auto& info : model.inputs)
      all = all && std::find(names.begin(), names.end(), info.name) != names.end();
    std::vector<size_t> order;
    for (const auto& vo : model.source->model.graph().output()) {
      auto pos = std::find(st->seg.outputs.begin(), st->seg.outputs.end(), vo.name());
      all = all && pos != st->seg.outputs.end();
      if (all) order.push_back(size_t(pos - st->seg.outputs.begin()));
    }
    if (all) st->whole = std::move(order);
  }
  remember(cache, key, st);
  return st;
}

// The segment from `begin` fed `env`, compiled for the shapes in it (and the values of the
// names the previous stage binds by value), cached on `prev`.
std::shared_ptr<Stage> OnnxRunner::Impl::next_stage(Stage& prev, int begin, const Env& env) {
  for (;;) {
    std::string key = std::to_string(begin) + "|";
    for (const auto& [name, v] : env) {
      key += name;
      if (is_host_value(v)) {  // only host nodes read it: its name is all the segment needs
        key += ":host;";
        continue;
      }
      key += ":" + std::to_string(int(v.tensor.dtype)) + ":";
      for (int64_t d : v.tensor.dims) key += std::to_string(d) + ",";
      if (prev.by_value.count(name)) {
        key += "=";
        key.append(reinterpret_cast<const char*>(v.tensor.bytes.data()), v.tensor.bytes.size());
      }
      key += ';';
    }
    if (auto st = recall(prev.next, key)) return st;
    // A new shape (or value): the segment's inputs, and its constants (the previous
    // segment's, plus the values bound here).
    std::vector<SegmentInput> inputs;
    std::map<std::string, HostTensor> consts = prev.seg.constants;
    for (const auto& [name, v] : env) {
      if (is_host_value(v)) inputs.push_back({name, true});
      else if (prev.by_value.count(name)) consts[name] = to_host(v, name);
      else inputs.push_back({name, false, v.tensor.dtype, v.onnx_type, v.tensor.dims});
    }
    std::shared_ptr<Stage> st;
    try {
      const Split split = prev.tier >= 3 ? Split::HostNodesAndValues : Split::HostNodes;
      st = build([&](Importer& im) { return im.import_segment(begin, inputs, consts, split); });
    } catch (const ConstantRequiredError& e) {
      // An input of this segment is needed by value: bind it (small ones only) and retry;
      // else widen the binding a tier.
      auto it = env.find(e.value);
      if (it != env.end() && it->second.is_numeric() && !prev.by_value.count(e.value) &&
          dims_numel(it->second.tensor.dims) <= kMaxValueElements) {
        prev.by_value.insert(e.value);
        continue;
      }
      if (prev.tier >= 3) throw;
      ++prev.tier;
      for (const auto& [name, v] : env)
        if (v.is_numeric() && binds_at(v.tensor, prev.tier)) prev.by_value.insert(name);
      continue;
    }
    remember(prev.next, key, st);
    return st;
  }
}


std::optional<std::vector<TypedTensor>> OnnxRunner::Impl::run_whole(const std::map<std::string, TypedTensor>& inputs) {
  if (by_value != 0 || inputs.size() != model.inputs.size()) return std::nullopt;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& info : model.inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end() || it->second.dtype != info.dtype) return std::nullopt;
    try {
      (void)runtime::numel_of(it->second.dims);
    } catch (const Error&) {
      return std::nullopt;
    }
    shapes[info.name] = it->second.dims;
  }
  std::shared_ptr<Stage> st;
  try {
    st = first_stage(shapes, {}, Split::HostNodes);
  } catch (const ConstantRequiredError&) {
    return std::nullopt;
  }
  if (!st || !st->whole) return std::nullopt;
  const std::vector<size_t>& order = *st->whole;
  std::vector<TypedTensor> res = st->cg->run_typed(inputs);
  if (res.size() != st->seg.outputs.size())
    fail(ErrorCategory::Internal, model.path, ": the graph gave ", res.size(), " values, expected ",
         st->seg.outputs.size());
  std::vector<TypedTensor> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(std::move(res[i]));  // moved, as the general path does
  return out;
}

std::vector<TypedTensor> OnnxRunner::run(const std::map<std::string, TypedTensor>& inputs) {
  return detail::guard("OnnxRunner::run", [&] {
    const OnnxModel& m = impl_->model;
    for (const auto& info : m.inputs)
      if (host_kind(info))
        fail(ErrorCategory::InvalidArgument, m.path, ": input '", info.name, "' is ", kind_name(info),
             ": run the model with OnnxRunner::run_values");
    if (auto direct = impl_->run_whole(inputs)) return std::move(*direct);
    std::map<std::string, OnnxValue> values;
    for (const auto& [name, t] : inputs) {
      int type = 0;
      for (const auto& info : m.inputs)
        if (info.name == name) type = info.onnx_type;
      values.emplace(name, OnnxValue::of(t, type));
    }
    std::vector<OnnxValue> outs = run_unguarded(values);
    std::vector<TypedTensor> res;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].is_numeric())
        fail(ErrorCategory::InvalidArgument, m.path, ": output '", m.outputs[i].name, "' is ", outs[i].describe(),
             ": run the model with OnnxRunner::run_values");
      res.push_back(std::move(outs[i].tensor));
    }
    return res;
  });
}

std::vector<OnnxValue> OnnxRunner::run_values(const std::map<std::string, OnnxValue>& inputs) {
  return detail::guard("OnnxRunner::run_values", [&] { return run_unguarded(inputs); });
}

std::vector<OnnxValue> OnnxRunner::run_unguarded(const std::map<std::string, OnnxValue>& inputs) {
  const OnnxModel& m = impl_->model;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, TypedTensor> feed;
  check_input_names(m, inputs, "");
  Env env;
  for (const auto& info : m.inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end())
      fail(ErrorCategory::InvalidArgument, m.path, ": missing input '", info.name, "' (its inputs: ", known_inputs(m), ")");
    const OnnxValue& v = it->second;
    if (host_kind(info)) {
      const bool fits = info.kind == ValueKind::Optional ? true
                        : info.kind == ValueKind::Tensor ? v.is_string()
                                                         : v.kind == info.kind;
      if (!fits)
        fail(ErrorCategory::InvalidArgument, m.path, ": input '", info.name, "' is ", kind_name(info), ", got ",
             v.describe());
      env[info.name] = v;
      continue;
    }
    if (!v.is_numeric())
      fail(ErrorCategory::InvalidArgument, m.path, ": input '", info.name, "' is ", info_str(info), ", got ", v.describe());
    const TypedTensor& t = v.tensor;
    try {
      (void)runtime::numel_of(t.dims);  // dims are non-negative and their product fits (no allocation)
      shapes[info.name] = t.dims;
      if (t.dtype == info.dtype) feed[info.name] = t;
      else feed[info.name] = runtime::convert_tensor(t, info.dtype);
    } catch (const Error& e) {
      fail(e.category(), m.path, ": input '", info.name, "' (", dtype_name(t.dtype), " given, the model takes ",
           info_str(info), "): ", e.what());
    }
    env[info.name].onnx_type = info.onnx_type;
  }
  std::shared_ptr<Stage> st;
  while (!st) {
    const int tier = impl_->by_value;
    try {
      st = impl_->first_stage(shapes, tier ? value_inputs(feed, std::min(tier, 2)) : std::map<std::string, TypedTensor>{},
                              tier >= 3 ? Split::HostNodesAndValues : Split::HostNodes);
    } catch (const ConstantRequiredError&) {
      if (tier >= 3) throw;
      ++impl_->by_value;
    }
  }
  for (auto& [name, t] : feed) env[name].tensor = std::move(t);
  const pb::GraphProto& gp = m.source->model.graph();
  // Segment by segment: run the compiled part, evaluate the node that needs run-time values
  // (or host values) on the host, and go on with the segment compiled for what came out.
  for (;;) {
    std::vector<TypedTensor> res;
    if (st->cg) {
      std::map<std::string, TypedTensor> used;
      for (const auto& name : st->cg->input_names()) {
        auto it = env.find(name);
        if (it == env.end()) fail(ErrorCategory::Internal, m.path, ": compiled graph wants unknown input '", name, "'");
        used.emplace(name, std::move(it->second.tensor));
      }
      res = st->cg->run_typed(used);
      for (auto& [name, t] : used) env[name].tensor = std::move(t);  // forwarded to the next segment
    }
    const Segment& seg = st->seg;
    if (res.size() != seg.outputs.size())
      fail(ErrorCategory::Internal, m.path, ": segment gave ", res.size(), " values, expected ", seg.outputs.size());
    if (seg.end < 0) {  // the model's outputs: computed by the graph, or host values held here
      std::vector<OnnxValue> outs;
      for (const auto& vo : gp.output()) {
        auto pos = std::find(seg.outputs.begin(), seg.outputs.end(), vo.name());
        if (pos != seg.outputs.end()) {
          size_t i = size_t(pos - seg.outputs.begin());
          int type = 0;
          if (vo.type().has_tensor_type()) type = vo.type().tensor_type().elem_type();
          outs.push_back(OnnxValue::of(std::move(res[i]), type));
        } else if (auto v = env.find(vo.name()); v != env.end()) {
          outs.push_back(v->second);
        } else {
          fail(ErrorCategory::Internal, m.path, ": output '", vo.name(), "' was not computed");
        }
      }
      return outs;
    }
    Env next;
    for (const auto& name : seg.forward) next[name] = std::move(env.at(name));
    for (size_t i = 0; i < res.size(); ++i) next[seg.outputs[i]] = OnnxValue::of(std::move(res[i]), seg.types.at(seg.outputs[i]));
    for (auto& [name, v] : env)  // host values stay with the runner until the model ends
      if (is_host_value(v) && !next.count(name)) next[name] = std::move(v);
    int begin = seg.end;
    if (seg.host_node()) {
      const pb::NodeProto& node = gp.node(seg.end);
      std::unordered_set<std::string> read;
      names_read(node, read);
      Scope scope;
      for (const auto& name : read) {
        if (name.empty()) continue;
        if (auto c = seg.constants.find(name); c != seg.constants.end()) scope.set(name, from_host(c->second));
        else if (auto v = next.find(name); v != next.end()) scope.set(name, v->second);
      }
      HostEval ev(*m.source, impl_->opts);
      std::vector<OnnxValue> outs = ev.eval(node, scope);
      for (int i = 0; i < node.output_size() && size_t(i) < outs.size(); ++i)
        if (!node.output(i).empty()) next[node.output(i)] = std::move(outs[size_t(i)]);
      begin = seg.end + 1;
    }
    st = impl_->next_stage(*st, begin, next);
    env = std::move(next);
  }
}

}  // namespace rlx::onnx
