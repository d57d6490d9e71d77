// `megadecode tokenize`: encode text with a model's tokenizer (ids and pieces), or decode ids.
#include <fmt/format.h>

#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_util.h"
#include "base/log.h"
#include "cli/commands.h"
#include "io/model_source.h"
#include "text/tokenizer.h"

namespace md::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string text_file;
  std::string decode;
  bool no_special = false;
  bool skip_special = false;
  bool json = false;
  bool ids_only = false;
};

std::vector<std::int32_t> parse_id_list(const std::string& list) {
  std::vector<std::int32_t> ids;
  std::string normalized = list;
  for (char& c : normalized) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::istringstream in(normalized);
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || value < 0 || value > INT32_MAX) {
      fail(
          "--decode: '{}' is not a token id (expected non-negative integers separated by commas "
          "or spaces)",
          word);
    }
    ids.push_back(static_cast<std::int32_t>(value));
  }
  return ids;
}

std::string input_text(const TokenizeOptions& options) {
  if (!options.text_file.empty()) return read_text_file(options.text_file);
  if (!options.text.empty()) return options.text;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// Token bytes shown as a JSON string so that control characters and partial UTF-8 stay visible.
std::string shown_bytes(const Tokenizer& tokenizer, std::int32_t id) {
  return nlohmann::json(tokenizer.token_bytes(id))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int print_encoding(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids,
                   const TokenizeOptions& options) {
  if (options.ids_only) {
    fmt::print("{}\n", fmt::join(ids, " "));
  } else if (options.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (std::int32_t id : ids) pieces.push_back(tokenizer.piece(id));
    nlohmann::json out{{"ids", ids}, {"pieces", pieces}, {"count", ids.size()}};
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{:>6}  {:>8}  {:<24}  {}\n", "index", "id", "piece", "bytes");
    for (std::size_t i = 0; i < ids.size(); ++i) {
      fmt::print("{:>6}  {:>8}  {:<24}  {}\n", i, ids[i], tokenizer.piece(ids[i]),
                 shown_bytes(tokenizer, ids[i]));
    }
    fmt::print("{} tokens\n", ids.size());
  }
  return kExitOk;
}

int run_tokenize(const TokenizeOptions& options) {
  ResolvedModel model = resolve_model_source(options.model);
  log::debug("tokenizer from {}", model.description);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(model.directory);
  if (!options.decode.empty()) {
    std::vector<std::int32_t> ids = parse_id_list(options.decode);
    for (std::int32_t id : ids) {
      if (id >= tokenizer->vocab_size()) {
        fail("--decode: token id {} is outside the vocabulary (size {})", id,
             tokenizer->vocab_size());
      }
    }
    std::string text = tokenizer->decode(ids, options.skip_special);
    if (options.json) {
      fmt::print("{}\n", nlohmann::json{{"text", text}}.dump(
                             -1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("{}\n", text);
    }
    return kExitOk;
  }
  std::vector<std::int32_t> ids = tokenizer->encode(input_text(options), !options.no_special);
  return print_encoding(*tokenizer, ids, options);
}

}  // namespace

CommandAction add_tokenize_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Encode text to token ids and pieces with a model's tokenizer, or decode ids");
  auto options = std::make_shared<TokenizeOptions>();
  sub->add_option("-m,--model", options->model,
                  "Model directory, or org/name[@revision] in the Hugging Face cache")
      ->required();
  auto* text = sub->add_option("-t,--text", options->text, "Text to encode (default: stdin)");
  sub->add_option("-f,--file", options->text_file, "Read the text to encode from a file")
      ->excludes(text);
  sub->add_option("-d,--decode", options->decode, "Decode these ids (e.g. \"9707,1879\")")
      ->excludes(text);
  sub->add_flag("--no-special", options->no_special,
                "Treat special-token text such as <|im_end|> as plain text");
  sub->add_flag("--skip-special", options->skip_special, "When decoding, drop special tokens");
  sub->add_flag("--json", options->json, "Print JSON instead of a table");
  sub->add_flag("--ids", options->ids_only, "Print only the ids, space-separated");
  return [options]() { return run_tokenize(*options); };
}

}  // namespace md::cli
