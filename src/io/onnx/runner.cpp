// OnnxRunner: import + compile per concrete input shapes, cached by those shapes.
#include <list>
#include <mutex>

#include "io/onnx/importer.h"
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
  // Most recently used first.
  std::list<std::pair<std::string, CompiledGraph>> cache;
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
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    bool shape_like = is_integer(t.dtype) || t.dtype == DType::Bool;
    if (n <= kMaxValueElements && (tier >= 2 || shape_like)) v[name] = t;
  }
  return v;
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

CompiledGraph& OnnxRunner::compiled(const std::map<std::string, std::vector<int64_t>>& shapes) {
  // A graph compiled for these shapes with inputs bound by value counts too (the most
  // recently used one).
  std::string prefix = shape_key(shapes) + "|";
  auto& cache = impl_->cache;
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->first.compare(0, prefix.size(), prefix) == 0) return it->second;
  return compiled_for(shapes, {});
}

CompiledGraph& OnnxRunner::compiled_for(const std::map<std::string, std::vector<int64_t>>& shapes,
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
  CompiledGraph cg = impl_->session.compile(g);
  cache.emplace_front(key, std::move(cg));
  if (cache.size() > kMaxCached) cache.pop_back();
  return cache.front().second;
}

std::vector<TypedTensor> OnnxRunner::run(const std::map<std::string, TypedTensor>& inputs) {
  const OnnxModel& m = impl_->model;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, TypedTensor> feed;
  for (const auto& info : m.inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) fail(ErrorCategory::InvalidArgument, m.path, ": missing input '", info.name, "'");
    shapes[info.name] = it->second.dims;
    if (it->second.dtype == info.dtype) feed[info.name] = it->second;
    else feed[info.name] = runtime::convert_tensor(it->second, info.dtype);
  }
  for (const auto& [name, t] : inputs) {
    (void)t;
    if (!shapes.count(name)) fail(ErrorCategory::InvalidArgument, m.path, ": the model has no input '", name, "'");
  }
  CompiledGraph* cg = nullptr;
  while (!cg) {
    try {
      cg = &compiled_for(shapes, impl_->by_value ? value_inputs(feed, impl_->by_value) : std::map<std::string, TypedTensor>{});
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
