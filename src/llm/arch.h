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
  bool transpose = false;  // ggml [n_in, n_out] matrix -> rlx [n_in, n_out] (row-major transpose)
  std::vector<int64_t> dims;  // the param's rlx dims
};

// One forward pass: `T` new tokens after `cache` positions of capacity (the bucket).
class BuildCtx {
 public:
  BuildCtx(const Model& m, int64_t T, int64_t cache, DType kv_type, bool all_rows);

  Graph g{"llm"};
  const Model& model;
  const HParams& hp;
  const int64_t T, C;
  const DType kv_type;
  const bool all_rows;

  bool has(const std::string& tensor) const;
  // Params from GGUF tensors (names as in the file). matrix(): y = x @ W for ggml's
  // [n_in, n_out] W; vec(): 1-D as stored; table(): 2-D rows as stored (embeddings).
  Value matrix(const std::string& tensor);
  Value vec(const std::string& tensor);
  Value table(const std::string& tensor);
  // The same as matrix(), from the tensor of another name (tied output = embedding).
  Value matrix_from(const std::string& param, const std::string& tensor);

  // Inputs (created on first use): token ids [T] i64, positions [T] i64, rotary cos/sin
  // [T, n_rot/2], additive mask [T, C+T], layer il's K/V cache [1, Hkv, C, head_dim].
  Value tokens();
  Value positions();
  Value rope_cos();
  Value rope_sin();
  Value mask();
  Value k_cache(int64_t il);
  Value v_cache(int64_t il);

  // Outputs in order: logits first, then per layer the new K and V rows.
  void set_logits(Value v) { logits_ = v; }
  void add_kv_out(int64_t il, Value k, Value v);
  void finish();  // sets the graph outputs

  const std::vector<ParamSource>& params() const { return params_; }

 private:
  Value param(const std::string& name, const std::string& tensor, bool transpose, std::vector<int64_t> dims);
  std::vector<ParamSource> params_;
  Value tokens_, positions_, cos_, sin_, mask_;
  std::vector<Value> kc_, vc_;
  Value logits_;
  std::vector<std::pair<Value, Value>> kv_out_;
};

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

}  // namespace rlx::llm
