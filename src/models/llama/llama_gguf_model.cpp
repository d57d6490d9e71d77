#include "models/llama/llama_gguf_model.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/zeroed_array.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul.h"
#include "kernels/norms.h"
#include "models/llama/llama_gguf_config.h"

namespace md {

// Per-sequence state: an f32 KV cache per layer, [kv heads][capacity][head_dim].
class LlamaState final : public SequenceState {
 public:
  LlamaState(const LlamaConfig& c, int64_t capacity) : SequenceState(capacity) {
    auto n = static_cast<std::size_t>(c.kv_dim() * capacity);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      keys.emplace_back(n);
      values.emplace_back(n);
    }
  }
  void reset() override { position_ = 0; }
  std::unique_ptr<SequenceState> clone() const override {
    return std::make_unique<LlamaState>(*this);
  }
  std::size_t bytes() const override {
    return keys.size() * 2 * (keys.empty() ? 0 : keys[0].bytes());
  }
  void advance(int64_t n) { position_ += n; }

  std::vector<ZeroedArray<float>> keys, values;
};

namespace {

using Buffer = std::vector<float>;
Buffer buffer(int64_t n) {
  return Buffer(static_cast<std::size_t>(n));
}

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

// Plain-weight RMSNorm (Llama): y = x / rms(x) · w, weights already f32.
void rms_norm_rows(const float* x, const std::vector<float>& w, int64_t rows, int64_t width,
                   float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* in = x + t * width;
    double sum = 0;
    for (int64_t i = 0; i < width; ++i) sum += static_cast<double>(in[i]) * in[i];
    auto inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(width) + eps));
    for (int64_t i = 0; i < width; ++i)
      y[t * width + i] = in[i] * inv * w[static_cast<std::size_t>(i)];
  }
}

// llama.cpp stores q and k rows permuted so that RoPE rotates adjacent pairs (2j, 2j+1); that is
// Hugging Face's rotate-half pairing (j, j + d/2) on the unpermuted weights.
void rope_adjacent(float* x, int64_t head_dim, int64_t position,
                   const std::vector<float>& inv_freq) {
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    float angle = static_cast<float>(position) * inv_freq[static_cast<std::size_t>(j)];
    float c = std::cos(angle), s = std::sin(angle);
    float a = x[2 * j], b = x[2 * j + 1];
    x[2 * j] = a * c - b * s;
    x[2 * j + 1] = b * c + a * s;
  }
}

}  // namespace

LlamaGgufModel::LlamaGgufModel(const std::string& path, const ModelRunOptions& options)
    : file_(path),
      config_(parse_llama_gguf_config(file_)),
      pool_(std::make_unique<ThreadPool>(options.threads)) {
  const LlamaConfig& c = config_;
  int64_t h = c.hidden_size;
  embedding_ = bind_matrix(file_, "token_embd.weight", c.vocab_size, h);
  output_ =
      c.tie_word_embeddings ? embedding_ : bind_matrix(file_, "output.weight", c.vocab_size, h);
  output_norm_ = bind_vector(file_, "output_norm.weight", h);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    std::string p = fmt::format("blk.{}.", i);
    LlamaLayerWeights l;
    l.attn_norm = bind_vector(file_, p + "attn_norm.weight", h);
    l.ffn_norm = bind_vector(file_, p + "ffn_norm.weight", h);
    l.q = bind_matrix(file_, p + "attn_q.weight", c.q_dim(), h);
    l.k = bind_matrix(file_, p + "attn_k.weight", c.kv_dim(), h);
    l.v = bind_matrix(file_, p + "attn_v.weight", c.kv_dim(), h);
    l.o = bind_matrix(file_, p + "attn_output.weight", h, c.q_dim());
    l.gate = bind_matrix(file_, p + "ffn_gate.weight", c.intermediate_size, h);
    l.up = bind_matrix(file_, p + "ffn_up.weight", c.intermediate_size, h);
    l.down = bind_matrix(file_, p + "ffn_down.weight", h, c.intermediate_size);
    layers_.push_back(std::move(l));
  }
  for (int64_t j = 0; j < c.head_dim / 2; ++j) {
    float exponent = static_cast<float>(2 * j) / static_cast<float>(c.head_dim);
    inv_freq_.push_back(1.0f /
                        static_cast<float>(std::pow(c.rope_theta, static_cast<double>(exponent))));
  }
}

std::string LlamaGgufModel::description() const {
  return fmt::format("llama {} layers, hidden {}, vocab {} ({})", config_.num_layers,
                     config_.hidden_size, config_.vocab_size, file_.path());
}

std::vector<int32_t> LlamaGgufModel::stop_token_ids() const {
  return {config_.eos_token_ids.begin(), config_.eos_token_ids.end()};
}

std::size_t LlamaGgufModel::state_bytes_per_token() const {
  return static_cast<std::size_t>(2 * config_.num_layers * config_.kv_dim()) * sizeof(float);
}

std::size_t LlamaGgufModel::decode_weight_bytes() const {
  std::size_t total = output_.row_bytes * static_cast<std::size_t>(output_.rows);
  for (const LlamaLayerWeights& l : layers_) {
    for (const GgufMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      total += m->row_bytes * static_cast<std::size_t>(m->rows);
    }
  }
  return total;
}

std::unique_ptr<SequenceState> LlamaGgufModel::new_sequence(int64_t capacity) const {
  if (capacity <= 0 || capacity > config_.max_position_embeddings) {
    fail("context {} is outside 1..{} (llama.context_length of {})", capacity,
         config_.max_position_embeddings, file_.path());
  }
  return std::make_unique<LlamaState>(config_, capacity);
}

namespace {

// Threads split the output rows at multiples of this: a multiple of every kernel path's register
// block (results do not depend on the split, only speed does).
constexpr int64_t kRowGrain = 16;

int64_t grains(const GgufMatrix& w) {
  return (w.rows + kRowGrain - 1) / kRowGrain;
}

}  // namespace

void LlamaGgufModel::matmuls(std::initializer_list<Product> products, const float* x,
                             int64_t rows) {
  int64_t total = 0, work = 0;
  for (const Product& p : products) {
    total += grains(*p.w);
    work += p.w->rows * p.w->cols * rows;
  }
  // Grains [begin, end) of the concatenated products' rows.
  auto body = [&](int64_t begin, int64_t end) {
    int64_t offset = 0;
    for (const Product& p : products) {
      const GgufMatrix& w = *p.w;
      const int64_t lo = std::max(begin - offset, int64_t{0});
      const int64_t hi = std::min(end - offset, grains(w));
      if (lo < hi) {
        kernels::gguf_matmul_tile(w, lo * kRowGrain, std::min(hi * kRowGrain, w.rows), x, w.cols,
                                  rows, kernels::MatmulOut{p.y, w.rows, p.accumulate});
      }
      offset += grains(w);
    }
  };
  pool_->parallel_for_work(total, work, body);
}

// hidden += o(attention(q(x), k(x), v(x))) for every row; each row's keys and values go to its own
// sequence's cache first, so a row attends to its sequence's earlier tokens and itself.
void LlamaGgufModel::attention(std::span<const Row> rows, const LlamaLayerWeights& layer,
                               int64_t layer_index, const float* x, float* hidden) {
  const LlamaConfig& c = config_;
  const int64_t hd = c.head_dim, n = static_cast<int64_t>(rows.size());
  Buffer q = buffer(n * c.q_dim()), k = buffer(n * c.kv_dim()), v = buffer(n * c.kv_dim());
  matmuls({{&layer.q, q.data()}, {&layer.k, k.data()}, {&layer.v, v.data()}}, x, n);
  const auto li = static_cast<std::size_t>(layer_index);
  int64_t longest = 0;
  for (int64_t t = 0; t < n; ++t) {
    const Row& row = rows[static_cast<std::size_t>(t)];
    longest = std::max(longest, row.position + 1);
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      rope_adjacent(q.data() + t * c.q_dim() + h * hd, hd, row.position, inv_freq_);
    }
    for (int64_t g = 0; g < c.num_key_value_heads; ++g) {
      float* key = k.data() + t * c.kv_dim() + g * hd;
      rope_adjacent(key, hd, row.position, inv_freq_);
      const int64_t offset = (g * row.state->capacity() + row.position) * hd;
      std::memcpy(row.state->keys[li].data() + offset, key,
                  static_cast<std::size_t>(hd) * sizeof(float));
      std::memcpy(row.state->values[li].data() + offset, v.data() + t * c.kv_dim() + g * hd,
                  static_cast<std::size_t>(hd) * sizeof(float));
    }
  }
  Buffer attended = buffer(n * c.q_dim()), scores = buffer(longest);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t t = 0; t < n; ++t) {
    const Row& row = rows[static_cast<std::size_t>(t)];
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      const int64_t offset = h / c.gqa_group() * row.state->capacity() * hd;
      kernels::attend(q.data() + t * c.q_dim() + h * hd, row.state->keys[li].data() + offset,
                      row.state->values[li].data() + offset, row.position + 1, hd, hd, scale,
                      scores.data(), attended.data() + t * c.q_dim() + h * hd);
    }
  }
  matmuls({{&layer.o, hidden, true}}, attended.data(), n);
}

void LlamaGgufModel::check_tokens(std::span<const int32_t> tokens) const {
  for (int32_t token : tokens) {
    if (token < 0 || token >= config_.vocab_size) {
      fail("token id {} is outside the vocabulary (0..{})", token, config_.vocab_size - 1);
    }
  }
}

void LlamaGgufModel::run(std::span<const Row> rows, std::span<const int32_t> tokens,
                         int64_t first_logit_row, std::vector<float>& logits) {
  const LlamaConfig& c = config_;
  const int64_t n = static_cast<int64_t>(rows.size()), h = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  Buffer hidden = buffer(n * h), normed = buffer(n * h);
  for (int64_t t = 0; t < n; ++t) {
    const auto token = static_cast<int64_t>(tokens[static_cast<std::size_t>(t)]);
    (void)kernels::dequantize_row(embedding_.type, embedding_.row(token), hidden.data() + t * h, h);
  }
  Buffer gate = buffer(n * c.intermediate_size), up = buffer(n * c.intermediate_size);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LlamaLayerWeights& layer = layers_[static_cast<std::size_t>(i)];
    rms_norm_rows(hidden.data(), layer.attn_norm, n, h, eps, normed.data());
    attention(rows, layer, i, normed.data(), hidden.data());
    rms_norm_rows(hidden.data(), layer.ffn_norm, n, h, eps, normed.data());
    matmuls({{&layer.gate, gate.data()}, {&layer.up, up.data()}}, normed.data(), n);
    for (std::size_t j = 0; j < gate.size(); ++j) gate[j] = kernels::silu(gate[j]) * up[j];
    matmuls({{&layer.down, hidden.data(), true}}, gate.data(), n);
  }
  const int64_t out_rows = n - first_logit_row;
  rms_norm_rows(hidden.data() + first_logit_row * h, output_norm_, out_rows, h, eps, normed.data());
  logits.resize(static_cast<std::size_t>(out_rows * c.vocab_size));
  matmuls({{&output_, logits.data()}}, normed.data(), out_rows);
}

void LlamaGgufModel::forward(SequenceState& sequence, std::span<const int32_t> tokens,
                             LogitRows which, std::vector<float>& logits) {
  auto& state = dynamic_cast<LlamaState&>(sequence);
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail("forward needs at least one token");
  if (state.position() + n > state.capacity()) {
    fail(
        "context full: {} tokens already in the sequence + {} new exceed the context of {} "
        "tokens (raise --context)",
        state.position(), n, state.capacity());
  }
  check_tokens(tokens);
  std::vector<Row> rows;
  for (int64_t t = 0; t < n; ++t) rows.push_back({&state, state.position() + t});
  run(rows, tokens, which == LogitRows::kAll ? 0 : n - 1, logits);
  state.advance(n);
}

void LlamaGgufModel::decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                            std::vector<float>& logits) {
  if (states.size() != tokens.size()) {
    fail("decode: {} sequences but {} tokens", states.size(), tokens.size());
  }
  if (states.empty()) {  // as the default decode: no rows, no logits
    logits.clear();
    return;
  }
  check_tokens(tokens);
  std::vector<Row> rows;
  for (SequenceState* sequence : states) {
    auto& state = dynamic_cast<LlamaState&>(*sequence);
    if (state.position() + 1 > state.capacity()) {
      fail("context full: {} tokens already in a sequence of context {} (raise --context)",
           state.position(), state.capacity());
    }
    for (const Row& row : rows) {
      if (row.state == &state) fail("decode: the same sequence appears twice in one step");
    }
    rows.push_back({&state, state.position()});
  }
  run(rows, tokens, 0, logits);
  for (const Row& row : rows) row.state->advance(1);
}

}  // namespace md
