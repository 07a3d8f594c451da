// Internal: what an architecture builder sees. A family (llama, qwen2, ...) is one small
// file (arch_NAME.cpp) with a function that reads its hyperparameters and one that builds
// the forward pass from the shared blocks in blocks.h; it registers itself in arch.cpp.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/llm.h"

namespace rlx::llm {

// How the engine fills a param from the GGUF tensor of the same name.
struct ParamSource {
  std::string param;   // param name in the graph
  std::string tensor;  // GGUF tensor it comes from
  bool raw = false;    // true: the tensor's bytes as stored (u8, a qmatmul weight); false: f32
  bool repack_q4_0x16 = false;  // raw Q4_0 bytes repacked into rlx's q4_0x16 panels at load
  std::vector<int64_t> dims;  // the param's rlx dims
  // Rows of several tensors of one type and width, concatenated in this order (a copy at
  // load; `tensor` is then the first of them): project_rows with fuse_rows.
  std::vector<std::string> parts;
};

// One forward pass: `B` sequences of `T` new tokens each (R = B*T rows, sequence-major),
// over caches of capacity C (the bucket); each sequence has its own cached length.
class BuildCtx {
 public:
  BuildCtx(const Model& m, int64_t B, int64_t T, int64_t cache, DType kv_type, bool all_rows);

  Graph g{"llm"};
  const Model& model;
  const HParams& hp;
  const int64_t B, T, R, C;
  const DType kv_type;
  const bool all_rows;
  bool repack = false;  // Q4_0 matrices of 16k rows as q4_0x16 (when the backend has the kernel)
  // Projections of one input by several matrices (q/k/v, gate/up) as one matrix of their
  // rows, one product instead of several (for device backends, where each is a launch and
  // the weights are copied to the device anyway; the CPU keeps them mapped in place).
  bool fuse_rows = false;
  // The input is the token ids (i32 "token" [R]) and their rows of token_embd.weight are
  // gathered by the graph (from the table's stored bytes: F32, F16 or BF16 tables; models
  // with learned positions keep the host's rows). Set by the engine for every pass or none
  // (the passes share one set of params).
  bool token_ids = false;
  // A step that runs without the host (token_ids, B = T = 1): the output "token" [1] (i32,
  // like the input) is the greedy next token, the argmax of the logits (the first index of
  // the maximum; NaN ranks above numbers), also written at position past of the input
  // "generated" i32[1, 1, C, 1] (in place: a handle that collects the tokens); the output
  // "past" is past + 1; the rotary rows are gathered at past from the inputs
  // "rope_cos.table" / "rope_sin.table" [C, n_rot/2] (every position's row, bound once).
  // Handles named "token" and "past" then feed each run's outputs to the next on the
  // backend's side, so consecutive runs need nothing from the host.
  bool greedy_token = false;
  // One sequence's prompt (B = 1, T > 1, not all_rows) whose logits come from the row the
  // input "last" i64[1] names, not from row T - 1: the engine pads a prompt to one of a few
  // lengths (rows past the prompt are computed and dropped), so passes are reused.
  bool last_row_input = false;

  bool has(const std::string& tensor) const;
  // Params from GGUF tensors (names as in the file). project(x, W): x @ W^T for ggml's
  // [n_in, n_out] W, read in its stored block format (qmatmul); vec(): as f32, one dim of
  // `n` elements (Error(Parse) naming the tensor otherwise: a norm weight or bias of another
  // length could broadcast, a single element to every feature, and run without an error);
  // with `or_one`, one element (a per-tensor scale) is allowed too.
  Value project(Value x, const std::string& tensor);
  // x @ W_i^T for each tensor: one qmatmul over their concatenated rows, split back, when
  // fuse_rows holds and they share type and width (and are not repacked Q4_0); else one each.
  std::vector<Value> project_rows(Value x, const std::vector<std::string>& tensors);
  // Mixture of experts: slot s of token t through expert ids[t, s] of the stacked ggml
  // [n_in, n_out, n_expert] tensor (qmatmul_id): [T, S, n_out].
  Value project_id(Value x, const std::string& tensor, Value ids);
  Value vec(const std::string& tensor, int64_t n, bool or_one = false);

  // Inputs (created on first use): the token embeddings [R, n_embd] (rows of
  // token_embd.weight, plus position_embd.weight for learned positions, gathered on the
  // host: R rows of the table, not a graph over the whole table; with token_ids, gathered
  // by the graph from the ids), rotary cos/sin
  // [R, n_rot/2] (each row at its own position), the cached lengths past i64[B], layer il's
  // K/V cache [B, Hkv, C, head_dim].
  Value embeddings();
  Value rope_cos();
  Value rope_sin();
  Value past();
  Value last_row();  // "last" i64[1] (last_row_input)
  Value k_cache(int64_t il);
  Value v_cache(int64_t il);

  // The outputs: the logits (and with greedy_token the next tokens). (The new K/V rows go
  // into the cache inputs in place, by cache_write: the caches are handles that persist
  // across runs.)
  void set_logits(Value v) { logits_ = v; }
  void finish();  // sets the graph outputs

  const std::vector<ParamSource>& params() const { return params_; }

 private:
  Value param(const std::string& name, const std::string& tensor, bool raw, std::vector<int64_t> dims);
  const gguf::TensorInfo& weight(const std::string& tensor, size_t rank, const char* what) const;
  std::vector<ParamSource> params_;
  Value rope_row(const char* table);  // greedy_token: a row of the table at past
  Value embd_, cos_, sin_, past_;
  std::vector<Value> kc_, vc_;
  Value logits_;
};

// The element type of a GGUF table whose stored rows a graph reads as they are (F32, F16,
// BF16); U8 for block formats, which need dequantizing.
DType plain_dtype(gguf::TensorType t);

struct ArchSpec {
  std::string name;
  std::function<void(const gguf::File&, HParams&)> hparams;  // reads the family's keys
  std::function<void(BuildCtx&)> build;
};

const ArchSpec* find_arch(const std::string& name);
const std::vector<ArchSpec>& arch_registry();

// Family registration (one per arch_*.cpp).
ArchSpec arch_llama();
ArchSpec arch_qwen2();
ArchSpec arch_qwen3();
ArchSpec arch_gpt2();
ArchSpec arch_qwen3moe();  // both in arch_qwen3.cpp

}  // namespace rlx::llm
