#include "models/qwen38/qwen38_config.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "base/error.h"
#include "kernels/moe_routing.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

constexpr char kModel[] = "qwen3_5";
constexpr char kLinearName[] = "linear_attention";
constexpr char kFullName[] = "full_attention";
// transformers' default when a config names neither layer_types nor an interval.
constexpr int64_t kDefaultFullAttentionInterval = 4;

constexpr char kMoeModel[] = "qwen3_5_moe";

// The nested form names the outer and the text model types in pairs: qwen3_5 / qwen3_5_text or
// qwen3_5_moe / qwen3_5_moe_text; the bare text form names only the second.
ConfigReader text_config_of(const ConfigReader& root) {
  const std::string type = root.string_or("model_type", "");
  if (root.has("text_config")) {
    const std::string outer = type == kMoeModel ? kMoeModel : kModel;
    root.expect("model_type", outer);
    ConfigReader text = root.object("text_config");
    text.expect("model_type", outer + "_text");
    return text;
  }
  if (type == kModel || type == kMoeModel) {
    root.missing("text_config",
                 fmt::format("a {} config nests the text model under text_config", type));
  }
  if (type != "qwen3_5_moe_text") root.expect("model_type", "qwen3_5_text");
  return root;
}

// hidden_act, as transformers' ACT2FN names it (the MLP's and the Gated DeltaNet conv's).
kernels::Activation read_hidden_act(const ConfigReader& text) {
  const std::string name = text.string_or("hidden_act", "silu");
  if (std::optional<kernels::Activation> act = kernels::activation_named(name)) return *act;
  text.reject("hidden_act",
              "unsupported (megadecode runs every parameter-free activation of transformers' "
              "ACT2FN: silu, gelu, gelu_pytorch_tanh, relu, ...; not prelu or xielu)");
}

// transformers' Qwen3_5MoeTextConfig: every layer's MLP is the sparse block, and it always
// renormalises the chosen probabilities (it reads no norm_topk_prob).
Qwen38Moe read_moe(const ConfigReader& text) {
  Qwen38Moe moe;
  moe.experts = text.positive("num_experts");
  moe.experts_per_token = text.positive("num_experts_per_tok");
  if (moe.experts_per_token > moe.experts) {
    text.reject("num_experts_per_tok", fmt::format("exceeds num_experts = {}", moe.experts));
  }
  if (moe.experts_per_token > kernels::kMaxExpertsPerToken) {
    text.reject("num_experts_per_tok",
                fmt::format("is above the {} experts per token megadecode routes",
                            kernels::kMaxExpertsPerToken));
  }
  moe.intermediate = text.positive("moe_intermediate_size");
  moe.shared_intermediate = text.positive("shared_expert_intermediate_size");
  return moe;
}

// transformers' Qwen3_5TextConfig: an explicit layer_types list wins; otherwise layer i is full
// attention when (i + 1) is a multiple of full_attention_interval (default 4: three Gated
// DeltaNet layers, then one attention layer). Any mix of the two kinds runs, including all of one.
std::vector<Qwen38LayerKind> read_layer_types(const ConfigReader& text, int64_t num_layers) {
  std::vector<Qwen38LayerKind> kinds;
  if (!text.has("layer_types")) {
    const int64_t interval = text.has("full_attention_interval")
                                 ? text.positive("full_attention_interval")
                                 : kDefaultFullAttentionInterval;
    for (int64_t i = 0; i < num_layers; ++i) {
      kinds.push_back((i + 1) % interval == 0 ? Qwen38LayerKind::kFullAttention
                                              : Qwen38LayerKind::kLinearAttention);
    }
    return kinds;
  }
  std::vector<std::string> names = text.string_list("layer_types");
  if (static_cast<int64_t>(names.size()) != num_layers) {
    text.reject("layer_types", fmt::format("has {} entries but num_hidden_layers is {}",
                                           names.size(), num_layers));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kLinearName) {
      kinds.push_back(Qwen38LayerKind::kLinearAttention);
    } else if (names[i] == kFullName) {
      kinds.push_back(Qwen38LayerKind::kFullAttention);
    } else {
      text.reject_element("layer_types", i,
                          fmt::format("unsupported ({} layers are \"{}\" or \"{}\")", kModel,
                                      kLinearName, kFullName));
    }
  }
  return kinds;
}

// Whether lm_head reads the embedding table. A nested config may say it at the top level (what
// Qwen3_5ForConditionalGeneration reads) and in text_config (what Qwen3_5ForCausalLM reads);
// the two must agree, or the checkpoint would mean different models to the two classes.
bool read_tie_word_embeddings(const ConfigReader& root, const ConfigReader& text) {
  const bool in_text = text.boolean_or("tie_word_embeddings", false);
  if (&root == &text || !root.has("tie_word_embeddings")) return in_text;
  const bool at_top = root.boolean("tie_word_embeddings");
  if (text.has("tie_word_embeddings") && at_top != in_text) {
    root.reject("tie_word_embeddings",
                fmt::format("is {} but text_config.tie_word_embeddings is {}", at_top, in_text));
  }
  return at_top;
}

struct RopeSettings {
  double theta = 0;
  double partial_rotary_factor = 0.25;
  const ConfigReader* factor_source = nullptr;  // where the factor was read, for errors
};

// rope_parameters (transformers >= 4.57) or the older rope_scaling; both may be absent.
void check_rope_object(const ConfigReader& rope) {
  rope.expect(rope.has("rope_type") ? "rope_type" : "type", "default");
  rope.expect("mrope_interleaved", true);
}

void check_rotary(const Qwen38Config& config, const ConfigReader& source) {
  double rotary = static_cast<double>(config.head_dim) * config.partial_rotary_factor;
  bool ok = config.partial_rotary_factor > 0 && rotary == std::floor(rotary) &&
            rotary <= static_cast<double>(config.head_dim) && static_cast<int64_t>(rotary) % 2 == 0;
  if (!ok) {
    source.reject("partial_rotary_factor",
                  fmt::format("rotary dim = head_dim {} x factor = {} must be an even integer "
                              "in (0, head_dim]",
                              config.head_dim, rotary));
  }
}

void check_mrope_section(const ConfigReader& rope, int64_t rotary_dim) {
  if (!rope.has("mrope_section")) return;
  std::vector<int64_t> section = rope.integer_list("mrope_section");
  int64_t sum = std::accumulate(section.begin(), section.end(), int64_t{0});
  if (sum != rotary_dim / 2) {
    rope.reject("mrope_section",
                fmt::format("sums to {} but rotary_dim / 2 = {}", sum, rotary_dim / 2));
  }
}

void read_rope(const ConfigReader& text, Qwen38Config& config) {
  std::optional<ConfigReader> rope = text.optional_object("rope_parameters");
  if (!rope) rope = text.optional_object("rope_scaling");
  if (rope) check_rope_object(*rope);
  config.rope_theta = rope && rope->has("rope_theta") ? rope->positive_number("rope_theta")
                                                      : text.positive_number("rope_theta");
  const ConfigReader* source = &text;
  if (rope && rope->has("partial_rotary_factor")) source = &*rope;
  config.partial_rotary_factor = source->number_or("partial_rotary_factor", 0.25);
  check_rotary(config, *source);
  if (rope) check_mrope_section(*rope, config.rotary_dim());
}

void check_heads(const ConfigReader& text, const Qwen38Config& config) {
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    text.reject("num_key_value_heads",
                fmt::format("must divide num_attention_heads = {}", config.num_attention_heads));
  }
  if (config.linear_num_value_heads % config.linear_num_key_heads != 0) {
    text.reject("linear_num_key_heads", fmt::format("must divide linear_num_value_heads = {}",
                                                    config.linear_num_value_heads));
  }
}

// Of §1.3's fixed settings only the weight format is still refused: attention_bias and hidden_act
// are read (transformers honours both), and attn_output_gate, output_gate_type and
// mamba_ssm_dtype are not read by transformers' qwen3_5 / qwen3_5_moe, which runs the gated
// attention and the f32 state whatever they say: so are they here.
void check_fixed_settings(const ConfigReader& root, const ConfigReader& text) {
  std::string why = fmt::format("{} weights are bf16 only", kModel);
  text.forbid("quantization_config", why);
  root.forbid("quantization_config", why);
}

}  // namespace

const char* Qwen38Config::text_model_type() const {
  return is_moe() ? "qwen3_5_moe_text" : "qwen3_5_text";
}

int64_t Qwen38Config::rotary_dim() const {
  return std::llround(static_cast<double>(head_dim) * partial_rotary_factor);
}

Qwen38LayerKind Qwen38Config::layer_kind(int64_t layer) const {
  return layer_types.at(static_cast<std::size_t>(layer));
}

bool Qwen38Config::is_full_attention(int64_t layer) const {
  return layer_kind(layer) == Qwen38LayerKind::kFullAttention;
}

int64_t Qwen38Config::num_full_attention_layers() const {
  return static_cast<int64_t>(
      std::count(layer_types.begin(), layer_types.end(), Qwen38LayerKind::kFullAttention));
}

int64_t Qwen38Config::linear_attention_ordinal(int64_t layer) const {
  if (is_full_attention(layer)) fail("layer {} is not a Gated DeltaNet layer", layer);
  return layers_before(layer, Qwen38LayerKind::kLinearAttention);
}

int64_t Qwen38Config::full_attention_ordinal(int64_t layer) const {
  if (!is_full_attention(layer)) fail("layer {} is not an attention layer", layer);
  return layers_before(layer, Qwen38LayerKind::kFullAttention);
}

int64_t Qwen38Config::layers_before(int64_t layer, Qwen38LayerKind kind) const {
  return static_cast<int64_t>(std::count(layer_types.begin(), layer_types.begin() + layer, kind));
}

DraftTarget Qwen38Config::draft_target() const {
  return DraftTarget{kModel, hidden_size, vocab_size, num_layers};
}

Qwen38Config parse_qwen38_config(const ConfigFiles& files) {
  ConfigReader root(files.config_path, files.config, kModel);
  ConfigReader text = text_config_of(root);
  check_fixed_settings(root, text);

  Qwen38Config config;
  config.hidden_size = text.positive("hidden_size");
  const bool moe = root.string_or("model_type", "") == kMoeModel ||
                   text.string_or("model_type", "") == "qwen3_5_moe_text";
  if (moe) {
    config.moe = read_moe(text);
  } else {
    config.intermediate_size = text.positive("intermediate_size");
  }
  config.num_layers = text.positive("num_hidden_layers");
  config.num_attention_heads = text.positive("num_attention_heads");
  config.num_key_value_heads = text.positive("num_key_value_heads");
  config.head_dim = text.positive("head_dim");
  config.linear_num_key_heads = text.positive("linear_num_key_heads");
  config.linear_key_head_dim = text.positive("linear_key_head_dim");
  config.linear_num_value_heads = text.positive("linear_num_value_heads");
  config.linear_value_head_dim = text.positive("linear_value_head_dim");
  config.linear_conv_kernel =
      text.has("linear_conv_kernel_dim") ? text.positive("linear_conv_kernel_dim") : 4;
  config.rms_norm_eps = text.positive_number("rms_norm_eps");
  config.vocab_size = text.positive("vocab_size");
  config.max_position_embeddings = text.positive("max_position_embeddings");
  check_heads(text, config);
  read_rope(text, config);
  config.layer_types = read_layer_types(text, config.num_layers);
  config.hidden_act = read_hidden_act(text);
  config.attention_bias = text.boolean_or("attention_bias", false);
  config.tie_word_embeddings = read_tie_word_embeddings(root, text);
  // Generation stops on <|endoftext|> (text_config) and <|im_end|> (top level /
  // generation_config.json); the spec requires both.
  config.eos_token_ids = eos_token_ids(files, {&text, &root}, config.vocab_size, EosPolicy::kUnion);
  return config;
}

}  // namespace md
