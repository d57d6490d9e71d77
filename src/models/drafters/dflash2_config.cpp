#include "models/drafters/dflash2_config.h"

#include <optional>

#include "base/error.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

constexpr char kModel[] = "DFlash2DraftModel";

void check_fixed_settings(const ConfigReader& config) {
  config.expect("model_type", "qwen3");
  config.expect("attention_bias", false);
  config.expect("hidden_act", "silu");
  config.expect("tie_word_embeddings", false);
  config.expect("use_sliding_window", true);
  // Bidirectional inside the block (§13 item 9); a causal drafter is a different model.
  config.expect("is_causal", false);
  config.forbid("quantization_config", fmt::format("{} weights are bf16", kModel));
  if (std::optional<ConfigReader> rope = config.optional_object("rope_parameters")) {
    rope->expect("rope_type", "default");
  }
}

void check_layer_types(const ConfigReader& config, int64_t layers) {
  if (!config.has("layer_types")) return;
  std::vector<std::string> types = config.string_list("layer_types");
  if (static_cast<int64_t>(types.size()) != layers) {
    config.reject("layer_types",
                  fmt::format("has {} entries but num_hidden_layers is {}", types.size(), layers));
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "sliding_attention") {
      config.reject_element("layer_types", i,
                            fmt::format("unsupported ({} needs \"sliding_attention\")", kModel));
    }
  }
}

double read_rope_theta(const ConfigReader& config) {
  std::optional<ConfigReader> rope = config.optional_object("rope_parameters");
  if (rope && rope->has("rope_theta")) return rope->positive_number("rope_theta");
  return config.positive_number("rope_theta");
}

// The optional unary-logit and embedding scalings of Z1/V1 are not implemented: only their
// neutral values are accepted.
void check_dflash_extras(const ConfigReader& dflash) {
  dflash.expect("output_multiplier", 1.0);
  dflash.forbid("final_logit_softcapping", fmt::format("{} implements no logit softcap", kModel));
  dflash.expect("input_embedding_scale", 1.0);
}

void read_dflash_config(const ConfigReader& dflash, DFlash2Config& c) {
  check_dflash_extras(dflash);
  c.block_size = dflash.positive("block_size");
  if (c.block_size < 2) dflash.reject("block_size", "must be at least 2 (an anchor and a draft)");
  c.target_layer_ids = dflash.integer_list("target_layer_ids");
  if (c.target_layer_ids.empty()) dflash.reject("target_layer_ids", "must name at least one tap");
  for (std::size_t i = 0; i < c.target_layer_ids.size(); ++i) {
    int64_t id = c.target_layer_ids[i];
    // The last layer's HF hidden state is the final-normed output: tapping it is ambiguous.
    if (id < 0 || id >= c.num_target_layers - 1) {
      dflash.reject_element(
          "target_layer_ids", i,
          fmt::format("must lie in [0, {}) (num_target_layers - 1)", c.num_target_layers - 1));
    }
  }
  c.mask_token_id = dflash.integer("mask_token_id");
  if (c.mask_token_id < 0 || c.mask_token_id >= c.vocab_size) {
    dflash.reject("mask_token_id", fmt::format("must be < vocab_size {}", c.vocab_size));
  }
  c.conv_kernel_size = dflash.positive("conv_kernel_size");
  c.conv_group_size = dflash.positive("conv_group_size");
  if (c.hidden_size % c.conv_group_size != 0) {
    dflash.reject("conv_group_size", fmt::format("must divide hidden_size {}", c.hidden_size));
  }
  c.selector_rank = dflash.positive("selector_rank");
  c.selector_top_k = dflash.positive("selector_top_k");
  if (c.selector_top_k > c.vocab_size) {
    dflash.reject("selector_top_k", fmt::format("exceeds vocab_size {}", c.vocab_size));
  }
}

void fail_mismatch(const DFlash2Config& draft, std::string_view field, int64_t value,
                   int64_t wanted, const DraftTarget& target) {
  fail("{}: {} = {}: must equal the target's {} ({})", draft.config_path, field, value, wanted,
       target.model);
}

}  // namespace

DFlash2Config parse_dflash2_config(const ConfigFiles& files) {
  ConfigReader config(files.config_path, files.config, kModel);
  check_fixed_settings(config);
  DFlash2Config c;
  c.config_path = files.config_path;
  c.hidden_size = config.positive("hidden_size");
  c.num_layers = config.positive("num_hidden_layers");
  c.num_attention_heads = config.positive("num_attention_heads");
  c.num_key_value_heads = config.positive("num_key_value_heads");
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    config.reject("num_key_value_heads",
                  fmt::format("must divide num_attention_heads = {}", c.num_attention_heads));
  }
  c.head_dim = config.positive("head_dim");
  if (c.head_dim % 2 != 0) config.reject("head_dim", "must be even (rotate-half RoPE)");
  c.intermediate_size = config.positive("intermediate_size");
  c.rms_norm_eps = config.positive_number("rms_norm_eps");
  c.rope_theta = read_rope_theta(config);
  c.sliding_window = config.positive("sliding_window");
  c.vocab_size = config.positive("vocab_size");
  c.num_target_layers = config.positive("num_target_layers");
  check_layer_types(config, c.num_layers);
  read_dflash_config(config.object("dflash_config"), c);
  return c;
}

void check_dflash2_target(const DFlash2Config& draft, const DraftTarget& target) {
  if (draft.hidden_size != target.hidden_size) {
    fail_mismatch(draft, "hidden_size", draft.hidden_size, target.hidden_size, target);
  }
  if (draft.vocab_size != target.vocab_size) {
    fail_mismatch(draft, "vocab_size", draft.vocab_size, target.vocab_size, target);
  }
  if (draft.num_target_layers != target.num_layers) {
    fail_mismatch(draft, "num_target_layers", draft.num_target_layers, target.num_layers, target);
  }
}

ConfigFootprint dflash2_footprint(const DFlash2Config& c, const FootprintOptions& options) {
  ConfigFootprint f;
  int64_t h = c.hidden_size;
  f.architecture = fmt::format(
      "DFlash2 block drafter: {} bidirectional sliding-window ({}) layers, hidden {}, {} q / {} "
      "kv heads x {}, MLP {}, block {}, taps {} of {} target layers, selector rank {} top-{}",
      c.num_layers, c.sliding_window, h, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
      c.intermediate_size, c.block_size, c.num_taps(), c.num_target_layers, c.selector_rank,
      c.selector_top_k);
  f.step_name = fmt::format("draft round (block of {})", c.block_size);
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < c.num_layers; ++l) layers.push_back(l);
  f.layer_kinds.push_back(
      LayerKindRow{"conv + attention + conv + MLP", layers,
                   fmt::format("dynamic block conv k={} groups of {}, rotary {} (theta {:g})",
                               c.conv_kernel_size, c.conv_group_size, c.head_dim, c.rope_theta)});
  f.add_dense(WeightKind::kDraftInput, WeightFormat::kBF16, h * c.fc_in_features());
  int64_t n = c.num_layers;
  f.add_dense(WeightKind::kAttention, WeightFormat::kBF16,
              n * (2 * c.q_dim() * h + 2 * c.kv_dim() * h));
  f.add_dense(WeightKind::kMlp, WeightFormat::kBF16, n * 3 * c.intermediate_size * h);
  // attention_conv and mlp_conv: base_kernel [2][k][H] and kernel_projection [rows, H].
  f.add_dense(WeightKind::kBlockConv, WeightFormat::kBF16,
              n * 2 * (2 * c.conv_kernel_size * h + c.kernel_projection_rows() * h));
  // input/post-attention norms and q/k norms per layer; hidden_norm and the final norm.
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, n * (2 * h + 2 * c.head_dim) + 2 * h);
  f.add_dense(WeightKind::kDraftHead, WeightFormat::kBF16, c.selector_rank * h);
  // Predecessor and successor codebooks are looked up by token: one predecessor row and top-k
  // successor rows per drafted position.
  int64_t codebook_rows = (c.block_size - 1) * (1 + c.selector_top_k);
  f.add_weights(WeightKind::kDraftHead, WeightFormat::kBF16, 2 * c.vocab_size * c.selector_rank,
                2 * c.vocab_size * c.selector_rank * 2, codebook_rows * c.selector_rank * 2);
  int64_t window = c.sliding_window + c.block_size;
  f.state.push_back(StateGroup{"draft context features",
                               fmt::format("ring [{}][{}] bf16", window, h), 0, h * 2, window,
                               true});
  f.state.push_back(StateGroup{
      "draft context K/V",
      fmt::format("{} layers x {{K,V}} x ring [{}][{}][{}] {}", n, window, c.num_key_value_heads,
                  c.head_dim, weight_format_name(options.kv_cache)),
      0, n * 2 * c.kv_dim() * dense_element_bytes(options.kv_cache), window, true});
  f.notes.push_back("borrows the target's embed_tokens and lm_head (not counted here)");
  return f;
}

}  // namespace md
