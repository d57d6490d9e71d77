#include "models/qwen38/qwen38_gguf_config.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "models/common/gguf_metadata.h"

namespace md {

namespace {

constexpr char kArchitecture[] = "qwen35";

std::string key(std::string_view name) {
  return fmt::format("{}.{}", kArchitecture, name);
}

int64_t positive(const GgufFile& file, std::string_view name) {
  return gguf_positive(file, key(name));
}

void check_architecture(const GgufFile& file) {
  const std::string architecture = file.string("general.architecture");
  if (architecture == "qwen35moe") {
    fail(
        "{}: 'general.architecture' is \"qwen35moe\": Qwen3.5-MoE GGUF files are not supported "
        "yet (dense qwen35 is)",
        file.path());
  }
  if (architecture != kArchitecture) {
    fail("{}: 'general.architecture' is \"{}\", expected \"{}\"", file.path(), architecture,
         kArchitecture);
  }
}

// llama.cpp's rule: the optional bool array attention.recurrent_layers, else layer i is full
// attention when (i + 1) is a multiple of full_attention_interval (default 4), as transformers.
std::vector<Qwen38LayerKind> read_layer_kinds(const GgufFile& file, int64_t layers) {
  std::vector<Qwen38LayerKind> kinds;
  if (const GgufValue* recurrent = file.find(key("attention.recurrent_layers"))) {
    const GgufValue::Array* list = recurrent->as_array();
    if (list == nullptr || static_cast<int64_t>(list->size()) < layers) {
      fail("{}: '{}' is not an array of at least {} booleans", file.path(),
           key("attention.recurrent_layers"), layers);
    }
    for (int64_t i = 0; i < layers; ++i) {
      std::optional<bool> is_recurrent = (*list)[static_cast<std::size_t>(i)].as_bool();
      if (!is_recurrent) {
        fail("{}: '{}'[{}] is not a boolean", file.path(), key("attention.recurrent_layers"), i);
      }
      kinds.push_back(*is_recurrent ? Qwen38LayerKind::kLinearAttention
                                    : Qwen38LayerKind::kFullAttention);
    }
    return kinds;
  }
  const int64_t interval = file.find(key("full_attention_interval")) != nullptr
                               ? positive(file, "full_attention_interval")
                               : 4;
  for (int64_t i = 0; i < layers; ++i) {
    kinds.push_back((i + 1) % interval == 0 ? Qwen38LayerKind::kFullAttention
                                            : Qwen38LayerKind::kLinearAttention);
  }
  return kinds;
}

void read_attention(const GgufFile& file, Qwen38Config& c) {
  c.num_attention_heads = positive(file, "attention.head_count");
  c.num_key_value_heads = positive(file, "attention.head_count_kv");
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail("{}: '{}' {} does not divide '{}' {}", file.path(), key("attention.head_count_kv"),
         c.num_key_value_heads, key("attention.head_count"), c.num_attention_heads);
  }
  c.head_dim = file.find(key("attention.key_length")) != nullptr
                   ? positive(file, "attention.key_length")
                   : c.hidden_size / c.num_attention_heads;
  const int64_t value_length = file.find(key("attention.value_length")) != nullptr
                                   ? positive(file, "attention.value_length")
                                   : c.head_dim;
  if (value_length != c.head_dim) {
    fail("{}: '{}' is {} but '{}' is {}: qwen35 attention heads have one width", file.path(),
         key("attention.value_length"), value_length, key("attention.key_length"), c.head_dim);
  }
  const int64_t rotary = positive(file, "rope.dimension_count");
  if (rotary > c.head_dim || rotary % 2 != 0) {
    fail("{}: '{}' is {}: it must be even and at most the head dimension {}", file.path(),
         key("rope.dimension_count"), rotary, c.head_dim);
  }
  c.partial_rotary_factor = static_cast<double>(rotary) / static_cast<double>(c.head_dim);
  c.rope_theta = file.number(key("rope.freq_base"));
  if (!(c.rope_theta > 0)) {
    fail("{}: '{}' is {}, expected a positive number", file.path(), key("rope.freq_base"),
         c.rope_theta);
  }
}

// The Gated DeltaNet widths from llama.cpp's ssm.* keys.
void read_delta_net(const GgufFile& file, Qwen38Config& c) {
  c.linear_conv_kernel = positive(file, "ssm.conv_kernel");
  c.linear_key_head_dim = positive(file, "ssm.state_size");
  c.linear_num_key_heads = positive(file, "ssm.group_count");
  c.linear_num_value_heads = positive(file, "ssm.time_step_rank");
  const int64_t inner = positive(file, "ssm.inner_size");
  if (inner % c.linear_num_value_heads != 0) {
    fail("{}: '{}' {} is not a multiple of '{}' {}", file.path(), key("ssm.inner_size"), inner,
         key("ssm.time_step_rank"), c.linear_num_value_heads);
  }
  c.linear_value_head_dim = inner / c.linear_num_value_heads;
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    fail("{}: '{}' {} does not divide '{}' {}", file.path(), key("ssm.group_count"),
         c.linear_num_key_heads, key("ssm.time_step_rank"), c.linear_num_value_heads);
  }
  // The converter reorders every value-head tensor into the tiled order whenever value heads
  // outnumber key heads (llama.cpp's _LinearAttentionVReorderBase).
  c.value_heads_tiled = c.linear_num_value_heads != c.linear_num_key_heads;
}

}  // namespace

Qwen38Config parse_qwen38_gguf_config(const GgufFile& file) {
  check_architecture(file);
  Qwen38Config c;
  const int64_t blocks = positive(file, "block_count");
  // Every block has tensors of its own: a count beyond the file's is a damaged header (and would
  // have the layer loops below run for billions of layers).
  if (blocks > static_cast<int64_t>(file.tensors().size())) {
    fail("{}: '{}' is {} but the file holds {} tensors", file.path(), key("block_count"), blocks,
         file.tensors().size());
  }
  // Multi-token-prediction layers, when exported, follow the main ones; they are not run.
  const int64_t mtp = file.integer_or(key("nextn_predict_layers"), 0);
  if (mtp < 0 || mtp >= blocks) {
    fail("{}: '{}' is {} with {} blocks", file.path(), key("nextn_predict_layers"), mtp, blocks);
  }
  c.num_layers = blocks - mtp;
  c.hidden_size = positive(file, "embedding_length");
  c.intermediate_size = positive(file, "feed_forward_length");
  c.max_position_embeddings = positive(file, "context_length");
  c.rms_norm_eps = file.number(key("attention.layer_norm_rms_epsilon"));
  if (!(c.rms_norm_eps > 0)) {
    fail("{}: '{}' is {}, expected a positive number", file.path(),
         key("attention.layer_norm_rms_epsilon"), c.rms_norm_eps);
  }
  read_attention(file, c);
  read_delta_net(file, c);
  c.layer_types = read_layer_kinds(file, c.num_layers);
  const GgufTensor* embedding = file.tensor("token_embd.weight");
  c.vocab_size = embedding != nullptr && embedding->dims.size() == 2
                     ? static_cast<int64_t>(embedding->dims[1])
                     : gguf_token_count(file);
  if (c.vocab_size <= 0) {
    fail("{}: neither token_embd.weight nor 'tokenizer.ggml.tokens' gives the vocabulary size",
         file.path());
  }
  // llama.cpp ties the output projection to the embedding by leaving output.weight out.
  c.tie_word_embeddings = file.tensor("output.weight") == nullptr;
  c.eos_token_ids = gguf_stop_ids(file, c.vocab_size, {"<|im_end|>", "<|endoftext|>"});
  return c;
}

}  // namespace md
