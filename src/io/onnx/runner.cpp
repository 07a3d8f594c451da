// OnnxRunner: import + compile per concrete input shapes, cached by those shapes.
#include <list>
#include <mutex>

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
}  // namespace

struct OnnxRunner::Impl {
  OnnxModel model;
  Session session;
  ImportOptions opts;
  // Most recently used first. Shared: a graph handed out by compiled() outlives its eviction.
  std::list<std::pair<std::string, std::shared_ptr<CompiledGraph>>> cache;
  int by_value = 0;  // 0: none; 1: small integer/bool inputs; 2: all small inputs (see onnx.h)
};

OnnxRunner::OnnxRunner(OnnxModel model, Session session, ImportOptions opts)
    : impl_(std::make_unique<Impl>(Impl{std::move(model), std::move(session), opts, {}})) {}
OnnxRunner::~OnnxRunner() = default;
OnnxRunner::OnnxRunner(OnnxRunner&&) noexcept = default;

const OnnxModel& OnnxRunner::model() const { return impl_->model; }
size_t OnnxRunner::cache_size() const { return impl_->cache.size(); }

namespace {

// Tier 1 binds small integer and bool inputs (shapes, axes, flags); tier 2 every small input.
std::map<std::string, TypedTensor> value_inputs(const std::map<std::string, TypedTensor>& feed, int tier) {
  std::map<std::string, TypedTensor> v;
  for (const auto& [name, t] : feed) {
    const int64_t n = dims_numel(t.dims);  // checked when the feed was built
    bool shape_like = is_integer(t.dtype) || t.dtype == DType::Bool;
    if (n <= kMaxValueElements && (tier >= 2 || shape_like)) v[name] = t;
  }
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

}  // namespace

std::shared_ptr<CompiledGraph> OnnxRunner::compiled(const std::map<std::string, std::vector<int64_t>>& shapes) {
  // A graph compiled for these shapes with inputs bound by value counts too (the most
  // recently used one).
  std::string prefix = shape_key(shapes) + "|";
  auto& cache = impl_->cache;
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->first.compare(0, prefix.size(), prefix) == 0) return it->second;
  return compiled_for(shapes, {});
}

std::shared_ptr<CompiledGraph> OnnxRunner::compiled_for(const std::map<std::string, std::vector<int64_t>>& shapes,
                                        const std::map<std::string, TypedTensor>& values) {
  std::string key = shape_key(shapes) + "|" + value_key(values);
  auto& cache = impl_->cache;
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->first == key) {
      cache.splice(cache.begin(), cache, it);
      return cache.front().second;
    }
  }
  Graph g = import_graph(impl_->model, shapes, impl_->opts, values);
  auto cg = std::make_shared<CompiledGraph>(impl_->session.compile(g));
  cache.emplace_front(key, std::move(cg));
  if (cache.size() > kMaxCached) cache.pop_back();
  return cache.front().second;
}

std::vector<TypedTensor> OnnxRunner::run(const std::map<std::string, TypedTensor>& inputs) {
  return detail::guard("OnnxRunner::run", [&] { return run_unguarded(inputs); });
}

std::vector<TypedTensor> OnnxRunner::run_unguarded(const std::map<std::string, TypedTensor>& inputs) {
  const OnnxModel& m = impl_->model;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, TypedTensor> feed;
  auto known = [&] {  // built only for a message
    std::string s;
    for (const auto& info : m.inputs) s += (s.empty() ? "" : ", ") + info.name + " " + info_str(info);
    return s.empty() ? std::string("none") : s;
  };
  for (const auto& [name, t] : inputs) {
    (void)t;
    bool found = false;
    for (const auto& info : m.inputs) found = found || info.name == name;
    if (!found)
      fail(ErrorCategory::InvalidArgument, m.path, ": the model has no input '", name, "' (its inputs: ", known(), ")");
  }
  for (const auto& info : m.inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end())
      fail(ErrorCategory::InvalidArgument, m.path, ": missing input '", info.name, "' (its inputs: ", known(), ")");
    const TypedTensor& t = it->second;
    try {
      (void)runtime::numel_of(t.dims);  // dims are non-negative and their product fits (no allocation)
      shapes[info.name] = t.dims;
      if (t.dtype == info.dtype) feed[info.name] = t;
      else feed[info.name] = runtime::convert_tensor(t, info.dtype);
    } catch (const Error& e) {
      fail(e.category(), m.path, ": input '", info.name, "' (", dtype_name(t.dtype), " given, the model takes ",
           info_str(info), "): ", e.what());
    }
  }
  std::shared_ptr<CompiledGraph> cg;
  while (!cg) {
    try {
      cg = compiled_for(shapes, impl_->by_value ? value_inputs(feed, impl_->by_value) : std::map<std::string, TypedTensor>{});
    } catch (const ConstantRequiredError&) {
      if (impl_->by_value >= 2) throw;
      ++impl_->by_value;
    }
  }
  std::map<std::string, TypedTensor> used;
  for (const auto& name : cg->input_names()) {
    auto it = feed.find(name);
    if (it == feed.end()) fail(ErrorCategory::Internal, m.path, ": compiled graph wants unknown input '", name, "'");
    used.emplace(name, std::move(it->second));
  }
  return cg->run_typed(used);
}

}  // namespace rlx::onnx
