// `megadecode bench`: decode tokens/s at several batch sizes and prefill tokens/s, for a model
// directory or a built-in synthetic shape, with the machine's read bandwidth measured in the same
// run so that every figure is also a fraction of the hardware limit.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "cli/bench_matrix_tiles.h"
#include "cli/bench_verify.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "cli/program_profile.h"
#include "dist/mpi_communicator.h"
#include "engine/generation.h"
#include "kernels/fp4_path.h"
#include "kernels/isa.h"
#include "kernels/memory_bandwidth.h"
#include "kernels/weight_streaming.h"
#include "models/drafters/dflash2/dflash2_synthetic.h"
#include "models/drafters/drafter_loader.h"
#include "models/drafters/dspark/dspark_synthetic.h"
#include "models/kimi/kimi_model.h"
#include "models/kimi/kimi_synthetic.h"
#include "models/model_loader.h"
#include "models/musespark/musespark_model.h"
#include "models/musespark/musespark_synthetic.h"
#include "models/qwen38/qwen38_synthetic.h"
#include "models/tensor_parallel_model.h"
#include "text/id_only_tokenizer.h"

namespace md::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  std::string synthetic;
  std::string weights;  // a weight pack for --tp (models/weight_pack.h)
  std::vector<int> rows = {1, 2, 4, 8};
  std::vector<std::string> executors;  // empty: default_executors()
  int threads = 0;
  double seconds = 1.5;
  int rounds = 3;  // interleaved: each re-measures the bandwidth, then every (executor, rows)
  int64_t prompt_tokens = 16;
  std::vector<int64_t> prefill_tokens = {128};  // prompt lengths, each its own figure
  int64_t context = 1024;
  bool json = false;
  std::string draft;                      // speculative figures with this drafter
  std::string draft_executor = "mega";    // how its rounds run
  std::string prefill_executor = "mega";  // how the prefill figures' prompts run
  int64_t spec_tokens = 96;               // tokens generated per acceptance length
  std::string matmul_inputs = "f32";
  std::string dense_weights = "as-stored";
  bool verbose = false;  // list the 1-row step program
  bool profile = false;  // per-instruction tables, one profiled pass per (executor, rows)
  std::vector<int> tp;   // tensor-parallel rank counts to compare (in-process ranks); empty: off
};

// Speculative decoding at one forced acceptance length (τ = accept), one sequence.
struct SpecFigure {
  int64_t accept = 0;  // 0: target-only decode
  int64_t tokens = 0;
  double seconds = 0;
  int64_t rounds = 0;
  double draft_seconds = 0, verify_seconds = 0;
  double tokens_per_second() const { return static_cast<double>(tokens) / seconds; }
};

struct DecodeFigure {
  std::string executor;
  int rows = 0;
  int64_t steps = 0;
  double seconds = 0;
  double weight_bytes = 0;  // read over all steps (a MoE's rows may choose different experts)
  double tokens_per_second() const { return static_cast<double>(rows * steps) / seconds; }
  double step_ms() const { return seconds / static_cast<double>(steps) * 1e3; }
  double step_bytes() const { return weight_bytes / static_cast<double>(steps); }
  double bytes_per_second() const { return weight_bytes / seconds; }
};

// One (executor, rows) pair: its rounds, each timed right after that round's bandwidth pass.
struct DecodeSeries {
  std::string executor;
  int rows = 0;
  std::vector<DecodeFigure> rounds;

  // All rounds as one measurement.
  DecodeFigure total() const {
    DecodeFigure sum{executor, rows, 0, 0, 0};
    for (const DecodeFigure& f : rounds) {
      sum.steps += f.steps;
      sum.seconds += f.seconds;
      sum.weight_bytes += f.weight_bytes;
    }
    return sum;
  }
};

// Per-round values summed up: their median and their range.
struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::size_t mid = values.size() / 2;
  double median = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  return {median, values.front(), values.back()};
}

// Rounds of the machine's read bandwidth and of every decode measurement in turn: on a shared
// machine the bandwidth drifts by tens of percent within a minute, so a figure is only compared
// with the bandwidth (or the other executor) measured next to it, and the medians over rounds are
// reported.
struct DecodeRounds {
  std::vector<double> bandwidth;  // per round, all threads
  std::vector<DecodeSeries> series;
  double step_bytes = 0;  // one row's step

  double fraction(const DecodeFigure& f, std::size_t round) const {
    return f.bytes_per_second() / bandwidth[round];
  }
  std::vector<double> fractions(const DecodeSeries& s) const {
    std::vector<double> out;
    for (std::size_t r = 0; r < s.rounds.size(); ++r) out.push_back(fraction(s.rounds[r], r));
    return out;
  }
  DecodeSeries& find_mutable(const std::string& executor, int rows) {
    for (DecodeSeries& s : series) {
      if (s.executor == executor && s.rows == rows) return s;
    }
    fail("bench: no {} series at {} rows", executor, rows);
  }
  const DecodeSeries* find(const std::string& executor, int rows) const {
    for (const DecodeSeries& s : series) {
      if (s.executor == executor && s.rows == rows) return &s;
    }
    return nullptr;
  }
  // a's speed over b's, per round.
  static std::vector<double> ratios(const DecodeSeries& a, const DecodeSeries& b) {
    std::vector<double> out;
    for (std::size_t r = 0; r < a.rounds.size(); ++r) {
      out.push_back(a.rounds[r].tokens_per_second() / b.rounds[r].tokens_per_second());
    }
    return out;
  }
};

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
}

std::vector<int32_t> synthetic_prompt(int64_t length, int64_t vocab, int seed) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i)
    ids.push_back(static_cast<int32_t>((i * 7919 + seed * 104729) % vocab));
  return ids;
}

// The `rows` independent sequences one (executor, rows) figure decodes: prompted, warmed up, and
// refilled outside the timed step when they fill their context.
class DecodeRun {
 public:
  DecodeRun(LanguageModel& model, const BenchOptions& options, int rows, std::string executor)
      : model_(model),
        options_(options),
        kind_(parse_executor(executor)),
        one_row_bytes_(static_cast<double>(model.decode_weight_bytes())),
        figure_{std::move(executor), rows, 0, 0, 0} {
    select();
    for (int r = 0; r < rows; ++r) {
      sequences_.push_back(model.new_sequence(options.context));
      states_.push_back(sequences_.back().get());
      refill(r);
      tokens_.push_back(static_cast<int32_t>((r * 31 + 7) % model.vocab_size()));
    }
    for (int warm = 0; warm < 2; ++warm) model.decode(states_, tokens_, logits_);
  }

  // One timed decode step of every sequence on this run's executor.
  void step() {
    select();
    if (states_[0]->position() + 1 >= states_[0]->capacity()) {
      for (int r = 0; r < figure_.rows; ++r) refill(r);
    }
    Clock::time_point start = Clock::now();
    model_.decode(states_, tokens_, logits_);
    figure_.seconds += since(start);
    ++figure_.steps;
    const std::size_t read = model_.last_step_weight_bytes();
    figure_.weight_bytes += read > 0 ? static_cast<double>(read) : one_row_bytes_;
    for (int32_t& token : tokens_) {
      token = static_cast<int32_t>((token * 13 + 5) % model_.vocab_size());
    }
  }

  const DecodeFigure& figure() const { return figure_; }

 private:
  void select() { model_.set_executor(kind_); }
  void refill(int r) {
    sequences_[static_cast<std::size_t>(r)]->reset();
    model_.forward(*sequences_[static_cast<std::size_t>(r)],
                   synthetic_prompt(options_.prompt_tokens, model_.vocab_size(), r),
                   LogitRows::kLast, logits_);
  }

  LanguageModel& model_;
  const BenchOptions& options_;
  const ExecutorKind kind_;
  const double one_row_bytes_;  // what a step read when the family does not say
  DecodeFigure figure_;
  std::vector<std::unique_ptr<SequenceState>> sequences_;
  std::vector<SequenceState*> states_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
};

// Decode steps of `rows` independent sequences on `executor` for about `seconds`.
DecodeFigure measure_decode(LanguageModel& model, const BenchOptions& options, int rows,
                            const std::string& executor, double seconds) {
  DecodeRun run(model, options, rows, executor);
  while (run.figure().steps < 3 || run.figure().seconds < seconds) run.step();
  return run.figure();
}

// The read bandwidth over one round's probe passes, which bench alternates with the decode steps:
// per read pattern, the bytes over the seconds of its passes; the pattern the machine reads
// fastest gives the figure (a kernel's walk must not beat the figure it is measured against).
class ProbeRound {
 public:
  explicit ProbeRound(kernels::ReadProbe& probe) : probe_(probe) {}
  // One pass in each pattern.
  void burst() {
    for (int pattern = 0; pattern < kernels::ReadProbe::kPatterns; ++pattern) {
      seconds_[static_cast<std::size_t>(pattern)] += probe_.pass(pattern);
    }
    ++bursts_;
  }
  double bytes_per_second() const {
    if (bursts_ == 0) return 0;
    const double fastest = *std::min_element(seconds_.begin(), seconds_.end());
    return static_cast<double>(bursts_) * static_cast<double>(probe_.bytes()) / fastest;
  }

 private:
  kernels::ReadProbe& probe_;
  std::array<double, kernels::ReadProbe::kPatterns> seconds_{};  // per pattern, all passes
  int bursts_ = 0;  // every pattern has had this many passes
};

// Decode steps of `rows` sequences on each executor in turn, in bursts of about kBurstSeconds,
// until each has had about `seconds`, with a burst of read-bandwidth passes after each turn of
// the executors: every executor's figure and the bandwidth then come from the same moments of
// the machine, whose read bandwidth drifts by tens of percent within seconds, so their ratios
// resolve differences of a few percent (per-executor blocks of a second or more, each after its
// own bandwidth pass, did not resolve 5%). A burst runs steps back to back, as a decode loop
// does; a fused team spins for about half a millisecond after its last step, on a core the next
// burst needs, which bursts of 100 ms make a 0.5% effect at most. (Single steps with a sleep
// between them cost every step a wake-up of the team: 0.1 ms steps of a tiny model took 0.85 ms.)
std::vector<DecodeFigure> measure_decode_alternating(LanguageModel& model,
                                                     const BenchOptions& options, int rows,
                                                     const std::vector<std::string>& executors,
                                                     double seconds, ProbeRound& bandwidth) {
  std::vector<std::unique_ptr<DecodeRun>> runs;
  for (const std::string& executor : executors) {
    runs.push_back(std::make_unique<DecodeRun>(model, options, rows, executor));
  }
  auto unfinished = [&](const DecodeRun& run) {
    return run.figure().steps < 3 || run.figure().seconds < seconds;
  };
  constexpr double kBurstSeconds = 0.1;
  for (bool stepped = true; stepped;) {
    stepped = false;
    for (const std::unique_ptr<DecodeRun>& run : runs) {
      // A finished executor steps no more: a faster one's steps do not stretch a slower one's.
      const double burst_end = run->figure().seconds + kBurstSeconds;
      while (unfinished(*run) && run->figure().seconds < burst_end) {
        run->step();
        stepped = true;
      }
    }
    if (stepped) bandwidth.burst();
  }
  std::vector<DecodeFigure> figures;
  for (const std::unique_ptr<DecodeRun>& run : runs) figures.push_back(run->figure());
  return figures;
}

// Generates options.spec_tokens tokens after a synthetic prompt with the drafter forced to an
// acceptance length of `accept` (0: no drafter), timing decode only.
SpecFigure measure_speculation(LanguageModel& model, const Tokenizer& tokenizer,
                               SpeculativeDrafter* drafter, const BenchOptions& options,
                               int64_t accept) {
  engine::Generator generator(model, tokenizer, options.context);
  if (drafter != nullptr) generator.set_drafter(drafter, 0, accept);
  engine::GenerationRequest request;
  request.prompt = synthetic_prompt(options.prompt_tokens, model.vocab_size(), 5);
  request.sampling.temperature = 0;
  request.max_tokens = options.spec_tokens;
  request.ignore_eos = true;
  (void)generator.generate(request, nullptr);  // warm-up: steps built, pages touched
  engine::GenerationResult result = generator.generate(request, nullptr);
  const engine::SpeculationStats& spec = result.stats.speculation;
  return SpecFigure{accept,
                    result.stats.generated_tokens - 1,
                    result.stats.decode_seconds,
                    spec.rounds,
                    spec.draft_seconds,
                    spec.verify_seconds};
}

// "--draft synthetic": a random-weight drafter shaped for the target (dflash2_synthetic.h).
std::unique_ptr<SpeculativeDrafter> open_drafter(LanguageModel& model,
                                                 const BenchOptions& options) {
  const ExecutorKind executor = parse_executor(options.draft_executor);
  if (options.draft == "synthetic") {
    // Kimi K3 and Muse Spark draft with DSpark, Qwen3.8 with DFlash2.
    if (dynamic_cast<KimiModel*>(&model) != nullptr ||
        dynamic_cast<MuseSparkModel*>(&model) != nullptr) {
      return make_synthetic_dspark(model.target_view(), options.threads,
                                   DSparkOptions{.executor = executor});
    }
    return make_synthetic_dflash2(model.target_view(), options.threads,
                                  DFlash2Options{.executor = executor});
  }
  if (options.model.empty()) {
    fail(
        "--draft DIR needs --model (the drafter's target); a synthetic target takes --draft "
        "synthetic");
  }
  return load_speculative_drafter(resolve_model_source(options.draft).directory,
                                  model.target_view(), options.threads, executor)
      .drafter;
}

std::vector<SpecFigure> speculation_figures(LanguageModel& model, const BenchOptions& options) {
  std::unique_ptr<Tokenizer> tokenizer =
      options.model.empty()
          ? std::make_unique<IdOnlyTokenizer>(static_cast<int32_t>(model.vocab_size()))
          : load_tokenizer(resolve_model_source(options.model).directory);
  std::unique_ptr<SpeculativeDrafter> drafter = open_drafter(model, options);
  std::vector<SpecFigure> figures{measure_speculation(model, *tokenizer, nullptr, options, 0)};
  for (int64_t accept = 1; accept <= drafter->block_size(); ++accept) {
    figures.push_back(measure_speculation(model, *tokenizer, drafter.get(), options, accept));
  }
  return figures;
}

void print_speculation(const std::vector<SpecFigure>& figures) {
  const SpecFigure& plain = figures.front();
  fmt::print(
      "\nspeculative decoding, 1 sequence, forced acceptance length τ (target-only: {:.1f} "
      "tok/s)\n",
      plain.tokens_per_second());
  fmt::print("{:>3} {:>10} {:>8} {:>14} {:>15}\n", "τ", "tok/s", "speedup", "draft ms/round",
             "verify ms/round");
  for (std::size_t i = 1; i < figures.size(); ++i) {
    const SpecFigure& f = figures[i];
    auto rounds = static_cast<double>(std::max<int64_t>(1, f.rounds));
    fmt::print("{:>3} {:>10.1f} {:>7.2f}x {:>14.3f} {:>15.3f}\n", f.accept, f.tokens_per_second(),
               f.tokens_per_second() / plain.tokens_per_second(), f.draft_seconds / rounds * 1e3,
               f.verify_seconds / rounds * 1e3);
  }
}

nlohmann::ordered_json speculation_json(const std::vector<SpecFigure>& figures) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const SpecFigure& f : figures) {
    auto rounds = static_cast<double>(std::max<int64_t>(1, f.rounds));
    out.push_back({{"acceptance_length", f.accept},
                   {"tokens_per_s", f.tokens_per_second()},
                   {"speedup", f.tokens_per_second() / figures.front().tokens_per_second()},
                   {"draft_ms_per_round", f.draft_seconds / rounds * 1e3},
                   {"verify_ms_per_round", f.verify_seconds / rounds * 1e3}});
  }
  return out;
}

std::vector<std::string> synthetic_shapes() {
  std::vector<std::string> shapes = synthetic_qwen38_shapes();
  for (std::string& shape : synthetic_musespark_shapes()) shapes.push_back(std::move(shape));
  for (std::string& shape : synthetic_kimi_shapes()) shapes.push_back(std::move(shape));
  return shapes;
}

std::unique_ptr<LanguageModel> make_synthetic_model(const std::string& shape,
                                                    const ModelRunOptions& run) {
  if (is_synthetic_musespark_shape(shape)) return make_synthetic_musespark(shape, run);
  if (is_synthetic_kimi_shape(shape)) return make_synthetic_kimi(shape, run);
  const std::vector<std::string> qwen38 = synthetic_qwen38_shapes();
  if (std::find(qwen38.begin(), qwen38.end(), shape) != qwen38.end()) {
    require_stored_dense_weights(run, "synthetic " + shape);
    return make_synthetic_qwen38(shape, run);
  }
  fail("unknown synthetic shape '{}' (known: {})", shape, fmt::join(synthetic_shapes(), ", "));
}

// `ranks` > 1: the model over that many in-process tensor-parallel ranks.
std::unique_ptr<LanguageModel> open_model(const BenchOptions& options, std::string& name,
                                          int ranks = 1) {
  ModelRunOptions run;
  run.threads = options.threads;
  run.matmul_inputs = parse_matmul_inputs(options.matmul_inputs);
  run.dense_weights = parse_dense_weights(options.dense_weights);
  if (!options.model.empty()) {
    ResolvedModel source = resolve_model_source(options.model);
    name = source.description;
    if (!options.weights.empty()) name += ", slices from the pack " + options.weights;
    return load_model(source.directory, run, ranks, options.weights);
  }
  if (!options.weights.empty()) {
    fail("--weights (or $QWEN_PACKED_WEIGHTS) needs --model: a synthetic shape has no pack");
  }
  name = "synthetic " + options.synthetic;
  if (ranks > 1) {
    // Every rank draws the whole shape's weights (the same seed) and keeps its share.
    const std::string shape = options.synthetic;
    return std::make_unique<TensorParallelModel>(ranks, run, [shape](const ModelRunOptions& rank) {
      return make_synthetic_model(shape, rank);
    });
  }
  return make_synthetic_model(options.synthetic, run);
}

// One prompt prefilled as the engine does it (chunks of Generator::kPrefillChunk, logits of the
// last row): the time to the first token's logits.
struct PrefillFigure {
  int64_t tokens = 0;
  double seconds = 0;
  double tokens_per_second() const { return static_cast<double>(tokens) / seconds; }
};

// `last` keeps the last prompt's sequence (for the memory figure).
std::vector<PrefillFigure> measure_prefills(LanguageModel& model,
                                            const std::vector<int64_t>& lengths,
                                            std::unique_ptr<SequenceState>& last) {
  std::vector<PrefillFigure> figures;
  for (int64_t tokens : lengths) {
    if (tokens > model.max_context()) {
      throw Error(fmt::format("--prefill-tokens {} exceeds the model's context of {} tokens",
                              tokens, model.max_context()));
    }
    auto state = model.new_sequence(tokens);
    const std::vector<int32_t> prompt = synthetic_prompt(tokens, model.vocab_size(), 99);
    std::vector<float> logits;
    const Clock::time_point start = Clock::now();
    for (int64_t first = 0; first < tokens; first += engine::Generator::kPrefillChunk) {
      const int64_t count = std::min(engine::Generator::kPrefillChunk, tokens - first);
      model.forward(*state,
                    std::span(prompt).subspan(static_cast<std::size_t>(first),
                                              static_cast<std::size_t>(count)),
                    LogitRows::kLast, logits);
    }
    figures.push_back({tokens, since(start)});
    last = std::move(state);
  }
  return figures;
}

// Each executor's tokens/s at more rows against one row's, per round (both measured).
struct BatchRatio {
  std::string executor;
  int rows = 0;
  std::vector<double> per_round;
  Spread ratio;
};
std::vector<BatchRatio> batch_ratios(const DecodeRounds& measured, const BenchOptions& options) {
  std::vector<BatchRatio> out;
  for (const std::string& executor : options.executors) {
    const DecodeSeries* one = measured.find(executor, 1);
    for (int rows : options.rows) {
      const DecodeSeries* many = measured.find(executor, rows);
      if (one == nullptr || many == nullptr || rows == 1) continue;
      std::vector<double> per_round = DecodeRounds::ratios(*many, *one);
      out.push_back({executor, rows, per_round, spread(per_round)});
    }
  }
  return out;
}

// The fused executors where the family has a fused program, else its reference forward.
std::vector<std::string> default_executors(LanguageModel& model) {
  if (model.set_executor(ExecutorKind::kMega)) return {"mega", "ops"};
  return {"reference"};
}

// `bench --tp 1,2,…`: the model once per rank count (in-process ranks sharing --threads), one
// row on the fused executor in interleaved rounds: tok/s, the weight bytes all ranks stream per
// step, the aggregate and per-rank streaming bandwidth, and each count's speed against the first.
int run_tensor_parallel_bench(const BenchOptions& options) {
  // Under mpirun every process runs this: one rank count, the job's, whose rank 0 measures while
  // the others follow it (a list would run its other counts on every process at once).
  const bool over_mpi = dist::launched_by_mpi();
  if (over_mpi && options.tp.size() != 1) {
    fail(
        "--tp: under mpirun, bench measures the job's own rank count (--tp N with mpirun -np N); "
        "compare counts with one job each, or without mpirun (in-process ranks)");
  }
  const char* transport = over_mpi ? "mpi" : "in-process";
  std::string name;
  std::vector<std::unique_ptr<LanguageModel>> models;
  for (int ranks : options.tp) {
    if (ranks < 1 || ranks > 64) fail("--tp: {} ranks is outside 1..64", ranks);
    models.push_back(open_model(options, name, ranks));
    if (!models.back()->set_executor(ExecutorKind::kMega))
      fail("--tp: {} has no fused program", name);
  }
  std::vector<DecodeSeries> series;
  for (int ranks : options.tp) series.push_back({std::to_string(ranks), 1, {}});
  for (int round = 0; round < options.rounds; ++round) {
    for (std::size_t i = 0; i < models.size(); ++i) {
      series[i].rounds.push_back(
          measure_decode(*models[i], options, 1, "mega", options.seconds / options.rounds));
    }
  }
  const int threads = options.threads > 0 ? options.threads : ThreadPool::hardware_threads();
  const DecodeFigure first = series[0].total();
  if (options.json) {
    nlohmann::ordered_json out{{"model", name}, {"threads", threads}};
    nlohmann::ordered_json figures = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < series.size(); ++i) {
      const DecodeFigure f = series[i].total();
      const int ranks = options.tp[i];
      figures.push_back(
          {{"ranks", ranks},
           {"transport", transport},
           {"tokens_per_s", f.tokens_per_second()},
           {"step_ms", f.step_ms()},
           {"weight_bytes_per_step_all_ranks", f.step_bytes()},
           {"weight_bytes_per_s_all_ranks", f.bytes_per_second()},
           {"weight_bytes_per_s_per_rank", f.bytes_per_second() / ranks},
           {"tokens_per_s_vs_first", f.tokens_per_second() / first.tokens_per_second()},
           {"tokens_per_s_vs_first_per_round", DecodeRounds::ratios(series[i], series[0])}});
    }
    out["tensor_parallel"] = figures;
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  if (over_mpi) {
    fmt::print(
        "{}\ntensor parallel, MPI ranks (one per process, {} threads each); 1 row, mega "
        "executor, {} rounds\n",
        name, threads, options.rounds);
  } else {
    fmt::print(
        "{}\ntensor parallel, in-process ranks sharing {} threads; 1 row, mega executor, "
        "{} rounds\n",
        name, threads, options.rounds);
  }
  fmt::print("{:>6} {:>9} {:>9} {:>14} {:>12} {:>12} {:>10}\n", "ranks", "tok/s", "step ms",
             "MiB/step (all)", "GB/s (all)", "GB/s (rank)", "vs first");
  for (std::size_t i = 0; i < series.size(); ++i) {
    const DecodeFigure f = series[i].total();
    const int ranks = options.tp[i];
    const Spread vs = spread(DecodeRounds::ratios(series[i], series[0]));
    fmt::print("{:>6} {:>9.1f} {:>9.2f} {:>14.1f} {:>12.2f} {:>12.2f} {:>9.2f}x\n", ranks,
               f.tokens_per_second(), f.step_ms(), f.step_bytes() / (1024.0 * 1024.0),
               f.bytes_per_second() / 1e9, f.bytes_per_second() / 1e9 / ranks, vs.median);
  }
  return kExitOk;
}

// `options` by value: its executors default from the model once it is open.
int run_bench(BenchOptions options) {
  if (!options.model.empty() && !options.synthetic.empty())
    fail("--model and --synthetic exclude each other");
  if (!options.tp.empty()) return run_tensor_parallel_bench(options);
  for (int rows : options.rows) {
    if (rows < 1 || rows > 8) fail("--rows: {} is outside 1..8", rows);
  }
  std::string name;
  Clock::time_point load_start = Clock::now();
  std::unique_ptr<LanguageModel> model = open_model(options, name);
  double load_seconds = since(load_start);
  if (options.executors.empty()) options.executors = default_executors(*model);
  int threads = options.threads > 0 ? options.threads : ThreadPool::hardware_threads();
  DecodeRounds measured;
  measured.step_bytes = static_cast<double>(model->decode_weight_bytes());
  for (const std::string& executor : options.executors) {
    if (!model->set_executor(parse_executor(executor))) {
      fail("--executors: {} has no '{}' executor", name, executor);
    }
    for (int rows : options.rows) measured.series.push_back({executor, rows, {}});
  }
  // 1 GiB: beyond any last-level cache, as the weights of a real model are.
  constexpr std::size_t kBandwidthBytes = std::size_t{1} << 30;
  double bandwidth_one = kernels::measure_read_bandwidth(1, kBandwidthBytes, 0.3);
  {
    // Freed before the resident memory is read below.
    kernels::ReadProbe probe(threads, kBandwidthBytes);
    for (int round = 0; round < options.rounds; ++round) {
      ProbeRound bandwidth_round(probe);
      for (int rows : options.rows) {
        const std::vector<DecodeFigure> figures =
            measure_decode_alternating(*model, options, rows, options.executors,
                                       options.seconds / options.rounds, bandwidth_round);
        for (const DecodeFigure& figure : figures) {
          measured.find_mutable(figure.executor, rows).rounds.push_back(figure);
        }
      }
      measured.bandwidth.push_back(bandwidth_round.bytes_per_second());
    }
  }
  const Spread bandwidth_spread = spread(measured.bandwidth);
  const double bandwidth = bandwidth_spread.median;
  const double step_bytes = measured.step_bytes;

  std::vector<std::string> profiles;
  for (const DecodeSeries& series : measured.series) {
    const std::string& executor = series.executor;
    const int rows = series.rows;
    program::Program* program = executor == "reference" ? nullptr : model->decode_program(rows);
    if (!options.profile || program == nullptr) continue;
    // A separate pass: the clock reads around every task must not touch the figures above.
    model->set_executor(parse_executor(executor));
    program->reset_profile();
    program->set_profiling(true);
    const DecodeFigure profiled =
        measure_decode(*model, options, rows, executor, options.seconds / options.rounds);
    program->set_profiling(false);
    // The profiled pass's own step time: the read bandwidth swings between passes, so the time
    // left outside the tasks is only meaningful against the steps the tasks were timed in.
    profiles.push_back(fmt::format("profile: {} executor, {} row(s)\n{}", executor, rows,
                                   format_profile(*program, bandwidth, profiled.step_ms() / 1e3)));
  }
  // Prefill runs as --prefill-executor says (its fused programs by default), verify on the fused
  // executor, where the family has them.
  const std::string prefill_executor = model->set_executor(parse_executor(options.prefill_executor))
                                           ? options.prefill_executor
                                           : "reference";
  std::unique_ptr<SequenceState> prefilled;
  const std::vector<PrefillFigure> prefills =
      measure_prefills(*model, options.prefill_tokens, prefilled);
  const char* main_executor = model->set_executor(ExecutorKind::kMega) ? "mega" : "reference";
  const std::optional<MatrixTileFigure> tiles =
      measure_matrix_tiles(*model, threads, options.seconds / 2);
  const std::optional<VerifyFigure> verify =
      measure_verify(*model, 8, options.context, options.seconds / 2);
  std::size_t resident = resident_bytes();
  std::vector<SpecFigure> spec;
  if (!options.draft.empty()) spec = speculation_figures(*model, options);

  if (options.json) {
    nlohmann::ordered_json out{{"model", name},
                               {"threads", threads},
                               {"matmul_inputs", options.matmul_inputs},
                               {"dense_weights", options.dense_weights},
                               {"load_seconds", load_seconds},
                               {"read_bandwidth_bytes_per_s", bandwidth},
                               {"read_bandwidth_bytes_per_s_per_round", measured.bandwidth},
                               {"read_bandwidth_one_thread_bytes_per_s", bandwidth_one},
                               {"decode_weight_bytes_per_step", step_bytes},
                               {"resident_bytes", resident},
                               {"weight_bytes", model->weight_bytes()},
                               {"live_state_bytes", prefilled->bytes()}};
    nlohmann::ordered_json prefill = nlohmann::ordered_json::array();
    for (const PrefillFigure& f : prefills) {
      prefill.push_back({{"executor", prefill_executor},
                         {"tokens", f.tokens},
                         {"seconds", f.seconds},
                         {"tokens_per_s", f.tokens_per_second()}});
    }
    out["prefill"] = prefill;
    if (tiles) {
      out["matrix_tiles"] = {{"format", tiles->format},
                             {"rows", tiles->rows},
                             {"cols", tiles->cols},
                             {"inputs", tiles->inputs},
                             {"seconds", tiles->seconds},
                             {"flops_per_s", tiles->flops_per_second()},
                             {"fma_peak_flops_per_s", tiles->peak},
                             {"fraction_of_peak", tiles->share_of_peak()}};
    }
    nlohmann::ordered_json decode = nlohmann::ordered_json::array();
    for (const DecodeSeries& series : measured.series) {
      const DecodeFigure f = series.total();
      std::vector<double> fractions = measured.fractions(series);
      decode.push_back({{"executor", f.executor},
                        {"rows", f.rows},
                        {"steps", f.steps},
                        {"tokens_per_s", f.tokens_per_second()},
                        {"step_ms", f.step_ms()},
                        {"weight_bytes_per_step", f.step_bytes()},
                        {"weight_bytes_per_s", f.bytes_per_second()},
                        {"fraction_of_bandwidth", spread(fractions).median},
                        {"fraction_of_bandwidth_per_round", fractions}});
    }
    out["decode"] = decode;
    if (verify) {
      out["verify"] = {{"executor", main_executor},
                       {"rows", verify->rows},
                       {"step_seconds", verify->verify_seconds},
                       {"one_row_decode_step_seconds", verify->decode_seconds},
                       {"ratio", verify->ratio()}};
    }
    nlohmann::ordered_json batch = nlohmann::ordered_json::array();
    for (const BatchRatio& b : batch_ratios(measured, options)) {
      batch.push_back({{"executor", b.executor},
                       {"rows", b.rows},
                       {"tokens_per_s_vs_one_row", b.ratio.median},
                       {"per_round", b.per_round}});
    }
    out["batch_vs_one_row"] = batch;
    if (!spec.empty()) out["speculative"] = speculation_json(spec);
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  program::Program* listed = model->decode_program(1);
  fmt::print("model      {} (loaded in {:.1f} s)\n", name, load_seconds);
  fmt::print("           {}\n", model->description());
  // NVFP4 and MXFP4 products may run a lower path than the rest (fp4_path.h).
  const std::string fp4_path =
      kernels::active_fp4_path() != kernels::active_isa_level()
          ? fmt::format("; FP4 on {}", kernels::isa_name(kernels::active_fp4_path()))
          : std::string();
  fmt::print("kernels    {} path ({} weight walk{}), weights {}; executors {}\n",
             kernels::active_isa(),
             kernels::weight_streaming_name(kernels::active_weight_streaming()), fp4_path,
             listed != nullptr ? weight_formats(*listed) : std::string("(no fused program)"),
             fmt::join(options.executors, ", "));
  fmt::print("threads    {}\n", threads);
  if (options.matmul_inputs != "f32") fmt::print("matmul     {} inputs\n", options.matmul_inputs);
  if (options.dense_weights != "as-stored") {
    fmt::print("dense      {} (quantised at load)\n", options.dense_weights);
  }
  fmt::print(
      "bandwidth  {:.2f} GB/s read with {} threads between the decode steps (median of {} "
      "rounds, {:.2f}-{:.2f}; {:.2f} GB/s with 1), measured now\n",
      bandwidth / 1e9, threads, options.rounds, bandwidth_spread.min / 1e9,
      bandwidth_spread.max / 1e9, bandwidth_one / 1e9);
  // Families that report what each step read (a MoE's rows choose different experts).
  fmt::print("weights    {:.3f} GB streamed per 1-row decode step{}\n\n", step_bytes / 1e9,
             model->last_step_weight_bytes() > 0
                 ? " (the GB/s below count what each step read: a MoE's rows may choose "
                   "different experts)"
                 : "");
  // "of bandwidth": the median over rounds of each round's fraction, with their range.
  fmt::print("{:<9} {:>4} {:>10} {:>10} {:>9} {:>12}  {}\n", "executor", "rows", "tok/s", "step ms",
             "GB/s", "of bandwidth", "rounds");
  for (const DecodeSeries& series : measured.series) {
    const DecodeFigure f = series.total();
    const Spread fraction = spread(measured.fractions(series));
    fmt::print("{:<9} {:>4} {:>10.1f} {:>10.3f} {:>9.2f} {:>11.1f}%  {:.0f}-{:.0f}%\n", f.executor,
               f.rows, f.tokens_per_second(), f.step_ms(), f.bytes_per_second() / 1e9,
               100 * fraction.median, 100 * fraction.min, 100 * fraction.max);
  }
  for (int rows : options.rows) {
    const DecodeSeries* mega = measured.find("mega", rows);
    const DecodeSeries* ops = measured.find("ops", rows);
    if (mega && ops) {
      const Spread ratio = spread(DecodeRounds::ratios(*mega, *ops));
      fmt::print("mega / ops at {} rows: {:.2f}x (median of per-round ratios, {:.2f}-{:.2f})\n",
                 rows, ratio.median, ratio.min, ratio.max);
    }
  }
  for (const BatchRatio& b : batch_ratios(measured, options)) {
    fmt::print(
        "{} rows / 1 row ({}): {:.2f}x the tokens/s (median of per-round ratios, "
        "{:.2f}-{:.2f})\n",
        b.rows, b.executor, b.ratio.median, b.ratio.min, b.ratio.max);
  }
  if (verify) {
    fmt::print(
        "verify     {} rows of one sequence: {:.3f} ms a step = {:.2f}x a 1-row decode step "
        "({:.3f} ms; {}, medians, interleaved)\n",
        verify->rows, verify->verify_seconds * 1e3, verify->ratio(), verify->decode_seconds * 1e3,
        main_executor);
  }
  fmt::print("\nprefill    (chunks of {} tokens, as the engine runs a prompt; {})\n",
             engine::Generator::kPrefillChunk, prefill_executor);
  for (const PrefillFigure& f : prefills) {
    fmt::print("  {:>6} tokens {:>10.1f} ms {:>10.1f} tok/s\n", f.tokens, f.seconds * 1e3,
               f.tokens_per_second());
  }
  if (tiles) {
    fmt::print(
        "tiles      {} {} x {} (the largest layer matrix) x {} rows: {:.1f} GFLOP/s = {:.0f}% of "
        "the f32 fma peak ({:.1f} GFLOP/s with {} thread(s), measured now)\n",
        tiles->format, tiles->rows, tiles->cols, tiles->inputs, tiles->flops_per_second() / 1e9,
        100 * tiles->share_of_peak(), tiles->peak / 1e9, threads);
  }
  double mib = 1 << 20;
  std::size_t live_state = prefilled->bytes();
  fmt::print(
      "memory     {:.1f} MiB resident = weights {:.1f} + sequence state {:.1f} + other {:.1f} "
      "MiB\n",
      static_cast<double>(resident) / mib, static_cast<double>(model->weight_bytes()) / mib,
      static_cast<double>(live_state) / mib,
      (static_cast<double>(resident) - static_cast<double>(model->weight_bytes()) -
       static_cast<double>(live_state)) /
          mib);
  if (!spec.empty()) print_speculation(spec);
  for (const std::string& table : profiles) fmt::print("\n{}", table);
  if (options.verbose && listed != nullptr)
    fmt::print("\nstep program, 1 row: {}", listed->describe());
  return kExitOk;
}

}  // namespace

CommandAction add_bench_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "bench", "Measure decode and prefill speed against the machine's memory bandwidth");
  auto options = std::make_shared<BenchOptions>();
  sub->add_option("-m,--model", options->model, "Model directory or org/name[@revision]");
  sub->add_option("--synthetic", options->synthetic,
                  "Built-in shape with random weights: qwen38-0.8b, qwen38-tiny, "
                  "muse-spark-tiny, muse-spark-layer, kimi-k3-tiny, kimi-k3-layer, kimi-k3-edges "
                  "(default qwen38-0.8b when no --model)");
  sub->add_option("--rows", options->rows, "Decode batch sizes (independent sequences)")
      ->delimiter(',');
  sub->add_option("--executors", options->executors,
                  "Executors to compare (default mega,ops; reference for a family without a "
                  "fused program)")
      ->delimiter(',')
      ->check(CLI::IsMember({"mega", "ops", "reference"}));
  sub->add_option("-t,--threads", options->threads, "Worker threads (default: all cores)");
  sub->add_option("--seconds", options->seconds,
                  "Time per measurement (executor and batch size), over all rounds")
      ->check(CLI::Range(0.05, 60.0));
  sub->add_option("--rounds", options->rounds,
                  "Interleaved rounds: each measures the read bandwidth, then every batch size "
                  "for --seconds / rounds per executor, the executors taking alternate steps; "
                  "fractions of the bandwidth and executor ratios are medians of the per-round "
                  "figures")
      ->check(CLI::Range(1, 20));
  sub->add_option("--prefill-tokens", options->prefill_tokens,
                  "Prompt lengths for the prefill figures (time to the prompt's last logits)")
      ->delimiter(',')
      ->check(CLI::Range(1, 262144));
  sub->add_option("-c,--context", options->context, "Context of each benchmark sequence")
      ->check(CLI::Range(32, 262144));
  sub->add_flag("--json", options->json, "Machine-readable output");
  sub->add_flag("-v,--verbose", options->verbose,
                "List the 1-row step program (opcodes, tasks, bytes, dependencies)");
  sub->add_flag(
      "--profile", options->profile,
      "Per-instruction time, bytes, GB/s and waits per worker (an extra pass per measurement)");
  sub->add_option("--draft", options->draft,
                  "Also measure speculative decoding with this drafter at forced acceptance "
                  "lengths 1..block: a directory or org/name for --model, 'synthetic' for a "
                  "random drafter shaped for the target");
  sub->add_option("--draft-executor", options->draft_executor,
                  "How the drafter's rounds run: mega (fused program), ops (the same program, a "
                  "barrier per operation) or reference (its plain forward)")
      ->check(CLI::IsMember({"mega", "ops", "reference"}));
  sub->add_option("--prefill-executor", options->prefill_executor,
                  "How the prefill figures' prompts run: mega (fused prefill programs where the "
                  "family has them), ops (the same programs, a barrier per operation) or "
                  "reference (the plain forward)")
      ->check(CLI::IsMember({"mega", "ops", "reference"}));
  sub->add_option("--spec-tokens", options->spec_tokens,
                  "Tokens generated per speculative measurement")
      ->check(CLI::Range(int64_t{8}, int64_t{100000}));
  sub->add_option("--tp", options->tp,
                  "Compare tensor-parallel rank counts instead (in-process ranks sharing "
                  "--threads; 1-row decode tok/s and the weight-streaming bandwidth of all ranks "
                  "and per rank), e.g. --tp 1,2; under mpirun -np N: --tp N, one rank per "
                  "process")
      ->delimiter(',');
  sub->add_option("--weights", options->weights,
                  "A weight pack written by megadecode pack for --model and --tp: the ranks map "
                  "their slices from it")
      ->envname("QWEN_PACKED_WEIGHTS");
  add_matmul_inputs_option(*sub, options->matmul_inputs);
  add_dense_weights_option(*sub, options->dense_weights);
  return [options]() {
    if (options->model.empty() && options->synthetic.empty()) options->synthetic = "qwen38-0.8b";
    return run_bench(*options);
  };
}

}  // namespace md::cli
