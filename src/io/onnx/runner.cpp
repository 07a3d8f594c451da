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
  bool by_value = false;  // small inputs are bound by value (see onnx.h)
};

OnnxRunner::OnnxRunner(OnnxModel model, Session session, ImportOptions opts)
    : impl_(std::make_unique<Impl>(Impl{std::move(model), std::move(session), opts, {}})) {}
OnnxRunner::~OnnxRunner() = default;
OnnxRunner::OnnxRunner(OnnxRunner&&) noexcept = default;

const OnnxModel& OnnxRunner::model() const { return impl_->model; }
size_t OnnxRunner::cache_size() const { return impl_->cache.size(); }

namespace {

std::map<std::string, TypedTensor> value_inputs(const OnnxModel& m, const std::map<std::string, TypedTensor>& feed) {
  std::map<std::string, TypedTensor> v;
  for (const auto& [name, t] : feed) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    if (n <= kMaxValueElements) v[name] = t;
  }
  (void)m;
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
  if (!impl_->by_value) {
    try {
      cg = &compiled_for(shapes, {});
    } catch (const ConstantRequiredError&) {
      impl_->by_value = true;
    }
  }
  if (!cg) cg = &compiled_for(shapes, value_inputs(m, feed));
  std::map<std::string, TypedTensor> used;
  for (const auto& name : cg->input_names()) {
    auto it = feed.find(name);
    if (it == feed.end()) fail(ErrorCategory::Internal, m.path, ": compiled graph wants unknown input '", name, "'");
    used.emplace(name, std::move(it->second));
  }
  return cg->run_typed(used);
}

}  // namespace rlx::onnx
