#include "models/qwen38/qwen38_gguf_config.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "kernels/moe_routing.h"
#include "models/common/gguf_metadata.h"

namespace md {

namespace {

constexpr char kDense[] = "qwen35";
constexpr char kMoe[] = "qwen35moe";

// The file and its architecture, which prefixes every model key ("qwen35moe.block_count").
struct Keys {
  const GgufFile& file;
  std::string architecture;

  std::string key(std::string_view name) const { return fmt::format("{}.{}", architecture, name); }
  int64_t positive(std::string_view name) const { return gguf_positive(file, key(name)); }
};

Keys keys_of(const GgufFile& file) {
  std::string architecture = file.string("general.architecture");
  if (architecture != kDense && architecture != kMoe) {
    fail("{}: 'general.architecture' is \"{}\", expected \"{}\" or \"{}\"", file.path(),
         architecture, kDense, kMoe);
  }
  return {file, std::move(architecture)};
}

// llama.cpp's qwen35moe: every block's FFN is routed experts (softmax, top expert_used_count,
// renormalised) plus a shared expert behind a sigmoid gate.
Qwen38Moe read_moe(const Keys& k) {
  Qwen38Moe moe;
  moe.experts = k.positive("expert_count");
  moe.experts_per_token = k.positive("expert_used_count");
  if (moe.experts_per_token > moe.experts || moe.experts_per_token > kernels::kMaxExpertsPerToken) {
    fail("{}: '{}' is {}: at most '{}' {} and at most {}", k.file.path(),
         k.key("expert_used_count"), moe.experts_per_token, k.key("expert_count"), moe.experts,
         kernels::kMaxExpertsPerToken);
  }
  moe.intermediate = k.positive("expert_feed_forward_length");
  moe.shared_intermediate = k.positive("expert_shared_feed_forward_length");
  return moe;
}

// llama.cpp's rule: the optional bool array attention.recurrent_layers, else layer i is full
// attention when (i + 1) is a multiple of full_attention_interval (default 4), as transformers.
std::vector<Qwen38LayerKind> read_layer_kinds(const Keys& k, int64_t layers) {
  const GgufFile& file = k.file;
  std::vector<Qwen38LayerKind> kinds;
  if (const GgufValue* recurrent = file.find(k.key("attention.recurrent_layers"))) {
    const GgufValue::Array* list = recurrent->as_array();
    if (list == nullptr || static_cast<int64_t>(list->size()) < layers) {
      fail("{}: '{}' is not an array of at least {} booleans", file.path(),
           k.key("attention.recurrent_layers"), layers);
    }
    for (int64_t i = 0; i < layers; ++i) {
      std::optional<bool> is_recurrent = (*list)[static_cast<std::size_t>(i)].as_bool();
      if (!is_recurrent) {
        fail("{}: '{}'[{}] is not a boolean", file.path(), k.key("attention.recurrent_layers"), i);
      }
      kinds.push_back(*is_recurrent ? Qwen38LayerKind::kLinearAttention
                                    : Qwen38LayerKind::kFullAttention);
    }
    return kinds;
  }
  const int64_t interval = file.find(k.key("full_attention_interval")) != nullptr
                               ? k.positive("full_attention_interval")
                               : 4;
  for (int64_t i = 0; i < layers; ++i) {
    kinds.push_back((i + 1) % interval == 0 ? Qwen38LayerKind::kFullAttention
                                            : Qwen38LayerKind::kLinearAttention);
  }
  return kinds;
}

void read_attention(const Keys& k, Qwen38Config& c) {
  const GgufFile& file = k.file;
  c.num_attention_heads = k.positive("attention.head_count");
  c.num_key_value_heads = k.positive("attention.head_count_kv");
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail("{}: '{}' {} does not divide '{}' {}", file.path(), k.key("attention.head_count_kv"),
         c.num_key_value_heads, k.key("attention.head_count"), c.num_attention_heads);
  }
  c.head_dim = file.find(k.key("attention.key_length")) != nullptr
                   ? k.positive("attention.key_length")
                   : c.hidden_size / c.num_attention_heads;
  const int64_t value_length = file.find(k.key("attention.value_length")) != nullptr
                                   ? k.positive("attention.value_length")
                                   : c.head_dim;
  if (value_length != c.head_dim) {
    fail("{}: '{}' is {} but '{}' is {}: qwen35 attention heads have one width", file.path(),
         k.key("attention.value_length"), value_length, k.key("attention.key_length"), c.head_dim);
  }
  const int64_t rotary = k.positive("rope.dimension_count");
  if (rotary > c.head_dim || rotary % 2 != 0) {
    fail("{}: '{}' is {}: it must be even and at most the head dimension {}", file.path(),
         k.key("rope.dimension_count"), rotary, c.head_dim);
  }
  c.partial_rotary_factor = static_cast<double>(rotary) / static_cast<double>(c.head_dim);
  c.rope_theta = file.number(k.key("rope.freq_base"));
  if (!(c.rope_theta > 0)) {
    fail("{}: '{}' is {}, expected a positive number", file.path(), k.key("rope.freq_base"),
         c.rope_theta);
  }
}

// The Gated DeltaNet widths from llama.cpp's ssm.* keys.
void read_delta_net(const Keys& k, Qwen38Config& c) {
  const GgufFile& file = k.file;
  c.linear_conv_kernel = k.positive("ssm.conv_kernel");
  c.linear_key_head_dim = k.positive("ssm.state_size");
  c.linear_num_key_heads = k.positive("ssm.group_count");
  c.linear_num_value_heads = k.positive("ssm.time_step_rank");
  const int64_t inner = k.positive("ssm.inner_size");
  if (inner % c.linear_num_value_heads != 0) {
    fail("{}: '{}' {} is not a multiple of '{}' {}", file.path(), k.key("ssm.inner_size"), inner,
         k.key("ssm.time_step_rank"), c.linear_num_value_heads);
  }
  c.linear_value_head_dim = inner / c.linear_num_value_heads;
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    fail("{}: '{}' {} does not divide '{}' {}", file.path(), k.key("ssm.group_count"),
         c.linear_num_key_heads, k.key("ssm.time_step_rank"), c.linear_num_value_heads);
  }
  // The converter reorders every value-head tensor into the tiled order whenever value heads
  // outnumber key heads (llama.cpp's _LinearAttentionVReorderBase).
  c.value_heads_tiled = c.linear_num_value_heads != c.linear_num_key_heads;
}

}  // namespace

Qwen38Config parse_qwen38_gguf_config(const GgufFile& file) {
  const Keys k = keys_of(file);
  Qwen38Config c;
  const int64_t blocks = k.positive("block_count");
  // Every block has tensors of its own: a count beyond the file's is a damaged header (and would
  // have the layer loops below run for billions of layers).
  if (blocks > static_cast<int64_t>(file.tensors().size())) {
    fail("{}: '{}' is {} but the file holds {} tensors", file.path(), k.key("block_count"), blocks,
         file.tensors().size());
  }
  // Multi-token-prediction layers, when exported, follow the main ones; they are not run.
  const int64_t mtp = file.integer_or(k.key("nextn_predict_layers"), 0);
  if (mtp < 0 || mtp >= blocks) {
    fail("{}: '{}' is {} with {} blocks", file.path(), k.key("nextn_predict_layers"), mtp, blocks);
  }
  c.num_layers = blocks - mtp;
  c.hidden_size = k.positive("embedding_length");
  if (k.architecture == kMoe) {
    c.moe = read_moe(k);
  } else {
    c.intermediate_size = k.positive("feed_forward_length");
  }
  c.max_position_embeddings = k.positive("context_length");
  c.rms_norm_eps = file.number(k.key("attention.layer_norm_rms_epsilon"));
  if (!(c.rms_norm_eps > 0)) {
    fail("{}: '{}' is {}, expected a positive number", file.path(),
         k.key("attention.layer_norm_rms_epsilon"), c.rms_norm_eps);
  }
  read_attention(k, c);
  read_delta_net(k, c);
  c.layer_types = read_layer_kinds(k, c.num_layers);
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
