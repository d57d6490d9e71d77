#include "models/llama/llama_gguf_config.h"

#include <algorithm>

#include "base/error.h"

namespace md {

namespace {

int64_t positive(const GgufFile& file, std::string_view key) {
  int64_t value = file.integer(key);
  if (value <= 0) fail("{}: '{}' is {}, expected a positive integer", file.path(), key, value);
  return value;
}

void check_rope(const GgufFile& file, const LlamaConfig& config) {
  int64_t rotary = file.integer_or("llama.rope.dimension_count", config.head_dim);
  if (rotary != config.head_dim) {
    fail(
        "{}: 'llama.rope.dimension_count' is {} but the head dimension is {}: partial rotary "
        "embeddings are not supported for llama",
        file.path(), rotary, config.head_dim);
  }
  std::string scaling = file.string_or("llama.rope.scaling.type", "none");
  if (scaling != "none") {
    fail("{}: 'llama.rope.scaling.type' is \"{}\": RoPE scaling is not supported yet", file.path(),
         scaling);
  }
}

std::vector<int64_t> stop_ids(const GgufFile& file, int64_t vocab) {
  std::vector<int64_t> ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (file.find(key) == nullptr) continue;
    int64_t id = file.integer(key);
    if (id < 0 || id >= vocab)
      fail("{}: '{}' is {}, outside the vocabulary of {}", file.path(), key, id, vocab);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

}  // namespace

LlamaConfig parse_llama_gguf_config(const GgufFile& file) {
  std::string architecture = file.string("general.architecture");
  if (architecture != "llama") {
    fail(
        "{}: 'general.architecture' is \"{}\"; megadecode reads GGUF files of architecture "
        "\"llama\"",
        file.path(), architecture);
  }
  LlamaConfig config;
  config.num_layers = positive(file, "llama.block_count");
  config.hidden_size = positive(file, "llama.embedding_length");
  config.intermediate_size = positive(file, "llama.feed_forward_length");
  config.num_attention_heads = positive(file, "llama.attention.head_count");
  config.num_key_value_heads = file.find("llama.attention.head_count_kv") != nullptr
                                   ? positive(file, "llama.attention.head_count_kv")
                                   : config.num_attention_heads;
  if (config.hidden_size % config.num_attention_heads != 0) {
    fail("{}: 'llama.embedding_length' {} is not a multiple of 'llama.attention.head_count' {}",
         file.path(), config.hidden_size, config.num_attention_heads);
  }
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    fail("{}: 'llama.attention.head_count_kv' {} does not divide 'llama.attention.head_count' {}",
         file.path(), config.num_key_value_heads, config.num_attention_heads);
  }
  config.head_dim = config.hidden_size / config.num_attention_heads;
  check_rope(file, config);
  config.rope_theta = file.number_or("llama.rope.freq_base", 10000.0);
  config.rms_norm_eps = file.number("llama.attention.layer_norm_rms_epsilon");
  config.max_position_embeddings = positive(file, "llama.context_length");
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  const GgufValue::Array* token_list = tokens != nullptr ? tokens->as_array() : nullptr;
  config.vocab_size = file.find("llama.vocab_size") != nullptr
                          ? positive(file, "llama.vocab_size")
                          : (token_list != nullptr ? static_cast<int64_t>(token_list->size()) : 0);
  if (config.vocab_size <= 0)
    fail("{}: neither 'llama.vocab_size' nor 'tokenizer.ggml.tokens' gives the vocabulary size",
         file.path());
  // llama.cpp ties the output projection to the embedding by leaving output.weight out.
  config.tie_word_embeddings = file.tensor("output.weight") == nullptr;
  config.eos_token_ids = stop_ids(file, config.vocab_size);
  return config;
}

}  // namespace md
