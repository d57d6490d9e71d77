// POST /v1/completions (§2.3, §3.2, §3.6, §6.1, §7).
#include "engine/choice_decoder.h"
#include "server/generation_route.h"
#include "server/json_body.h"
#include "server/prompt_logprobs.h"
#include "server/routes.h"
#include "server/token_text.h"

namespace md::server {
namespace {

using json = nlohmann::ordered_json;

struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // what echo shows
};

// The legacy logprobs object (§6.1), built incrementally so that streamed chunks carry absolute
// text offsets.
class LegacyLogprobs {
 public:
  LegacyLogprobs(const Tokenizer& tokenizer, int64_t top) : tokenizer_(tokenizer), top_(top) {}

  void add(int32_t id, std::optional<float> logprob, const std::vector<engine::TokenLogprob>& alts,
           bool skip_special) {
    std::string shown = token_string(tokenizer_, id);
    tokens_.push_back(shown);
    if (logprob) {
      token_logprobs_.push_back(json_logprob(*logprob));
      json top = json::object();
      for (std::size_t k = 0; k < alts.size() && static_cast<int64_t>(k) < top_; ++k) {
        std::string key = token_string(tokenizer_, alts[k].token);
        if (!top.contains(key)) top[key] = json_logprob(alts[k].logprob);
      }
      if (!top.contains(shown)) top[shown] = json_logprob(*logprob);
      top_logprobs_.push_back(std::move(top));
    } else {
      token_logprobs_.push_back(nullptr);
      top_logprobs_.push_back(nullptr);
    }
    text_offset_.push_back(offset_);
    bool special = skip_special && tokenizer_.is_special(id);
    if (!special) offset_ += code_points(tokenizer_.decode(std::span<const int32_t>(&id, 1)));
  }
  bool empty() const { return tokens_.empty(); }
  // Everything added since the last take (streaming) or in all (non-streaming), offsets clamped to
  // the final text length when given.
  json take(std::optional<int64_t> text_length = std::nullopt) {
    json offsets = json::array();
    for (int64_t o : text_offset_) offsets.push_back(text_length ? std::min(o, *text_length) : o);
    json out{{"tokens", tokens_},
             {"token_logprobs", token_logprobs_},
             {"top_logprobs", top_logprobs_},
             {"text_offset", std::move(offsets)}};
    tokens_.clear();
    token_logprobs_ = json::array();
    top_logprobs_ = json::array();
    text_offset_.clear();
    return out;
  }

 private:
  const Tokenizer& tokenizer_;
  int64_t top_;
  std::vector<std::string> tokens_;
  json token_logprobs_ = json::array();
  json top_logprobs_ = json::array();
  std::vector<int64_t> text_offset_;
  int64_t offset_ = 0;
};

class CompletionFormatter : public ResponseFormatter {
 public:
  CompletionFormatter(const ServerContext& context, const CompletionRequest& request,
                      std::string id, std::vector<Prompt> prompts)
      : context_(context),
        tokenizer_(*context.model.tokenizer),
        request_(request),
        id_(std::move(id)),
        prompts_(std::move(prompts)) {
    for (std::size_t p = 0; p < prompts_.size(); ++p) {
      for (int64_t j = 0; j < request_.n; ++j) {
        choices_.emplace_back(p, LegacyLogprobs(tokenizer_, request_.logprobs.value_or(0)));
      }
    }
  }

  std::vector<json> opening_chunks() override {
    std::vector<json> out;
    if (!request_.echo || request_.logprobs) return out;  // echo with logprobs waits for scores
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      out.push_back(chunk(choice_json(i, prompts_[choices_[i].prompt].text, nullptr)));
    }
    return out;
  }

  std::vector<json> chunks(ChoiceUpdate& update) override {
    std::vector<json> out;
    auto index = static_cast<std::size_t>(update.choice);
    Choice& c = choices_[index];
    if (update.prompt_scores) {
      // The echoed prompt is a chunk of its own, before any generated text (§3.6).
      std::string echoed = echo_scores(c, *update.prompt_scores);
      if (request_.echo) {
        json lp = request_.logprobs ? c.logprobs.take() : json(nullptr);
        out.push_back(chunk(choice_json(index, echoed, std::move(lp))));
      }
    }
    add_tokens(c, update.delta.tokens);
    std::string text = update.delta.content;
    if (!text.empty() || (request_.logprobs && !c.logprobs.empty())) {
      json lp = request_.logprobs ? c.logprobs.take() : json(nullptr);
      out.push_back(chunk(choice_json(index, text, std::move(lp))));
    }
    if (update.delta.finished) {
      json finish = choice_json(index, "", nullptr);
      finish["finish_reason"] = update.delta.finish_reason;
      finish["stop_reason"] = update.delta.stop_reason;
      out.push_back(chunk(std::move(finish)));
    }
    return out;
  }

  void collect(ChoiceUpdate& update) override {
    Choice& c = choices_[static_cast<std::size_t>(update.choice)];
    if (update.prompt_scores) {
      c.prompt_scores = *update.prompt_scores;
      c.echo_text = echo_scores(c, *update.prompt_scores);
    }
    add_tokens(c, update.delta.tokens);
    c.all.append(std::move(update.delta));
  }

  json final_response(const RequestRun& run) override {
    json choices = json::array();
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      std::string text = (request_.echo ? prompts_[c.prompt].text : "") + c.all.content;
      json lp = request_.logprobs ? c.logprobs.take(code_points(text)) : json(nullptr);
      json choice{{"index", i},
                  {"text", text},
                  {"logprobs", std::move(lp)},
                  {"finish_reason", c.all.finish_reason},
                  {"stop_reason", c.all.stop_reason}};
      if (request_.prompt_logprobs && !c.prompt_scores.empty()) {
        choice["prompt_logprobs"] = prompt_logprobs_json(
            tokenizer_, prompts_[c.prompt].ids, c.prompt_scores, *request_.prompt_logprobs);
      }
      if (request_.return_token_ids) {
        json ids = json::array();
        for (const auto& t : c.all.tokens) ids.push_back(t.id);
        choice["token_ids"] = std::move(ids);
        choice["prompt_token_ids"] = prompts_[c.prompt].ids;
      }
      choices.push_back(std::move(choice));
    }
    json body = base();
    body["choices"] = std::move(choices);
    body["usage"] = usage(run);
    return body;
  }

  json usage(const RequestRun& run) override {
    int64_t completion = run.completion_tokens();
    return json{{"prompt_tokens", run.prompt_tokens()},
                {"completion_tokens", completion},
                {"total_tokens", run.prompt_tokens() + completion},
                {"prompt_tokens_details", json{{"cached_tokens", run.cached_tokens()}}}};
  }

  json usage_chunk(const RequestRun& run) override {
    json body = base();
    body["choices"] = json::array();
    body["usage"] = usage(run);
    return body;
  }

 private:
  struct Choice {
    Choice(std::size_t p, LegacyLogprobs lp) : prompt(p), logprobs(std::move(lp)) {}
    std::size_t prompt = 0;
    LegacyLogprobs logprobs;
    ChoiceDelta all;
    std::vector<engine::ScoredToken> prompt_scores;
    std::string echo_text;
  };

  // With echo and logprobs, the prompt's tokens head the arrays (the first without a value).
  std::string echo_scores(Choice& c, const std::vector<engine::ScoredToken>& scores) {
    const Prompt& prompt = prompts_[c.prompt];
    if (request_.echo && request_.logprobs) {
      for (std::size_t t = 0; t < prompt.ids.size(); ++t) {
        if (t == 0) {
          c.logprobs.add(prompt.ids[0], std::nullopt, {}, false);
        } else {
          const engine::ScoredToken& s = scores.at(t - 1);
          c.logprobs.add(prompt.ids[t], s.logprob, s.top, false);
        }
      }
    }
    return prompt.text;
  }

  void add_tokens(Choice& c, const std::vector<engine::GeneratedToken>& tokens) {
    if (!request_.logprobs) return;
    for (const auto& t : tokens)
      c.logprobs.add(t.id, t.logprob, t.top, request_.skip_special_tokens);
  }

  json base() const {
    return json{{"id", id_},
                {"object", "text_completion"},
                {"created", created_},
                {"model", request_.model},
                {"system_fingerprint", context_.fingerprint}};
  }
  static json choice_json(std::size_t index, const std::string& text, json logprobs) {
    return json{{"index", index},
                {"text", text},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", nullptr}};
  }
  json chunk(json choice) const {
    json body = base();
    body["choices"] = json::array({std::move(choice)});
    if (request_.stream && request_.include_usage) body["usage"] = nullptr;
    return body;
  }

  const ServerContext& context_;
  const Tokenizer& tokenizer_;
  CompletionRequest request_;
  std::string id_;
  std::vector<Prompt> prompts_;
  std::vector<Choice> choices_;
};

std::vector<Prompt> tokenize_prompts(const CompletionRequest& request,
                                     const ServerContext& context) {
  std::vector<Prompt> prompts;
  const Tokenizer& tokenizer = *context.model.tokenizer;
  for (const PromptInput& input : request.prompts) {
    Prompt p;
    if (input.text) {
      p.text = *input.text;
      p.ids = tokenizer.encode(p.text, /*parse_special=*/true);
    } else {
      p.ids = input.ids;
      p.text = tokenizer.decode(p.ids, false);
    }
    if (p.ids.empty()) throw invalid_value("prompt", "at least one token");
    auto n = static_cast<int64_t>(p.ids.size());
    if (n > context.max_prompt_tokens()) {
      throw context_length_exceeded("prompt", n, context.max_prompt_tokens(),
                                    context.model.context);
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

}  // namespace

void handle_completions(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  auto arrival = std::chrono::steady_clock::now();
  json body = parse_json_body(req.body);
  context.require_ready();
  CompletionRequest request = parse_completion_request(body, context.limits);
  std::vector<Prompt> prompts = tokenize_prompts(request, context);
  uint64_t seed = request_seed(request);
  int64_t logprobs = request.logprobs.value_or(-1);
  int32_t prompt_top = -1;
  if (request.echo && request.logprobs) prompt_top = static_cast<int32_t>(*request.logprobs);
  if (request.prompt_logprobs) {
    prompt_top = std::max(prompt_top, static_cast<int32_t>(*request.prompt_logprobs));
  }

  std::shared_ptr<grammar::TokenConstraint> constraint = compile_constraint(request, context);
  std::vector<engine::ChoiceWork> works;
  int64_t prompt_tokens = 0;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    auto n_prompt = static_cast<int64_t>(prompts[p].ids.size());
    prompt_tokens += n_prompt;
    context.metrics.observe_request_prompt_tokens(n_prompt);
    int64_t max_tokens = effective_max_tokens(request, n_prompt, context.model.context,
                                              context.options.default_max_tokens, false);
    if (request.min_tokens > max_tokens) {
      throw invalid_value_message("min_tokens", "'min_tokens' must not exceed 'max_tokens'.");
    }
    engine::GenerationRequest engine_request =
        make_engine_request(request, context.model, prompts[p].ids, max_tokens, logprobs >= 0,
                            std::max<int64_t>(0, logprobs));
    engine_request.constraint = constraint;
    for (int64_t j = 0; j < request.n; ++j) {
      engine::ChoiceWork work;
      work.request = engine_request;
      work.seed = engine::choice_seed(seed, static_cast<int64_t>(p), j);
      work.choice = static_cast<int32_t>(static_cast<int64_t>(p) * request.n + j);
      work.prompt_top_logprobs = prompt_top;
      work.generate = max_tokens > 0;
      works.push_back(std::move(work));
    }
  }
  req.log->prompt_tokens = prompt_tokens;
  std::vector<ChoiceConfig> configs(works.size());
  for (std::size_t i = 0; i < works.size(); ++i) {
    configs[i].prompt = static_cast<int32_t>(works[i].choice / request.n);
  }
  std::string id = random_id("cmpl-");
  context.metrics.request_received("completions");
  auto run = std::make_shared<RequestRun>(context, id, std::move(works), std::move(configs),
                                          prompt_tokens, arrival);
  auto formatter = std::make_shared<CompletionFormatter>(context, request, id, std::move(prompts));
  respond(req, res, std::move(run), std::move(formatter), request.stream, request.include_usage);
}

}  // namespace md::server
