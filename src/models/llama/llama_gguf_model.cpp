#include "models/llama/llama_gguf_model.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/zeroed_array.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/gguf_dequant.h"
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
  std::unique_ptr<SequenceState> clone() const override { return std::make_unique<LlamaState>(*this); }
  std::size_t bytes() const override { return keys.size() * 2 * (keys.empty() ? 0 : keys[0].bytes()); }
  void advance(int64_t n) { position_ += n; }

  std::vector<ZeroedArray<float>> keys, values;
};

namespace {

using Buffer = std::vector<float>;
Buffer buffer(int64_t n) { return Buffer(static_cast<std::size_t>(n)); }

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
  if (!kernels::can_dequantize(t->type)) {
    fail("{}: tensor '{}' is {}, a format megadecode cannot read yet", file.path(), name,
         ggml_type_name(t->type));
  }
  return {t->type, t->data, rows, cols, t->nbytes / static_cast<std::size_t>(rows)};
}

std::vector<float> bind_vector(const GgufFile& file, const std::string& name, int64_t n) {
  GgufMatrix m = bind_matrix(file, name, 1, n);
  std::vector<float> values(static_cast<std::size_t>(n));
  if (!kernels::dequantize_row(m.type, m.data, values.data(), n)) {
    fail("{}: tensor '{}' cannot be read", file.path(), name);
  }
  return values;
}

// Σ a·b over 16 independent lanes (summed in a fixed tree): vectorises without reassociation.
float dot_lanes(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int64_t i = full; i < n; ++i) acc[i - full] += a[i] * b[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// Plain-weight RMSNorm (Llama): y = x / rms(x) · w, weights already f32.
void rms_norm_rows(const float* x, const std::vector<float>& w, int64_t rows, int64_t width,
                   float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* in = x + t * width;
    double sum = 0;
    for (int64_t i = 0; i < width; ++i) sum += static_cast<double>(in[i]) * in[i];
    auto inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(width) + eps));
    for (int64_t i = 0; i < width; ++i) y[t * width + i] = in[i] * inv * w[static_cast<std::size_t>(i)];
  }
}

// llama.cpp stores q and k rows permuted so that RoPE rotates adjacent pairs (2j, 2j+1); that is
// Hugging Face's rotate-half pairing (j, j + d/2) on the unpermuted weights.
void rope_adjacent(float* x, int64_t head_dim, int64_t position, const std::vector<float>& inv_freq) {
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
    : file_(path), config_(parse_llama_gguf_config(file_)), pool_(std::make_unique<ThreadPool>(options.threads)) {
  const LlamaConfig& c = config_;
  int64_t h = c.hidden_size;
  embedding_ = bind_matrix(file_, "token_embd.weight", c.vocab_size, h);
  output_ = c.tie_word_embeddings ? embedding_ : bind_matrix(file_, "output.weight", c.vocab_size, h);
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
    inv_freq_.push_back(1.0f / static_cast<float>(std::pow(c.rope_theta, static_cast<double>(exponent))));
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

// y[t][r] = Σ_c W[r][c] x[t][c]: each weight row is dequantised once and used for every row t.
void LlamaGgufModel::matmul(const GgufMatrix& w, const float* x, int64_t rows, float* y) {
  pool_->parallel_for_work(w.rows, w.rows * w.cols * rows, [&](int64_t begin, int64_t end) {
    Buffer row = buffer(w.cols);
    for (int64_t r = begin; r < end; ++r) {
      bool ok = kernels::dequantize_row(w.type, w.data + static_cast<std::size_t>(r) * w.row_bytes,
                                        row.data(), w.cols);
      (void)ok;  // the format and row length were checked when the weights were bound
      for (int64_t t = 0; t < rows; ++t) y[t * w.rows + r] = dot_lanes(row.data(), x + t * w.cols, w.cols);
    }
  });
}

void LlamaGgufModel::attention(LlamaState& state, const LlamaLayerWeights& layer,
                               int64_t layer_index, const float* x, int64_t rows, float* out) {
  const LlamaConfig& c = config_;
  int64_t hd = c.head_dim;
  Buffer q = buffer(rows * c.q_dim()), k = buffer(rows * c.kv_dim()), v = buffer(rows * c.kv_dim());
  matmul(layer.q, x, rows, q.data());
  matmul(layer.k, x, rows, k.data());
  matmul(layer.v, x, rows, v.data());
  auto li = static_cast<std::size_t>(layer_index);
  int64_t first = state.position();
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t h = 0; h < c.num_attention_heads; ++h) rope_adjacent(q.data() + t * c.q_dim() + h * hd, hd, first + t, inv_freq_);
    for (int64_t g = 0; g < c.num_key_value_heads; ++g) {
      float* key = k.data() + t * c.kv_dim() + g * hd;
      rope_adjacent(key, hd, first + t, inv_freq_);
      int64_t offset = (g * state.capacity() + first + t) * hd;
      std::memcpy(state.keys[li].data() + offset, key, static_cast<std::size_t>(hd) * sizeof(float));
      std::memcpy(state.values[li].data() + offset, v.data() + t * c.kv_dim() + g * hd,
                  static_cast<std::size_t>(hd) * sizeof(float));
    }
  }
  Buffer attended = buffer(rows * c.q_dim()), scores = buffer(first + rows);
  float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      int64_t g = h / c.gqa_group();
      int64_t offset = g * state.capacity() * hd;
      kernels::attend(q.data() + t * c.q_dim() + h * hd, state.keys[li].data() + offset,
                      state.values[li].data() + offset, first + t + 1, hd, hd, scale,
                      scores.data(), attended.data() + t * c.q_dim() + h * hd);
    }
  }
  matmul(layer.o, attended.data(), rows, out);
}

void LlamaGgufModel::forward(SequenceState& sequence, std::span<const int32_t> tokens,
                             LogitRows which, std::vector<float>& logits) {
  auto& state = dynamic_cast<LlamaState&>(sequence);
  const LlamaConfig& c = config_;
  auto rows = static_cast<int64_t>(tokens.size());
  if (rows == 0) fail("forward needs at least one token");
  if (state.position() + rows > state.capacity()) {
    fail("context full: {} tokens already in the sequence + {} new exceed the context of {} "
         "tokens (raise --context)",
         state.position(), rows, state.capacity());
  }
  for (int32_t token : tokens) {
    if (token < 0 || token >= c.vocab_size) fail("token id {} is outside the vocabulary (0..{})", token, c.vocab_size - 1);
  }
  int64_t h = c.hidden_size;
  auto eps = static_cast<float>(c.rms_norm_eps);
  Buffer hidden = buffer(rows * h), normed = buffer(rows * h), mixed = buffer(rows * h);
  for (int64_t t = 0; t < rows; ++t) {
    const uint8_t* row = embedding_.data + static_cast<std::size_t>(tokens[static_cast<std::size_t>(t)]) * embedding_.row_bytes;
    (void)kernels::dequantize_row(embedding_.type, row, hidden.data() + t * h, h);
  }
  Buffer gate = buffer(rows * c.intermediate_size), up = buffer(rows * c.intermediate_size);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LlamaLayerWeights& layer = layers_[static_cast<std::size_t>(i)];
    rms_norm_rows(hidden.data(), layer.attn_norm, rows, h, eps, normed.data());
    attention(state, layer, i, normed.data(), rows, mixed.data());
    for (std::size_t j = 0; j < hidden.size(); ++j) hidden[j] += mixed[j];
    rms_norm_rows(hidden.data(), layer.ffn_norm, rows, h, eps, normed.data());
    matmul(layer.gate, normed.data(), rows, gate.data());
    matmul(layer.up, normed.data(), rows, up.data());
    for (std::size_t j = 0; j < gate.size(); ++j) gate[j] = kernels::silu(gate[j]) * up[j];
    matmul(layer.down, gate.data(), rows, mixed.data());
    for (std::size_t j = 0; j < hidden.size(); ++j) hidden[j] += mixed[j];
  }
  state.advance(rows);
  int64_t first = which == LogitRows::kAll ? 0 : rows - 1;
  int64_t out_rows = rows - first;
  rms_norm_rows(hidden.data() + first * h, output_norm_, out_rows, h, eps, normed.data());
  logits.resize(static_cast<std::size_t>(out_rows * c.vocab_size));
  matmul(output_, normed.data(), out_rows, logits.data());
}

}  // namespace md
