#include "models/llama/llama_gguf_config.h"

#include <algorithm>

#include "base/error.h"
#include "models/common/gguf_metadata.h"

namespace md {

namespace {

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
  config.num_layers = gguf_positive(file, "llama.block_count");
  config.hidden_size = gguf_positive(file, "llama.embedding_length");
  config.intermediate_size = gguf_positive(file, "llama.feed_forward_length");
  config.num_attention_heads = gguf_positive(file, "llama.attention.head_count");
  config.num_key_value_heads = file.find("llama.attention.head_count_kv") != nullptr
                                   ? gguf_positive(file, "llama.attention.head_count_kv")
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
  config.max_position_embeddings = gguf_positive(file, "llama.context_length");
  config.vocab_size = file.find("llama.vocab_size") != nullptr
                          ? gguf_positive(file, "llama.vocab_size")
                          : gguf_token_count(file);
  if (config.vocab_size <= 0)
    fail("{}: neither 'llama.vocab_size' nor 'tokenizer.ggml.tokens' gives the vocabulary size",
         file.path());
  // llama.cpp ties the output projection to the embedding by leaving output.weight out.
  config.tie_word_embeddings = file.tensor("output.weight") == nullptr;
  config.eos_token_ids = gguf_stop_ids(file, config.vocab_size);
  return config;
}

}  // namespace md
