// Engine: compiles forward passes per (sequences, new tokens, cache bucket, rows wanted),
// fills the weights once (mapped in place), keeps the KV cache of every sequence slot and
// feeds each pass its embeddings, rotary tables and cached lengths.
//
// Every pass writes its new K/V rows into its cache inputs itself (cache_write, in place on
// the handles), so nothing but the embeddings, rotary rows and lengths goes in and the
// logits come out per run.
// There is one cache, per layer K and V of [slots, Hkv, C, D], in one SharedBuffer of the
// backend's memory (host memory on the CPU, device memory on CUDA), and every pass reads and
// writes it in place (bind_handle_shared; the passes' arenas hold no cache of their own). A
// one-sequence pass (prompt, or decode with one slot) is bound to its slot's rows before it
// runs; the batch pass to all of them. Nothing is copied between passes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "llm/arch.h"
#include "rlx/dtype.h"
#include "rlx/quant.h"

namespace rlx::llm {

namespace {
constexpr int64_t kMinBucket = 256;
// Prompt passes are compiled per prompt length (a chat's every turn may bring a new one), each
// a compiled graph with its activations (a device's memory): this many are kept besides the
// weights' owner.
constexpr int kPromptPasses = 4;

int64_t bucket_for(int64_t need, int64_t n_ctx) {
  int64_t b = kMinBucket;
  while (b < need) b *= 2;
  return std::min(b, n_ctx);
}

// The length of the pass that runs n prompt tokens padded (EngineOptions::pad_prompts): 8,
// 16, 32, 64 or a multiple of 64 rows, at most `chunk` (0: no bound). Few lengths, and steps
// small where a row costs most relative to the pass (short prompts are bound by reading the
// weights, not by their rows).
int64_t padded_rows(int64_t n, int64_t chunk) {
  if (n <= 1) return n;
  int64_t r = 8;
  while (r < n && r < 64) r *= 2;
  if (r < n) r = (n + 63) / 64 * 64;
  return chunk > 0 ? std::min(r, std::max(chunk, n)) : r;
}
}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  EngineOptions opts;
  int64_t n_ctx = 0, slots = 1;
  std::vector<int64_t> pos;  // per slot: tokens in its cache
  int64_t C = 0;             // current cache capacity (bucket), shared by all slots
  size_t kv_elt = 2;
  // Every layer's K and V, cache k (Pass::cache_names' order) at k * layer_bytes(C), in
  // kv_type; allocated zeroed by the first pass compiled (on the CPU calloc'd host memory:
  // pages are touched only as rows are written, so the unused part of a bucket costs none).
  SharedBuffer cache;
  struct Pass {
    CompiledGraph net;
    int64_t B = 1;
    int64_t slot = -1;            // the slot its caches are bound to (B > 1: 0, all); -1: none yet
    std::vector<int> input_kind;  // per graph input: 0 embd, 1 cos, 2 sin, 3 past, 4 handle, 5 token ids, 6 last row
    std::vector<std::string> cache_names;  // handle names, layer-major: k0, v0, k1, v1, ...
    uint64_t used = 0;            // when it was last asked for (Impl::tick)
  };
  // (B, T, C, all_rows, greedy): a greedy pass is generate_greedy's step, its state in
  // handles (BuildCtx::greedy_token).
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, Pass> graphs;
  Pass* weights_owner = nullptr;
  bool repack = true;  // Q4_0 matrices as q4_0x16 while the backend takes them
  std::string report;
  std::vector<float> rope_factors;  // rope_freqs.weight, empty when absent
  float theta_scale = 1;            // base^(-2/n_rot), in float as llama.cpp computes it
  float yarn_lo = 0, yarn_hi = 0;  // YaRN's correction dims (pairs below lo keep the unscaled angle)
  // The embedding tables (looked up once; position_embd only for learned positions).
  const gguf::TensorInfo* tok_embd = nullptr;
  bool token_ids = false;  // the graphs gather the embeddings from token ids (BuildCtx::token_ids)
  const gguf::TensorInfo* pos_embd = nullptr;
  int64_t tok_row_bytes = 0, pos_row_bytes = 0;
  std::vector<int64_t> all_slots;  // 0 .. slots-1, the batch pass's rows
  std::vector<float> embd, cosv, sinv, row;  // per-run host buffers (reused)
  std::vector<int64_t> pastv;
  std::vector<int32_t> padded;      // a prompt's tokens padded to its pass's length (reused)
  std::vector<std::span<const uint8_t>> inputs;  // run()'s graph inputs (reused)
  std::vector<int64_t> one_slot{0};              // slot_of for a one-sequence pass
  uint64_t tick = 0;                             // graph()'s clock for Pass::used

  size_t row_bytes() const { return static_cast<size_t>(model->hp.head_dim) * kv_elt; }
  // Bytes of one cache (one layer's K or V) at capacity c: [slots, Hkv, c, D].
  size_t layer_bytes(int64_t c) const { return static_cast<size_t>(slots * model->hp.n_head_kv * c) * row_bytes(); }
  size_t n_caches() const { return 2 * static_cast<size_t>(model->hp.n_layer); }
  // Byte offset of (slot or batch row b, head h, position p) in a [*, Hkv, c, D] cache.
  size_t at(int64_t b, int64_t h, int64_t p, int64_t c) const {
    return static_cast<size_t>((b * model->hp.n_head_kv + h) * c + p) * row_bytes();
  }
  Pass& graph(int64_t B, int64_t T, bool all_rows, bool greedy = false);
  void ran(Pass& p, int64_t T, const std::vector<int64_t>& slot_of);  // p appended T rows per sequence
  void bind_slot(Pass& p, int64_t slot);  // p's caches on `slot`'s rows (B > 1: every slot's)
  void trim_prompt_passes(const Pass& keep);  // at most kPromptPasses, the least recently used go
  void truncate(int64_t slot, int64_t at);  // the slot back to `at` rows (a failed prompt appends nothing)
  void fill_params(CompiledGraph& net, const std::vector<ParamSource>& params);
  void grow(int64_t need);
  void embed_row(int32_t token, int64_t position, float* dst);
  void rope_row(int64_t position, float* c, float* s) const;
  // Runs pass p over `tokens` (R = B*T, sequence-major) for `slot_of[b]`, of which the first
  // `rows` of each sequence are appended (B = 1 when rows < T: the rest is padding, its cache
  // rows past the sequence's end); returns the logits.
  std::vector<float> run(Pass& p, std::span<const int32_t> tokens, const std::vector<int64_t>& slot_of,
                         int64_t rows = -1);
};

void Engine::Impl::embed_row(int32_t token, int64_t position, float* dst) {
  const int64_t E = model->hp.n_embd;
  gguf::dequantize(tok_embd->type, model->file.data(*tok_embd) + token * tok_row_bytes, dst, E);
  if (pos_embd) {  // learned positions (gpt2)
    gguf::dequantize(pos_embd->type, model->file.data(*pos_embd) + position * pos_row_bytes, row.data(), E);
    for (int64_t i = 0; i < E; ++i) dst[i] += row[static_cast<size_t>(i)];
  }
}

// Rotary angles exactly as llama.cpp's CPU rope computes them (float arithmetic):
// theta_i = pos * base^(-2i/n_rot) by repeated multiplication, divided by the frequency
// factor, times freq_scale (YaRN: blended with the unscaled angle by a ramp over the pairs
// between its correction dims), then cosf/sinf times mscale.
void Engine::Impl::rope_row(int64_t position, float* c, float* s) const {
  const HParams& hp = model->hp;
  // (float values kept as doubles: the casts are exact)
  const float freq_scale = static_cast<float>(hp.rope_freq_scale), mscale = static_cast<float>(hp.rope_mscale);
  const bool yarn = hp.rope_scaling == HParams::RopeScaling::Yarn;
  float theta = static_cast<float>(position);
  for (int64_t i = 0; i < hp.n_rot / 2; ++i) {
    const float ff = rope_factors.empty() ? 1.0f : rope_factors[static_cast<size_t>(i)];
    const float extrap = theta / ff;
    float a = freq_scale * extrap;
    if (yarn) {
      const float y = (static_cast<float>(i) - yarn_lo) / std::max(0.001f, yarn_hi - yarn_lo);
      const float mix = 1.0f - std::min(1.0f, std::max(0.0f, y));
      a = a * (1.0f - mix) + extrap * mix;
    }
    c[i] = std::cos(a) * mscale;
    s[i] = std::sin(a) * mscale;
    theta *= theta_scale;
  }
}

void Engine::Impl::fill_params(CompiledGraph& net, const std::vector<ParamSource>& params) {
  const gguf::File& f = model->file;
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t bytes = 0, mapped = 0, repacked = 0, fused = 0;
  std::vector<float> tmp;
  for (const ParamSource& p : params) {
    const gguf::TensorInfo& t = f.tensor(p.tensor);
    if (!p.parts.empty()) {  // several matrices' rows, one after another: a copy
      size_t n = 0;
      for (const std::string& part : p.parts) n += f.tensor(part).bytes;
      auto buf = std::make_shared<std::vector<uint8_t>>(n);
      size_t at = 0;
      for (const std::string& part : p.parts) {
        const gguf::TensorInfo& pt = f.tensor(part);
        std::memcpy(buf->data() + at, f.data(pt), pt.bytes);
        at += pt.bytes;
      }
      net.set_param_external(p.param, buf->data(), buf->size(), buf);
      for (const std::string& part : p.parts) {
        const gguf::TensorInfo& pt = f.tensor(part);
        auto& e = by_type[gguf::type_name(pt.type)];
        e.first++;
        e.second += pt.bytes;
        f.release(pt);
      }
      fused += n;
      continue;
    }
    if (p.repack_q4_0x16) {  // Q4_0 interleaved into 16-row panels: a copy that replaces the mapped pages
      auto buf = std::make_shared<std::vector<uint8_t>>(t.bytes);
      quant::repack_q4_0x16(f.data(t), buf->data(), t.dims[1], t.dims[0]);
      net.set_param_external(p.param, buf->data(), buf->size(), buf);
      f.release(t);
      repacked += t.bytes;
    } else if (p.raw) {  // a qmatmul weight: the blocks as stored, read in place from the mapping
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
  int tensors = 0;
  for (const auto& [name, e] : by_type) tensors += e.first;
  os << "weights: " << tensors << " tensors (";
  bool first = true;
  for (const auto& [name, e] : by_type) {
    os << (first ? "" : ", ") << name << " x" << e.first << " " << e.second << " bytes";
    first = false;
  }
  os << "): matrices read in place from the memory-mapped file in their stored block format (" << mapped
     << " bytes, not copied), vectors copied as f32 (" << bytes << " bytes); token embeddings gathered "
     << (token_ids ? "by the graph from the table as stored" : "by the host from the mapping");
  if (fused) os << "; q/k/v and gate/up matrices concatenated into one matrix each (" << fused << " bytes)";
  if (repacked) os << "; Q4_0 matrices repacked at load into 16-row panels for the VNNI kernel (" << repacked << " bytes)";
  report = os.str();
}


Engine::Impl::Pass& Engine::Impl::graph(int64_t B, int64_t T, bool all_rows, bool greedy) {
  auto key = std::make_tuple(B, T, C, all_rows, greedy);
  auto it = graphs.find(key);
  if (it != graphs.end()) {
    it->second.used = ++tick;
    return it->second;
  }
  CompileOptions co;
  co.threads = opts.threads;
  Pass p;
  p.B = B;
  auto build = [&](bool repack_q4) {
    auto c = std::make_unique<BuildCtx>(*model, B, T, C, opts.kv_type, all_rows);
    c->repack = repack_q4;
    c->fuse_rows = opts.fuse_projections < 0 ? opts.device != Device::Cpu : opts.fuse_projections > 0;
    c->token_ids = token_ids;
    c->greedy_token = greedy;
    c->last_row_input = B == 1 && T > 1 && !all_rows && !greedy;
    try {
      find_arch(model->hp.arch)->build(*c);
    } catch (const Error& e) {
      // A node whose shapes do not meet: the file's tensors disagree with its metadata (the
      // builder takes the sizes of each product from its tensor, the heads from the keys).
      if (e.category() != ErrorCategory::Shape) throw;
      const HParams& hp = model->hp;
      fail(ErrorCategory::Parse, "GGUF file '", model->file.path(), "': its tensors do not fit its metadata (n_embd ",
           hp.n_embd, ", ", hp.n_head, " heads, ", hp.n_head_kv, " KV heads, head dim ", hp.head_dim, ", FFN ", hp.n_ff,
           "): ", e.what());
    }
    return c;
  };
  std::unique_ptr<BuildCtx> cp = build(repack);
  try {
    p.net = Session(opts.device, co).compile(cp->g);
  } catch (const Error& e) {
    // The first pass learns whether the backend reads q4_0x16 (legalize refuses it where
    // the kernel is missing); from then on every pass is built the same way.
    if (e.category() != ErrorCategory::Unsupported || !repack || weights_owner) throw;
    repack = false;
    cp = build(false);
    p.net = Session(opts.device, co).compile(cp->g);
  }
  BuildCtx& c = *cp;
  if (!weights_owner) fill_params(p.net, c.params());
  else p.net.share_params_from(weights_owner->net);
  const HParams& hp = model->hp;
  // A greedy step's own state is handles (BuildCtx::greedy_token): nothing goes in per run.
  static const char* const kStepState[] = {"token", "past", "generated", "rope_cos.table", "rope_sin.table"};
  auto step_state = [&](const std::string& name) {
    return greedy && std::find(std::begin(kStepState), std::end(kStepState), name) != std::end(kStepState);
  };
  std::vector<std::string> state;
  for (const std::string& name : p.net.input_names()) {
    int kind = step_state(name)       ? 4
               : name == "embd"     ? 0
               : name == "rope_cos" ? 1
               : name == "rope_sin" ? 2
               : name == "past"     ? 3
               : name == "token"    ? 5
               : name == "last"     ? 6
                                    : 4;
    p.input_kind.push_back(kind);
    if (step_state(name)) state.push_back(name);
    if (kind != 4 || step_state(name)) continue;
    if (name.rfind("k_cache.", 0) != 0 && name.rfind("v_cache.", 0) != 0)
      fail(ErrorCategory::Internal, "llm::Engine: unexpected graph input '", name, "'");
  }
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    p.cache_names.push_back("k_cache." + std::to_string(il));
    p.cache_names.push_back("v_cache." + std::to_string(il));
  }
  if (!cache.bytes()) cache = p.net.allocate_shared(n_caches() * layer_bytes(C));
  bind_slot(p, 0);
  // The token and position outputs feed the next run's inputs on the backend's side; the
  // rotary rows of every position of the bucket are bound once (rope_row's bits, as the
  // host loop computes them per step).
  if (!state.empty()) {
    const int64_t half = hp.n_rot / 2;
    std::vector<float> cs(static_cast<size_t>(C * half)), sn(cs.size());
    for (int64_t r = 0; r < C; ++r) rope_row(r, cs.data() + r * half, sn.data() + r * half);
    auto table = [&](const std::vector<float>& v) {
      TypedTensor t{DType::F32, {C, half}, std::vector<uint8_t>(v.size() * 4)};
      std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
      return t;
    };
    const std::map<std::string, TypedTensor> init{
        {"token", TypedTensor{DType::I32, {1}, std::vector<uint8_t>(4, 0)}},
        {"past", TypedTensor{DType::I64, {1}, std::vector<uint8_t>(8, 0)}},
        {"generated", TypedTensor{DType::I32, {1, 1, C, 1}, std::vector<uint8_t>(static_cast<size_t>(C) * 4, 0)}},
        {"rope_cos.table", table(cs)},
        {"rope_sin.table", table(sn)}};
    for (const std::string& name : state) p.net.bind_handle(name, init.at(name));
  }
  p.used = ++tick;
  auto [pos_it, ok] = graphs.emplace(key, std::move(p));
  if (!weights_owner) weights_owner = &pos_it->second;  // std::map nodes do not move
#if defined(__GLIBC__)
  malloc_trim(0);  // compiling freed a lot of small blocks: hand the pages back before the runs
#endif
  return pos_it->second;
}

void Engine::Impl::bind_slot(Pass& p, int64_t slot) {
  if (p.B > 1) slot = 0;  // the batch pass: every slot's rows, from the first
  if (p.slot == slot) return;
  const size_t base = at(slot, 0, 0, C);
  for (size_t k = 0; k < p.cache_names.size(); ++k)
    if (!p.net.bind_handle_shared(p.cache_names[k], cache, k * layer_bytes(C) + base))
      fail(ErrorCategory::Internal, "llm::Engine: the compiled pass cannot bind its cache '", p.cache_names[k], "'");
  p.slot = slot;
}

// A larger bucket: every slot's rows are copied into a new buffer laid out at the new
// capacity (on the backend's side); passes of the old bucket are dropped. The weights' owner
// stays (the others read its weights) and is bound to the new cache, so that the old one's
// memory goes.
void Engine::Impl::grow(int64_t need) {
  const int64_t nc = bucket_for(need, n_ctx);
  if (nc <= C) return;
  const HParams& hp = model->hp;
  const size_t rb = row_bytes(), old_layer = layer_bytes(C), new_layer = layer_bytes(nc);
  if (cache.bytes() && graphs.empty()) {
    cache = SharedBuffer();  // the first pass failed after allocating it: the next one allocates anew
  } else if (cache.bytes()) {
    SharedBuffer next = graphs.begin()->second.net.allocate_shared(n_caches() * new_layer);
    std::vector<SharedBuffer::Range> rows;
    for (size_t k = 0; k < n_caches(); ++k)
      for (int64_t s = 0; s < slots; ++s)
        for (int64_t h = 0; h < hp.n_head_kv; ++h)
          rows.push_back({k * new_layer + at(s, h, 0, nc), k * old_layer + at(s, h, 0, C),
                          static_cast<size_t>(pos[static_cast<size_t>(s)]) * rb});
    next.copy_from(cache, rows);
    cache = next;
  }
  C = nc;
  for (auto it = graphs.begin(); it != graphs.end();) {
    if (std::get<2>(it->first) != C && &it->second != weights_owner) it = graphs.erase(it);
    else ++it;
  }
  if (weights_owner) {
    // Compiled for an older bucket, its caches are smaller than the new layout's: bound at
    // each cache's start (it never runs again: a pass is looked up by its bucket).
    Pass& w = *weights_owner;
    for (size_t k = 0; k < w.cache_names.size(); ++k) w.net.bind_handle_shared(w.cache_names[k], cache, k * new_layer);
    w.slot = -1;
  }
}

void Engine::Impl::truncate(int64_t slot, int64_t at) {
  const size_t s = static_cast<size_t>(slot);
  pos[s] = std::min(pos[s], at);
}

void Engine::Impl::trim_prompt_passes(const Pass& keep) {
  for (;;) {
    auto victim = graphs.end();
    int kept = 0;
    for (auto it = graphs.begin(); it != graphs.end(); ++it) {
      if (std::get<1>(it->first) <= 1 || &it->second == weights_owner) continue;
      ++kept;
      if (&it->second != &keep && (victim == graphs.end() || it->second.used < victim->second.used)) victim = it;
    }
    if (kept <= kPromptPasses || victim == graphs.end()) return;
    graphs.erase(victim);
  }
}

// The graph wrote the new rows into the cache.
void Engine::Impl::ran(Pass& p, int64_t T, const std::vector<int64_t>& slot_of) {
  for (int64_t b = 0; b < p.B; ++b) pos[static_cast<size_t>(slot_of[static_cast<size_t>(b)])] += T;
}

std::vector<float> Engine::Impl::run(Pass& p, std::span<const int32_t> tokens, const std::vector<int64_t>& slot_of,
                                     int64_t rows) {
  const HParams& hp = model->hp;
  const int64_t B = p.B, R = static_cast<int64_t>(tokens.size()), T = R / B, E = hp.n_embd, half = hp.n_rot / 2;
  if (rows < 0) rows = T;
  if (rows < 1 || rows > T || (rows < T && B != 1))
    fail(ErrorCategory::Internal, "llm::Engine: ", rows, " of ", T, " rows appended in a pass of ", B, " sequences");
  const int64_t last = rows - 1;  // the "last" input (BuildCtx::last_row_input), read by run_slots below
  embd.resize(static_cast<size_t>(token_ids ? 0 : R * E));
  cosv.resize(static_cast<size_t>(R * half));
  sinv.resize(static_cast<size_t>(R * half));
  pastv.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = pos[static_cast<size_t>(slot_of[static_cast<size_t>(b)])];
    pastv[static_cast<size_t>(b)] = base;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t r = b * T + t;
      if (!token_ids) embed_row(tokens[static_cast<size_t>(r)], base + t, embd.data() + r * E);
      rope_row(base + t, cosv.data() + r * half, sinv.data() + r * half);
    }
  }
  auto bytes = [](const auto& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  std::vector<std::span<const uint8_t>>& in = inputs;
  in.clear();
  for (int kind : p.input_kind) {
    switch (kind) {
      case 0: in.push_back(bytes(embd)); break;
      case 1: in.push_back(bytes(cosv)); break;
      case 2: in.push_back(bytes(sinv)); break;
      case 3: in.push_back(bytes(pastv)); break;
      case 5: in.push_back(bytes(tokens)); break;
      case 6: in.push_back(bytes(std::span<const int64_t>(&last, 1))); break;
      default: in.emplace_back(); break;  // a resident cache handle
    }
  }
  std::vector<TensorView> out = p.net.run_slots(in);
  ran(p, rows, slot_of);
  const float* lg = static_cast<const float*>(out[0].data);
  return std::vector<float>(lg, lg + out[0].bytes / 4);
}

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions opts) : impl_(std::make_unique<Impl>()) {
  detail::guard("llm::Engine", [&] {
    if (!model) fail(ErrorCategory::InvalidArgument, "llm::Engine: no model");
    if (opts.kv_type != DType::F16 && opts.kv_type != DType::F32)
      fail(ErrorCategory::InvalidArgument, "llm::Engine: KV cache type must be f16 or f32, not ",
           dtype_name(opts.kv_type));
    if (opts.sequences < 1 || opts.sequences > 1024)
      fail(ErrorCategory::InvalidArgument, "llm::Engine: sequences must be in [1, 1024], got ", opts.sequences);
    if (opts.threads < 0 || opts.threads > kMaxThreads)
      fail(ErrorCategory::InvalidArgument, "llm::Engine: threads must be 0 (all cores) to ", kMaxThreads, ", got ",
           opts.threads);
    if (opts.prompt_chunk < 0)
      fail(ErrorCategory::InvalidArgument, "llm::Engine: prompt_chunk must be >= 0, got ", opts.prompt_chunk);
    Impl& m = *impl_;
    m.model = std::move(model);
    m.opts = opts;
    m.slots = opts.sequences;
    m.pos.assign(static_cast<size_t>(m.slots), 0);
    const HParams& hp = m.model->hp;
    m.n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min<int64_t>(hp.n_ctx_train, 4096);
    if (m.n_ctx < 1 || m.n_ctx > (int64_t(1) << 24))
      fail(ErrorCategory::InvalidArgument, "llm::Engine: context ", m.n_ctx, " is out of range");
    m.kv_elt = dtype_size(opts.kv_type);
    const gguf::File& f = m.model->file;
    m.theta_scale = std::pow(static_cast<float>(hp.rope_base), -2.0f / static_cast<float>(hp.n_rot));
    if (hp.rope_scaling == HParams::RopeScaling::Yarn) {
      // The pairs whose wavelength fits the original context beta times (beta_fast 32,
      // beta_slow 1), as llama.cpp computes them in float: floor / ceil, clamped to the dims.
      const float n = static_cast<float>(hp.n_rot), base = static_cast<float>(hp.rope_base);
      auto dim = [&](float beta) {
        return n * std::log(static_cast<float>(hp.rope_orig_ctx) / (beta * 2 * static_cast<float>(M_PI))) /
               (2 * std::log(base));
      };
      m.yarn_lo = std::max(0.0f, std::floor(dim(32.0f)));
      m.yarn_hi = std::min(n - 1, std::ceil(dim(1.0f)));
    }
    m.tok_embd = &f.tensor("token_embd.weight");
    m.tok_row_bytes = gguf::row_bytes(m.tok_embd->type, hp.n_embd);
    if ((m.pos_embd = f.find_tensor("position_embd.weight"))) {
      if (m.pos_embd->dims.size() != 2 || m.pos_embd->dims[0] != hp.n_embd || m.pos_embd->dims[1] < m.n_ctx)
        fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': position_embd.weight must be [", hp.n_embd, ", >= ",
             m.n_ctx, "]");
      m.pos_row_bytes = gguf::row_bytes(m.pos_embd->type, hp.n_embd);
      m.row.resize(static_cast<size_t>(hp.n_embd));
    }
    // The graphs gather the embeddings themselves where they can read the table as stored
    // (one id a row goes in, and generate_greedy can feed a step's token to the next on the
    // backend); learned positions and quantized tables keep the host's rows.
    m.token_ids = !m.pos_embd && plain_dtype(m.tok_embd->type) != DType::U8;
    for (int64_t s = 0; s < m.slots; ++s) m.all_slots.push_back(s);
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

int64_t Engine::position(int64_t slot) const {
  if (slot < 0 || slot >= impl_->slots)
    fail(ErrorCategory::InvalidArgument, "llm::Engine: sequence ", slot, " is outside [0, ", impl_->slots, ")");
  return impl_->pos[static_cast<size_t>(slot)];
}
int64_t Engine::context() const { return impl_->n_ctx; }
int64_t Engine::sequences() const { return impl_->slots; }
void Engine::reset() {
  std::fill(impl_->pos.begin(), impl_->pos.end(), 0);
}
void Engine::reset(int64_t slot) {
  position(slot);  // range check
  impl_->pos[static_cast<size_t>(slot)] = 0;
}
const Model& Engine::model() const { return *impl_->model; }
std::string Engine::load_report() const { return impl_->report; }
int64_t Engine::compiled_graphs() const { return static_cast<int64_t>(impl_->graphs.size()); }

namespace {
void check_tokens(const HParams& hp, std::span<const int32_t> tokens, const char* where) {
  for (int32_t id : tokens)
    if (id < 0 || id >= hp.n_vocab)
      fail(ErrorCategory::InvalidArgument, where, ": token id ", id, " is outside the vocabulary [0, ", hp.n_vocab, ")");
}
}  // namespace

std::vector<float> Engine::eval(int64_t slot, std::span<const int32_t> tokens, bool all_rows) {
  return detail::guard("llm::Engine::eval", [&] {
    Impl& m = *impl_;
    const int64_t T = static_cast<int64_t>(tokens.size()), at = position(slot);
    if (T == 0) fail(ErrorCategory::InvalidArgument, "llm::Engine::eval: no tokens");
    if (at + T > m.n_ctx)
      fail(ErrorCategory::InvalidArgument, "llm::Engine::eval: ", T, " tokens at position ", at, " exceed the context of ",
           m.n_ctx);
    check_tokens(m.model->hp, tokens, "llm::Engine::eval");
    m.grow(at + T);
    // A prompt goes in chunks of prompt_chunk, the last one padded to a pass length of a few
    // (padded_rows) where pad_prompts asks and its padding rows fit the cache; a single token
    // is a decode step.
    const int64_t chunk = T > 1 ? m.opts.prompt_chunk : 0, V = m.model->hp.n_vocab;
    const bool pad = T > 1 && (m.opts.pad_prompts < 0 ? m.opts.device != Device::Cpu : m.opts.pad_prompts > 0);
    std::vector<float> logits;
    try {
      for (int64_t done = 0; done < T;) {
        const int64_t n = chunk > 0 ? std::min(T - done, chunk) : T - done;
        int64_t rows = pad ? padded_rows(n, chunk) : n;
        if (at + done + rows > m.C) rows = n;
        std::span<const int32_t> part = tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(n));
        if (rows > n) {
          m.padded.assign(part.begin(), part.end());
          m.padded.resize(static_cast<size_t>(rows), part.back());
          part = m.padded;
        }
        Impl::Pass& p = m.graph(1, rows, all_rows);
        m.bind_slot(p, slot);
        m.one_slot[0] = slot;
        std::vector<float> lg = m.run(p, part, m.one_slot, n);
        if (!all_rows) logits = std::move(lg);
        else logits.insert(logits.end(), lg.begin(), lg.begin() + n * V);
        // A prompt pass runs once per prompt: its activation pages go back to the OS until
        // the next one (its cache handles are persistent and stay).
        if (rows > 1) {
          p.net.release_scratch();
          m.trim_prompt_passes(p);
        }
        done += n;
      }
    } catch (...) {
      m.truncate(slot, at);  // chunks that ran are not kept: the call appends all or nothing
      throw;
    }
    return logits;
  });
}

std::vector<float> Engine::eval(std::span<const int32_t> tokens, bool all_rows) { return eval(0, tokens, all_rows); }

std::vector<int32_t> Engine::generate_greedy(int32_t token, int64_t n) {
  return detail::guard("llm::Engine::generate_greedy", [&] {
    Impl& m = *impl_;
    if (m.slots != 1)
      fail(ErrorCategory::InvalidArgument, "llm::Engine::generate_greedy: one sequence only; this engine has ", m.slots);
    const int64_t at = m.pos[0];
    if (n < 0 || at + n > m.n_ctx)
      fail(ErrorCategory::InvalidArgument, "llm::Engine::generate_greedy: ", n, " tokens at position ", at,
           " exceed the context of ", m.n_ctx);
    check_tokens(m.model->hp, std::span<const int32_t>(&token, 1), "llm::Engine::generate_greedy");
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(n));
    if (!m.token_ids) {  // the embeddings come from the host: a round trip per step
      for (int64_t i = 0; i < n; ++i) {
        std::vector<float> lg = eval(0, std::span<const int32_t>(&token, 1));
        token = greedy_token(lg);
        out.push_back(token);
      }
      return out;
    }
    if (n == 0) return out;
    m.grow(at + n);  // one bucket for every step: the pass cannot change between them
    Impl::Pass& p = m.graph(1, 1, false, true);
    m.bind_slot(p, 0);
    m.one_slot[0] = 0;
    // The step's state (token, position, the tokens so far) stays on the backend: the runs
    // go out back to back with nothing uploaded or read between them, and the tokens come
    // back once, from the "generated" handle.
    p.net.write_handle("token", 0, &token, sizeof token);
    p.net.write_handle("past", 0, &at, sizeof at);
    try {
      const std::map<std::string, TypedTensor> none;
      for (int64_t i = 0; i < n; ++i) p.net.commit_no_wait_handles_only(none);
      p.net.sync_pending();
    } catch (...) {
      try {
        p.net.sync_pending();  // the runs already queued end before the error goes up
      } catch (...) {
      }
      throw;
    }
    out.resize(static_cast<size_t>(n));
    p.net.read_handle_range("generated", static_cast<size_t>(at) * 4, out.data(), static_cast<size_t>(n) * 4);
    m.ran(p, n, m.one_slot);
    return out;
  });
}

std::vector<float> Engine::step(std::span<const int32_t> tokens) {
  return detail::guard("llm::Engine::step", [&] {
    Impl& m = *impl_;
    if (static_cast<int64_t>(tokens.size()) != m.slots)
      fail(ErrorCategory::InvalidArgument, "llm::Engine::step: ", tokens.size(), " tokens for ", m.slots, " sequences");
    int64_t longest = 0;
    for (int64_t s = 0; s < m.slots; ++s) longest = std::max(longest, m.pos[static_cast<size_t>(s)]);
    if (longest + 1 > m.n_ctx)
      fail(ErrorCategory::InvalidArgument, "llm::Engine::step: a sequence is at the context limit ", m.n_ctx);
    check_tokens(m.model->hp, tokens, "llm::Engine::step");
    m.grow(longest + 1);
    if (m.slots == 1) {
      Impl::Pass& p = m.graph(1, 1, false);
      m.bind_slot(p, 0);
      m.one_slot[0] = 0;
      return m.run(p, tokens, m.one_slot);
    }
    return m.run(m.graph(m.slots, 1, false), tokens, m.all_slots);
  });
}

}  // namespace rlx::llm
