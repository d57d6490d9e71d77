#include "cli/model_session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"
#include "dist/mpi_communicator.h"
#include "engine/context_size.h"
#include "engine/generation_defaults.h"
#include "engine/speculative_round.h"
#include "io/gguf_file.h"
#include "io/model_source.h"
#include "io/pack_manifest.h"
#include "kernels/matmul.h"
#include "models/common/gguf_tokenizer.h"
#include "models/drafters/drafter_loader.h"
#include "models/model_loader.h"
#include "models/rank_stream.h"
#include "models/tensor_parallel_model.h"
#include "models/weight_pack.h"

namespace md::cli {

void add_model_flags(CLI::App& command, ModelFlags& flags) {
  command.add_option("-m,--model", flags.model,
                     "Model directory, .gguf file, or org/name[@revision] in the Hugging Face "
                     "cache (default: $MEGADECODE_MODEL, else SmolLM2-135M-Instruct from "
                     "scripts/setup)");
  command
      .add_option("-c,--context", flags.context,
                  "Tokens a sequence can hold (default: the model's maximum, capped so the "
                  "state fits in a quarter of memory)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("-t,--threads", flags.threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--kv-cache", flags.kv_cache, "KV cache element type")
      ->check(CLI::IsMember({"bf16", "f32"}));
  command.add_option("--draft", flags.draft,
                     "Speculative decoding with this drafter (directory or org/name[@revision]; "
                     "defaults from the HF cache: z-lab/Qwen3.8-27B-DFlash2 for Qwen/Qwen3.8-27B, "
                     "RedHatAI/Kimi-K3-speculator.dspark for moonshotai/Kimi-K3, "
                     "Inferact/Muse-Spark-Open-DSpark for the Muse Spark checkpoint)");
  command.add_flag("--no-spec", flags.no_spec, "Turn speculative decoding off");
  command
      .add_option("--block-size", flags.block_size,
                  "Rows per speculative round: the anchor plus drafts (default: the drafter's)")
      ->check(CLI::Range(int64_t{2}, int64_t{64}));
  command
      .add_option("--force-accept", flags.force_accept,
                  "Benchmarks only: pretend N-1 drafts are accepted every round (output is "
                  "then not the model's)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  command
      .add_option("--spec-confidence-threshold", flags.confidence_threshold,
                  "Stop each speculative block at the first draft the drafter's confidence head "
                  "rates below this (0..1; DSpark drafters with a confidence head; default 0: "
                  "off). Output is unchanged; only how many drafts a round verifies")
      ->check(CLI::Range(0.0f, 1.0f));
  command
      .add_option("--tp", flags.tp,
                  "Tensor-parallel ranks: the model's heads, FFN columns and vocabulary split "
                  "over N ranks: in this process (sharing --threads), or one per process when "
                  "started by mpirun/srun with N processes (every family; a MoE model's routed "
                  "experts are dealt to the ranks)")
      ->check(CLI::Range(1, 64));
  command
      .add_option("--weights", flags.weights,
                  "A weight pack written by megadecode pack for this model and --tp: the ranks "
                  "map their slices from it instead of cutting them from the checkpoint")
      ->envname("QWEN_PACKED_WEIGHTS");
  command
      .add_option("--executor", flags.executor,
                  "Decode steps: mega (fused program, persistent threads), ops (same program, "
                  "a barrier per operation) or reference (plain forward)")
      ->check(CLI::IsMember({"mega", "ops", "reference"}));
  add_matmul_inputs_option(command, flags.matmul_inputs);
  add_dense_weights_option(command, flags.dense_weights);
}

CLI::Option* add_dense_weights_option(CLI::App& command, std::string& value) {
  return command
      .add_option("--dense-weights", value,
                  "Dense matrices as stored, or int8 with a scale per output row, quantised at "
                  "load (muse_spark: attention, expert projections and lm_head; half the bytes, "
                  "about 1 % error per matrix)")
      ->check(CLI::IsMember({"as-stored", "int8"}));
}

DenseWeights parse_dense_weights(const std::string& value) {
  return value == "int8" ? DenseWeights::kInt8 : DenseWeights::kAsStored;
}

CLI::Option* add_matmul_inputs_option(CLI::App& command, std::string& value) {
  return command
      .add_option("--matmul-inputs", value,
                  "What the weights multiply: f32 activations as they are; bf16 (bf16 weights, "
                  "AVX512-BF16 only: activations rounded to bf16, faster with several rows); or "
                  "q8 (GGUF Q4_0/Q4_1/Q8_0 weights: activations quantised to int8 per 32, "
                  "integer dot products as llama.cpp computes them). Both move logits by ~1e-2 "
                  "of their range")
      ->check(CLI::IsMember({"f32", "bf16", "q8"}));
}

kernels::MatmulInputs parse_matmul_inputs(const std::string& value) {
  const kernels::MatmulInputs inputs = value == "bf16" ? kernels::MatmulInputs::kBf16
                                       : value == "q8" ? kernels::MatmulInputs::kQ8
                                                       : kernels::MatmulInputs::kF32;
  kernels::check_matmul_inputs(inputs);
  return inputs;
}

void add_sampling_flags(CLI::App& command, SamplingFlags& flags) {
  command.add_option("--temperature,--temp", flags.temperature,
                     "Sampling temperature; 0 = greedy (default: generation_config.json, else 1)");
  command.add_option("--top-k", flags.top_k, "Keep the k most likely tokens (0 = off)");
  command.add_option("--top-p", flags.top_p, "Nucleus sampling mass (1 = off)");
  command.add_option("--min-p", flags.min_p, "Drop tokens below min_p × the top probability");
  command.add_option("--presence-penalty", flags.presence_penalty, "OpenAI presence penalty");
  command.add_option("--frequency-penalty", flags.frequency_penalty, "OpenAI frequency penalty");
  command.add_option("--repetition-penalty", flags.repetition_penalty,
                     "Divide logits of seen tokens (>1 discourages repeats)");
  command.add_option("--seed", flags.seed, "Seed that makes sampled output reproducible");
  command
      .add_option("-n,--max-tokens", flags.max_tokens,
                  "Most tokens to generate (0 = until a stop or the context is full)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--stop", flags.stop, "Extra stop string (repeatable)");
  command.add_flag("--ignore-eos", flags.ignore_eos, "Keep generating past stop tokens");
  command.add_flag("--greedy", flags.greedy, "Greedy decoding (same as --temperature 0)");
}

ExecutorKind parse_executor(const std::string& name) {
  if (name == "mega") return ExecutorKind::kMega;
  if (name == "ops") return ExecutorKind::kOps;
  if (name == "reference") return ExecutorKind::kReference;
  fail("--executor: '{}' is not one of mega, ops, reference", name);
}

namespace {

// 64-bit FNV-1a of a file's bytes: which binary a rank runs (paths and times differ across hosts
// for the same build; the bytes do not).
uint64_t file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t hash = 1469598103934665603ull;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      hash = (hash ^ static_cast<unsigned char>(buffer[static_cast<std::size_t>(i)])) *
             1099511628211ull;
    }
  }
  return hash;
}

// What must be the same on every rank of one model: the binary, the model and the options that
// shape its shards and their steps (threads may differ from host to host).
std::string rank_identity(const std::string& directory, const ModelRunOptions& options, int ranks,
                          const std::string& pack) {
  std::error_code error;
  const auto bytes = std::filesystem::is_regular_file(directory, error)
                         ? std::filesystem::file_size(directory, error)
                         : 0;
  return fmt::format(
      "binary {:016x}, model {} ({} bytes), tp {}, executor {}, matmul inputs {}, kv {}, dense "
      "{}, prefill rows {}, pack manifest {:016x}",
      file_hash("/proc/self/exe"), std::filesystem::path(directory).filename().string(), bytes,
      ranks, program::executor_name(options.executor), static_cast<int>(options.matmul_inputs),
      static_cast<int>(options.kv_cache), static_cast<int>(options.dense_weights),
      options.prefill_rows,
      pack.empty() ? 0 : file_hash((std::filesystem::path(pack) / kPackManifestName).string()));
}

// The model over the processes of an MPI job, one rank each: rank 0 returns the model the
// command drives (RankStreamModel); the other ranks follow its calls until it ends, then exit
// here, the command's work being rank 0's.
std::unique_ptr<LanguageModel> load_over_mpi(const std::string& directory, ModelRunOptions options,
                                             int ranks, const std::string& pack) {
  // For the process's life: MPI_Finalize runs at exit.
  static std::unique_ptr<dist::MpiSession> mpi = std::make_unique<dist::MpiSession>();
  dist::Communicator& world = mpi->world();
  if (world.size() != ranks) {
    fail("--tp {} but the MPI job has {} processes: launch with mpirun -np {} (or srun -n {})",
         ranks, world.size(), ranks, ranks);
  }
  check_same_everywhere(world, rank_identity(directory, options, ranks, pack));
  options.ranks = &world;
  std::unique_ptr<LanguageModel> shard;
  try {
    shard = load_rank_model(directory, options, pack);
  } catch (const Error& e) {
    world.abort(fmt::format("cannot load its shard: {}", e.what()));  // ends the job
    throw;
  }
  const std::size_t others = gather_other_ranks_decode_bytes(*shard, world);
  if (world.rank() == 0) return std::make_unique<RankStreamModel>(std::move(shard), world, others);
  log::info("rank {} of {}: following rank 0", world.rank(), world.size());
  // The launcher passes a Ctrl-C or SIGTERM to every rank; rank 0 ends the stream when it stops,
  // and this rank with it.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  follow_rank_stream(*shard, world);
  shard.reset();
  std::exit(kExitOk);
}

}  // namespace

bool follows_rank_zero(const ModelFlags& flags) {
  return flags.tp > 1 && dist::launched_by_mpi() && dist::launcher_rank() > 0;
}

std::unique_ptr<LanguageModel> load_model(const std::string& directory,
                                          const ModelRunOptions& options, int ranks,
                                          const std::string& pack) {
  if (ranks <= 1) return load_rank_model(directory, options, pack);
  if (dist::launched_by_mpi()) return load_over_mpi(directory, options, ranks, pack);
  return std::make_unique<TensorParallelModel>(ranks, options,
                                               [&directory, &pack](const ModelRunOptions& rank) {
                                                 return load_rank_model(directory, rank, pack);
                                               });
}

std::optional<std::string> default_model() {
  if (const char* chosen = std::getenv("MEGADECODE_MODEL"); chosen != nullptr && *chosen != 0) {
    return std::string(chosen);
  }
  std::filesystem::path root;
  if (const char* env_root = std::getenv("MEGADECODE_ROOT");
      env_root != nullptr && *env_root != 0) {
    root = env_root;
  } else {
    std::error_code error;
    // build/<flavour>/bin/megadecode → the repository
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return std::nullopt;
    root = exe.parent_path().parent_path().parent_path().parent_path();
  }
  std::filesystem::path file = root / kDefaultModelFile;
  if (!std::filesystem::exists(file)) return std::nullopt;
  return file.string();
}

std::string model_spec(const ModelFlags& flags) {
  if (!flags.model.empty()) return flags.model;
  std::optional<std::string> fallback = default_model();
  if (!fallback) {
    fail(
        "no --model given and the default model is not installed: scripts/setup fetches "
        "SmolLM2-135M-Instruct into {}, or set MEGADECODE_MODEL",
        kDefaultModelFile);
  }
  log::info("model: {} (the default)", *fallback);
  return *fallback;
}

ModelSession open_model_session(const ModelFlags& flags, int sequences) {
  const kernels::MatmulInputs matmul_inputs = parse_matmul_inputs(flags.matmul_inputs);
  ModelSession session;
  session.source = resolve_model_source(model_spec(flags));
  const std::string& directory = session.source.directory;
  ModelRunOptions options;
  options.threads = flags.threads;
  options.kv_cache = flags.kv_cache == "f32" ? KvCacheType::kF32 : KvCacheType::kBf16;
  options.executor = parse_executor(flags.executor);
  options.matmul_inputs = matmul_inputs;
  options.dense_weights = parse_dense_weights(flags.dense_weights);
  if (directory.ends_with(".gguf")) {
    GgufFile file(directory);
    session.tokenizer = load_gguf_tokenizer(file);
    session.chat_template = load_gguf_chat_template(file);
  } else {
    session.tokenizer = load_tokenizer(directory);
    session.chat_template = ChatTemplate::load(directory);
    const engine::GenerationDefaults defaults = engine::read_generation_defaults(directory);
    session.sampling_defaults = engine::default_sampling(defaults);
    session.model_sets_sampling = !defaults.empty();
  }
  session.model = load_model(directory, options, flags.tp, flags.weights);
  if (session.tokenizer->vocab_size() > session.model->vocab_size()) {
    fail("{}: the tokenizer has {} tokens but the model's vocabulary is {}", directory,
         session.tokenizer->vocab_size(), session.model->vocab_size());
  }
  session.context = engine::choose_context(*session.model, flags.context, sequences);
  // An explicit --draft must load; a default drafter that is not in the cache (or does not fit)
  // only turns speculation off, with a warning.
  std::optional<ResolvedModel> draft_source;
  LoadedDrafter loaded;
  if (!flags.no_spec && !flags.draft.empty()) {
    draft_source = resolve_model_source(flags.draft);
    // The drafter's round runs on the same number of workers and the same kind of executor as
    // the target's steps.
    loaded = load_speculative_drafter(draft_source->directory, session.model->target_view(),
                                      flags.threads, options.executor);
  } else if (std::optional<DefaultFamily> family = default_draft_family(flags.model);
             family && !flags.no_spec) {
    try {
      draft_source = resolve_family_default(*family, RepoRole::kDraft);
      loaded = load_speculative_drafter(draft_source->directory, session.model->target_view(),
                                        flags.threads, options.executor);
    } catch (const Error& e) {
      log::warn(
          "no speculative decoding: the default drafter cannot be used ({}); pass --draft "
          "DIR, or --no-spec to silence this",
          e.what());
      draft_source.reset();
    }
  }
  if (draft_source && loaded.drafter) {
    session.drafter = std::move(loaded.drafter);
    session.drafter_method = loaded.method;
    session.drafter_directory = draft_source->directory;
    session.block_size = flags.block_size;
    session.force_accept = flags.force_accept;
    session.confidence_threshold = engine::checked_confidence_threshold(
        *session.drafter, flags.confidence_threshold, flags.force_accept);
    log::info("speculative decoding with {} ({}, block {})", draft_source->directory,
              session.drafter_method,
              flags.block_size > 0 ? flags.block_size : session.drafter->block_size());
  } else if (flags.force_accept > 0 || flags.block_size > 0 || flags.confidence_threshold > 0) {
    fail("--block-size, --force-accept and --spec-confidence-threshold need a drafter (--draft)");
  }
  log::debug("loaded {}; context {}", session.model->description(), session.context);
  return session;
}

std::optional<DefaultFamily> default_draft_family(const std::string& model_spec) {
  std::string repo = model_spec.substr(0, model_spec.find('@'));
  for (const FamilyRepos& family : family_repo_table()) {
    if (repo == family.target_repo) return family.family;
  }
  return std::nullopt;
}

engine::GenerationRequest make_request(const ModelSession& session, const SamplingFlags& flags,
                                       std::vector<int32_t> prompt) {
  engine::GenerationRequest request;
  request.prompt = std::move(prompt);
  engine::SamplingParams& s = request.sampling;
  s = session.sampling_defaults;
  if (flags.temperature) s.temperature = *flags.temperature;
  if (flags.top_k) s.top_k = *flags.top_k;
  if (flags.top_p) s.top_p = *flags.top_p;
  if (flags.min_p) s.min_p = *flags.min_p;
  if (flags.presence_penalty) s.presence_penalty = *flags.presence_penalty;
  if (flags.frequency_penalty) s.frequency_penalty = *flags.frequency_penalty;
  if (flags.repetition_penalty) s.repetition_penalty = *flags.repetition_penalty;
  if (flags.greedy) s.temperature = 0;
  s.seed = flags.seed;
  request.max_tokens = flags.max_tokens;
  request.stop = flags.stop;
  request.ignore_eos = flags.ignore_eos;
  return request;
}

std::string format_stats(const engine::GenerationStats& stats, engine::FinishReason finish) {
  std::string line = fmt::format(
      "prompt {} tok ({} reused) | prefill {:.1f} ms ({:.1f} tok/s) | first token {:.1f} ms | "
      "decode {} tok at {:.1f} tok/s | total {:.1f} ms | finish {}",
      stats.prompt_tokens, stats.reused_tokens, stats.prefill_seconds * 1e3,
      stats.prefill_tokens_per_second(), stats.first_token_seconds * 1e3, stats.generated_tokens,
      stats.decode_tokens_per_second(), stats.total_seconds * 1e3,
      engine::finish_reason_name(finish));
  const engine::SpeculationStats& spec = stats.speculation;
  if (spec.rounds > 0) {
    line += fmt::format(
        " | spec {} rounds, mean acceptance length {:.2f}, {} drafts verified, accepted by draft "
        "position [{}], draft {:.1f} ms, verify {:.1f} ms",
        spec.rounds, spec.mean_acceptance_length(), spec.drafted, fmt::join(spec.accepted_at, ","),
        spec.draft_seconds * 1e3, spec.verify_seconds * 1e3);
  }
  return line;
}

}  // namespace md::cli
