#include "backends/null/backend.h"

#include <cstring>
#include <map>

namespace rlx::null_backend {

namespace {

// Params by name, shared between executables by share_params_from.
struct ParamStore {
  struct Entry {
    Shape type;
    std::vector<uint8_t> bytes;
    bool set = false;
  };
  std::map<std::string, Entry> entries;
};

class NullExecutable final : public backend::Executable {
 public:
  explicit NullExecutable(opt::Plan plan) : plan_(std::move(plan)), params_(std::make_shared<ParamStore>()) {
    const Graph& g = plan_.graph;
    values_.resize(g.nodes().size());
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      for (const Shape& s : n.outputs) values_[i].emplace_back(s.bytes());
      if (n.kind == OpKind::Constant) {
        const Blob& b = n.attr<ConstantAttrs>().value;
        values_[i][0].assign(b.data(), b.data() + b.size());
      }
      if (n.kind == OpKind::Param) {
        const auto& leaf = n.attr<LeafAttrs>();
        ParamStore::Entry e{n.outputs[0], std::vector<uint8_t>(n.outputs[0].bytes()),
                            !leaf.init.empty() || n.outputs[0].bytes() == 0};
        if (!leaf.init.empty()) e.bytes.assign(leaf.init.data(), leaf.init.data() + leaf.init.size());
        params_->entries.emplace(leaf.name, std::move(e));
      }
    }
  }

  const opt::Plan& plan() const override { return plan_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.device = "null";
    c.isa = "none";
    c.active_extent = false;
    c.precisions = {"f32"};
    return c;
  }
  int num_kernel_calls() const override { return 0; }

  bool stored(Value v) const override { return !slot(v).empty(); }
  uint8_t* host_data(Value v) override { return param_of(v) ? param_of(v)->bytes.data() : slot(v).data(); }
  void upload(Value v, const void* src, size_t bytes) override { std::memcpy(host(v, bytes), src, bytes); }
  bool bind_value_external(Value, void*, size_t) override { return false; }  // keeps its own buffers
  void upload_range(Value v, size_t offset, const void* src, size_t bytes) override {
    const size_t total = plan_.graph.type(v).bytes();
    if (offset > total || bytes > total - offset) fail(ErrorCategory::Internal, "null backend: bad ranged transfer");
    if (bytes) std::memcpy(host(v, total) + offset, src, bytes);
  }
  void download(Value v, void* dst, size_t bytes) const override {
    std::memcpy(dst, const_cast<NullExecutable*>(this)->host(v, bytes), bytes);
  }
  void download_range(Value v, size_t offset, void* dst, size_t bytes) const override {
    const size_t total = plan_.graph.type(v).bytes();
    if (offset > total || bytes > total - offset) fail(ErrorCategory::Internal, "null backend: bad ranged transfer");
    if (bytes) std::memcpy(dst, const_cast<NullExecutable*>(this)->host(v, total) + offset, bytes);
  }
  void copy_value(Value src, Value dst, size_t bytes) override { std::memmove(host(dst, bytes), host(src, bytes), bytes); }

  bool has_param(const std::string& name) const override { return params_->entries.count(name) > 0; }
  uint8_t* param_host_data(const std::string& name) override { return entry(name).bytes.data(); }
  void write_param(const std::string& name, size_t offset, const void* src, size_t bytes) override {
    ParamStore::Entry& e = entry(name);
    if (offset > e.bytes.size() || bytes > e.bytes.size() - offset)
      fail(ErrorCategory::InvalidArgument, "param '", name, "': bytes outside its ", e.bytes.size());
    if (bytes) std::memcpy(e.bytes.data() + offset, src, bytes);
  }
  void bind_param_external(const std::string& name, const void* bytes, size_t nbytes,
                           std::shared_ptr<const void>) override {  // host copies: nothing to gain
    write_param(name, 0, bytes, nbytes);
    mark_param_set(name);
  }
  void mark_param_set(const std::string& name) override { entry(name).set = true; }
  bool param_set(const std::string& name) const override { return const_cast<NullExecutable*>(this)->entry(name).set; }
  void copy_params_from(const backend::Executable& other) override {
    const auto& o = as_null(other);
    for (auto& [name, e] : params_->entries) {
      auto it = o.params_->entries.find(name);
      if (it == o.params_->entries.end() || !(it->second.type == e.type))
        fail(ErrorCategory::InvalidArgument, "copy_params_from: the source does not store param '", name, "'");
    }
    for (auto& [name, e] : params_->entries) e = o.params_->entries.at(name);
  }
  void share_params_from(const backend::Executable& other) override {
    const auto& o = as_null(other);
    for (const auto& [name, e] : params_->entries)
      if (!o.params_->entries.count(name)) fail(ErrorCategory::InvalidArgument, "share_params_from: no param '", name, "'");
    params_ = o.params_;
  }
  bool shares_params_with(const backend::Executable& other) const override {
    auto* o = dynamic_cast<const NullExecutable*>(&other);
    return o && o->params_ == params_;
  }

  void run() override {}  // nothing to compute: legalize let only leaves through
  void set_extent(int64_t, int64_t) override {}
  void release_scratch() override {}
  void set_poison_scratch(bool) override {}
  std::unique_ptr<backend::Executable> clone() const override {
    auto c = std::make_unique<NullExecutable>(*this);
    c->params_ = std::make_shared<ParamStore>(*params_);
    return c;
  }

 private:
  std::vector<uint8_t>& slot(Value v) { return values_.at(size_t(v.node)).at(size_t(v.out)); }
  const std::vector<uint8_t>& slot(Value v) const { return values_.at(size_t(v.node)).at(size_t(v.out)); }
  ParamStore::Entry* param_of(Value v) {
    const Node& n = plan_.graph.node(v.node);
    return n.kind == OpKind::Param ? &entry(n.attr<LeafAttrs>().name) : nullptr;
  }
  uint8_t* host(Value v, size_t bytes) {
    uint8_t* p = host_data(v);
    if (bytes != plan_.graph.type(v).bytes() || (bytes && !p))
      fail(ErrorCategory::Internal, "null backend: bad transfer of ", bytes, " bytes");
    return p;
  }
  ParamStore::Entry& entry(const std::string& name) {
    auto it = params_->entries.find(name);
    if (it == params_->entries.end()) fail(ErrorCategory::Internal, "null backend: no param '", name, "'");
    return it->second;
  }
  static const NullExecutable& as_null(const backend::Executable& other) {
    auto* o = dynamic_cast<const NullExecutable*>(&other);
    if (!o) fail(ErrorCategory::InvalidArgument, "the source graph was compiled for another backend");
    return *o;
  }

  opt::Plan plan_;
  std::vector<std::vector<std::vector<uint8_t>>> values_;  // [node][out]
  std::shared_ptr<ParamStore> params_;
};

class NullBackend final : public backend::Backend {
 public:
  std::string name() const override { return "null"; }
  Device device() const override { return Device::Null; }
  bool available(std::string*) const override { return true; }
  opt::BackendClaims claims(const CompileOptions&) const override {
    return opt::BackendClaims{"null", [](const Node&, const std::vector<const Shape*>&) { return false; }};
  }
  opt::ConstEvaluator const_evaluator() const override { return {}; }  // no folding
  std::unique_ptr<backend::Executable> compile(opt::Plan plan, const CompileOptions&) const override {
    return std::make_unique<NullExecutable>(std::move(plan));
  }
};

}  // namespace

std::unique_ptr<backend::Backend> make_backend() { return std::make_unique<NullBackend>(); }

}  // namespace rlx::null_backend
