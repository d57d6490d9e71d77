// `megadecode grammar`: what structured output will enforce. Prints the GBNF compiled from a JSON
// schema (or json_object, or checks a GBNF file); with a model and a file of token prefixes, prints
// the tokens the grammar allows after each prefix and the time the mask took — the interface the
// independent-engine comparison in the end-to-end tests drives.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_util.h"
#include "cli/commands.h"
#include "engine/constraint_cache.h"
#include "io/model_source.h"
#include "text/grammar/gbnf_parser.h"
#include "text/grammar/json_schema_grammar.h"
#include "text/tokenizer.h"

namespace md::cli {
namespace {

struct GrammarOptions {
  std::string schema_file;
  std::string grammar_file;
  bool json_object = false;
  std::string model;
  std::string masks_file;
  std::vector<int32_t> end_ids;
};

std::string grammar_text(const GrammarOptions& options) {
  if (options.json_object) return grammar::json_object_gbnf();
  if (!options.grammar_file.empty()) return read_text_file(options.grammar_file);
  if (options.schema_file.empty()) fail("give one of --schema, --grammar or --json-object");
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(read_text_file(options.schema_file));
  } catch (const nlohmann::json::exception& e) {
    fail("--schema: not valid JSON: {}", e.what());
  }
  return grammar::json_schema_to_gbnf(schema);
}

// One line per prefix: {"prefix": [ids]} in, {"allowed": [...], "accepting": b, "mask_us": t} out.
int print_masks(const GrammarOptions& options, const std::string& text) {
  ResolvedModel model = resolve_model_source(options.model);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(model.directory);
  engine::ConstraintCache cache(*tokenizer, options.end_ids, 1);
  std::shared_ptr<grammar::TokenConstraint> constraint = cache.get(text);
  std::ifstream in(options.masks_file);
  if (!in) fail("--masks: cannot read {}", options.masks_file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json out;
    grammar::TokenMatcher matcher(constraint);
    bool alive = true;
    std::vector<int32_t> prefix;
    try {
      prefix = nlohmann::json::parse(line).at("prefix").get<std::vector<int32_t>>();
    } catch (const nlohmann::json::exception&) {
      fail("--masks line {}: expected {{\"prefix\": [token ids]}}", number);
    }
    for (int32_t id : prefix) {
      if (!matcher.accept(id)) {
        out = {{"error", fmt::format("token {} leaves the grammar", id)}};
        alive = false;
        break;
      }
    }
    if (alive) {
      std::vector<float> logits(static_cast<std::size_t>(tokenizer->vocab_size()), 0.0f);
      auto begin = std::chrono::steady_clock::now();
      matcher.mask_logits(logits);
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin)
              .count();
      std::vector<int32_t> allowed;
      for (std::size_t id = 0; id < logits.size(); ++id) {
        if (logits[id] == 0.0f) allowed.push_back(static_cast<int32_t>(id));
      }
      out = {{"allowed", allowed}, {"accepting", matcher.accepting()}, {"mask_us", us}};
    }
    fmt::print("{}\n", out.dump());
  }
  grammar::MaskStats stats = cache.stats();
  fmt::print(stderr, "{} masks, {} computed by a trie walk in {:.3f} ms in all\n", stats.masks,
             stats.computed, stats.compute_seconds * 1e3);
  return kExitOk;
}

int run_grammar(const GrammarOptions& options) {
  std::string text = grammar_text(options);
  grammar::parse_gbnf(text);  // the same checks a request's grammar gets
  if (options.model.empty()) {
    fmt::print("{}", text);
    return kExitOk;
  }
  if (options.masks_file.empty()) fail("--model needs --masks FILE (JSON lines of prefixes)");
  return print_masks(options, text);
}

}  // namespace

CommandAction add_grammar_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "grammar",
      "Print the GBNF grammar structured output enforces for a JSON schema; with a model, the "
      "tokens it allows after given prefixes");
  auto options = std::make_shared<GrammarOptions>();
  auto* schema = sub->add_option("--schema", options->schema_file, "A JSON schema file");
  auto* gbnf =
      sub->add_option("--grammar", options->grammar_file, "A GBNF grammar file")->excludes(schema);
  sub->add_flag("--json-object", options->json_object,
                "Any JSON object (response_format json_object)")
      ->excludes(schema)
      ->excludes(gbnf);
  sub->add_option("-m,--model", options->model,
                  "Model directory, or org/name[@revision] in the Hugging Face cache");
  sub->add_option("--masks", options->masks_file,
                  "JSON lines {\"prefix\": [token ids]}: print the allowed next tokens of each");
  sub->add_option("--end-ids", options->end_ids,
                  "Token ids allowed where the grammar is complete (the model's end tokens)")
      ->delimiter(',');
  return [options]() { return run_grammar(*options); };
}

}  // namespace md::cli
