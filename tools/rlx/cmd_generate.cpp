// `rlx generate` (text generation from a GGUF model) and `rlx tokenize`.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.h"
#include "rlx/llm.h"

namespace rlx::cli {

namespace {

double number(const Args& a, const std::string& opt, double dflt, double lo, double hi) {
  if (!a.has(opt)) return dflt;
  const std::string s = a.get(opt);
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !(v >= lo && v <= hi)) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    std::ostringstream os;
    os << "option '" << opt << "': '" << s << "' is not a number in [" << lo << ", " << hi << "]";
    throw UsageError(os.str());
  }
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string cur;
  for (size_t i = 0; i <= s.size(); ++i) {
    char c = i < s.size() ? s[i] : ',';
    if (c == ',' || c == ' ') {
      if (cur.empty()) continue;
      try {
        size_t used = 0;
        long v = std::stol(cur, &used);
        if (used != cur.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(cur);
        ids.push_back(static_cast<int32_t>(v));
      } catch (const std::exception&) {
        throw UsageError("--prompt-ids: '" + cur + "' is not a token id");
      }
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (ids.empty()) throw UsageError("--prompt-ids: no ids given");
  return ids;
}

int cmd_generate(const Args& a) {
  const std::string path = a.get("-m");
  if (path.empty()) throw UsageError("generate: -m MODEL.gguf is required");
  if (a.has("-p") == a.has("--prompt-ids")) throw UsageError("generate: give exactly one of -p PROMPT and --prompt-ids IDS");
  auto model = llm::Model::load(path);
  llm::EngineOptions eo;
  eo.threads = static_cast<int>(number(a, "--threads", 0, 0, 1024));
  eo.n_ctx = static_cast<int64_t>(number(a, "--ctx", 0, 0, double(int64_t(1) << 24)));
  const std::string kv = a.get("--kv-type", "f16");
  if (kv != "f16" && kv != "f32") throw UsageError("--kv-type: 'f16' or 'f32', not '" + kv + "'");
  eo.kv_type = kv == "f16" ? DType::F16 : DType::F32;
  llm::SamplerOptions so;
  so.temperature = static_cast<float>(number(a, "--temp", 0.8, 0, 100));
  so.top_k = static_cast<int>(number(a, "--top-k", 40, 0, 1e9));
  so.top_p = static_cast<float>(number(a, "--top-p", 0.95, 1e-9, 1));
  so.min_p = static_cast<float>(number(a, "--min-p", 0.05, 0, 1));
  so.repeat_penalty = static_cast<float>(number(a, "--repeat-penalty", 1.0, 1e-6, 100));
  so.seed = static_cast<uint64_t>(number(a, "--seed", 0, 0, 1.8e19));
  const int n_gen = static_cast<int>(number(a, "-n", 32, 0, 1e9));

  const llm::Tokenizer* tok = model->tokenizer.get();
  std::vector<int32_t> prompt;
  if (a.has("--prompt-ids")) {
    prompt = parse_ids(a.get("--prompt-ids"));
  } else {
    if (!tok) fail(ErrorCategory::Unsupported, "generate: the model's tokenizer cannot be used (", model->tokenizer_error,
                   "); pass --prompt-ids");
    prompt = tok->encode(a.get("-p"), true, true);
    if (prompt.empty()) throw UsageError("generate: the prompt gives no tokens");
  }
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
  for (; produced < n_gen; ++produced) {
    int32_t id = sampler.sample(logits, history);
    history.push_back(id);
    generated.push_back(id);
    if (tok && tok->is_eog(id)) {  // end of generation: not printed
      ++produced;
      break;
    }
    if (stream) std::cout << stream->push(id) << std::flush;
    if (produced + 1 == n_gen || engine.position() >= engine.context()) {
      ++produced;
      break;
    }
    logits = engine.eval(std::span<const int32_t>(&id, 1));
  }
  auto t2 = clock::now();
  if (stream) std::cout << stream->flush();
  std::cout << "\n";
  const double tp = std::chrono::duration<double>(t1 - t0).count();
  const double tg = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s; generation: %d tokens, %.1f tok/s\n", prompt.size(),
               tp > 0 ? double(prompt.size()) / tp : 0.0, produced, tg > 0 && produced > 1 ? double(produced - 1) / tg : 0.0);
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

}  // namespace

std::vector<Command> generate_commands() {
  std::vector<Command> t;
  t.push_back(Command{
      "generate", "generate text with a GGUF language model (streams the text; speeds on stderr)",
      "-m MODEL.gguf (-p PROMPT | --prompt-ids IDS) [options]", 0, 0,
      {{"-m", "MODEL.gguf", "the model", false},
       {"-p", "PROMPT", "prompt text (BOS added as the vocabulary says; special tokens in the text are parsed)", false},
       {"--prompt-ids", "ID,ID,...", "prompt as token ids instead of text", false},
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
       {"--print-ids", "", "end with one line 'ids: ...' of the generated ids", false},
       {"--verbose", "", "also print what loading did to the weights", false}},
      &cmd_generate});
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
