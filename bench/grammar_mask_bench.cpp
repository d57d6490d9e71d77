// Structured output's cost per token: the token mask of a JSON-schema grammar over the Qwen3
// vocabulary (151,669 ids) and over a 248,320-id vocabulary (Qwen3.5/3.8's size: Qwen3's tokens
// plus synthetic ones, each the bytes of two random Qwen3 tokens, so the trie has the size and a
// plausible shape of the real one, which is not available offline). A generation is replayed
// token by token: `cold` compiles the grammar afresh (every state's mask is a trie walk, as for
// the first request with a schema), `warm` reuses it (a later request with the same schema: the
// masks come from the cache); `apply` is writing one mask into a row of logits.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/constraint_cache.h"
#include "text/grammar/gbnf_parser.h"
#include "text/grammar/json_schema_grammar.h"
#include "text/grammar/token_constraint.h"
#include "text/tokenizer.h"

namespace {

using md::grammar::TokenConstraint;
using md::grammar::TokenMatcher;

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":40},
  "age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"email"},
  "role":{"enum":["admin","editor","viewer"]},
  "tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4},
  "address":{"type":"object","properties":{"street":{"type":"string","maxLength":40},
     "zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","zip"]},
  "score":{"type":"number","minimum":0,"maximum":100}},
  "required":["name","age","email","role","tags","address","score"],
  "additionalProperties":false})";

std::vector<std::string> qwen_bytes() {
  auto tokenizer = md::load_tokenizer(MD_QWEN3_TOKENIZER_DIR);
  return md::engine::grammar_token_bytes(*tokenizer);
}

std::vector<std::string> vocabulary(int64_t size) {
  std::vector<std::string> bytes = qwen_bytes();
  std::mt19937 rng(248);
  const std::size_t real = bytes.size();
  while (static_cast<int64_t>(bytes.size()) < size) {
    const std::string& a = bytes[rng() % real];
    const std::string& b = bytes[rng() % real];
    bytes.push_back(a.empty() || b.empty() ? std::string() : a + b);
  }
  bytes.resize(static_cast<std::size_t>(size));
  return bytes;
}

struct Setup {
  std::shared_ptr<const md::grammar::TokenTrie> trie;
  std::string gbnf;
  std::vector<int32_t> walk;  // a generation the grammar allows
};

const Setup& setup(int64_t vocab) {
  static std::map<int64_t, Setup> setups;
  auto [it, fresh] = setups.try_emplace(vocab);
  if (!fresh) return it->second;
  Setup& s = it->second;
  s.trie = std::make_shared<md::grammar::TokenTrie>(vocabulary(vocab));
  s.gbnf = md::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
  auto constraint = std::make_shared<TokenConstraint>(md::grammar::parse_gbnf(s.gbnf), s.trie,
                                                      std::vector<int32_t>{});
  TokenMatcher matcher(constraint);
  std::vector<float> logits(static_cast<std::size_t>(vocab));
  std::mt19937 rng(7);
  // Random allowed tokens, short ones preferred (a model writes words, not the longest token
  // that happens to fit), until the object is complete.
  while (!matcher.finished() && s.walk.size() < 600) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    matcher.mask_logits(logits);
    std::vector<int32_t> allowed;
    for (std::size_t id = 0; id < logits.size(); ++id) {
      if (logits[id] == 0.0f && s.trie->bytes(static_cast<int32_t>(id)).size() <= 4) {
        allowed.push_back(static_cast<int32_t>(id));
      }
    }
    if (allowed.empty()) {
      for (std::size_t id = 0; id < logits.size(); ++id) {
        if (logits[id] == 0.0f) allowed.push_back(static_cast<int32_t>(id));
      }
    }
    int32_t token = allowed[rng() % allowed.size()];
    matcher.accept(token);
    s.walk.push_back(token);
  }
  return s;
}

void replay(benchmark::State& state, bool cold) {
  const Setup& s = setup(state.range(0));
  std::vector<float> logits(static_cast<std::size_t>(state.range(0)));
  auto warm = std::make_shared<TokenConstraint>(md::grammar::parse_gbnf(s.gbnf), s.trie,
                                                std::vector<int32_t>{});
  if (!cold) {  // a first request with the schema fills the cache
    TokenMatcher matcher(warm);
    for (int32_t token : s.walk) {
      matcher.mask_logits(logits);
      matcher.accept(token);
    }
  }
  md::grammar::MaskStats before = warm->stats();
  uint64_t computed = 0, masks = 0;
  for (auto _ : state) {
    std::shared_ptr<TokenConstraint> constraint = warm;
    if (cold) {
      state.PauseTiming();
      constraint = std::make_shared<TokenConstraint>(md::grammar::parse_gbnf(s.gbnf), s.trie,
                                                     std::vector<int32_t>{});
      state.ResumeTiming();
    }
    TokenMatcher matcher(constraint);
    for (int32_t token : s.walk) {
      matcher.mask_logits(logits);
      matcher.accept(token);
    }
    if (cold) {
      computed += constraint->stats().computed;
      masks += constraint->stats().masks;
    }
  }
  if (!cold) {
    computed = warm->stats().computed - before.computed;
    masks = warm->stats().masks - before.masks;
  }
  state.counters["tokens"] = static_cast<double>(s.walk.size());
  state.counters["per_token"] = benchmark::Counter(
      static_cast<double>(s.walk.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["walked_share"] =
      masks ? static_cast<double>(computed) / static_cast<double>(masks) : 0.0;
}

void BM_MaskCold(benchmark::State& state) {
  replay(state, true);
}
void BM_MaskWarm(benchmark::State& state) {
  replay(state, false);
}

// Writing a cached mask into a row of logits: the per-token floor.
void BM_MaskApply(benchmark::State& state) {
  const Setup& s = setup(state.range(0));
  auto constraint = std::make_shared<TokenConstraint>(md::grammar::parse_gbnf(s.gbnf), s.trie,
                                                      std::vector<int32_t>{});
  TokenMatcher matcher(constraint);
  for (int i = 0; i < 3; ++i) matcher.accept(s.walk[static_cast<std::size_t>(i)]);  // in a string
  std::vector<float> logits(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    matcher.mask_logits(logits);
    benchmark::DoNotOptimize(logits.data());
  }
}

BENCHMARK(BM_MaskCold)->Arg(151669)->Arg(248320)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskWarm)->Arg(151669)->Arg(248320)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskApply)->Arg(151669)->Arg(248320)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
