// Engine: compiles the forward pass per (new tokens, cache bucket, rows wanted), fills the
// weights once, keeps the KV cache and feeds it with the rotary tables and the mask.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <tuple>

#include "llm/arch.h"
#include "rlx/dtype.h"

namespace rlx::llm {

namespace {
constexpr int64_t kMinBucket = 256;

int64_t bucket_for(int64_t need, int64_t n_ctx) {
  int64_t b = kMinBucket;
  while (b < need) b *= 2;
  return std::min(b, n_ctx);
}
}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  EngineOptions opts;
  int64_t n_ctx = 0;
  int64_t pos = 0;
  int64_t C = 0;  // current cache capacity (bucket)
  size_t kv_elt = 2;
  // Per layer, [Hkv, C, head_dim] in kv_type.
  std::vector<std::vector<uint8_t>> kc, vc;
  std::map<std::tuple<int64_t, int64_t, bool>, CompiledGraph> graphs;
  CompiledGraph* weights_owner = nullptr;
  std::string report;
  std::vector<float> rope_factors;  // rope_freqs.weight, empty when absent
  // Per-run host buffers (reused).
  std::vector<int64_t> tok, posv;
  std::vector<float> cosv, sinv, maskv;

  CompiledGraph& graph(int64_t T, bool all_rows);
  void fill_params(CompiledGraph& net, const std::vector<ParamSource>& params);
  void grow(int64_t need);
  void rope_tables(int64_t T);
};

void Engine::Impl::fill_params(CompiledGraph& net, const std::vector<ParamSource>& params) {
  const gguf::File& f = model->file;
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t f32_bytes = 0;
  std::vector<float> tmp, out;
  for (const ParamSource& p : params) {
    const gguf::TensorInfo& t = f.tensor(p.tensor);
    const int64_t n = t.elements();
    if (!gguf::can_dequantize(t.type))
      fail(ErrorCategory::Unsupported, "GGUF file '", f.path(), "': tensor '", t.name, "' is ", gguf::type_name(t.type),
           ", which rlx cannot read yet");
    tmp.resize(static_cast<size_t>(n));
    gguf::dequantize(t.type, f.data(t), tmp.data(), n);
    const float* src = tmp.data();
    if (p.transpose) {  // ggml [d0 = n_in, d1 = n_out]: rows of n_in -> rlx [n_in, n_out]
      const int64_t d0 = t.dims[0], d1 = t.dims[1];
      out.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < d1; ++j)
        for (int64_t i = 0; i < d0; ++i) out[static_cast<size_t>(i * d1 + j)] = tmp[static_cast<size_t>(j * d0 + i)];
      src = out.data();
    }
    net.set_param_typed(p.param, src, static_cast<size_t>(n) * 4, DType::F32);
    auto& e = by_type[gguf::type_name(t.type)];
    e.first++;
    e.second += t.bytes;
    f32_bytes += static_cast<uint64_t>(n) * 4;
  }
  net.finalize_params();
  std::ostringstream os;
  os << "weights: " << params.size() << " tensors read (";
  bool first = true;
  for (const auto& [name, e] : by_type) {
    os << (first ? "" : ", ") << name << " x" << e.first << " " << e.second << " bytes";
    first = false;
  }
  os << "), held as f32 matrices in rlx's layout: " << f32_bytes << " bytes";
  if (by_type.size() != 1 || by_type.begin()->first != std::string("f32"))
    os << " (non-f32 weights are dequantized at load: quantized matmul kernels are not built yet)";
  report = os.str();
}

CompiledGraph& Engine::Impl::graph(int64_t T, bool all_rows) {
  auto key = std::make_tuple(T, C, all_rows);
  auto it = graphs.find(key);
  if (it != graphs.end()) return it->second;
  BuildCtx c(*model, T, C, opts.kv_type, all_rows);
  find_arch(model->hp.arch)->build(c);
  CompileOptions co;
  co.threads = opts.threads;
  CompiledGraph net = Session(Device::Cpu, co).compile(c.g);
  if (!weights_owner) {
    fill_params(net, c.params());
  } else {
    net.share_params_from(*weights_owner);
  }
  auto [pos_it, ok] = graphs.emplace(key, std::move(net));
  if (!weights_owner) weights_owner = &pos_it->second;  // std::map nodes do not move
  return pos_it->second;
}

void Engine::Impl::grow(int64_t need) {
  const int64_t nc = bucket_for(need, n_ctx);
  if (nc <= C && !kc.empty()) return;
  const HParams& hp = model->hp;
  const size_t row = static_cast<size_t>(hp.head_dim) * kv_elt;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    for (auto* cache : {&kc, &vc}) {
      std::vector<uint8_t> fresh(static_cast<size_t>(hp.n_head_kv * nc) * row);
      if (!cache->empty())
        for (int64_t h = 0; h < hp.n_head_kv; ++h)
          std::memcpy(fresh.data() + static_cast<size_t>(h * nc) * row,
                      (*cache)[static_cast<size_t>(il)].data() + static_cast<size_t>(h * C) * row,
                      static_cast<size_t>(pos) * row);
      if (cache->size() < static_cast<size_t>(hp.n_layer)) cache->resize(static_cast<size_t>(hp.n_layer));
      (*cache)[static_cast<size_t>(il)] = std::move(fresh);
    }
  }
  C = nc;
}

// Rotary angles exactly as llama.cpp's CPU rope computes them (float arithmetic):
// theta_i = pos * base^(-2i/n_rot) by repeated multiplication, divided by the frequency
// factor, then cosf/sinf.
void Engine::Impl::rope_tables(int64_t T) {
  const HParams& hp = model->hp;
  const int64_t half = hp.n_rot / 2;
  cosv.resize(static_cast<size_t>(T * half));
  sinv.resize(static_cast<size_t>(T * half));
  const float theta_scale = std::pow(static_cast<float>(hp.rope_base), -2.0f / static_cast<float>(hp.n_rot));
  for (int64_t t = 0; t < T; ++t) {
    float theta = static_cast<float>(pos + t);
    for (int64_t i = 0; i < half; ++i) {
      const float ff = rope_factors.empty() ? 1.0f : rope_factors[static_cast<size_t>(i)];
      const float a = theta / ff;
      cosv[static_cast<size_t>(t * half + i)] = std::cos(a);
      sinv[static_cast<size_t>(t * half + i)] = std::sin(a);
      theta *= theta_scale;
    }
  }
}

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions opts) : impl_(std::make_unique<Impl>()) {
  detail::guard("llm::Engine", [&] {
    if (!model) fail(ErrorCategory::InvalidArgument, "llm::Engine: no model");
    if (opts.kv_type != DType::F16 && opts.kv_type != DType::F32)
      fail(ErrorCategory::InvalidArgument, "llm::Engine: KV cache type must be f16 or f32, not ",
           dtype_name(opts.kv_type));
    Impl& m = *impl_;
    m.model = std::move(model);
    m.opts = opts;
    const HParams& hp = m.model->hp;
    m.n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min<int64_t>(hp.n_ctx_train, 4096);
    if (m.n_ctx < 1 || m.n_ctx > (int64_t(1) << 24))
      fail(ErrorCategory::InvalidArgument, "llm::Engine: context ", m.n_ctx, " is out of range");
    m.kv_elt = dtype_size(opts.kv_type);
    if (const gguf::TensorInfo* rf = m.model->file.find_tensor("rope_freqs.weight")) {
      if (rf->elements() != hp.n_rot / 2 || rf->type != gguf::TensorType::F32)
        fail(ErrorCategory::Parse, "GGUF file '", m.model->file.path(), "': rope_freqs.weight must be f32[",
             hp.n_rot / 2, "]");
      m.rope_factors.resize(static_cast<size_t>(rf->elements()));
      std::memcpy(m.rope_factors.data(), m.model->file.data(*rf), m.rope_factors.size() * 4);
    }
    m.grow(1);
  });
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;

int64_t Engine::position() const { return impl_->pos; }
int64_t Engine::context() const { return impl_->n_ctx; }
void Engine::reset() { impl_->pos = 0; }
const Model& Engine::model() const { return *impl_->model; }
std::string Engine::load_report() const { return impl_->report; }
int64_t Engine::compiled_graphs() const { return static_cast<int64_t>(impl_->graphs.size()); }

std::vector<float> Engine::eval(std::span<const int32_t> tokens, bool all_rows) {
  return detail::guard("llm::Engine::eval", [&] {
    Impl& m = *impl_;
    const HParams& hp = m.model->hp;
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T == 0) fail(ErrorCategory::InvalidArgument, "llm::Engine::eval: no tokens");
    if (m.pos + T > m.n_ctx)
      fail(ErrorCategory::InvalidArgument, "llm::Engine::eval: ", T, " tokens at position ", m.pos,
           " exceed the context of ", m.n_ctx);
    for (int32_t id : tokens)
      if (id < 0 || id >= hp.n_vocab)
        fail(ErrorCategory::InvalidArgument, "llm::Engine::eval: token id ", id, " is outside the vocabulary [0, ",
             hp.n_vocab, ")");
    m.grow(m.pos + T);
    CompiledGraph& net = m.graph(T, all_rows);
    const int64_t C = m.C;
    m.tok.assign(tokens.begin(), tokens.end());
    m.posv.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) m.posv[static_cast<size_t>(t)] = m.pos + t;
    m.rope_tables(T);
    m.maskv.assign(static_cast<size_t>(T * (C + T)), -INFINITY);
    for (int64_t t = 0; t < T; ++t) {
      float* row = m.maskv.data() + t * (C + T);
      std::fill(row, row + m.pos, 0.0f);            // the cached positions
      std::fill(row + C, row + C + t + 1, 0.0f);    // the new tokens up to this one
    }
    auto bytes = [](const auto& v) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0]));
    };
    std::vector<std::span<const uint8_t>> in;
    for (const std::string& name : net.input_names()) {
      if (name == "tokens") in.push_back(bytes(m.tok));
      else if (name == "positions") in.push_back(bytes(m.posv));
      else if (name == "rope_cos") in.push_back(bytes(m.cosv));
      else if (name == "rope_sin") in.push_back(bytes(m.sinv));
      else if (name == "mask") in.push_back(bytes(m.maskv));
      else if (name.rfind("k_cache.", 0) == 0) in.push_back(bytes(m.kc[std::stoul(name.substr(8))]));
      else if (name.rfind("v_cache.", 0) == 0) in.push_back(bytes(m.vc[std::stoul(name.substr(8))]));
      else fail(ErrorCategory::Internal, "llm::Engine: unexpected graph input '", name, "'");
    }
    std::vector<TensorView> out = net.run_slots(in);
    // Append the new rows: [1, Hkv, T, D] -> cache [Hkv, C, D] at pos.
    const size_t row = static_cast<size_t>(hp.head_dim) * m.kv_elt;
    for (int64_t il = 0; il < hp.n_layer; ++il)
      for (int kv = 0; kv < 2; ++kv) {
        const TensorView& v = out[static_cast<size_t>(1 + 2 * il + kv)];
        std::vector<uint8_t>& cache = (kv ? m.vc : m.kc)[static_cast<size_t>(il)];
        const uint8_t* src = static_cast<const uint8_t*>(v.data);
        for (int64_t h = 0; h < hp.n_head_kv; ++h)
          std::memcpy(cache.data() + static_cast<size_t>(h * C + m.pos) * row, src + static_cast<size_t>(h * T) * row,
                      static_cast<size_t>(T) * row);
      }
    m.pos += T;
    const float* lg = static_cast<const float*>(out[0].data);
    return std::vector<float>(lg, lg + out[0].bytes / 4);
  });
}

}  // namespace rlx::llm
