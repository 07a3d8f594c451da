// `rlx generate` (text generation from a GGUF model) and `rlx tokenize`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.h"
#include "rlx/llm.h"

namespace rlx::cli {

namespace {


// "1,2,3" or "1 2 3" (or both): an item between two commas must hold an id ("1,,2" is a typo,
// not two ids).
std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::istringstream words(s.substr(start, comma - start));
    std::string w;
    bool any = false;
    while (words >> w) {
      any = true;
      int64_t v = 0;
      if (!whole_number(w, 0, INT32_MAX, v)) throw UsageError("--prompt-ids: '" + w + "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
    if (!any) throw UsageError("--prompt-ids: '" + s + "' has an empty item (ids are separated by commas or spaces)");
    start = comma + 1;
  }
  return ids;
}

// B sequences decoded together (one graph run per step for all of them); prompts are
// used round-robin when fewer than B are given. Each sequence's text is printed at the end.
int generate_parallel(const Args& a, const std::shared_ptr<const llm::Model>& model, llm::EngineOptions eo,
                      const llm::SamplerOptions& so, const std::vector<std::vector<int32_t>>& prompts, int B, int n_gen) {
  eo.sequences = B;
  llm::Engine engine(model, eo);
  const llm::Tokenizer* tok = model->tokenizer.get();
  std::vector<llm::Sampler> samplers;
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(B)), generated(static_cast<size_t>(B));
  std::vector<int32_t> next(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  size_t prompt_tokens = 0;
  const int64_t V = model->hp.n_vocab;
  for (int b = 0; b < B; ++b) {
    llm::SamplerOptions sb = so;
    sb.seed = so.seed + uint64_t(b);
    samplers.emplace_back(sb);
    const std::vector<int32_t>& p = prompts[size_t(b) % prompts.size()];
    prompt_tokens += p.size();
    history[size_t(b)] = p;
    std::vector<float> lg = engine.eval(b, p);
    next[size_t(b)] = samplers.back().sample(lg, history[size_t(b)]);
  }
  auto t1 = clock::now();
  int steps = 0;
  bool at_context = false;  // stopped because a sequence filled its context
  for (int i = 0; i < n_gen; ++i) {
    bool all_done = true;
    for (int b = 0; b < B; ++b) {
      if (done[size_t(b)]) continue;
      history[size_t(b)].push_back(next[size_t(b)]);
      generated[size_t(b)].push_back(next[size_t(b)]);
      if ((tok && tok->is_eog(next[size_t(b)])) || int(generated[size_t(b)].size()) >= n_gen) done[size_t(b)] = true;
      all_done = all_done && done[size_t(b)];
    }
    int64_t longest = 0;
    for (int b = 0; b < B; ++b) longest = std::max(longest, engine.position(b));
    if (all_done) break;
    if (longest + 1 > engine.context()) {
      at_context = true;
      break;
    }
    std::vector<float> lg = engine.step(next);  // finished sequences ride along; their rows are ignored
    ++steps;
    for (int b = 0; b < B; ++b)
      if (!done[size_t(b)])
        next[size_t(b)] = samplers[size_t(b)].sample(std::span<const float>(lg.data() + int64_t(b) * V, size_t(V)),
                                                     history[size_t(b)]);
  }
  auto t2 = clock::now();
  size_t total = 0;
  for (int b = 0; b < B; ++b) {
    total += generated[size_t(b)].size();
    std::cout << "[" << b << "] ";
    if (tok) {
      std::vector<int32_t> shown = generated[size_t(b)];
      if (!shown.empty() && tok->is_eog(shown.back())) shown.pop_back();
      std::cout << tok->decode(prompts[size_t(b) % prompts.size()], {false, true}) << tok->decode(shown);
    }
    if (a.has("--print-ids")) {
      std::cout << (tok ? "\n" : "") << "ids:";
      for (int32_t id : generated[size_t(b)]) std::cout << " " << id;
    }
    std::cout << "\n";
  }
  const double tp = std::chrono::duration<double>(t1 - t0).count(), tg = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s; generation: %zu tokens, %.1f tok/s (%d sequences, %d batched steps)\n",
               prompt_tokens, tp > 0 ? double(prompt_tokens) / tp : 0.0, total,
               tg > 0 ? double(steps) * B / tg : 0.0, B, steps);
  if (at_context)
    std::fprintf(stderr, "generation stopped at the context limit: %lld positions a sequence (--ctx sets it)\n",
                 static_cast<long long>(engine.context()));
  return 0;
}

int cmd_generate(const Args& a) {
  const std::string path = a.get("-m");
  if (path.empty()) throw UsageError("generate: -m MODEL.gguf is required");
  if (a.has("-p") == a.has("--prompt-ids")) throw UsageError("generate: give exactly one of -p PROMPT and --prompt-ids IDS");
  auto model = llm::Model::load(path);
  llm::EngineOptions eo;
  eo.threads = static_cast<int>(integer(a, "--threads", 0, 0, kMaxThreads));
  eo.device = device_named(a.get("--device", "cpu"), "--device");
  eo.n_ctx = integer(a, "--ctx", 0, 0, int64_t(1) << 24);
  const std::string kv = a.get("--kv-type", "f16");
  if (kv != "f16" && kv != "f32") throw UsageError("--kv-type: 'f16' or 'f32', not '" + kv + "'");
  eo.kv_type = kv == "f16" ? DType::F16 : DType::F32;
  llm::SamplerOptions so;
  so.temperature = static_cast<float>(number(a, "--temp", 0.8, 0, 100));
  so.top_k = static_cast<int>(integer(a, "--top-k", 40, 0, 1 << 30));
  so.top_p = static_cast<float>(number(a, "--top-p", 0.95, 1e-9, 1));
  so.min_p = static_cast<float>(number(a, "--min-p", 0.05, 0, 1));
  so.repeat_penalty = static_cast<float>(number(a, "--repeat-penalty", 1.0, 1e-6, 100));
  so.seed = unsigned_integer(a, "--seed", 0);
  const int n_gen = static_cast<int>(integer(a, "-n", 32, 0, 1 << 30));

  const llm::Tokenizer* tok = model->tokenizer.get();
  std::vector<std::vector<int32_t>> prompts;
  if (a.has("--prompt-ids")) {
    for (const std::string& s : a.all("--prompt-ids")) prompts.push_back(parse_ids(s));
  } else {
    if (!tok) fail(ErrorCategory::Unsupported, "generate: the model's tokenizer cannot be used (", model->tokenizer_error,
                   "); pass --prompt-ids");
    for (const std::string& s : a.all("-p")) {
      prompts.push_back(tok->encode(s, true, true));
      if (prompts.back().empty()) throw UsageError("generate: the prompt '" + s + "' gives no tokens");
    }
  }
  const int parallel = static_cast<int>(integer(a, "--parallel", int64_t(prompts.size()), 1, 1024));
  if (parallel > 1 || prompts.size() > 1) return generate_parallel(a, model, eo, so, prompts, parallel, n_gen);
  const std::vector<int32_t>& prompt = prompts[0];
  llm::Engine engine(model, eo);
  llm::Sampler sampler(so);
  std::vector<int32_t> history = prompt, generated;
  std::unique_ptr<llm::DecodeStream> stream;
  if (tok) stream = std::make_unique<llm::DecodeStream>(*tok);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<float> logits = engine.eval(prompt);
  auto t1 = clock::now();
  int produced = 0;
  // Greedy without a repetition penalty is the argmax of each step: the engine then feeds the
  // tokens back itself (generate_greedy; on a device the steps are queued back to back), in
  // runs of 1, 2, 4, ... up to 16 steps, the first tokens as soon as they exist. Either way
  // the same ids (the prompt's is the sampler's).
  const bool greedy = so.temperature == 0 && so.repeat_penalty == 1;
  std::vector<int32_t> ahead;  // greedy: tokens generated, not yet emitted
  size_t next = 0;
  int run = 1;
  bool at_context = false;  // stopped because the context is full
  for (; produced < n_gen; ++produced) {
    int32_t id;
    if (!greedy || produced == 0) {
      id = sampler.sample(logits, history);
    } else {
      if (next == ahead.size()) {
        const int64_t room = std::min<int64_t>({int64_t(run), int64_t(n_gen - produced), engine.context() - engine.position()});
        ahead = engine.generate_greedy(history.back(), room);
        next = 0;
        run = std::min(2 * run, 16);
      }
      id = ahead[next++];
    }
    history.push_back(id);
    generated.push_back(id);
    if (tok && tok->is_eog(id)) {  // end of generation: not printed
      ++produced;
      break;
    }
    if (stream) std::cout << stream->push(id) << std::flush;
    const bool queued = greedy && next < ahead.size();  // fed already, as the run that made the next one
    if (produced + 1 == n_gen) {
      ++produced;
      break;
    }
    if (!queued && engine.position() >= engine.context()) {
      ++produced;
      at_context = true;
      break;
    }
    if (!greedy) logits = engine.eval(std::span<const int32_t>(&id, 1));
  }
  auto t2 = clock::now();
  if (stream) std::cout << stream->flush();
  std::cout << "\n";
  const double tp = std::chrono::duration<double>(t1 - t0).count();
  const double tg = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s; generation: %d tokens, %.1f tok/s\n", prompt.size(),
               tp > 0 ? double(prompt.size()) / tp : 0.0, produced, tg > 0 && produced > 1 ? double(produced - 1) / tg : 0.0);
  if (at_context)
    std::fprintf(stderr, "generation stopped at the context limit: %lld positions (--ctx sets it)\n",
                 static_cast<long long>(engine.context()));
  if (a.has("--verbose")) std::fprintf(stderr, "%s\n", engine.load_report().c_str());
  if (a.has("--print-ids")) {
    std::cout << "ids:";
    for (int32_t id : generated) std::cout << " " << id;
    std::cout << "\n";
  }
  return 0;
}

int cmd_tokenize(const Args& a) {
  const std::string path = a.get("-m");
  if (path.empty()) throw UsageError("tokenize: -m MODEL.gguf is required");
  gguf::File f = gguf::File::open(path);
  llm::Tokenizer tok = llm::Tokenizer::from_gguf(f);
  std::vector<int32_t> ids = tok.encode(a.positional[0], a.has("--add-special"), a.has("--parse-special"));
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  if (a.has("--pieces")) {
    for (int32_t id : ids) {
      std::string p = tok.piece(id), shown;
      for (unsigned char c : p) {
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", c);
          shown += b;
        } else {
          shown += static_cast<char>(c);
        }
      }
      std::cout << id << "\t'" << shown << "'\n";
    }
  }
  return 0;
}

// A comma-separated list of integers in [0, hi], as in "-t 1,2".
std::vector<int> int_list(const std::string& s, const std::string& opt, int hi) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(start, comma - start);
    int64_t v = 0;
    if (!whole_number(item, 0, hi, v))
      throw UsageError("option '" + opt + "': '" + item + "' is not an integer in [0, " + std::to_string(hi) + "]");
    out.push_back(int(v));
    start = comma + 1;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// llama-bench's two measurements on rlx: pp = one batch of P tokens from an empty cache,
// tg = N single-token steps after `depth` cached tokens; graphs are compiled in a warm-up
// run first. Prints one line per test: "rlx pp128 t=2: 812.3 tok/s (median of 5; ...)".
int cmd_llm_bench(const Args& a) {
  const std::string path = a.get("-m");
  if (path.empty()) throw UsageError("llm-bench: -m MODEL.gguf is required");
  auto model = llm::Model::load(path);
  const int P = static_cast<int>(integer(a, "-p", 128, 0, 1 << 20));
  const int N = static_cast<int>(integer(a, "-n", 32, 0, 1 << 20));
  const int D = static_cast<int>(integer(a, "-d", 0, 0, 1 << 24));
  const int reps = static_cast<int>(integer(a, "-r", 5, 1, 1000));
  std::vector<int> threads = int_list(a.get("-t", "1"), "-t", kMaxThreads);
  const std::string kv = a.get("--kv-type", "f16");
  if (kv != "f16" && kv != "f32") throw UsageError("--kv-type: 'f16' or 'f32', not '" + kv + "'");
  const Device device = device_named(a.get("--device", "cpu"), "--device");
  const std::vector<int> batches = int_list(a.get("-B", "0"), "-B", 1024);
  if (P == 0 && N == 0 && !a.has("--chat")) throw UsageError("llm-bench: nothing to measure (-p and -n are both 0)");
  if (N == 0 && std::any_of(batches.begin(), batches.end(), [](int b) { return b > 0; }))
    throw UsageError("llm-bench: -B times decode steps: it needs -n >= 1");
  using clock = std::chrono::steady_clock;
  const int64_t V = model->hp.n_vocab;
  auto tokens = [&](int n, uint32_t seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((uint64_t(seed) * 2654435761u + uint64_t(i) * 40503u) % uint64_t(V));
    return t;
  };
  // The options every engine here shares, for `t` threads and a context of at least `ctx`.
  auto options = [&](int t, int64_t ctx) {
    llm::EngineOptions eo;
    eo.threads = t;
    eo.device = device;
    eo.kv_type = kv == "f16" ? DType::F16 : DType::F32;
    eo.n_ctx = std::max<int64_t>(ctx, 256);
    return eo;
  };
  for (int t : threads) {
    llm::Engine e(model, options(t, std::max<int64_t>(P, int64_t(D) + N)));
    auto fill = [&](int n) {  // `n` cached tokens (not timed; the engine takes them in chunks of 512)
      if (n > 0) e.eval(tokens(n, 0));
    };
    if (P > 0) {
      std::vector<double> rate;
      for (int r = -1; r < reps; ++r) {  // r = -1: warm-up (compiles the pass)
        e.reset();
        auto t0 = clock::now();
        e.eval(tokens(P, uint32_t(r + 7)));
        double s = std::chrono::duration<double>(clock::now() - t0).count();
        if (r >= 0) rate.push_back(P / s);
      }
      std::printf("rlx pp%d t=%d: %.1f tok/s (median of %d)\n", P, t, median(rate), reps);
    }
    // N greedy steps from `depth` cached tokens, `decode(first, N)` timed per repetition.
    auto tg = [&](const char* how, const std::function<void(int32_t)>& decode) {
      std::vector<double> rate;
      for (int r = -1; r < reps; ++r) {
        e.reset();
        fill(D);
        auto t0 = clock::now();
        decode(int32_t(r + 3));
        double s = std::chrono::duration<double>(clock::now() - t0).count();
        if (r >= 0) rate.push_back(N / s);
      }
      std::printf("rlx tg%d%s t=%d: %.1f tok/s (median of %d%s)\n", N, D ? (" @ d" + std::to_string(D)).c_str() : "", t,
                  median(rate), reps, how);
    };
    if (N > 0)  // as llama-bench: one eval per token, the host picking the next one
      tg("", [&](int32_t id) {
        for (int i = 0; i < N; ++i) id = llm::greedy_token(e.eval(std::span<const int32_t>(&id, 1)));
      });
    // The same steps by Engine::generate_greedy: the token stays on the backend and the steps
    // are queued without a host round trip between them where it can.
    if (N > 0 && a.has("--generate-greedy")) tg("; generate_greedy", [&](int32_t id) { e.generate_greedy(id, N); });
    std::fflush(stdout);
  }
  // A chat's turns: prompts of the given lengths appended to one sequence, each followed by
  // one decode step (the reply's first token), with a fresh engine per repetition. The turns
  // after the first are timed, compiles included: prompts padded to a few pass lengths
  // (EngineOptions::pad_prompts 1), which later turns reuse, against exact lengths (0), where
  // each new length compiles a pass. Both alternate, repetition by repetition.
  const std::vector<int> turns = a.has("--chat") ? int_list(a.get("--chat"), "--chat", 1 << 20) : std::vector<int>{};
  if (!turns.empty()) {
    int64_t total = 0;
    for (int n : turns) {
      if (n < 1) throw UsageError("--chat: turn lengths must be >= 1");
      total += n + 1;
    }
    for (int t : threads) {
      std::vector<double> ms[2];
      for (int r = 0; r < reps; ++r)
        for (int exact = 0; exact < 2; ++exact) {
          llm::EngineOptions eo = options(t, total);
          eo.pad_prompts = exact ? 0 : 1;
          llm::Engine e(model, eo);
          clock::time_point t0;
          for (size_t i = 0; i < turns.size(); ++i) {
            if (i == 1) t0 = clock::now();
            int32_t id = llm::greedy_token(e.eval(tokens(turns[i], uint32_t(11 * i + r))));
            e.eval(std::span<const int32_t>(&id, 1));
          }
          ms[exact].push_back(turns.size() > 1 ? 1e3 * std::chrono::duration<double>(clock::now() - t0).count() : 0.0);
        }
      std::printf("rlx chat %s t=%d: turns 2-%zu in %.1f ms padded to a few pass lengths, %.1f ms at exact lengths "
                  "(median of %d)\n",
                  a.get("--chat").c_str(), t, turns.size(), median(ms[0]), median(ms[1]), reps);
      std::fflush(stdout);
    }
  }
  // Batched decode, as llama-batched-bench measures S_TG: B sequences each holding P prompt
  // tokens, then N steps of one token for every sequence; aggregate tokens/s.
  for (int B : batches) {
    if (B < 1) continue;
    for (int t : threads) {
      llm::EngineOptions eo = options(t, int64_t(P) + N + 1);
      eo.sequences = B;
      llm::Engine e(model, eo);
      std::vector<double> rate;
      for (int r = -1; r < reps; ++r) {
        e.reset();
        for (int b = 0; b < B; ++b)
          if (P > 0) e.eval(b, tokens(P, uint32_t(100 + b)));
        std::vector<int32_t> ids(static_cast<size_t>(B), int32_t(r + 3));
        auto t0 = clock::now();
        for (int i = 0; i < N; ++i) {
          std::vector<float> lg = e.step(ids);
          for (int b = 0; b < B; ++b)
            ids[size_t(b)] = llm::greedy_token(std::span<const float>(lg.data() + int64_t(b) * V, size_t(V)));
        }
        double s = std::chrono::duration<double>(clock::now() - t0).count();
        if (r >= 0) rate.push_back(double(B) * N / s);
      }
      std::printf("rlx batched B=%d pp%d tg%d t=%d: %.1f tok/s (aggregate, median of %d)\n", B, P, N, t, median(rate), reps);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

std::vector<Command> generate_commands() {
  std::vector<Command> t;
  t.push_back(Command{
      "generate", "generate text with a GGUF language model (streams the text; speeds on stderr)",
      "-m MODEL.gguf (-p PROMPT | --prompt-ids IDS) [options]", 0, 0,
      {{"-m", "MODEL.gguf", "the model", false},
       {"-p", "PROMPT", "prompt text (BOS added as the vocabulary says; special tokens in the text are parsed)", true},
       {"--prompt-ids", "ID,ID,...", "prompt as token ids instead of text", true},
       {"--parallel", "B", "decode B sequences together (default: one per prompt), aggregate tok/s", false},
       {"-n", "N", "tokens to generate (default 32)", false},
       {"--temp", "T", "temperature; 0 is greedy (default 0.8)", false},
       {"--top-k", "K", "keep the K most likely tokens; 0 off (default 40)", false},
       {"--top-p", "P", "nucleus: smallest set of mass P (default 0.95)", false},
       {"--min-p", "M", "drop tokens below M times the best one (default 0.05)", false},
       {"--repeat-penalty", "R", "penalty on the last 64 tokens; 1 off (default 1)", false},
       {"--seed", "S", "sampling seed (default 0)", false},
       {"--threads", "N", "threads (default: all cores)", false},
       {"--ctx", "C", "context length (default: min(training context, 4096))", false},
       {"--kv-type", "f16|f32", "KV cache element type (default f16)", false},
       {"--device", "cpu|cuda", "the backend (default cpu)", false},
       {"--print-ids", "", "end with one line 'ids: ...' of the generated ids", false},
       {"--verbose", "", "also print what loading did to the weights", false}},
      &cmd_generate});
  t.push_back(Command{"llm-bench", "prompt-processing and generation speed of a GGUF model (as llama-bench measures them)",
                      "-m MODEL.gguf [-p 128] [-n 32] [-d DEPTH] [-t 1,2] [-r 5]", 0, 0,
                      {{"-m", "MODEL.gguf", "the model", false},
                       {"-p", "P", "prompt tokens in one batch (0: skip; default 128)", false},
                       {"-n", "N", "generated tokens, one per step (0: skip; default 32)", false},
                       {"-d", "D", "tokens already in the cache before generating (default 0)", false},
                       {"-t", "T,T", "thread counts (default 1)", false},
                       {"-r", "R", "repetitions after one warm-up; the median is printed (default 5)", false},
                       {"--chat", "L,L,...", "also a chat: prompts of these lengths appended in turns, each with one decode step; the turns after the first timed (compiles included), prompts padded to a few pass lengths against exact lengths", false},
                       {"-B", "B,B", "also batched decode of B sequences after P prompt tokens each (aggregate tok/s)", false},
                       {"--kv-type", "f16|f32", "KV cache element type (default f16)", false},
                       {"--device", "cpu|cuda", "the backend (default cpu)", false},
                       {"--generate-greedy", "",
                        "also the N steps by Engine::generate_greedy (the token fed back on the backend, the steps queued "
                        "without waiting for each other)",
                        false}},
                      &cmd_llm_bench});
  t.push_back(Command{"tokenize", "print the token ids of TEXT for a GGUF model's tokenizer", "-m MODEL.gguf TEXT [options]",
                      1, 1,
                      {{"-m", "MODEL.gguf", "the model (a vocab-only GGUF works)", false},
                       {"--add-special", "", "add BOS/EOS as the vocabulary says", false},
                       {"--parse-special", "", "recognise control tokens written in the text", false},
                       {"--pieces", "", "then one line per token: id and its text", false}},
                      &cmd_tokenize});
  return t;
}

}  // namespace rlx::cli
