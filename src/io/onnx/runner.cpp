// OnnxRunner: import + compile per concrete input shapes, cached by those shapes.
#include <list>
#include <mutex>

#include "io/onnx/importer.h"
#include "runtime/typed_io.h"

namespace rlx::onnx {

namespace {
constexpr size_t kMaxCached = 32;

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
};

OnnxRunner::OnnxRunner(OnnxModel model, Session session, ImportOptions opts)
    : impl_(std::make_unique<Impl>(Impl{std::move(model), std::move(session), opts, {}})) {}
OnnxRunner::~OnnxRunner() = default;
OnnxRunner::OnnxRunner(OnnxRunner&&) noexcept = default;

const OnnxModel& OnnxRunner::model() const { return impl_->model; }
size_t OnnxRunner::cache_size() const { return impl_->cache.size(); }

CompiledGraph& OnnxRunner::compiled(const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::string key = shape_key(shapes);
  auto& cache = impl_->cache;
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->first == key) {
      cache.splice(cache.begin(), cache, it);
      return cache.front().second;
    }
  }
  Graph g = import_graph(impl_->model, shapes, impl_->opts);
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
  CompiledGraph& cg = compiled(shapes);
  std::map<std::string, TypedTensor> used;
  for (const auto& name : cg.input_names()) {
    auto it = feed.find(name);
    if (it == feed.end()) fail(ErrorCategory::Internal, m.path, ": compiled graph wants unknown input '", name, "'");
    used.emplace(name, std::move(it->second));
  }
  return cg.run_typed(used);
}

}  // namespace rlx::onnx
