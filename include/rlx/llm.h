// LLM engine: GGUF models built as rlx graphs, a KV cache, sampling.
//
// llm::Model reads a GGUF file (memory-mapped), its hyperparameters and tokenizer, and
// knows how to build the graph of its architecture family (llama, qwen2, qwen3, gpt2;
// see src/llm/arch_*.cpp). An unknown general.architecture is Error(Unsupported) naming
// it and the families rlx has.
//
// llm::Engine runs a model over `sequences` independent sequence slots (1 by default):
// eval(slot, tokens) appends tokens to one slot (a prompt, or one decode step) and returns
// their logits; step(tokens) decodes one token for every slot in one graph run (batched
// decode: the weights are read once for all slots; the slots may be at different
// positions). Graphs are compiled by the normal pipeline per (sequences, new tokens, cache
// bucket), the bucket being the context capacity rounded up to a power of two (at least
// 256); attention reads only the filled rows of a slot. All graphs share one weights
// segment; the matrices are not copied into it but read in place, in their GGUF block
// format, from the memory-mapped file. The KV cache (F16 by default, F32 selectable) is
// resident in the graphs' handles; appending a token writes only its rows.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/compiled_graph.h"
#include "rlx/gguf.h"
#include "rlx/tokenizer.h"

namespace rlx::llm {

enum class RopeKind { None, Norm, Neox };  // Norm: pairs (2i, 2i+1); Neox: (i, i + n_rot/2)

struct HParams {
  std::string arch;
  int64_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
  int64_t head_dim = 0, n_ff = 0, n_rot = 0;
  double rope_base = 10000, norm_eps = 1e-5, attn_scale = 0;  // attn_scale 0: 1/sqrt(head_dim)
  RopeKind rope = RopeKind::Norm;
  // RoPE context scaling (<arch>.rope.scaling.*), as llama.cpp applies it: the angle of
  // position p and pair i is p * freq_scale * base^(-2i/n_rot) (linear: freq_scale =
  // 1/factor); YaRN (yarn) mixes it with the unscaled angle over the pairs between the
  // correction dims of its original context (beta_fast 32, beta_slow 1) and scales cos and
  // sin by rope_mscale, which otherwise is the key's attn_factor.
  enum class RopeScaling { None, Linear, Yarn } rope_scaling = RopeScaling::None;
  double rope_freq_scale = 1, rope_mscale = 1;
  int64_t rope_orig_ctx = 0;  // YaRN: the context the model was trained with before scaling
  bool layer_norm = false;  // LayerNorm (with bias) instead of RMSNorm
  int64_t n_expert = 0, n_expert_used = 0;
};

struct Model {
  // Error(Io/Parse) for unreadable files, Error(Unsupported) for unknown families.
  static std::shared_ptr<const Model> load(const std::string& path);
  gguf::File file;  // once the tokenizer is built, its tokenizer.ggml.* arrays read empty
  HParams hp;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the vocab is not a supported tokenizer
  std::string tokenizer_error;                 // why it is null
};

// Names of the architecture families rlx can build.
std::vector<std::string> architectures();

struct EngineOptions {
  Device device = Device::Cpu;
  int threads = 0;           // 0: hardware concurrency, else 1..kMaxThreads
  int64_t n_ctx = 0;         // 0: min(the model's training context, 4096); per sequence
  DType kv_type = DType::F16;  // F16 or F32
  int64_t sequences = 1;     // sequence slots (batched decode through step())
  // q/k/v and gate/up matrices concatenated at load into one matrix each (one product where
  // there were three or two): -1 for device backends only (their weights are copied to the
  // device anyway), 0 never, 1 always (on the CPU a copy instead of reading them mapped).
  int fuse_projections = -1;
  // A prompt longer than prompt_chunk tokens runs in passes of prompt_chunk tokens (a pass's
  // activations stay bounded however long the prompt); 0: one pass.
  int64_t prompt_chunk = 512;
  // A prompt (or its last chunk) padded up to 8, 16, 32, 64 or a multiple of 64 rows, so a
  // chat's turns reuse a few compiled passes instead of compiling one per new length (the
  // padding rows are computed and dropped; their cache rows lie past the sequence's end and
  // are overwritten by the next tokens). -1: on device backends only, where a pass compiles
  // kernels specialized to its shapes and holds device memory of its own (a chat's short
  // turns twice as fast on CUDA); on the CPU a pass compiles in about ten milliseconds, what
  // a medium prompt's padding rows cost too. 0 never, 1 always.
  int pad_prompts = -1;
};

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, EngineOptions opts = {});
  ~Engine();
  Engine(Engine&&) noexcept;

  // Appends `tokens` to sequence `slot`; returns logits row-major [rows, n_vocab]: every
  // token's row when `all_rows`, else only the last token's. Error(InvalidArgument) for
  // token ids outside the vocabulary, a context overflow or a bad slot (nothing is appended).
  std::vector<float> eval(int64_t slot, std::span<const int32_t> tokens, bool all_rows = false);
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_rows = false);  // slot 0
  // One token per slot (tokens.size() == sequences()), all in one run; logits [sequences, n_vocab].
  std::vector<float> step(std::span<const int32_t> tokens);
  // Greedy decoding of slot 0 of a one-sequence engine: appends `token`, then each step's
  // argmax, n runs in all; returns the n tokens (as n eval calls with an argmax after each:
  // the first index of the maximum, NaN ranked above every number). Where the graphs take
  // token ids (f32, f16 or bf16 token tables, no learned positions) a step's whole state
  // (token, position, the tokens so far, every position's rotary row) stays on the backend
  // and the runs are queued with nothing uploaded or read between them
  // (CompiledGraph::commit_no_wait_handles_only); otherwise it is eval and an argmax per step.
  // Error(InvalidArgument) as eval's, or for an engine of several sequences.
  std::vector<int32_t> generate_greedy(int32_t token, int64_t n);
  int64_t position(int64_t slot = 0) const;
  int64_t context() const;
  int64_t sequences() const;
  void reset();              // empties every slot
  void reset(int64_t slot);  // empties one slot

  const Model& model() const;
  std::string load_report() const;  // what loading did to the weights (types, bytes)
  // The passes compiled and kept: one per kind of run asked for (sequences, tokens per run,
  // cache bucket, rows of logits, greedy step); of the prompt passes (more than one token a
  // run) at most four besides the first pass compiled, the least recently used dropped first.
  int64_t compiled_graphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The greedy token of one logits row: the first index of the maximum, NaN ranked above every
// number (the graphs' argmax, generate_greedy's); 0 for an empty row. Vectorized: a
// vocabulary's row takes a few microseconds.
int32_t greedy_token(std::span<const float> logits);

struct SamplerOptions {
  float temperature = 0;  // 0: greedy (greedy_token)
  int top_k = 40;         // 0: off
  float top_p = 0.95f;    // 1: off
  float min_p = 0.05f;    // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

// Seeded and reproducible: the same options, logits and history give the same ids.
class Sampler {
 public:
  explicit Sampler(SamplerOptions o = {});
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplerOptions o_;
  uint64_t state_;
};

}  // namespace rlx::llm
