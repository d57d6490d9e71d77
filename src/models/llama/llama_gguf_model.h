// A Llama-architecture model loaded from one GGUF file (e.g. SmolLM2-135M-Instruct Q4_1) and its
// plain reference forward: weights stay in their GGUF block format in the mapped file and each
// row is dequantised to f32 as it is used; activations and the KV cache are f32.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "io/gguf_file.h"
#include "kernels/rope.h"
#include "models/language_model.h"
#include "models/llama/llama_config.h"

namespace md {

// A [rows][cols] weight in a GGUF block format, rows `row_bytes` apart in the mapping.
struct GgufMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  std::size_t row_bytes = 0;
};

struct LlamaLayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  GgufMatrix q, k, v, o, gate, up, down;
};

class LlamaGgufModel final : public LanguageModel {
 public:
  // Throws md::Error for another architecture, unsupported settings or weight formats, and
  // tensors missing or shaped unlike the metadata says.
  LlamaGgufModel(const std::string& path, const ModelRunOptions& options);

  std::string description() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_context() const override { return config_.max_position_embeddings; }
  std::vector<int32_t> stop_token_ids() const override;
  std::size_t state_bytes_per_token() const override;
  std::size_t state_bytes_fixed() const override { return 0; }
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  std::size_t decode_weight_bytes() const override;
  std::size_t weight_bytes() const override { return file_.file_bytes(); }

  const LlamaConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }

 private:
  void matmul(const GgufMatrix& w, const float* x, int64_t rows, float* y);
  void attention(class LlamaState& state, const LlamaLayerWeights& layer, int64_t layer_index,
                 const float* x, int64_t rows, float* out);

  GgufFile file_;
  LlamaConfig config_;
  GgufMatrix embedding_;
  GgufMatrix output_;  // the embedding itself when tied
  std::vector<float> output_norm_;
  std::vector<LlamaLayerWeights> layers_;
  std::vector<float> inv_freq_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace md
