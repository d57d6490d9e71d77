#include "models/llama/llama_gguf_weights.h"

#include <fmt/format.h>

#include <initializer_list>

#include "base/error.h"
#include "kernels/gguf_q8_packing.h"
#include "models/common/gguf_binder.h"

namespace md {

namespace {

constexpr char kFamily[] = "llama";

GgufMatrix bind_matrix(const GgufFile& file, const std::string& name, int64_t rows, int64_t cols) {
  return bind_gguf_matrix(file, name, rows, cols, kFamily);
}

std::vector<float> bind_vector(const GgufFile& file, const std::string& name, int64_t n) {
  return bind_gguf_vector(file, name, n, kFamily);
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
