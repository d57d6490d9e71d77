#include "models/musespark/musespark_config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/error.h"
#include "kernels/moe_routing.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

constexpr char kModel[] = "muse_spark";
// The published vocabulary and the tokenizer size the seed hard-codes for it (not a config key).
constexpr int64_t kPublishedVocab = 202048;
constexpr int64_t kPublishedVocabUsed = 201818;
constexpr int64_t kNvfp4Group = 16;

// Full (NoPE) attention on layers l % 4 == 1, sliding-window RoPE attention elsewhere.
MuseLayerKind pattern_kind(int64_t layer) {
  return layer % 4 == 1 ? MuseLayerKind::kFullAttention : MuseLayerKind::kSlidingAttention;
}

void check_fixed_settings(const ConfigReader& root, const ConfigReader& text) {
  text.expect("attention_bias", false);
  text.expect("hidden_act", "silu");
  text.expect("num_shared_experts", 0);
  text.expect("routed_scaling_factor", 1.0);
  text.expect("tie_word_embeddings", false);
  root.expect("tie_word_embeddings", false);
}

void check_length(const ConfigReader& text, const char* key, std::size_t size, int64_t layers) {
  if (static_cast<int64_t>(size) != layers) {
    text.reject(key, fmt::format("has {} entries but num_hidden_layers is {}", size, layers));
  }
}

std::vector<MuseLayerKind> read_layer_types(const ConfigReader& text, int64_t layers) {
  std::vector<std::string> names = text.string_list("layer_types");
  check_length(text, "layer_types", names.size(), layers);
  std::vector<MuseLayerKind> kinds;
  for (std::size_t i = 0; i < names.size(); ++i) {
    MuseLayerKind kind = pattern_kind(static_cast<int64_t>(i));
    std::string_view wanted =
        kind == MuseLayerKind::kFullAttention ? "full_attention" : "sliding_attention";
    if (names[i] != wanted) {
      text.reject_element("layer_types", i,
                          fmt::format("unsupported ({} needs \"{}\": full attention exactly on "
                                      "layers l % 4 == 1)",
                                      kModel, wanted));
    }
    kinds.push_back(kind);
  }
  return kinds;
}

std::vector<double> read_layer_rope_theta(const ConfigReader& text,
                                          const std::vector<MuseLayerKind>& kinds, double theta) {
  std::vector<double> thetas = text.number_list("layer_rope_theta");
  check_length(text, "layer_rope_theta", thetas.size(), static_cast<int64_t>(kinds.size()));
  for (std::size_t i = 0; i < thetas.size(); ++i) {
    bool full = kinds[i] == MuseLayerKind::kFullAttention;
    double wanted = full ? 0.0 : theta;
    if (thetas[i] != wanted) {
      text.reject_element("layer_rope_theta", i,
                          fmt::format("unsupported ({} needs {:g}: {})", kModel, wanted,
                                      full ? "full layers use no RoPE" : "rope_theta"));
    }
  }
  return thetas;
}

void check_mlp_layer_types(const ConfigReader& text, int64_t layers) {
  std::vector<std::string> types = text.string_list("mlp_layer_types");
  check_length(text, "mlp_layer_types", types.size(), layers);
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "sparse") {
      text.reject_element(
          "mlp_layer_types", i,
          fmt::format("unsupported ({} needs \"sparse\": every layer is MoE)", kModel));
    }
  }
}

double read_rope_theta(const ConfigReader& text) {
  std::optional<ConfigReader> rope = text.optional_object("rope_parameters");
  if (!rope) return text.positive_number("rope_theta");
  rope->expect("rope_type", "default");
  return rope->positive_number("rope_theta");
}

void read_attention(const ConfigReader& text, MuseSparkConfig& c) {
  c.num_attention_heads = text.positive("num_attention_heads");
  c.num_key_value_heads = text.positive("num_key_value_heads");
  c.head_dim = text.positive("head_dim");
  if (c.num_attention_heads * c.head_dim != c.hidden_size) {
    text.reject("head_dim", fmt::format("num_attention_heads {} x head_dim must equal "
                                        "hidden_size {}",
                                        c.num_attention_heads, c.hidden_size));
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    text.reject("num_key_value_heads",
                fmt::format("must divide num_attention_heads = {}", c.num_attention_heads));
  }
  if (c.head_dim % 2 != 0) text.reject("head_dim", "must be even (rotate-half RoPE)");
  c.sliding_window = text.positive("sliding_window");
  c.rope_theta = read_rope_theta(text);
  c.layer_types = read_layer_types(text, c.num_layers);
  c.layer_rope_theta = read_layer_rope_theta(text, c.layer_types, c.rope_theta);
  c.qk_scale_factor = text.positive_number("qk_scale_factor");
}

void read_moe(const ConfigReader& text, MuseSparkConfig& c) {
  check_mlp_layer_types(text, c.num_layers);
  c.moe_hidden_size = text.positive("moe_hidden_size");
  c.moe_intermediate_size = text.positive("moe_intermediate_size");
  c.num_experts = text.positive("num_local_experts");
  c.num_experts_per_token = text.positive("num_experts_per_tok");
  if (c.num_experts_per_token > kernels::kMaxExpertsPerToken) {
    text.reject("num_experts_per_tok",
                fmt::format("is above the {} experts per token megadecode routes",
                            kernels::kMaxExpertsPerToken));
  }
  if (c.num_experts_per_token > c.num_experts) {
    text.reject("num_experts_per_tok",
                fmt::format("exceeds num_local_experts = {}", c.num_experts));
  }
}

// Vendor layout: NVFP4 experts on every layer but the first and the last.
std::vector<WeightFormat> expected_expert_formats(const MuseSparkConfig& c) {
  std::vector<WeightFormat> formats(static_cast<std::size_t>(c.num_layers), WeightFormat::kBF16);
  if (!c.quantization.quantized()) return formats;
  for (int64_t l = 1; l + 1 < c.num_layers; ++l) {
    formats[static_cast<std::size_t>(l)] = WeightFormat::kNVFP4;
  }
  return formats;
}

void check_nvfp4_widths(const ConfigReader& text, const MuseSparkConfig& c) {
  if (!c.quantization.quantized()) return;
  // NVFP4 blocks run along the input axis: Hm for gate_up, I for down.
  for (const char* key : {"moe_hidden_size", "moe_intermediate_size"}) {
    if (text.integer(key) % kNvfp4Group != 0) {
      text.reject(key, fmt::format("must be a multiple of the NVFP4 block size {}", kNvfp4Group));
    }
  }
}

void read_vocab(const ConfigReader& text, MuseSparkConfig& c) {
  c.vocab_size = text.positive("vocab_size");
  // Test fixtures state vocab_used; the published model's comes from its tokenizer (§1).
  int64_t fallback = c.vocab_size == kPublishedVocab ? kPublishedVocabUsed : c.vocab_size;
  c.vocab_used = text.integer_or("vocab_used", fallback);
  if (c.vocab_used <= 0 || c.vocab_used > c.vocab_size) {
    text.reject("vocab_used", fmt::format("must be in 1..vocab_size {}", c.vocab_size));
  }
}

}  // namespace

double MuseSparkConfig::softmax_scale() const {
  return qk_scale_factor / std::sqrt(static_cast<double>(head_dim));
}

MuseLayerKind MuseSparkConfig::layer_kind(int64_t layer) const {
  return layer_types.at(static_cast<std::size_t>(layer));
}

int64_t MuseSparkConfig::num_full_attention_layers() const {
  return static_cast<int64_t>(
      std::count(layer_types.begin(), layer_types.end(), MuseLayerKind::kFullAttention));
}

DraftTarget MuseSparkConfig::draft_target() const {
  return DraftTarget{kModel, hidden_size, vocab_size, num_layers};
}

MuseSparkConfig parse_musespark_config(const ConfigFiles& files) {
  ConfigReader root(files.config_path, files.config, kModel);
  ConfigReader text = root.has("text_config") ? root.object("text_config") : root;
  check_fixed_settings(root, text);

  MuseSparkConfig c;
  c.hidden_size = text.positive("hidden_size");
  c.num_layers = text.positive("num_hidden_layers");
  read_vocab(text, c);
  read_attention(text, c);
  read_moe(text, c);
  c.rms_norm_eps = text.positive_number("rms_norm_eps");
  c.post_norm_eps = text.positive_number("post_norm_eps");
  c.residual_gate_temperature = text.positive_number("residual_gate_temperature");
  c.output_multiplier = text.positive_number("output_multiplier");
  c.final_logit_softcapping = text.positive_number("final_logit_softcapping");
  c.max_position_embeddings = text.integer_or("max_position_embeddings", 0);
  c.quantization = parse_nvfp4_quantization(files, root, text);
  check_nvfp4_widths(text, c);
  c.expert_formats = expected_expert_formats(c);
  c.eos_token_ids = eos_token_ids(files, {&text, &root}, c.vocab_size, EosPolicy::kGenerationFirst);
  return c;
}

}  // namespace md
