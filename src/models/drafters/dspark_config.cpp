#include "models/drafters/dspark_config.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

constexpr char kModel[] = "dspark";
constexpr int64_t kDefaultBlockSize = 8;  // the reference computes 8 rows per round
constexpr int64_t kFirstTapLayer = 2;

// The speculators fields that select variants this spec does not cover.
void check_top_level(const ConfigReader& config) {
  config.expect("speculators_model_type", "dspark", ConfigReader::Absent::kRefuse);
  config.expect("markov_head_type", "vanilla");
  config.expect("fc_norm", false);
  config.expect("aux_hidden_stream", "prefix");
  config.expect("tie_word_embeddings", false);
  // Slot k predicts the token after anchor + k (the anchor row drafts too); false would shift
  // every slot by one.
  config.expect("sample_from_anchor", true);
  config.expect("sliding_window_non_causal", false);  // the block is causal (§14 item 7)
  if (std::optional<ConfigReader> speculators = config.optional_object("speculators_config")) {
    speculators->expect("algorithm", "dspark");
  }
}

void check_layers(const ConfigReader& layer, int64_t num_layers) {
  layer.expect("hidden_act", "silu");
  layer.expect("attention_bias", false);
  layer.expect("is_causal", true);  // sliding_attention layers are causal inside the block
  if (std::optional<ConfigReader> rope = layer.optional_object("rope_parameters")) {
    rope->expect("rope_type", "default");
  }
  if (!layer.has("layer_types")) return;
  std::vector<std::string> types = layer.string_list("layer_types");
  if (static_cast<int64_t>(types.size()) != num_layers) {
    layer.reject("layer_types", fmt::format("has {} entries but num_hidden_layers is {}",
                                            types.size(), num_layers));
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "sliding_attention") {
      layer.reject_element("layer_types", i,
                           fmt::format("unsupported ({} needs \"sliding_attention\")", kModel));
    }
  }
}

double read_rope_theta(const ConfigReader& layer) {
  std::optional<ConfigReader> rope = layer.optional_object("rope_parameters");
  if (rope && rope->has("rope_theta")) return rope->positive_number("rope_theta");
  return layer.positive_number("rope_theta");
}

void read_layer_config(const ConfigReader& layer, DSparkConfig& c) {
  c.hidden_size = layer.positive("hidden_size");
  c.num_layers = layer.positive("num_hidden_layers");
  c.num_attention_heads = layer.positive("num_attention_heads");
  c.num_key_value_heads = layer.positive("num_key_value_heads");
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    layer.reject("num_key_value_heads",
                 fmt::format("must divide num_attention_heads = {}", c.num_attention_heads));
  }
  c.head_dim = layer.positive("head_dim");
  if (c.head_dim % 2 != 0) layer.reject("head_dim", "must be even (rotate-half RoPE)");
  c.intermediate_size = layer.positive("intermediate_size");
  c.vocab_size = layer.positive("vocab_size");
  c.sliding_window = layer.positive("sliding_window");
  c.rope_theta = read_rope_theta(layer);
  c.rms_norm_eps = layer.positive_number("rms_norm_eps");
  check_layers(layer, c.num_layers);
}

void read_taps(const ConfigReader& config, DSparkConfig& c) {
  const char* key = "aux_hidden_state_layer_ids";
  c.aux_hidden_state_layer_ids = config.integer_list(key);
  const auto& ids = c.aux_hidden_state_layer_ids;
  if (ids.empty()) config.reject(key, "must name at least one tap");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < kFirstTapLayer) {
      config.reject_element(key, i, fmt::format("tap ids start at {}", kFirstTapLayer));
    }
    if (std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i), ids[i]) !=
        ids.begin() + static_cast<std::ptrdiff_t>(i)) {
      config.reject_element(key, i, "tap ids must be distinct");
    }
  }
}

}  // namespace

DSparkConfig parse_dspark_config(const ConfigFiles& files) {
  ConfigReader config(files.config_path, files.config, kModel);
  check_top_level(config);
  DSparkConfig c;
  c.config_path = files.config_path;
  read_layer_config(config.object("transformer_layer_config"), c);
  c.draft_vocab_size = config.integer_or("draft_vocab_size", c.vocab_size);
  if (c.draft_vocab_size < 1 || c.draft_vocab_size > c.vocab_size) {
    config.reject("draft_vocab_size",
                  fmt::format("must lie in 1..vocab_size {} (the draft vocabulary is a subset of "
                              "the target's, mapped by d2t)",
                              c.vocab_size));
  }
  read_taps(config, c);
  c.mask_token_id = config.integer("mask_token_id");
  if (c.mask_token_id < 0 || c.mask_token_id >= c.vocab_size) {
    config.reject("mask_token_id", fmt::format("must be < vocab_size {}", c.vocab_size));
  }
  c.markov_rank = config.positive("markov_rank");
  c.block_size = config.integer_or("block_size", kDefaultBlockSize);
  if (c.block_size < 2) config.reject("block_size", "must be at least 2 (an anchor and a draft)");
  // speculators' defaults: a confidence head over [hidden ; markov_w1[prev]].
  c.enable_confidence_head = config.boolean_or("enable_confidence_head", true);
  c.confidence_head_with_markov =
      c.enable_confidence_head && config.boolean_or("confidence_head_with_markov", true);
  return c;
}

void check_dspark_target(const DSparkConfig& draft, const DraftTarget& target) {
  if (draft.hidden_size != target.hidden_size) {
    fail("{}: transformer_layer_config.hidden_size = {}: must equal the target's {} ({})",
         draft.config_path, draft.hidden_size, target.hidden_size, target.model);
  }
  if (draft.vocab_size != target.vocab_size) {
    fail("{}: transformer_layer_config.vocab_size = {}: must equal the target's {} ({})",
         draft.config_path, draft.vocab_size, target.vocab_size, target.model);
  }
  const auto& ids = draft.aux_hidden_state_layer_ids;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] > target.num_layers - 1) {
      fail(
          "{}: aux_hidden_state_layer_ids[{}] = {}: must lie in {}..{} for a {}-layer target "
          "({})",
          draft.config_path, i, ids[i], kFirstTapLayer, target.num_layers - 1, target.num_layers,
          target.model);
    }
  }
}

ConfigFootprint dspark_footprint(const DSparkConfig& c, const FootprintOptions& options) {
  ConfigFootprint f;
  int64_t h = c.hidden_size;
  f.architecture = fmt::format(
      "DSpark block drafter: {} causal sliding-window ({}) layers, hidden {}, {} q / {} kv heads "
      "x {}, SwiGLU MLP {}, block {}, {} taps, Markov head rank {}{}",
      c.num_layers, c.sliding_window, h, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
      c.intermediate_size, c.block_size, c.num_taps(), c.markov_rank,
      c.enable_confidence_head ? ", confidence head" : "");
  f.step_name = fmt::format("draft round (block of {})", c.block_size);
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < c.num_layers; ++l) layers.push_back(l);
  f.layer_kinds.push_back(LayerKindRow{"attention + MLP", layers,
                                       fmt::format("GQA group {}, rotary {} (theta {:g})",
                                                   c.gqa_group(), c.head_dim, c.rope_theta)});
  int64_t embedding = c.vocab_size * h;
  // The drafter's own table; each block row looks up one token.
  f.add_weights(WeightKind::kEmbedding, WeightFormat::kBF16, embedding, embedding * 2,
                c.block_size * h * 2);
  f.add_dense(WeightKind::kDraftInput, WeightFormat::kBF16, h * c.fc_in_features());
  int64_t n = c.num_layers;
  f.add_dense(WeightKind::kAttention, WeightFormat::kBF16,
              n * (2 * c.q_dim() * h + 2 * c.kv_dim() * h));
  f.add_dense(WeightKind::kMlp, WeightFormat::kBF16, n * 3 * c.intermediate_size * h);
  // input/post-attention and q/k norms per layer; hidden_norm and the final norm.
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, n * (2 * h + 2 * c.head_dim) + 2 * h);
  int64_t markov = c.vocab_size * c.markov_rank;
  // markov_w1 is an embedding (row = previous token); markov_w2 a Linear rank -> vocab.
  f.add_weights(WeightKind::kDraftHead, WeightFormat::kBF16, markov, markov * 2,
                c.block_size * c.markov_rank * 2);
  f.add_dense(WeightKind::kDraftHead, WeightFormat::kBF16, c.draft_vocab_size * c.markov_rank);
  if (c.enable_confidence_head) {
    int64_t inputs = h + (c.confidence_head_with_markov ? c.markov_rank : 0);
    f.add_dense(WeightKind::kDraftHead, WeightFormat::kBF16, inputs + 1);  // proj + bias
  }
  f.add_dense(WeightKind::kLmHead, WeightFormat::kBF16, c.draft_vocab_size * h);
  int64_t kv_bytes = dense_element_bytes(options.kv_cache);
  f.state.push_back(StateGroup{
      "draft context K/V ring",
      fmt::format("{} layers x {{K,V}} x [{}][{}][{}] {} + i32 positions", n, c.sliding_window,
                  c.num_key_value_heads, c.head_dim, weight_format_name(options.kv_cache)),
      0, n * 2 * c.kv_dim() * kv_bytes + 4, c.sliding_window, true});
  return f;
}

}  // namespace md
