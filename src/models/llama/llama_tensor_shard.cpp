#include "models/llama/llama_tensor_shard.h"

#include <fmt/format.h>

#include <memory>
#include <utility>
#include <vector>

#include "base/error.h"
#include "models/common/slice_source.h"
#include "models/common/tensor_shard.h"

namespace md {

namespace {

using shard::scaled;

GgufMatrix rows_of(shard::Slicer& take, const GgufMatrix& w, shard::Range range, std::string key) {
  return take.rows(kernels::WeightMatrix::of(w), range, std::move(key)).gguf();
}
GgufMatrix columns_of(shard::Slicer& take, const GgufMatrix& w, shard::Range range,
                      std::string key) {
  return take.columns(kernels::WeightMatrix::of(w), range, std::move(key)).gguf();
}

}  // namespace

LlamaShard shard_llama(const LlamaConfig& config, LlamaGgufWeights weights, int rank, int ranks,
                       const std::string& model, shard::SliceSource* slices) {
  const shard::HeadShard heads = shard::attention_heads(
      config.num_attention_heads, config.num_key_value_heads, rank, ranks, model);
  const int64_t hd = config.head_dim;
  // FFN columns in whole blocks of every layer's down matrix (GGUF mixes formats by layer).
  int64_t unit = 1;
  for (const LlamaLayerWeights& l : weights.layers) {
    unit = std::max(unit, shard::column_unit(kernels::WeightMatrix::of(l.down)));
  }
  if (config.intermediate_size % unit != 0 || config.intermediate_size / unit < ranks) {
    fail("{}: {} FFN columns cannot be shared among {} ranks in blocks of {}", model,
         config.intermediate_size, ranks, unit);
  }
  const shard::Range ffn = shard::even_part(config.intermediate_size, ranks, rank, unit);
  const shard::Range vocab = shard::even_part(config.vocab_size, ranks, rank);

  LlamaShard out{config, {}};
  out.config.num_attention_heads = heads.heads.size();
  out.config.num_key_value_heads = heads.kv_heads.size();
  out.config.intermediate_size = ffn.size();
  LlamaGgufWeights& w = out.weights;
  w.owned = std::move(weights.owned);  // the HF q/k rows the views below may point into
  w.embedding = weights.embedding;
  shard::Slicer take(slices, w.owned, model);
  w.slice_storage = take.storage();
  w.output = rows_of(take, weights.output, vocab, "output");
  w.output_norm = std::move(weights.output_norm);
  for (std::size_t i = 0; i < weights.layers.size(); ++i) {
    LlamaLayerWeights& whole = weights.layers[i];
    const std::string tag = fmt::format("layer {} ", i);
    LlamaLayerWeights l;
    l.attn_norm = std::move(whole.attn_norm);
    l.ffn_norm = std::move(whole.ffn_norm);
    l.q = rows_of(take, whole.q, scaled(heads.heads, hd), tag + "q");
    l.k = rows_of(take, whole.k, scaled(heads.kv_heads, hd), tag + "k");
    l.v = rows_of(take, whole.v, scaled(heads.kv_heads, hd), tag + "v");
    l.o = columns_of(take, whole.o, scaled(heads.heads, hd), tag + "o");
    l.gate = rows_of(take, whole.gate, ffn, tag + "gate");
    l.up = rows_of(take, whole.up, ffn, tag + "up");
    l.down = columns_of(take, whole.down, ffn, tag + "down");
    w.layers.push_back(std::move(l));
  }
  return out;
}

}  // namespace md
