#include "models/llama/llama_config.h"

#include <optional>
#include <string>

#include "base/error.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

constexpr char kModel[] = "llama";

void check_fixed_settings(const ConfigReader& config) {
  config.expect("model_type", "llama");
  config.expect("hidden_act", "silu");
  config.expect("attention_bias", false);
  config.expect("mlp_bias", false);
  config.expect("pretraining_tp", 1);
  config.forbid(
      "quantization_config",
      fmt::format("{} from config.json is unquantized; quantized models come as GGUF", kModel));
  // Plain RoPE only: llama3/yarn/linear scaling change the frequencies.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (std::optional<ConfigReader> rope = config.optional_object(key)) {
      rope->expect(rope->has("rope_type") ? "rope_type" : "type", "default");
    }
  }
}

double read_rope_theta(const ConfigReader& config) {
  std::optional<ConfigReader> rope = config.optional_object("rope_parameters");
  if (rope && rope->has("rope_theta")) return rope->positive_number("rope_theta");
  // Hugging Face's LlamaConfig default.
  double theta = config.number_or("rope_theta", 10000.0);
  if (!(theta > 0)) config.reject("rope_theta", "must be positive");
  return theta;
}

WeightFormat read_weight_format(const ConfigReader& config) {
  const char* key = config.has("torch_dtype") ? "torch_dtype" : "dtype";
  std::string dtype = config.string_or(key, "bfloat16");
  if (dtype == "bfloat16") return WeightFormat::kBF16;
  if (dtype == "float16") return WeightFormat::kF16;
  if (dtype == "float32") return WeightFormat::kF32;
  config.reject(key, "unsupported (llama needs \"bfloat16\", \"float16\" or \"float32\")");
}

void read_heads(const ConfigReader& config, LlamaConfig& c) {
  c.num_attention_heads = config.positive("num_attention_heads");
  c.num_key_value_heads = config.integer_or("num_key_value_heads", c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    config.reject("num_key_value_heads", fmt::format("must be positive and divide "
                                                     "num_attention_heads = {}",
                                                     c.num_attention_heads));
  }
  if (config.has("head_dim")) {
    c.head_dim = config.positive("head_dim");
  } else if (c.hidden_size % c.num_attention_heads != 0) {
    config.reject("num_attention_heads", fmt::format("must divide hidden_size {} when head_dim "
                                                     "is absent",
                                                     c.hidden_size));
  } else {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) {
    config.reject(config.has("head_dim") ? "head_dim" : "num_attention_heads",
                  fmt::format("head_dim {} must be even for RoPE", c.head_dim));
  }
}

}  // namespace

LlamaConfig parse_llama_config(const ConfigFiles& files) {
  ConfigReader config(files.config_path, files.config, kModel);
  check_fixed_settings(config);
  LlamaConfig c;
  c.hidden_size = config.positive("hidden_size");
  c.intermediate_size = config.positive("intermediate_size");
  c.num_layers = config.positive("num_hidden_layers");
  read_heads(config, c);
  c.rope_theta = read_rope_theta(config);
  c.rms_norm_eps = config.positive_number("rms_norm_eps");
  c.vocab_size = config.positive("vocab_size");
  c.tie_word_embeddings = config.boolean_or("tie_word_embeddings", false);
  c.max_position_embeddings = config.positive("max_position_embeddings");
  c.weight_format = read_weight_format(config);
  c.eos_token_ids = eos_token_ids(files, {&config}, c.vocab_size, EosPolicy::kGenerationFirst);
  return c;
}

ConfigFootprint llama_footprint(const LlamaConfig& c, const FootprintOptions& options) {
  ConfigFootprint f;
  WeightFormat w = c.weight_format;
  int64_t h = c.hidden_size;
  f.architecture = fmt::format(
      "llama decoder: {} layers, hidden {}, {} q / {} kv heads x {}, "
      "SwiGLU MLP {}, vocab {}, {} lm_head",
      c.num_layers, h, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
      c.intermediate_size, c.vocab_size, c.tie_word_embeddings ? "tied" : "untied");
  f.max_context = c.max_position_embeddings;
  std::vector<int64_t> layers;
  for (int64_t i = 0; i < c.num_layers; ++i) layers.push_back(i);
  f.layer_kinds.push_back(LayerKindRow{"attention + MLP", layers,
                                       fmt::format("GQA group {}, rotary {} (theta {:g})",
                                                   c.gqa_group(), c.head_dim, c.rope_theta)});
  f.add_embedding(w, c.vocab_size, h);
  f.add_dense(WeightKind::kAttention, w, c.num_layers * (2 * c.q_dim() * h + 2 * c.kv_dim() * h));
  f.add_dense(WeightKind::kMlp, w, c.num_layers * 3 * c.intermediate_size * h);
  f.add_dense(WeightKind::kNorms, w, (2 * c.num_layers + 1) * h);
  int64_t head_bytes = c.vocab_size * h * dense_element_bytes(w);
  if (c.tie_word_embeddings) {
    // The embedding table doubles as lm_head: no extra storage, but every token reads it whole.
    f.add_weights(WeightKind::kLmHead, w, 0, 0, head_bytes, c.vocab_size * h);
  } else {
    f.add_dense(WeightKind::kLmHead, w, c.vocab_size * h);
  }
  f.state.push_back(StateGroup{
      "KV cache",
      fmt::format("{} layers x {{K,V}} x [{}][ctx][{}] {}", c.num_layers, c.num_key_value_heads,
                  c.head_dim, weight_format_name(options.kv_cache)),
      0, c.num_layers * 2 * c.kv_dim() * dense_element_bytes(options.kv_cache), 0, false});
  return f;
}

}  // namespace md
