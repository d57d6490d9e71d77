#include "models/llama/llama_gguf_weights.h"

#include <fmt/format.h>

#include <initializer_list>

#include "base/error.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_q8_packing.h"

namespace md {

namespace {

GgufMatrix bind_matrix(const GgufFile& file, const std::string& name, int64_t rows, int64_t cols) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr) fail("{}: tensor '{}' is missing (llama needs it)", file.path(), name);
  // Vectors are stored with one dimension, matrices with two (ggml order: columns first).
  bool vector_ok = rows == 1 && t->dims.size() == 1 && t->dims[0] == cols;
  bool matrix_ok = t->dims.size() == 2 && t->dims[0] == cols && t->dims[1] == rows;
  if (!vector_ok && !matrix_ok) {
    fail("{}: tensor '{}' is {} but the metadata implies [{}, {}] (ggml order)", file.path(), name,
         t->describe(), cols, rows);
  }
  GgufMatrix m{t->type, t->data, rows, cols, t->nbytes / static_cast<std::size_t>(rows)};
  // Every matrix the model binds is either multiplied (GGUF GEMV kernels) or dequantised row by
  // row (norms, embeddings): both read the same formats.
  if (!kernels::can_dequantize(t->type) || !kernels::gguf_matmul_accepts(m)) {
    fail("{}: tensor '{}' is {}, a format megadecode cannot read yet", file.path(), name,
         ggml_type_name(t->type));
  }
  return m;
}

std::vector<float> bind_vector(const GgufFile& file, const std::string& name, int64_t n) {
  GgufMatrix m = bind_matrix(file, name, 1, n);
  std::vector<float> values(static_cast<std::size_t>(n));
  if (!kernels::dequantize_row(m.type, m.data, values.data(), n)) {
    fail("{}: tensor '{}' cannot be read", file.path(), name);
  }
  return values;
}

}  // namespace

LlamaGgufWeights bind_llama_gguf_weights(const GgufFile& file, const LlamaConfig& c) {
  const int64_t h = c.hidden_size;
  LlamaGgufWeights w;
  w.embedding = bind_matrix(file, "token_embd.weight", c.vocab_size, h);
  w.output =
      c.tie_word_embeddings ? w.embedding : bind_matrix(file, "output.weight", c.vocab_size, h);
  w.output_norm = bind_vector(file, "output_norm.weight", h);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    std::string p = fmt::format("blk.{}.", i);
    LlamaLayerWeights l;
    l.attn_norm = bind_vector(file, p + "attn_norm.weight", h);
    l.ffn_norm = bind_vector(file, p + "ffn_norm.weight", h);
    l.q = bind_matrix(file, p + "attn_q.weight", c.q_dim(), h);
    l.k = bind_matrix(file, p + "attn_k.weight", c.kv_dim(), h);
    l.v = bind_matrix(file, p + "attn_v.weight", c.kv_dim(), h);
    l.o = bind_matrix(file, p + "attn_output.weight", h, c.q_dim());
    l.gate = bind_matrix(file, p + "ffn_gate.weight", c.intermediate_size, h);
    l.up = bind_matrix(file, p + "ffn_up.weight", c.intermediate_size, h);
    l.down = bind_matrix(file, p + "ffn_down.weight", h, c.intermediate_size);
    w.layers.push_back(std::move(l));
  }
  return w;
}

void set_matmul_inputs(LlamaGgufWeights& weights, kernels::MatmulInputs inputs) {
  auto tag = [&](std::initializer_list<GgufMatrix*> matrices) {
    for (GgufMatrix* m : matrices) {
      m->inputs = inputs;
      // The q8 path reads Q4_0 / Q4_1 / Q8_0 regrouped by eight rows: a copy made once, here (the
      // file's pages of these matrices are then never touched).
      if (inputs == kernels::MatmulInputs::kQ8 && kernels::gguf_q8_packs(m->type) &&
          m->packed == nullptr) {
        weights.owned.push_back(
            std::make_unique<std::uint8_t[]>(kernels::gguf_q8_packed_bytes(*m)));
        kernels::pack_gguf_q8_rows(*m, weights.owned.back().get());
        m->packed = weights.owned.back().get();
      }
    }
  };
  tag({&weights.embedding});
  if (weights.output.data == weights.embedding.data)
    weights.output.packed = weights.embedding.packed;
  tag({&weights.output});
  for (LlamaLayerWeights& l : weights.layers) {
    tag({&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down});
  }
}

}  // namespace md
