// BuildCtx (params and inputs of one forward pass), the family registry, Model::load.
#include "llm/arch.h"

#include <cmath>

#include <algorithm>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "rlx/quant.h"

namespace rlx::llm {

BuildCtx::BuildCtx(const Model& m, int64_t b, int64_t t, int64_t cache, DType kv, bool all)
    : model(m), hp(m.hp), B(b), T(t), R(b * t), C(cache), kv_type(kv), all_rows(all),
      kc_(static_cast<size_t>(m.hp.n_layer)), vc_(static_cast<size_t>(m.hp.n_layer)) {}

bool BuildCtx::has(const std::string& tensor) const { return model.file.find_tensor(tensor) != nullptr; }

Value BuildCtx::param(const std::string& name, const std::string& tensor, bool raw, std::vector<int64_t> dims) {
  if (int32_t id = g.find_param(name); id >= 0) return Value{id, 0};
  params_.push_back(ParamSource{name, tensor, raw, false, dims});
  return g.param(name, Shape(dims, raw ? DType::U8 : DType::F32));
}

// The GGUF tensor of a projection: `rank` dims in a format rlx reads.
const gguf::TensorInfo& BuildCtx::weight(const std::string& tensor, size_t rank, const char* what) const {
  const gguf::TensorInfo& t = model.file.tensor(tensor);
  if (t.dims.size() != rank)
    fail(ErrorCategory::Parse, "GGUF file '", model.file.path(), "': tensor '", tensor, "' has ", t.dims.size(),
         " dims, ", what, " need ", rank);
  if (!gguf::can_dequantize(t.type))
    fail(ErrorCategory::Unsupported, "GGUF file '", model.file.path(), "': tensor '", tensor, "' is ",
         gguf::type_name(t.type), ", a format rlx cannot read yet");
  return t;
}

Value BuildCtx::project(Value x, const std::string& tensor) {
  const gguf::TensorInfo& t = weight(tensor, 2, "matrices");
  const int64_t k = t.dims[0], n = t.dims[1];
  Value w = param(tensor, tensor, true, {n, gguf::row_bytes(t.type, k)});
  uint32_t format = static_cast<uint32_t>(t.type);
  if (repack && t.type == gguf::TensorType::Q4_0 && n % 16 == 0) {
    format = quant::kQ4_0x16;
    for (ParamSource& s : params_)
      if (s.param == tensor) s.repack_q4_0x16 = true;
  }
  return g.qmatmul(x, w, format, k);
}

std::vector<Value> BuildCtx::project_rows(Value x, const std::vector<std::string>& tensors) {
  std::vector<Value> out;
  const gguf::TensorInfo& t0 = weight(tensors[0], 2, "matrices");
  // (Q4_0 repacked into 16-row panels stays per matrix.)
  bool same = fuse_rows && tensors.size() > 1 && !(repack && t0.type == gguf::TensorType::Q4_0);
  std::vector<int64_t> sizes;
  int64_t n = 0;
  for (const std::string& name : tensors) {
    const gguf::TensorInfo& t = weight(name, 2, "matrices");
    same = same && t.type == t0.type && t.dims[0] == t0.dims[0];
    sizes.push_back(t.dims[1]);
    n += t.dims[1];
  }
  if (!same) {
    for (const std::string& name : tensors) out.push_back(project(x, name));
    return out;
  }
  std::string fused = "rows(" + tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) fused += "," + tensors[i];
  fused += ")";
  const int64_t k = t0.dims[0];
  const std::vector<int64_t> dims{n, gguf::row_bytes(t0.type, k)};
  Value w;
  if (int32_t id = g.find_param(fused); id >= 0) {
    w = Value{id, 0};
  } else {
    params_.push_back(ParamSource{fused, tensors[0], true, false, dims, tensors});
    w = g.param(fused, Shape(dims, DType::U8));
  }
  return g.split(g.qmatmul(x, w, static_cast<uint32_t>(t0.type), k), -1, sizes);
}

Value BuildCtx::project_id(Value x, const std::string& tensor, Value ids) {
  const gguf::TensorInfo& t = weight(tensor, 3, "stacked experts");
  const int64_t k = t.dims[0], n = t.dims[1], e = t.dims[2];
  Value w = param(tensor, tensor, true, {e, n, gguf::row_bytes(t.type, k)});
  return g.qmatmul_id(x, w, ids, static_cast<uint32_t>(t.type), k);
}

namespace {
// "[d0, d1, ...]", for messages.
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}
}  // namespace

Value BuildCtx::vec(const std::string& tensor, int64_t n, bool or_one) {
  const gguf::TensorInfo& t = model.file.tensor(tensor);
  if (t.dims.size() != 1 || (t.dims[0] != n && !(or_one && t.dims[0] == 1)))
    fail(ErrorCategory::Parse, "GGUF file '", model.file.path(), "': tensor '", tensor, "' is ", dims_text(t.dims),
         ", not [", n, or_one ? "] or [1]" : "]");
  return param(tensor, tensor, false, {t.dims[0]});
}

DType plain_dtype(gguf::TensorType t) {
  switch (t) {
    case gguf::TensorType::F32: return DType::F32;
    case gguf::TensorType::F16: return DType::F16;
    case gguf::TensorType::BF16: return DType::BF16;
    default: return DType::U8;
  }
}

Value BuildCtx::embeddings() {
  if (embd_.valid()) return embd_;
  if (!token_ids) return embd_ = g.input("embd", Shape({R, hp.n_embd}, DType::F32));
  // The table as stored ([n_vocab, row bytes], the param a tied output projection reads
  // too), a row per id, its bytes read as the table's element type, widened to f32.
  const gguf::TensorInfo& t = weight("token_embd.weight", 2, "token embeddings");
  const DType et = plain_dtype(t.type);
  if (et == DType::U8)
    fail(ErrorCategory::Unsupported, "llm: token ids in the graph need an f32, f16 or bf16 token_embd.weight, not ",
         gguf::type_name(t.type));
  Value table = param("token_embd.weight", "token_embd.weight", true, {hp.n_vocab, gguf::row_bytes(t.type, hp.n_embd)});
  Value rows = g.bitcast(g.gather(table, g.input("token", Shape({R}, DType::I32)), 0), et);
  return embd_ = et == DType::F32 ? rows : g.cast(rows, DType::F32);
}
Value BuildCtx::rope_row(const char* table) {
  return g.gather(g.input(table, Shape({C, hp.n_rot / 2}, DType::F32)), past(), 0);  // [B = R, n_rot/2]
}
Value BuildCtx::rope_cos() {
  if (!cos_.valid())
    cos_ = greedy_token ? rope_row("rope_cos.table") : g.input("rope_cos", Shape({R, hp.n_rot / 2}, DType::F32));
  return cos_;
}
Value BuildCtx::rope_sin() {
  if (!sin_.valid())
    sin_ = greedy_token ? rope_row("rope_sin.table") : g.input("rope_sin", Shape({R, hp.n_rot / 2}, DType::F32));
  return sin_;
}
Value BuildCtx::past() {
  if (!past_.valid()) past_ = g.input("past", Shape({B}, DType::I64));
  return past_;
}
Value BuildCtx::last_row() { return g.input("last", Shape({1}, DType::I64)); }
Value BuildCtx::k_cache(int64_t il) {
  Value& v = kc_[static_cast<size_t>(il)];
  if (!v.valid()) v = g.input("k_cache." + std::to_string(il), Shape({B, hp.n_head_kv, C, hp.head_dim}, kv_type));
  return v;
}
Value BuildCtx::v_cache(int64_t il) {
  Value& v = vc_[static_cast<size_t>(il)];
  if (!v.valid()) v = g.input("v_cache." + std::to_string(il), Shape({B, hp.n_head_kv, C, hp.head_dim}, kv_type));
  return v;
}

void BuildCtx::finish() {
  if (!greedy_token) return g.set_outputs({logits_}, {"logits"});
  if (!token_ids || T != 1 || B != 1 || all_rows)
    fail(ErrorCategory::Internal, "llm: a greedy step needs token ids and one sequence of one new token");
  // The token goes through the "generated" list (written at past, read back from there), so
  // the write is part of what the outputs depend on.
  Value token = g.reshape(g.cast(g.argmax(logits_, -1, false), DType::I32), {1, 1, 1, 1});
  Value generated = g.cache_write(g.input("generated", Shape({1, 1, C, 1}, DType::I32)), token, past());
  Value next = g.gather(g.reshape(generated, {C}), past(), 0);  // [1]
  g.set_outputs({logits_, next, g.add(past(), g.scalar(1, DType::I64))}, {"logits", "token", "past"});
}

const std::vector<ArchSpec>& arch_registry() {
  static const std::vector<ArchSpec> r{arch_llama(), arch_qwen2(), arch_qwen3(), arch_qwen3moe(), arch_gpt2()};
  return r;
}

const ArchSpec* find_arch(const std::string& name) {
  for (const ArchSpec& a : arch_registry())
    if (a.name == name) return &a;
  return nullptr;
}

std::vector<std::string> architectures() {
  std::vector<std::string> n;
  for (const ArchSpec& a : arch_registry()) n.push_back(a.name);
  return n;
}

namespace {

// <arch>.rope.scaling.*: the type (absent: linear, as llama.cpp reads it), the factor (or
// the older rope.scale_linear; 0 or absent: none), attn_factor, and for YaRN the original
// context. longrope needs per-context factor tensors rlx does not read: refused, as is an
// unknown type.
void read_rope_scaling(const gguf::File& f, HParams& hp) {
  const std::string k = hp.arch + ".rope.scaling.";
  const std::string type = f.get_string(k + "type", "linear");
  if (type == "longrope")
    fail(ErrorCategory::Unsupported, "GGUF file '", f.path(), "': ", k, "type 'longrope' is not supported");
  if (type != "none" && type != "linear" && type != "yarn")
    fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", k, "type '", type,
         "' is not a RoPE scaling type (none, linear, yarn, longrope)");
  const std::string fkey = f.has(k + "factor") ? k + "factor" : hp.arch + ".rope.scale_linear";
  const double factor = f.get_float(fkey, 0.0), attn = f.get_float(k + "attn_factor", 1.0);
  if (!(std::isfinite(factor) && factor >= 0))
    fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", fkey, " = ", factor, " is not a finite number >= 0");
  if (!(std::isfinite(attn) && attn > 0))
    fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", k, "attn_factor = ", attn,
         " is not a positive finite number");
  // float, as llama.cpp keeps these.
  const float freq_scale = type == "none" || factor == 0 ? 1.0f : 1.0f / static_cast<float>(factor);
  float mscale = static_cast<float>(attn);
  hp.rope_scaling = type == "yarn" ? HParams::RopeScaling::Yarn
                    : freq_scale != 1.0f ? HParams::RopeScaling::Linear
                                         : HParams::RopeScaling::None;
  if (hp.rope_scaling == HParams::RopeScaling::Yarn) {
    hp.rope_orig_ctx = f.get_int(k + "original_context_length", hp.n_ctx_train);
    if (hp.rope_orig_ctx <= 0 || hp.rope_orig_ctx > (int64_t(1) << 24))
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", k, "original_context_length = ", hp.rope_orig_ctx,
           " is out of range");
    // llama.cpp's magnitude for YaRN: its context's attention factor (1 + 0.1 ln s for a
    // scale s > 1, divided by the same so the rope's own factor is not applied twice) times
    // the key's, then the rope's 1 + 0.1 ln s. Computed in that order, in float.
    const float s = 1.0f / freq_scale;
    float ctx = s <= 1.0f ? 1.0f : 0.1f * std::log(s) + 1.0f;
    ctx *= 1.0f / (1.0f + 0.1f * std::log(s));
    mscale = ctx * static_cast<float>(attn) * (1.0f + 0.1f * std::log(1.0f / freq_scale));
  }
  hp.rope_freq_scale = freq_scale;
  hp.rope_mscale = mscale;
}

// Keys every family shares, as llama.cpp reads them ("<arch>.embedding_length", ...).
void read_common(const gguf::File& f, HParams& hp) {
  const std::string& a = hp.arch;
  auto need = [&](const std::string& key) {
    int64_t v = f.get_int(a + "." + key);
    if (v <= 0 || v > (int64_t(1) << 24))
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", a, ".", key, " = ", v, " is out of range");
    return v;
  };
  hp.n_embd = need("embedding_length");
  hp.n_layer = need("block_count");
  hp.n_head = need("attention.head_count");
  hp.n_head_kv = f.get_int(a + ".attention.head_count_kv", hp.n_head);
  hp.n_ctx_train = need("context_length");
  hp.n_ff = f.get_int(a + ".feed_forward_length", 0);
  hp.head_dim = f.get_int(a + ".attention.key_length", hp.n_embd / hp.n_head);
  int64_t vdim = f.get_int(a + ".attention.value_length", hp.head_dim);
  if (vdim != hp.head_dim)
    fail(ErrorCategory::Unsupported, "GGUF file '", f.path(), "': key length ", hp.head_dim, " != value length ", vdim);
  hp.n_rot = f.get_int(a + ".rope.dimension_count", hp.head_dim);
  hp.rope_base = f.get_float(a + ".rope.freq_base", 10000.0);
  read_rope_scaling(f, hp);
  hp.n_expert = f.get_int(a + ".expert_count", 0);
  hp.n_expert_used = f.get_int(a + ".expert_used_count", 0);
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0)
    fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", hp.n_head, " heads are not a multiple of ", hp.n_head_kv,
         " KV heads");
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2)
    fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': rope dimension ", hp.n_rot, " does not fit head dim ",
         hp.head_dim);
  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  hp.n_vocab = emb.dims.size() == 2 ? emb.dims[1] : 0;
  if (hp.n_vocab <= 0 || emb.dims[0] != hp.n_embd)
    fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': token_embd.weight is not [n_embd ", hp.n_embd, ", n_vocab]");
}

// The metadata against the tensors it describes, where a disagreement would otherwise run
// without an error: blocks past block_count (the model would run its first layers only), an
// output projection whose rows are not the vocabulary (logits of the wrong width, token ids
// the tokenizer does not have), a dense FFN width other than feed_forward_length (an absent
// key is taken from the tensor).
void check_tensors_fit(const gguf::File& f, HParams& hp) {
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    int64_t il = 0;
    size_t i = 4;
    for (; i < t.name.size() && i < 12 && t.name[i] >= '0' && t.name[i] <= '9'; ++i) il = il * 10 + (t.name[i] - '0');
    if (i > 4 && i < t.name.size() && t.name[i] == '.' && il >= hp.n_layer)
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': tensor '", t.name, "' belongs to block ", il, " but ",
           hp.arch, ".block_count is ", hp.n_layer);
  }
  if (const gguf::TensorInfo* out = f.find_tensor("output.weight"))
    if (out->dims.size() != 2 || out->dims[0] != hp.n_embd || out->dims[1] != hp.n_vocab)
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': output.weight is ", dims_text(out->dims), ", not [n_embd ",
           hp.n_embd, ", n_vocab ", hp.n_vocab, "] as token_embd.weight gives");
  if (const gguf::TensorInfo* up = f.find_tensor("blk.0.ffn_up.weight"); up && up->dims.size() == 2) {
    if (hp.n_ff == 0) hp.n_ff = up->dims[1];
    if (up->dims[1] != hp.n_ff)
      fail(ErrorCategory::Parse, "GGUF file '", f.path(), "': ", hp.arch, ".feed_forward_length is ", hp.n_ff,
           " but blk.0.ffn_up.weight has ", up->dims[1], " outputs");
  }
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string& path) {
  return detail::guard("llm::Model::load", [&] {
    auto m = std::make_shared<Model>();
    m->file = gguf::File::open(path);
    m->hp.arch = m->file.get_string("general.architecture");
    const ArchSpec* spec = find_arch(m->hp.arch);
    if (!spec) {
      std::string known;
      for (const std::string& n : architectures()) known += (known.empty() ? "" : ", ") + n;
      fail(ErrorCategory::Unsupported, "GGUF file '", path, "': architecture '", m->hp.arch,
           "' is not supported (rlx builds: ", known, ")");
    }
    read_common(m->file, m->hp);
    spec->hparams(m->file, m->hp);
    // The float keys, checked here with their names (a zero or NaN RoPE base gives NaN logits
    // with no error at all; a bad epsilon would be refused only later, by a node of the graph).
    const HParams& hp = m->hp;
    if (!(std::isfinite(hp.rope_base) && hp.rope_base > 0))
      fail(ErrorCategory::Parse, "GGUF file '", path, "': ", hp.arch, ".rope.freq_base = ", hp.rope_base,
           " is not a positive finite number");
    if (!(std::isfinite(hp.norm_eps) && hp.norm_eps >= 0))
      fail(ErrorCategory::Parse, "GGUF file '", path, "': the norm epsilon ", hp.norm_eps, " (", hp.arch,
           ".attention.layer_norm_*epsilon) is not a finite number >= 0");
    if (!(std::isfinite(hp.attn_scale) && hp.attn_scale >= 0))
      fail(ErrorCategory::Parse, "GGUF file '", path, "': ", hp.arch, ".attention.scale = ", hp.attn_scale,
           " is not a finite number >= 0");
    if (m->hp.n_expert > 0 && (m->hp.n_expert_used < 1 || m->hp.n_expert_used > m->hp.n_expert))
      fail(ErrorCategory::Parse, "GGUF file '", path, "': ", m->hp.n_expert_used, " experts used of ", m->hp.n_expert);
    check_tensors_fit(m->file, m->hp);
    try {
      m->tokenizer = std::make_shared<Tokenizer>(Tokenizer::from_gguf(m->file));
      m->file.drop_arrays("tokenizer.ggml.");  // the tokenizer holds the vocabulary now
#if defined(__GLIBC__)
      malloc_trim(0);  // and building it left freed blocks behind
#endif
    } catch (const Error& e) {
      m->tokenizer_error = e.what();
    }
    return std::shared_ptr<const Model>(m);
  });
}

}  // namespace rlx::llm
