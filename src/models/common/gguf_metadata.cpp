#include "models/common/gguf_metadata.h"

#include <algorithm>

#include "base/error.h"

namespace md {

int64_t gguf_positive(const GgufFile& file, std::string_view key) {
  int64_t value = file.integer(key);
  if (value <= 0) fail("{}: '{}' is {}, expected a positive integer", file.path(), key, value);
  return value;
}

int64_t gguf_token_count(const GgufFile& file) {
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  const GgufValue::Array* list = tokens != nullptr ? tokens->as_array() : nullptr;
  return list != nullptr ? static_cast<int64_t>(list->size()) : 0;
}

std::vector<int64_t> gguf_stop_ids(const GgufFile& file, int64_t vocab,
                                   const std::vector<std::string_view>& stop_texts) {
  std::vector<int64_t> ids;
  auto add = [&](int64_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (file.find(key) == nullptr) continue;
    int64_t id = file.integer(key);
    if (id < 0 || id >= vocab)
      fail("{}: '{}' is {}, outside the vocabulary of {}", file.path(), key, id, vocab);
    add(id);
  }
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  const GgufValue::Array* list = tokens != nullptr ? tokens->as_array() : nullptr;
  if (list == nullptr || stop_texts.empty()) return ids;
  for (std::size_t id = 0; id < list->size() && static_cast<int64_t>(id) < vocab; ++id) {
    const std::string* text = (*list)[id].as_string();
    if (text != nullptr &&
        std::find(stop_texts.begin(), stop_texts.end(), *text) != stop_texts.end())
      add(static_cast<int64_t>(id));
  }
  return ids;
}

}  // namespace md
