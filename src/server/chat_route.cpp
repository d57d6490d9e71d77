// POST /v1/chat/completions (§2.2, §3.1, §3.5, §6.2, §11, §12).
#include "engine/choice_decoder.h"
#include "server/chat_prompt.h"
#include "server/chat_run.h"
#include "server/generation_route.h"
#include "server/json_body.h"
#include "server/prompt_logprobs.h"
#include "server/routes.h"
#include "server/token_text.h"
#include "server/tool_call_grammar.h"
#include "text/kimi_xtml_splitter.h"
#include "text/muse_channel_parser.h"

namespace md::server {
namespace {

using json = nlohmann::ordered_json;

json tool_call_json(const ToolCall& call) {
  return json{{"id", call.id},
              {"type", "function"},
              {"function", json{{"name", call.name}, {"arguments", call.arguments}}}};
}

json top_entry(const Tokenizer& tokenizer, int32_t id, float logprob) {
  return json{{"token", token_string(tokenizer, id)},
              {"logprob", json_logprob(logprob)},
              {"bytes", token_bytes_json(tokenizer, id)}};
}

json logprob_content(const Tokenizer& tokenizer,
                     const std::vector<engine::GeneratedToken>& tokens) {
  json content = json::array();
  for (const engine::GeneratedToken& t : tokens) {
    json entry = top_entry(tokenizer, t.id, t.logprob);
    json top = json::array();
    for (const engine::TokenLogprob& alt : t.top)
      top.push_back(top_entry(tokenizer, alt.token, alt.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return content;
}

class ChatFormatter : public ResponseFormatter {
 public:
  ChatFormatter(const ServerContext& context, const ChatRequest& request, std::string id,
                std::vector<int32_t> prompt_ids)
      : context_(context),
        tokenizer_(*context.model.tokenizer),
        id_(std::move(id)),
        model_(request.model),
        n_(request.n),
        logprobs_(request.logprobs),
        include_usage_(request.stream && request.include_usage),
        return_token_ids_(request.return_token_ids),
        prompt_ids_(std::move(prompt_ids)),
        prompt_top_(request.prompt_logprobs.value_or(0)),
        choices_(static_cast<std::size_t>(request.n)) {}

  std::vector<json> opening_chunks() override {
    std::vector<json> out;
    for (int64_t i = 0; i < n_; ++i) {
      json delta{{"role", "assistant"}, {"content", ""}};
      out.push_back(chunk(choice_json(i, std::move(delta), nullptr)));
    }
    return out;
  }

  std::vector<json> chunks(ChoiceUpdate& update) override {
    std::vector<json> out;
    ChoiceDelta& d = update.delta;
    Choice& c = choices_[static_cast<std::size_t>(update.choice)];
    for (auto& t : d.tokens) c.pending_logprobs.push_back(std::move(t));
    auto emit = [&](json delta) {
      json lp = nullptr;
      if (logprobs_ && !c.pending_logprobs.empty()) {
        lp = json{{"content", logprob_content(tokenizer_, c.pending_logprobs)},
                  {"refusal", nullptr}};
        c.pending_logprobs.clear();
      }
      out.push_back(chunk(choice_json(update.choice, std::move(delta), std::move(lp))));
    };
    if (!d.reasoning.empty()) emit(json{{"reasoning_content", d.reasoning}});
    if (!d.content.empty()) emit(json{{"content", d.content}});
    for (const ToolCall& call : d.tool_calls) {
      json entry = tool_call_json(call);
      entry = json{{"index", c.calls++},
                   {"id", entry["id"]},
                   {"type", "function"},
                   {"function", entry["function"]}};
      emit(json{{"tool_calls", json::array({entry})}});
    }
    if (d.finished) {
      if (logprobs_ && !c.pending_logprobs.empty()) emit(json{{"content", ""}});
      json finish = choice_json(update.choice, json::object(), nullptr);
      finish["finish_reason"] = d.finish_reason;
      finish["stop_reason"] = d.stop_reason;
      out.push_back(chunk(std::move(finish)));
    }
    return out;
  }

  void collect(ChoiceUpdate& update) override {
    if (update.prompt_scores) prompt_scores_ = std::move(*update.prompt_scores);
    Choice& c = choices_[static_cast<std::size_t>(update.choice)];
    c.all.append(std::move(update.delta));
  }

  json final_response(const RequestRun& run) override {
    json choices = json::array();
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      ChoiceDelta& all = choices_[i].all;
      json message{{"role", "assistant"}};
      bool only_calls =
          !all.tool_calls.empty() && all.content.find_first_not_of(" \t\r\n") == std::string::npos;
      message["content"] = only_calls ? json(nullptr) : json(all.content);
      message["refusal"] = nullptr;
      if (!all.reasoning.empty()) message["reasoning_content"] = all.reasoning;
      if (!all.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCall& call : all.tool_calls) calls.push_back(tool_call_json(call));
        message["tool_calls"] = std::move(calls);
      }
      json lp = nullptr;
      if (logprobs_)
        lp = json{{"content", logprob_content(tokenizer_, all.tokens)}, {"refusal", nullptr}};
      json choice{{"index", i},
                  {"message", std::move(message)},
                  {"logprobs", std::move(lp)},
                  {"finish_reason", all.finish_reason},
                  {"stop_reason", all.stop_reason}};
      if (return_token_ids_) {
        json ids = json::array();
        for (const auto& t : all.tokens) ids.push_back(t.id);
        choice["token_ids"] = std::move(ids);
      }
      choices.push_back(std::move(choice));
    }
    json body = base("chat.completion");
    body["choices"] = std::move(choices);
    body["usage"] = usage(run);
    if (prompt_scores_) {
      body["prompt_logprobs"] =
          prompt_logprobs_json(tokenizer_, prompt_ids_, *prompt_scores_, prompt_top_);
    }
    if (return_token_ids_) body["prompt_token_ids"] = prompt_ids_;
    return body;
  }

  json usage(const RequestRun& run) override {
    int64_t completion = run.completion_tokens();
    return json{{"prompt_tokens", run.prompt_tokens()},
                {"completion_tokens", completion},
                {"total_tokens", run.prompt_tokens() + completion},
                {"prompt_tokens_details", json{{"cached_tokens", run.cached_tokens()}}},
                {"completion_tokens_details", json{{"reasoning_tokens", run.reasoning_tokens()}}}};
  }

  json usage_chunk(const RequestRun& run) override {
    json body = base("chat.completion.chunk");
    body["choices"] = json::array();
    body["usage"] = usage(run);
    return body;
  }

 private:
  struct Choice {
    ChoiceDelta all;  // non-streaming
    std::vector<engine::GeneratedToken> pending_logprobs;
    int calls = 0;
  };

  json base(const char* object) const {
    return json{{"id", id_},
                {"object", object},
                {"created", created_},
                {"model", model_},
                {"system_fingerprint", context_.fingerprint}};
  }
  static json choice_json(int64_t index, json delta, json logprobs) {
    return json{{"index", index},
                {"delta", std::move(delta)},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", nullptr}};
  }
  json chunk(json choice) const {
    json body = base("chat.completion.chunk");
    body["choices"] = json::array({std::move(choice)});
    if (include_usage_) body["usage"] = nullptr;
    return body;
  }

  const ServerContext& context_;
  const Tokenizer& tokenizer_;
  std::string id_;
  std::string model_;
  int64_t n_;
  bool logprobs_;
  bool include_usage_;
  bool return_token_ids_;
  std::vector<int32_t> prompt_ids_;
  int64_t prompt_top_;
  std::vector<Choice> choices_;
  std::optional<std::vector<engine::ScoredToken>> prompt_scores_;
};

// Structured output (§15, §12.5): the response format's or the tool calls' grammar, lazy where
// it governs only the calls, and from the end of the reasoning on a prompt that opens it.
void constrain_output(const ChatRequest& request, const ChatPrompt& prompt, ServerContext& context,
                      engine::GenerationRequest& out) {
  out.constraint = compile_constraint(request, context);
  // Kimi K3 writes its calls in its own sections, which the call grammars (of <tool_call> blocks)
  // do not describe: its strict tools are parsed, not constrained.
  const bool own_call_syntax = context.channel_format == ChannelFormat::kKimiXtml;
  if (std::optional<ToolCallGrammar> calls =
          own_call_syntax ? std::nullopt : tool_call_grammar(request, context.tool_format)) {
    if (request.grammar) {
      throw invalid_value_message(
          request.grammar_param,
          "A JSON response format or a grammar cannot be combined with strict tools (their calls "
          "have a grammar of their own); drop one of them, or 'strict'.");
    }
    std::optional<int32_t> opening = context.model.tokenizer->token_id("<tool_call>");
    if (!calls->lazy || opening) {
      CommonFields fields;
      fields.grammar = calls->gbnf;
      fields.grammar_param = "tools";
      // The tags are added tokens, which constrained output otherwise never writes.
      out.constraint = compile_constraint(fields, context, {"<tool_call>", "</tool_call>"});
      if (calls->lazy) out.constraint_trigger = opening;
    }
  }
  if (out.constraint && prompt.starts_in_reasoning) {
    out.constraint_after = context.model.tokenizer->token_id("</think>");
  }
}

// The end of a rendered prompt that tells a channel splitter where the output starts: its last
// 64 bytes before trailing whitespace (both splitters ignore that whitespace).
std::string prompt_end(std::string_view text) {
  const std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return {};
  const std::size_t begin = end + 1 > 64 ? end + 1 - 64 : 0;
  return std::string(text.substr(begin, end + 1 - begin));
}

// What opens the answer after a prompt that ends where the model would first reason or write a
// header, in formats whose markers constrained output cannot write (added tokens): Muse's
// ` to=user<|message|>`, Kimi K3's closing of the think section and opening of the response.
std::string answer_opening(ChannelFormat format, std::string_view prompt) {
  if (format == ChannelFormat::kMuseHeaders && MuseChannelParser::starts_in_header(prompt)) {
    return " to=user<|message|>";
  }
  if (format == ChannelFormat::kKimiXtml &&
      KimiXtmlSplitter::start_of(prompt) == KimiXtmlSplitter::Section::kThink) {
    return "<|close|>think<|sep|><|open|>response<|sep|>";
  }
  return "";
}

// Structured output shapes the answer's body: the prompt opens the answer itself, and the
// reasoning is skipped, as a forced tool call skips thinking.
void open_answer_for_structured_output(const ChatRequest& request, const ServerContext& context,
                                       ChatPrompt& prompt) {
  if (!request.grammar) return;
  const std::string opening = answer_opening(context.channel_format, prompt.text);
  if (opening.empty()) return;
  prompt.text += opening;
  for (const int32_t id : context.model.tokenizer->encode(opening, /*parse_special=*/true)) {
    prompt.ids.push_back(id);
  }
}

}  // namespace

ChatRun start_chat_run(ServerContext& context, const HttpRequest& req, const ChatRequest& request,
                       const std::string& id, std::string_view prompt_param,
                       std::string_view endpoint, std::chrono::steady_clock::time_point arrival) {
  ChatRun out;
  out.prompt = render_chat_prompt(request, context.model.chat_template, *context.model.tokenizer,
                                  context.tool_format);
  open_answer_for_structured_output(request, context, out.prompt);
  const ChatPrompt& prompt = out.prompt;
  auto prompt_tokens = static_cast<int64_t>(prompt.ids.size());
  req.log->prompt_tokens = prompt_tokens;
  if (prompt_tokens > context.max_prompt_tokens()) {
    throw context_length_exceeded(prompt_param, prompt_tokens, context.max_prompt_tokens(),
                                  context.model.context);
  }
  int64_t max_tokens = effective_max_tokens(request, prompt_tokens, context.model.context,
                                            context.options.default_max_tokens, true);
  if (request.min_tokens > max_tokens) {
    throw invalid_value_message("min_tokens", "'min_tokens' must not exceed 'max_tokens'.");
  }
  out.engine_request = make_engine_request(request, context.model, prompt.ids, max_tokens,
                                           request.logprobs, request.top_logprobs);
  constrain_output(request, prompt, context, out.engine_request);
  uint64_t seed = request_seed(request);
  ChoiceConfig config;
  config.split_reasoning =
      context.options.reasoning_parser && context.channel_format != ChannelFormat::kNone;
  config.channel_format = context.channel_format;
  config.prompt_end = prompt_end(prompt.text);
  // Muse's headers are special tokens: the splitter must see them as text (and without the
  // splitter they stay in the content whole, not as bare header words).
  out.engine_request.kept_special =
      channel_marker_ids(context.channel_format, *context.model.tokenizer);
  config.parse_tools = !request.tools.is_null() && request.tool_choice != ToolChoiceKind::kNone;
  config.tools = request.tools;
  config.parallel_tool_calls = request.parallel_tool_calls;
  config.forced_prefix = prompt.forced_prefix;

  std::vector<engine::ChoiceWork> works;
  std::vector<ChoiceConfig> configs;
  for (int64_t j = 0; j < request.n; ++j) {
    engine::ChoiceWork work;
    work.request = out.engine_request;
    work.seed = engine::choice_seed(seed, 0, j);
    work.choice = static_cast<int32_t>(j);
    if (j == 0 && request.prompt_logprobs) {
      work.prompt_top_logprobs = static_cast<int32_t>(*request.prompt_logprobs);
    }
    work.generate = max_tokens > 0;
    works.push_back(std::move(work));
    configs.push_back(config);
  }
  context.metrics.request_received(endpoint);
  context.metrics.observe_request_prompt_tokens(prompt_tokens);
  out.run = std::make_shared<RequestRun>(context, id, std::move(works), std::move(configs),
                                         prompt_tokens, arrival);
  return out;
}

void handle_chat(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  auto arrival = std::chrono::steady_clock::now();
  json body = parse_json_body(req.body);
  context.require_ready();
  ChatRequest request = parse_chat_request(body, context.limits);
  std::string id = random_id("chatcmpl-");
  ChatRun chat = start_chat_run(context, req, request, id, "messages", "chat", arrival);
  auto formatter = std::make_shared<ChatFormatter>(context, request, id, chat.prompt.ids);
  respond(req, res, std::move(chat.run), std::move(formatter), request.stream,
          request.include_usage);
}

}  // namespace md::server
