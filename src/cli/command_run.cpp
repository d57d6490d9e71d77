// `megadecode run`: one prompt in, streamed text out, a stats line on stderr; optionally the
// prompt's and the answer's log-probabilities as JSON for verification.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_util.h"
#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/model_session.h"
#include "cli/prefill_progress.h"

namespace md::cli {
namespace {

struct RunOptions {
  ModelFlags model;
  SamplingFlags sampling;
  std::string prompt;
  std::string prompt_file;
  std::string system;
  bool chat = false;
  bool raw = false;
  bool no_think = false;
  std::string logits_out;
  int logits_top_k = 5;
  bool quiet_stats = false;
};

std::string read_prompt(const RunOptions& options) {
  if (!options.prompt_file.empty()) return read_text_file(options.prompt_file);
  if (!options.prompt.empty()) return options.prompt;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::vector<int32_t> encode_prompt(const ModelSession& session, const RunOptions& options,
                                   const std::string& text) {
  bool templated = !options.raw && session.chat_template.has_value();
  if (options.chat && !session.chat_template) {
    fail(
        "--chat: {} has no chat template (tokenizer_config.json chat_template or "
        "chat_template.jinja); use --raw",
        session.source.directory);
  }
  if (!templated) return session.tokenizer->encode(text, true);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!options.system.empty())
    messages.push_back({{"role", "system"}, {"content", options.system}});
  messages.push_back({{"role", "user"}, {"content", text}});
  ChatTemplateOptions template_options;
  template_options.add_generation_prompt = true;
  if (options.no_think) template_options.extra["enable_thinking"] = false;
  return encode_chat_segments(*session.tokenizer,
                              session.chat_template->render_segments(messages, template_options));
}

void write_logits_json(const std::string& path, const ModelSession& session,
                       const engine::GenerationRequest& request,
                       const engine::GenerationResult& result) {
  nlohmann::ordered_json prompt_logprobs = nlohmann::ordered_json::array();
  prompt_logprobs.push_back(nullptr);  // the first token has no prediction
  for (float lp : result.prompt_logprobs) prompt_logprobs.push_back(lp);
  nlohmann::ordered_json generated = nlohmann::ordered_json::array();
  for (const engine::GeneratedToken& token : result.tokens) {
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const engine::TokenLogprob& alt : token.top) {
      top.push_back({{"id", alt.token}, {"logprob", alt.logprob}});
    }
    generated.push_back({{"id", token.id},
                         {"text", session.tokenizer->decode(std::span(&token.id, 1))},
                         {"logprob", token.logprob},
                         {"top_logprobs", top}});
  }
  nlohmann::ordered_json out{{"model", session.source.directory},
                             {"prompt_tokens", request.prompt},
                             {"prompt_logprobs", prompt_logprobs},
                             {"generated", generated},
                             {"finish_reason", engine::finish_reason_name(result.finish)}};
  std::ofstream file(path);
  if (!file) fail("--logits-out: cannot write {}", path);
  file << out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!file) fail("--logits-out: writing {} failed", path);
}

int run(const RunOptions& options) {
  if (options.chat && options.raw) fail("--chat and --raw exclude each other");
  std::string text = read_prompt(options);
  ModelSession session = open_model_session(options.model);
  engine::GenerationRequest request =
      make_request(session, options.sampling, encode_prompt(session, options, text));
  if (!options.logits_out.empty()) {
    request.prompt_logprobs = true;
    request.logprobs = true;
    request.top_logprobs = options.logits_top_k;
  }
  engine::Generator generator(*session.model, *session.tokenizer, session.context);
  session.attach(generator);
  PrefillProgressLine progress = PrefillProgressLine::on_stderr();
  if (!options.quiet_stats) generator.set_prefill_progress(std::ref(progress));
  InterruptScope interrupt;
  engine::GenerationResult result = generator.generate(
      request,
      [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      },
      &InterruptScope::flag());
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!options.logits_out.empty()) write_logits_json(options.logits_out, session, request, result);
  if (!options.quiet_stats) fmt::print(stderr, "{}\n", format_stats(result.stats, result.finish));
  return kExitOk;
}

}  // namespace

CommandAction add_run_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("run", "Generate text from a prompt");
  auto options = std::make_shared<RunOptions>();
  add_model_flags(*sub, options->model);
  auto* prompt = sub->add_option("-p,--prompt", options->prompt, "Prompt text (default: stdin)");
  sub->add_option("-f,--prompt-file", options->prompt_file, "Read the prompt from a file")
      ->excludes(prompt);
  sub->add_option("--system", options->system, "System message (chat mode)");
  sub->add_flag("--chat", options->chat,
                "Wrap the prompt in the model's chat template (default when it has one)");
  sub->add_flag("--raw", options->raw, "Feed the prompt as is, without the chat template");
  sub->add_flag("--no-think", options->no_think, "Ask the template to skip reasoning");
  add_sampling_flags(*sub, options->sampling);
  sub->add_option("--logits-out", options->logits_out,
                  "Write prompt and answer log-probabilities as JSON to this file");
  sub->add_option("--logits-top-k", options->logits_top_k,
                  "Alternatives per generated token in --logits-out")
      ->check(CLI::Range(0, 20));
  sub->add_flag("-q,--quiet", options->quiet_stats,
                "No stats line (nor prefill progress) on stderr");
  return [options]() { return run(*options); };
}

}  // namespace md::cli
