// What `run` and `chat` share: the flags that choose and size a model and sample from it, and
// the loaded model with its tokenizer, chat template and sequence context.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "io/model_source.h"
#include "models/drafters/speculative_drafter.h"
#include "models/language_model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace md::cli {

struct ModelFlags {
  std::string model;
  int64_t context = 0;  // 0: choose
  int threads = 0;      // 0: all hardware threads
  std::string kv_cache = "bf16";
  std::string executor = "mega";
  std::string matmul_inputs = "f32";        // f32, bf16 or q8 (kernels::MatmulInputs)
  std::string dense_weights = "as-stored";  // or int8 (DenseWeights)
  // Speculative decoding: a drafter directory or org/name[@rev]; off with no_spec.
  std::string draft;
  bool no_spec = false;
  int64_t block_size = 0;          // 0: the drafter's
  int64_t force_accept = 0;        // benchmarks only
  float confidence_threshold = 0;  // --spec-confidence-threshold; 0: off
  int tp = 1;                      // tensor-parallel ranks (in-process)
  std::string weights;             // --weights: a pack for --tp (models/weight_pack.h); or cut
};

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, presence_penalty, frequency_penalty,
      repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  int64_t max_tokens = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool greedy = false;
};

void add_model_flags(CLI::App& command, ModelFlags& flags);
void add_sampling_flags(CLI::App& command, SamplingFlags& flags);

struct ModelSession {
  ResolvedModel source;
  std::unique_ptr<LanguageModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;
  engine::SamplingParams sampling_defaults;  // generation_config.json
  bool model_sets_sampling = false;          // generation_config.json said anything about it
  int64_t context = 0;
  std::unique_ptr<SpeculativeDrafter> drafter;  // null: no speculation
  std::string drafter_directory;
  std::string drafter_method;  // "dflash2", "dspark"
  int64_t block_size = 0;
  int64_t force_accept = 0;
  float confidence_threshold = 0;

  // Turns speculation on in `generator` when the session has a drafter.
  void attach(engine::Generator& generator) const {
    if (drafter) {
      generator.set_drafter(drafter.get(), block_size, force_accept, confidence_threshold);
    }
  }
};

// The model used when --model is absent: $MEGADECODE_MODEL, else the SmolLM2-135M-Instruct file
// scripts/setup installs under the repository's .models/ (the repository is $MEGADECODE_ROOT,
// set by the launcher, or found from the binary's own location). nullopt when neither exists.
std::optional<std::string> default_model();
inline constexpr const char* kDefaultModelFile = ".models/SmolLM2-135M-Instruct.Q4_1.gguf";

// flags.model, or the default model (md::Error saying how to install it when it is missing).
std::string model_spec(const ModelFlags& flags);

// Resolves, validates and loads everything (the default model when flags.model is empty);
// throws md::Error with a precise message. The context is sized so that `sequences` states fit.
ModelSession open_model_session(const ModelFlags& flags, int sequences = 1);
ExecutorKind parse_executor(const std::string& name);
// Whether this process is a rank other than 0 of a model spread over an MPI job: it loads its
// shard and follows rank 0 (open_model_session never returns there), and does nothing of the
// command's own (no port, no terminal).
bool follows_rank_zero(const ModelFlags& flags);
// The model at `directory`; with ranks > 1, spread over that many in-process tensor-parallel
// ranks (models/tensor_parallel_model.h) that share options.threads, or over the processes of an
// MPI job. With a `pack` (a directory `megadecode pack` wrote), the ranks map their slices from
// it; it must have been made from this checkpoint for this many ranks.
std::unique_ptr<LanguageModel> load_model(const std::string& directory,
                                          const ModelRunOptions& options, int ranks,
                                          const std::string& pack = "");

// The --matmul-inputs option, shared with bench (its values: f32, bf16).
CLI::Option* add_matmul_inputs_option(CLI::App& command, std::string& value);
// The bf16-weight product mode `value` names; md::Error when this process cannot run it (checked
// before a long load).
kernels::MatmulInputs parse_matmul_inputs(const std::string& value);
// --dense-weights as-stored|int8 (DenseWeights), shared by the model commands and bench.
CLI::Option* add_dense_weights_option(CLI::App& command, std::string& value);
DenseWeights parse_dense_weights(const std::string& value);

// A request for `prompt` with the model's defaults overridden by the user's flags.
engine::GenerationRequest make_request(const ModelSession& session, const SamplingFlags& flags,
                                       std::vector<int32_t> prompt);

// The family whose default drafter a --model value takes (its published target), if any: the
// drafter is then resolved at the family's draft revision ($QWEN_DRAFT_REVISION, …).
std::optional<DefaultFamily> default_draft_family(const std::string& model_spec);

// "prompt 12 tok | prefill 3.1 ms (3870 tok/s) | first token 3.5 ms | decode 63 tok at 812 tok/s
// | total 81 ms | stop"
std::string format_stats(const engine::GenerationStats& stats, engine::FinishReason finish);

}  // namespace md::cli
