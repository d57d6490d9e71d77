#include "server/prompt_logprobs.h"

#include <string>

#include "server/token_text.h"

namespace md::server {

nlohmann::ordered_json prompt_logprobs_json(const Tokenizer& tokenizer,
                                            const std::vector<int32_t>& prompt,
                                            const std::vector<engine::ScoredToken>& scores,
                                            int64_t top_n) {
  using json = nlohmann::ordered_json;
  json out = json::array({nullptr});
  for (std::size_t t = 0; t < scores.size() && t + 1 < prompt.size(); ++t) {
    const engine::ScoredToken& s = scores[t];
    json entry = json::object();
    auto add = [&](int32_t id, float logprob, int64_t rank) {
      std::string key = std::to_string(id);
      if (entry.contains(key)) return;
      entry[key] = json{{"logprob", json_logprob(logprob)},
                        {"rank", rank},
                        {"decoded_token", tokenizer.decode(std::span<const int32_t>(&id, 1))}};
    };
    add(prompt[t + 1], s.logprob, s.rank);
    for (std::size_t k = 0; k < s.top.size() && static_cast<int64_t>(k) < top_n; ++k) {
      add(s.top[k].token, s.top[k].logprob, static_cast<int64_t>(k) + 1);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace md::server
