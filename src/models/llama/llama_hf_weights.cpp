#include "models/llama/llama_hf_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul.h"
#include "models/llama/llama_testing.h"

namespace md {

namespace {

const TensorView& tensor(const Checkpoint& checkpoint, const std::string& name) {
  const TensorView* t = checkpoint.find(name);
  if (t == nullptr) {
    fail("checkpoint {}: tensor '{}' is missing (llama needs it)", checkpoint.path(), name);
  }
  return *t;
}

GgmlType ggml_type_of(const TensorView& t) {
  switch (t.dtype) {
    case DType::kBF16:
      return GgmlType::kBF16;
    case DType::kF16:
      return GgmlType::kF16;
    case DType::kF32:
      return GgmlType::kF32;
    default:
      fail("{}: tensor '{}' is {} but llama reads BF16, F16 or F32", t.file, t.name,
           dtype_name(t.dtype));
  }
}

void check_shape(const TensorView& t, std::initializer_list<int64_t> shape) {
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end())) {
    fail("{}: tensor '{}' has shape [{}] but the config implies [{}]", t.file, t.name,
         fmt::join(t.shape, ", "), fmt::join(shape, ", "));
  }
}

// A [rows][cols] matrix read in place: safetensors rows are contiguous, row-major like GGUF's.
// The bf16 kernels read 16-bit words: a tensor the file does not align to 2 bytes is copied.
GgufMatrix bind_matrix(const Checkpoint& checkpoint, const std::string& name, int64_t rows,
                       int64_t cols, LlamaGgufWeights& w) {
  const TensorView& t = tensor(checkpoint, name);
  GgmlType type = ggml_type_of(t);
  check_shape(t, {rows, cols});
  GgufMatrix m{type, t.data, rows, cols, static_cast<std::size_t>(cols) * dtype_size(t.dtype)};
  if (reinterpret_cast<std::uintptr_t>(m.data) % 2 != 0) {
    auto copy = std::make_unique<std::uint8_t[]>(t.nbytes);
    std::memcpy(copy.get(), t.data, t.nbytes);
    m.data = copy.get();
    w.owned.push_back(std::move(copy));
  }
  if (!kernels::gguf_matmul_accepts(m)) {
    fail("{}: tensor '{}' ({}) cannot be read by the matmul kernels", t.file, name, t.describe());
  }
  return m;
}

std::vector<float> bind_vector(const Checkpoint& checkpoint, const std::string& name, int64_t n) {
  const TensorView& t = tensor(checkpoint, name);
  GgmlType type = ggml_type_of(t);
  check_shape(t, {n});
  std::vector<float> values(static_cast<std::size_t>(n));
  if (!kernels::dequantize_row(type, t.data, values.data(), n)) {
    fail("{}: tensor '{}' cannot be read", t.file, name);
  }
  return values;
}

// Copies `m` ([heads * head_dim][cols]) with each head's rows reordered from HF's rotate-half
// layout to the adjacent-pair layout (see llama_hf_weights.h): row 2i <- i, 2i+1 <- i + half.
GgufMatrix permute_heads(const GgufMatrix& m, int64_t head_dim, LlamaGgufWeights& w) {
  const int64_t half = head_dim / 2;
  auto copy = std::make_unique<std::uint8_t[]>(m.row_bytes * static_cast<std::size_t>(m.rows));
  for (int64_t head = 0; head * head_dim < m.rows; ++head) {
    const int64_t base = head * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        std::memcpy(copy.get() + static_cast<std::size_t>(base + 2 * i + j) * m.row_bytes,
                    m.row(base + i + j * half), m.row_bytes);
      }
    }
  }
  GgufMatrix out = m;
  out.data = copy.get();
  w.owned.push_back(std::move(copy));
  return out;
}

}  // namespace

LlamaGgufWeights bind_llama_hf_weights(const Checkpoint& checkpoint, const LlamaConfig& c,
                                       testing::LlamaHfQk qk) {
  // The kernels pair (2i, 2i+1); an odd head_dim has no such pairing (the config parser refuses
  // it too, this only keeps the permutation's precondition local).
  if (c.head_dim % 2 != 0) fail("checkpoint {}: head_dim {} is odd", checkpoint.path(), c.head_dim);
  const int64_t h = c.hidden_size;
  LlamaGgufWeights w;
  w.embedding = bind_matrix(checkpoint, "model.embed_tokens.weight", c.vocab_size, h, w);
  // transformers ties lm_head to the embedding when the config says so, even if the file also
  // stores an lm_head.weight; follow it.
  w.output = c.tie_word_embeddings ? w.embedding
                                   : bind_matrix(checkpoint, "lm_head.weight", c.vocab_size, h, w);
  w.output_norm = bind_vector(checkpoint, "model.norm.weight", h);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LlamaLayerWeights l;
    l.attn_norm = bind_vector(checkpoint, p + "input_layernorm.weight", h);
    l.ffn_norm = bind_vector(checkpoint, p + "post_attention_layernorm.weight", h);
    l.q = bind_matrix(checkpoint, p + "self_attn.q_proj.weight", c.q_dim(), h, w);
    l.k = bind_matrix(checkpoint, p + "self_attn.k_proj.weight", c.kv_dim(), h, w);
    if (qk == testing::LlamaHfQk::kPermuteForAdjacentRope) {
      l.q = permute_heads(l.q, c.head_dim, w);
      l.k = permute_heads(l.k, c.head_dim, w);
    }
    l.v = bind_matrix(checkpoint, p + "self_attn.v_proj.weight", c.kv_dim(), h, w);
    l.o = bind_matrix(checkpoint, p + "self_attn.o_proj.weight", h, c.q_dim(), w);
    l.gate = bind_matrix(checkpoint, p + "mlp.gate_proj.weight", c.intermediate_size, h, w);
    l.up = bind_matrix(checkpoint, p + "mlp.up_proj.weight", c.intermediate_size, h, w);
    l.down = bind_matrix(checkpoint, p + "mlp.down_proj.weight", h, c.intermediate_size, w);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace md
