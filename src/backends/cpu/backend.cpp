#include "backends/cpu/backend.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "backends/cpu/evaluate.h"
#include "backends/cpu/executable.h"
#include "backends/cpu/isa.h"

namespace rlx::cpu {

namespace {

class CpuExecutable final : public backend::Executable {
 public:
  CpuExecutable(std::shared_ptr<const Program> program, std::unique_ptr<cpu::Executable> exe)
      : program_(std::move(program)), exe_(std::move(exe)) {}

  const opt::Plan& plan() const override { return program_->plan; }
  int num_kernel_calls() const override { return int(program_->thunks.size()); }
  Capabilities capabilities() const override {
    Capabilities c;
    c.device = "cpu";
    c.threads = exe_->threads();
    c.isa = std::string(isa_name(detect_isa()));
#ifdef RLX_HAVE_BLAS
    c.blas = true;
#endif
    c.precisions = {"f32", "f16", "bf16"};
    return c;
  }

  bool stored(Value v) const override { return !ref(v).absent(); }
  uint8_t* host_data(Value v) override { return exe_->locate(ref(v)); }
  void upload(Value v, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(checked(v, bytes), src, bytes);
  }
  void download(Value v, void* dst, size_t bytes) const override {
    if (bytes) std::memcpy(dst, const_cast<CpuExecutable*>(this)->checked(v, bytes), bytes);
  }
  bool bind_value_external(Value v, void* data, size_t bytes) override {
    const BufRef& r = ref(v);
    if (r.absent() || r.segment != opt::Segment::Arena || bytes != program_->plan.graph.type(v).bytes())
      fail(ErrorCategory::Internal, "bind_value_external: value (", v.node, ", ", v.out, ") is not an arena value of ",
           bytes, " bytes");
    exe_->bind_external(r.offset, int64_t(bytes), static_cast<uint8_t*>(data));
    return true;
  }
  void upload_range(Value v, size_t offset, const void* src, size_t bytes) override {
    const size_t total = program_->plan.graph.type(v).bytes();
    if (offset > total || bytes > total - offset)
      fail(ErrorCategory::Internal, "transfer of ", bytes, " bytes at offset ", offset, " into a value of ", total, " bytes");
    if (bytes) std::memcpy(checked(v, total) + offset, src, bytes);
  }
  void download_range(Value v, size_t offset, void* dst, size_t bytes) const override {
    const size_t total = program_->plan.graph.type(v).bytes();
    if (offset > total || bytes > total - offset)
      fail(ErrorCategory::Internal, "transfer of ", bytes, " bytes at offset ", offset, " from a value of ", total, " bytes");
    if (bytes) std::memcpy(dst, const_cast<CpuExecutable*>(this)->checked(v, total) + offset, bytes);
  }
  void copy_value(Value src, Value dst, size_t bytes) override {
    if (bytes) std::memmove(checked(dst, bytes), checked(src, bytes), bytes);  // may alias
  }

  bool has_param(const std::string& name) const override { return exe_->weights()->find(name) != nullptr; }
  uint8_t* param_host_data(const std::string& name) override { return exe_->weights()->data(entry(name)); }
  void write_param(const std::string& name, size_t offset, const void* src, size_t bytes) override {
    const Weights::Entry& e = entry(name);
    if (offset > e.type.bytes() || bytes > e.type.bytes() - offset)
      fail(ErrorCategory::InvalidArgument, "param '", name, "': bytes [", offset, ", ", offset + bytes,
           ") outside its ", e.type.bytes());
    exe_->weights()->make_owned(e);  // an external param becomes a copy before it is written
    if (bytes) std::memcpy(exe_->weights()->data(e) + offset, src, bytes);
  }
  void mark_param_set(const std::string& name) override { exe_->weights()->mark_set(entry(name)); }
  void bind_param_external(const std::string& name, const void* bytes, size_t nbytes,
                           std::shared_ptr<const void> owner) override {
    const Weights::Entry& e = entry(name);
    if (nbytes != e.type.bytes())
      fail(ErrorCategory::InvalidArgument, "param '", name, "': ", nbytes, " bytes given, it has ", e.type.bytes());
    exe_->weights()->set_external(e, static_cast<const uint8_t*>(bytes), std::move(owner));
  }
  bool param_set(const std::string& name) const override { return entry(name).set; }
  void copy_params_from(const backend::Executable& other) override {
    const auto& src = as_cpu(other, "copy_params_from");
    if (src.exe_->weights() == exe_->weights()) return;
    std::vector<std::pair<const Weights::Entry*, const Weights::Entry*>> pairs;
    for (const Weights::Entry& mine : exe_->weights()->entries()) {
      const Weights::Entry* theirs = src.exe_->weights()->find(mine.name);
      if (!theirs || !(theirs->type == mine.type))
        fail(ErrorCategory::InvalidArgument, "copy_params_from: the source does not store param '", mine.name,
             "' as ", mine.type.str());
      pairs.emplace_back(&mine, theirs);
    }
    for (const auto& [mine, theirs] : pairs) {
      const size_t n = mine->type.bytes();
      if (n) std::memcpy(exe_->weights()->data(*mine), src.exe_->weights()->data(*theirs), n);
      if (theirs->set) exe_->weights()->mark_set(*mine);
    }
  }
  void share_params_from(const backend::Executable& other) override {
    exe_->use_weights(as_cpu(other, "share_params_from").exe_->weights());
  }
  bool shares_params_with(const backend::Executable& other) const override {
    auto* o = dynamic_cast<const CpuExecutable*>(&other);
    return o && o->exe_->weights() == exe_->weights();
  }

  void run() override { exe_->run(); }
  void set_extent(int64_t actual, int64_t upper) override { exe_->set_extent(actual, upper); }
  void release_scratch() override { exe_->release_scratch(); }
  void set_poison_scratch(bool on) override { exe_->set_poison_scratch(on); }
  std::unique_ptr<backend::Executable> clone() const override {
    return std::make_unique<CpuExecutable>(program_, exe_->clone());
  }

 private:
  const BufRef& ref(Value v) const {
    if (v.node < 0 || size_t(v.node) >= program_->values.size() || v.out < 0 ||
        size_t(v.out) >= program_->values[size_t(v.node)].size())
      fail(ErrorCategory::Internal, "the CPU executable has no value (", v.node, ", ", v.out, ")");
    return program_->values[size_t(v.node)][size_t(v.out)];
  }
  uint8_t* checked(Value v, size_t bytes) {
    const Shape& s = program_->plan.graph.type(v);
    if (bytes != s.bytes())
      fail(ErrorCategory::Internal, "transfer of ", bytes, " bytes for a value of type ", s.str());
    uint8_t* p = exe_->locate(ref(v));
    if (!p) fail(ErrorCategory::Internal, "value (", v.node, ", ", v.out, ") has no storage");
    return p;
  }
  const Weights::Entry& entry(const std::string& name) const {
    const Weights::Entry* e = exe_->weights()->find(name);
    if (!e) fail(ErrorCategory::Internal, "param '", name, "' missing from the weights segment");
    return *e;
  }
  static const CpuExecutable& as_cpu(const backend::Executable& other, const char* what) {
    auto* o = dynamic_cast<const CpuExecutable*>(&other);
    if (!o) fail(ErrorCategory::InvalidArgument, what, ": the source graph was compiled for another backend");
    return *o;
  }

  std::shared_ptr<const Program> program_;
  std::unique_ptr<cpu::Executable> exe_;
};

class CpuBackend final : public backend::Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::Cpu; }
  bool available(std::string*) const override { return true; }
  opt::BackendClaims claims(const CompileOptions&) const override {
    return opt::BackendClaims{
        "cpu", [](const Node& n, const std::vector<const Shape*>& in) { return kernel_registry().supports(n, in); },
        [](const Node& n, const std::vector<const Shape*>& in) { return kernel_registry().prefers_f32(n, in); }};
  }
  opt::ConstEvaluator const_evaluator() const override {
    return [](const Node& node, const std::vector<Shape>& in_types, const std::vector<Blob>& in_values) {
      std::vector<const Shape*> types;
      std::vector<std::span<const uint8_t>> values;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const bool present = node.inputs[i].valid();
        types.push_back(present ? &in_types.at(i) : nullptr);
        values.emplace_back(present ? std::span<const uint8_t>(in_values.at(i).data(), in_values.at(i).size())
                                    : std::span<const uint8_t>());
      }
      return evaluate_node(node, types, values);
    };
  }
  std::unique_ptr<backend::Executable> compile(opt::Plan plan, const CompileOptions& opts) const override {
    std::shared_ptr<Program> program = cpu::compile(std::move(plan));
    const int threads = opts.threads > 0 ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    auto exe = std::make_unique<cpu::Executable>(program, threads);
    drop_param_init(*program);  // the weights segment now holds it
    return std::make_unique<CpuExecutable>(std::move(program), std::move(exe));
  }
};

}  // namespace

std::unique_ptr<backend::Backend> make_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace rlx::cpu
