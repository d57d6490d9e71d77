// `megadecode info`: architecture, parameters by kind, bytes read per decoded token and memory
// needed, from the model's config alone (nothing is loaded; a GGUF file's weights are counted from
// its tensor table).
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "io/gguf_file.h"
#include "io/model_source.h"
#include "models/gguf_model_summary.h"
#include "models/language_model.h"
#include "models/model_config.h"
#include "models/model_summary.h"

namespace md::cli {

CommandAction add_info_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "info", "Describe a model: architecture, parameters, bytes per token, memory");
  auto model = std::make_shared<std::string>();
  auto options = std::make_shared<SummaryOptions>();
  sub->add_option("-m,--model", *model,
                  "Model directory, .gguf file, or org/name[@revision] in the Hugging Face cache")
      ->required();
  sub->add_option("--context", options->context, "Positions per sequence (0: model default)");
  sub->add_option("--sequences", options->sequences, "Sequences held at once")
      ->check(CLI::PositiveNumber);
  auto dense = std::make_shared<std::string>("as-stored");
  add_dense_weights_option(*sub, *dense);
  return [model, options, dense]() {
    const DenseWeights dense_weights = parse_dense_weights(*dense);
    options->footprint.dense_int8 = dense_weights == DenseWeights::kInt8;
    ResolvedModel resolved = resolve_model_source(*model);
    fmt::print("model: {}\n", resolved.description);
    if (resolved.directory.ends_with(".gguf")) {
      require_stored_dense_weights(dense_weights, resolved.directory);
      const GgufFile file(resolved.directory);
      fmt::print("{}", format_model_summary(summarize_gguf_model(file, *options)));
      return kExitOk;
    }
    ModelConfig config = load_model_config(resolved.directory);
    if (family_of(config) != ModelFamily::kMuseSpark) {
      require_stored_dense_weights(dense_weights, resolved.directory);
    }
    fmt::print("{}", format_model_summary(summarize_model(config, *options)));
    return kExitOk;
  };
}

}  // namespace md::cli
