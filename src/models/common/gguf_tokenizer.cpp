#include "models/common/gguf_tokenizer.h"

#include <climits>
#include <utility>

#include "base/error.h"

namespace md {
namespace {

// An absent key gives an empty vector; a key that is not an array of `what` fails.
template <typename Convert>
auto read_array(const GgufFile& file, std::string_view key, std::string_view what,
                const Convert& convert) {
  using T = typename decltype(convert(std::declval<const GgufValue&>()))::value_type;
  std::vector<T> out;
  const GgufValue* value = file.find(key);
  if (value == nullptr) return out;
  const GgufValue::Array* array = value->as_array();
  if (array == nullptr)
    fail("{}: {} is {}, not an array of {}", file.path(), key, value->describe(), what);
  out.reserve(array->size());
  for (std::size_t i = 0; i < array->size(); ++i) {
    auto element = convert((*array)[i]);
    if (!element) fail("{}: {}[{}] is not {}", file.path(), key, i, what);
    out.push_back(std::move(*element));
  }
  return out;
}

std::optional<std::int32_t> optional_id(const GgufFile& file, std::string_view key) {
  if (file.find(key) == nullptr) return std::nullopt;
  const std::int64_t id = file.integer(key);
  if (id < 0 || id > INT32_MAX) fail("{}: {} = {} is not a token id", file.path(), key, id);
  return static_cast<std::int32_t>(id);
}

}  // namespace

GgufTokenizerData read_gguf_tokenizer_data(const GgufFile& file) {
  GgufTokenizerData data;
  data.origin = file.path();
  data.model = file.string_or("tokenizer.ggml.model", "");
  data.pre = file.string_or("tokenizer.ggml.pre", "");
  const auto as_string = [](const GgufValue& v) -> std::optional<std::string> {
    const std::string* s = v.as_string();
    return s ? std::optional<std::string>(*s) : std::nullopt;
  };
  data.tokens = read_array(file, "tokenizer.ggml.tokens", "strings", as_string);
  data.merges = read_array(file, "tokenizer.ggml.merges", "strings", as_string);
  data.token_types = read_array(file, "tokenizer.ggml.token_type", "integers",
                                [](const GgufValue& v) -> std::optional<std::int32_t> {
                                  const auto i = v.as_int64();
                                  return i ? std::optional<std::int32_t>(*i) : std::nullopt;
                                });
  data.bos = optional_id(file, "tokenizer.ggml.bos_token_id");
  data.eos = optional_id(file, "tokenizer.ggml.eos_token_id");
  data.unk = optional_id(file, "tokenizer.ggml.unknown_token_id");
  data.pad = optional_id(file, "tokenizer.ggml.padding_token_id");
  data.add_bos = file.boolean_or("tokenizer.ggml.add_bos_token", false);
  data.chat_template = file.string_or("tokenizer.chat_template", "");
  return data;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file) {
  return build_gguf_tokenizer(read_gguf_tokenizer_data(file));
}

std::optional<ChatTemplate> load_gguf_chat_template(const GgufFile& file) {
  return build_gguf_chat_template(read_gguf_tokenizer_data(file));
}

}  // namespace md
