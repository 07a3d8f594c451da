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
  // A compiled pass and how far its resident cache handles are filled.
  struct Pass {
    CompiledGraph net;
    int64_t synced = 0;  // rows [0, synced) of its caches hold the engine's rows
    std::vector<int> input_kind;  // per graph input: 0 embd, 1 cos, 2 sin, 3 past, 4 cache handle
  };
  std::map<std::tuple<int64_t, int64_t, bool>, Pass> graphs;
  CompiledGraph* weights_owner = nullptr;
  std::string report;
  std::vector<float> rope_factors;  // rope_freqs.weight, empty when absent
  // Per-run host buffers (reused).
  std::vector<float> embd, cosv, sinv, row;

  Pass& graph(int64_t T, bool all_rows);
  void sync(Pass& p, int64_t from, int64_t to);  // rows [from, to) of every cache into p's handles
  void fill_params(CompiledGraph& net, const std::vector<ParamSource>& params);
  void grow(int64_t need);
  void rope_tables(int64_t T);
  void embed(std::span<const int32_t> tokens);
};

// Rows of token_embd.weight (any block format) for the tokens, plus the learned position
// rows when the model has them, in f32: the graph's `embd` input.
void Engine::Impl::embed(std::span<const int32_t> tokens) {
  const gguf::File& f = model->file;
  const int64_t E = model->hp.n_embd, T = static_cast<int64_t>(tokens.size());
  embd.resize(static_cast<size_t>(T * E));
  const gguf::TensorInfo& te = f.tensor("token_embd.weight");
  const int64_t rb = gguf::row_bytes(te.type, E);
  for (int64_t t = 0; t < T; ++t)
    gguf::dequantize(te.type, f.data(te) + tokens[static_cast<size_t>(t)] * rb, embd.data() + t * E, E);
  if (const gguf::TensorInfo* pe = f.find_tensor("position_embd.weight")) {
    const int64_t prb = gguf::row_bytes(pe->type, E);
    if (pe->dims.size() != 2 || pe->dims[0] != E || pe->dims[1] < n_ctx)
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': position_embd.weight must be [", E, ", >= ", n_ctx, "]");
    row.resize(static_cast<size_t>(E));
    for (int64_t t = 0; t < T; ++t) {
      gguf::dequantize(pe->type, f.data(*pe) + (pos + t) * prb, row.data(), E);
      for (int64_t i = 0; i < E; ++i) embd[static_cast<size_t>(t * E + i)] += row[static_cast<size_t>(i)];
    }
  }
}

void Engine::Impl::fill_params(CompiledGraph& net, const std::vector<ParamSource>& params) {
  const gguf::File& f = model->file;
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t bytes = 0, mapped = 0;
  std::vector<float> tmp;
  for (const ParamSource& p : params) {
    const gguf::TensorInfo& t = f.tensor(p.tensor);
    if (p.raw) {  // a qmatmul weight: the blocks as stored, read in place from the mapping
      net.set_param_external(p.param, f.data(t), t.bytes, f.keepalive());
      mapped += t.bytes;
    } else {
      const int64_t n = t.elements();
      tmp.resize(static_cast<size_t>(n));
      gguf::dequantize(t.type, f.data(t), tmp.data(), n);
      net.set_param_typed(p.param, tmp.data(), static_cast<size_t>(n) * 4, DType::F32);
      bytes += static_cast<uint64_t>(n) * 4;
    }
    auto& e = by_type[gguf::type_name(t.type)];
    e.first++;
    e.second += t.bytes;
  }
  net.finalize_params();
  std::ostringstream os;
  os << "weights: " << params.size() << " tensors (";
  bool first = true;
  for (const auto& [name, e] : by_type) {
    os << (first ? "" : ", ") << name << " x" << e.first << " " << e.second << " bytes";
    first = false;
  }
  os << "): matrices read in place from the memory-mapped file in their stored block format (" << mapped
     << " bytes, not copied), vectors copied as f32 (" << bytes << " bytes); token embeddings gathered from the mapping";
  report = os.str();
}

Engine::Impl::Pass& Engine::Impl::graph(int64_t T, bool all_rows) {
  auto key = std::make_tuple(T, C, all_rows);
  auto it = graphs.find(key);
  if (it != graphs.end()) return it->second;
  BuildCtx c(*model, T, C, opts.kv_type, all_rows);
  find_arch(model->hp.arch)->build(c);
  CompileOptions co;
  co.threads = opts.threads;
  Pass p;
  p.net = Session(Device::Cpu, co).compile(c.g);
  if (!weights_owner) fill_params(p.net, c.params());
  else p.net.share_params_from(*weights_owner);
  // The caches are resident handles: bound once here with the rows so far, then kept in
  // step by row-sized writes (sync), never copied whole per run.
  const HParams& hp = model->hp;
  for (const std::string& name : p.net.input_names()) {
    int kind = name == "embd" ? 0 : name == "rope_cos" ? 1 : name == "rope_sin" ? 2 : name == "past" ? 3 : 4;
    p.input_kind.push_back(kind);
    if (kind != 4) continue;
    const bool is_k = name.rfind("k_cache.", 0) == 0;
    if (!is_k && name.rfind("v_cache.", 0) != 0) fail(ErrorCategory::Internal, "llm::Engine: unexpected input '", name, "'");
    const std::vector<uint8_t>& src = (is_k ? kc : vc)[std::stoul(name.substr(8))];
    TypedTensor t{opts.kv_type, {1, hp.n_head_kv, C, hp.head_dim}, src};
    p.net.bind_handle(name, t);
  }
  p.synced = pos;
  auto [pos_it, ok] = graphs.emplace(key, std::move(p));
  if (!weights_owner) weights_owner = &pos_it->second.net;  // std::map nodes do not move
  return pos_it->second;
}

void Engine::Impl::sync(Pass& p, int64_t from, int64_t to) {
  if (to <= from) return;
  const HParams& hp = model->hp;
  const size_t row = static_cast<size_t>(hp.head_dim) * kv_elt;
  for (int64_t il = 0; il < hp.n_layer; ++il)
    for (int kv = 0; kv < 2; ++kv) {
      const std::string name = (kv ? "v_cache." : "k_cache.") + std::to_string(il);
      const std::vector<uint8_t>& cache = (kv ? vc : kc)[static_cast<size_t>(il)];
      for (int64_t h = 0; h < hp.n_head_kv; ++h) {
        const size_t off = static_cast<size_t>(h * C + from) * row;
        p.net.write_handle(name, off, cache.data() + off, static_cast<size_t>(to - from) * row);
      }
    }
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
  for (auto it = graphs.begin(); it != graphs.end();) {  // passes of other buckets are not used again
    if (std::get<1>(it->first) != C && &it->second.net != weights_owner) it = graphs.erase(it);
    else ++it;
  }
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
void Engine::reset() {
  impl_->pos = 0;
  for (auto& [key, p] : impl_->graphs) p.synced = 0;  // rows past the position are masked anyway
}
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
    Impl::Pass& pass = m.graph(T, all_rows);
    const int64_t C = m.C;
    m.sync(pass, pass.synced, m.pos);
    m.embed(tokens);
    m.rope_tables(T);
    const int64_t past = m.pos;
    auto bytes = [](const auto& v) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0]));
    };
    std::vector<std::span<const uint8_t>> in;
    for (int kind : pass.input_kind) {
      switch (kind) {
        case 0: in.push_back(bytes(m.embd)); break;
        case 1: in.push_back(bytes(m.cosv)); break;
        case 2: in.push_back(bytes(m.sinv)); break;
        case 3: in.emplace_back(reinterpret_cast<const uint8_t*>(&past), sizeof past); break;
        default: in.emplace_back(); break;  // a resident cache handle
      }
    }
    std::vector<TensorView> out = pass.net.run_slots(in);
    // Append the new rows, [1, Hkv, T, D] -> cache [Hkv, C, D] at pos: the engine's copy
    // and this pass's handles (other passes catch up when they next run).
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
    m.sync(pass, m.pos, m.pos + T);
    pass.synced = m.pos + T;
    m.pos += T;
    const float* lg = static_cast<const float*>(out[0].data);
    return std::vector<float>(lg, lg + out[0].bytes / 4);
  });
}

}  // namespace rlx::llm
