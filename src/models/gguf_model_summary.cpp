#include "models/gguf_model_summary.h"

#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "models/llama/llama_gguf_config.h"
#include "models/qwen38/qwen38_gguf_config.h"

namespace md {

namespace {

WeightFormat format_of(const GgufFile& file, const GgufTensor& t) {
  switch (t.type) {
    case GgmlType::kF32:
      return WeightFormat::kF32;
    case GgmlType::kF16:
      return WeightFormat::kF16;
    case GgmlType::kBF16:
      return WeightFormat::kBF16;
    case GgmlType::kQ8_0:
      return WeightFormat::kQ8_0;
    case GgmlType::kQ4_0:
      return WeightFormat::kQ4_0;
    case GgmlType::kQ4_1:
      return WeightFormat::kQ4_1;
    case GgmlType::kQ4_K:
      return WeightFormat::kQ4_K;
    case GgmlType::kQ6_K:
      return WeightFormat::kQ6_K;
    case GgmlType::kQ5_0:
      return WeightFormat::kQ5_0;
    case GgmlType::kQ5_K:
      return WeightFormat::kQ5_K;
    default:
      fail("{}: tensor '{}' is {}, a format megadecode cannot read yet", file.path(), t.name,
           ggml_type_name(t.type));
  }
}

bool has(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

// The block a tensor belongs to ("blk.N."), or nullopt for a global one.
std::optional<int64_t> block_of(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  const std::size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos) return std::nullopt;
  return std::stoll(std::string(name.substr(4, dot - 4)));
}

// What a llama.cpp tensor name holds. `linear(block)` says whether a block is a Gated DeltaNet
// layer (its attn_qkv / attn_gate are the delta net's projections); blocks at or past `blocks`
// (multi-token-prediction layers) are not part of the model.
template <typename IsLinear>
std::optional<WeightKind> kind_of(std::string_view name, int64_t blocks, IsLinear linear) {
  if (name.starts_with("token_embd.")) return WeightKind::kEmbedding;
  if (name.starts_with("output.")) return WeightKind::kLmHead;
  const std::optional<int64_t> block = block_of(name);
  if (block && *block >= blocks) return std::nullopt;
  if (name.ends_with("_norm.weight") && !has(name, "ssm_norm")) return WeightKind::kNorms;
  if (has(name, "_exps.")) return WeightKind::kRoutedExperts;
  if (has(name, "_shexp.")) return WeightKind::kSharedExperts;
  if (has(name, ".ffn_gate_inp.")) return WeightKind::kRouter;
  if (has(name, ".ffn_")) return WeightKind::kMlp;
  if (has(name, ".ssm_")) return WeightKind::kLinearAttention;
  if (block && linear(*block)) return WeightKind::kLinearAttention;
  if (has(name, ".attn_")) return WeightKind::kAttention;
  return WeightKind::kNorms;
}

// Replaces the config's assumed weights with the file's tensors. A token reads `expert_share`
// (experts per token / experts) of the routed experts' stacks.
template <typename IsLinear>
void count_tensors(const GgufFile& file, int64_t blocks, bool tied, IsLinear linear,
                   double expert_share, ConfigFootprint& f) {
  f.weights.clear();
  for (const GgufTensor& t : file.tensors()) {
    const std::optional<WeightKind> kind = kind_of(t.name, blocks, linear);
    if (!kind) continue;
    const WeightFormat format = format_of(file, t);
    const auto bytes = static_cast<int64_t>(t.nbytes);
    if (*kind == WeightKind::kEmbedding) {
      // One row read per token; tied, the whole table is read again as lm_head.
      f.add_weights(*kind, format, t.numel(), bytes, bytes / std::max<int64_t>(1, t.rows()));
      if (tied) f.add_weights(WeightKind::kLmHead, format, 0, 0, bytes, t.numel());
      continue;
    }
    if (*kind == WeightKind::kRoutedExperts) {
      f.add_weights(*kind, format, t.numel(), bytes,
                    static_cast<int64_t>(static_cast<double>(bytes) * expert_share));
      continue;
    }
    f.add_weights(*kind, format, t.numel(), bytes, bytes);
  }
  f.notes.clear();
  f.notes.push_back(
      fmt::format("weights as stored in {} ({} tensors)", file.path(), file.tensors().size()));
}

}  // namespace

ModelSummary summarize_gguf_model(const GgufFile& file, const SummaryOptions& options) {
  const std::string architecture = file.string_or("general.architecture", "");
  if (architecture == "qwen35" || architecture == "qwen35moe") {
    const Qwen38Config config = parse_qwen38_gguf_config(file);
    ConfigFootprint f = qwen38_footprint(config, options.footprint);
    count_tensors(
        file, config.num_layers, config.tie_word_embeddings,
        [&](int64_t block) { return !config.is_full_attention(block); },
        config.is_moe() ? static_cast<double>(config.moe.experts_per_token) /
                              static_cast<double>(config.moe.experts)
                        : 0.0,
        f);
    return summarize_footprint(ModelFamily::kQwen38, std::move(f), options);
  }
  const LlamaConfig config = parse_llama_gguf_config(file);
  ConfigFootprint f = model_footprint(config, options.footprint);
  count_tensors(
      file, config.num_layers, config.tie_word_embeddings, [](int64_t) { return false; }, 0.0, f);
  return summarize_footprint(ModelFamily::kLlama, std::move(f), options);
}

}  // namespace md
