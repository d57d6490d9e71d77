// One DFlash2 drafting round in the speculative loop's steady state — a verify step's commit of
// `commit` context rows, then propose() — through the reference forward and through the fused
// program (persistent team or op by op), at 1 and 2 threads. And a prompt's context rows
// (BM_DFlash2PromptContext): `prompt` positions appended to a new sequence, then its first
// round, which keys the window — the context store's pooled products (reference) against its
// programs (mega) — on the synthetic drafter of the synthetic qwen38-0.8b target (hidden 1024,
// window 2048), 2 threads.
//
//   dflash2_bench [--draft=DIR] [--target=DIR] [google benchmark flags]
//
// Defaults: the tiny-dflash2 drafter and its tiny-qwen38 target that scripts/setup writes into
// build/fixtures (run from the repository root). Each benchmark runs 5 times in random order
// (--benchmark_repetitions=5 --benchmark_enable_random_interleaving=true).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/drafters/dflash2/dflash2_drafter.h"
#include "models/drafters/dflash2/dflash2_synthetic.h"
#include "models/qwen38/qwen38_model.h"
#include "models/qwen38/qwen38_synthetic.h"

namespace {

using md::ExecutorKind;

constexpr int64_t kPrompt = 40;  // context positions before the measured rounds
std::string g_draft = "build/fixtures/tiny-dflash2";
std::string g_target = "build/fixtures/tiny-qwen38";

std::vector<float> random_taps(int64_t values) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> taps(static_cast<std::size_t>(values));
  for (float& t : taps) t = normal(rng);
  return taps;
}

// Each iteration commits `commit` rows at positions kPrompt.. (truncating the last round's), so
// every round sees the same context length and does the same work.
void BM_Round(benchmark::State& state, ExecutorKind executor) {
  auto commit = state.range(0);
  auto threads = static_cast<int>(state.range(1));
  md::ModelRunOptions run;
  run.threads = 1;
  md::Qwen38Model target(g_target, run);
  md::DFlash2Drafter drafter(g_draft, target.target_view(), threads,
                             md::DFlash2Options{.executor = executor});
  int64_t width = drafter.config().fc_in_features();
  std::vector<float> prompt = random_taps(kPrompt * width);
  std::vector<float> rows = random_taps(commit * width);
  drafter.append_context(prompt, kPrompt);
  drafter.propose(1, 0.0f, {});  // warm-up: the program is built, the ring filled
  int32_t anchor = 0;
  for (auto _ : state) {
    drafter.truncate_context(kPrompt);
    drafter.append_context(rows, commit);
    md::DraftProposal proposal = drafter.propose(anchor, 0.0f, {});
    benchmark::DoNotOptimize(proposal.tokens.data());
    anchor = (anchor + 1) % 256;
  }
}

// A new sequence's prompt of `prompt` positions, then its first round.
void BM_PromptContext(benchmark::State& state, ExecutorKind executor) {
  const auto prompt = state.range(0);
  md::ModelRunOptions run;
  run.threads = 2;
  static std::unique_ptr<md::Qwen38Model> target = md::make_synthetic_qwen38("qwen38-0.8b", run);
  auto drafter = md::make_synthetic_dflash2(target->target_view(), 2,
                                            md::DFlash2Options{.executor = executor});
  const std::vector<float> taps = random_taps(prompt * drafter->config().fc_in_features());
  for (auto _ : state) {
    auto sequence = drafter->new_sequence();
    sequence->append_context(taps, prompt);
    md::DraftProposal proposal = sequence->propose(1, 0.0f, {});
    benchmark::DoNotOptimize(proposal.tokens.data());
  }
  state.counters["positions/s"] = benchmark::Counter(static_cast<double>(prompt),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  std::string repetitions = "--benchmark_repetitions=5";
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::vector<char*> args{argv[0], repetitions.data(), interleave.data()};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--draft=", 8) == 0) {
      g_draft = argv[i] + 8;
    } else if (std::strncmp(argv[i], "--target=", 9) == 0) {
      g_target = argv[i] + 9;
    } else {
      args.push_back(argv[i]);
    }
  }
  int filtered_argc = static_cast<int>(args.size());
  benchmark::Initialize(&filtered_argc, args.data());
  for (auto [name, executor] :
       {std::pair{"reference", ExecutorKind::kReference}, std::pair{"mega", ExecutorKind::kMega},
        std::pair{"ops", ExecutorKind::kOps}}) {
    benchmark::RegisterBenchmark(fmt::format("BM_DFlash2Round/{}", name).c_str(), BM_Round,
                                 executor)
        ->ArgsProduct({{1, 8}, {1, 2}})
        ->ArgNames({"commit", "threads"})
        ->Unit(benchmark::kMicrosecond);
  }
  for (auto [name, executor] :
       {std::pair{"reference", ExecutorKind::kReference}, std::pair{"mega", ExecutorKind::kMega}}) {
    benchmark::RegisterBenchmark(fmt::format("BM_DFlash2PromptContext/{}", name).c_str(),
                                 BM_PromptContext, executor)
        ->Arg(512)
        ->Arg(2048)
        ->ArgName("prompt")
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
