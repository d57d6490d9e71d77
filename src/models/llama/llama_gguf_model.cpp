#include "models/llama/llama_gguf_model.h"

#include <cmath>
#include <filesystem>
#include <variant>

#include "base/cache_aligned.h"
#include "base/error.h"
#include "base/ggml_type.h"
#include "kernels/activations.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul.h"
#include "kernels/kv_attention.h"
#include "kernels/norms.h"
#include "models/common/prefill_chunks.h"
#include "models/llama/llama_gguf_config.h"
#include "models/llama/llama_tensor_shard.h"
#include "models/model_config.h"

namespace md {

namespace {

// `buffer` holding n floats (its contents left as they were; every user overwrites them).
float* sized(CacheAligned<float>& buffer, int64_t n) {
  buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

// y = x / rms(x) · w for each of `rows` rows (GGUF norm weights are f32).
void rms_norm_rows(const float* x, const std::vector<float>& w, int64_t rows, int64_t width,
                   float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t)
    kernels::rms_norm(x + t * width, w.data(), width, eps, y + t * width);
}

LlamaConfig hf_config(const std::string& directory) {
  ModelConfig config = load_model_config(directory);
  if (!std::holds_alternative<LlamaConfig>(config)) {
    fail("{}: config.json describes a {} model, not llama", directory,
         family_name(family_of(config)));
  }
  return std::get<LlamaConfig>(config);
}

}  // namespace

LlamaGgufModel::LlamaGgufModel(const std::string& path, const ModelRunOptions& options,
                               testing::LlamaHfQk hf_qk)
    : LlamaGgufModel(
          path,
          std::filesystem::is_directory(path) ? nullptr : std::make_shared<const GgufFile>(path),
          options, hf_qk) {}

LlamaGgufModel::LlamaGgufModel(std::shared_ptr<const GgufFile> file, const ModelRunOptions& options)
    : LlamaGgufModel(file->path(), file, options, {}) {}

LlamaGgufModel::LlamaGgufModel(const std::string& path, std::shared_ptr<const GgufFile> file,
                               const ModelRunOptions& options, testing::LlamaHfQk hf_qk)
    : path_(path),
      gguf_(std::move(file)),
      checkpoint_(gguf_ ? nullptr : std::make_unique<Checkpoint>(path)),
      config_(gguf_ ? parse_llama_gguf_config(*gguf_) : hf_config(path)),
      ranks_(options.ranks),
      rank_config_(config_),
      weights_(gguf_ ? bind_llama_gguf_weights(*gguf_, config_)
                     : bind_llama_hf_weights(*checkpoint_, config_, hf_qk)),
      rope_(config_.head_dim, config_.rope_theta, kernels::RopePairing::kAdjacent),
      pool_(std::make_unique<ThreadPool>(options.threads)),
      executor_(options.executor),
      prefill_rows_(options.prefill_rows),
      executors_(pool_->size()) {
  check_prefill_rows(prefill_rows_);
  kernels::check_matmul_inputs(options.matmul_inputs);
  require_step_programs(options, std::filesystem::path(path_).filename().string());
  if (tensor_parallel()) {
    LlamaShard shard =
        shard_llama(config_, std::move(weights_), ranks_->rank(), ranks_->size(),
                    std::filesystem::path(path_).filename().string(), options.slices);
    rank_config_ = shard.config;
    weights_ = std::move(shard.weights);
  }
  set_matmul_inputs(weights_, options.matmul_inputs);
}

std::string LlamaGgufModel::description() const {
  std::string ranks;
  if (tensor_parallel()) ranks = fmt::format(", rank {} of {}", ranks_->rank(), ranks_->size());
  return fmt::format("llama {} layers, hidden {}, vocab {}{} ({})", config_.num_layers,
                     config_.hidden_size, config_.vocab_size, ranks, path_);
}

std::vector<int32_t> LlamaGgufModel::stop_token_ids() const {
  return {config_.eos_token_ids.begin(), config_.eos_token_ids.end()};
}

std::size_t LlamaGgufModel::state_bytes_per_token() const {
  return static_cast<std::size_t>(2 * rank_config_.num_layers * rank_config_.kv_dim()) *
         sizeof(float);
}

std::size_t LlamaGgufModel::weight_bytes() const {
  return gguf_ ? gguf_->file_bytes() : checkpoint_->total_bytes();
}

namespace {

// The bytes a product streams (a tensor-parallel rank's column view: its own blocks only).
std::size_t streamed_bytes(const GgufMatrix& m) {
  return kernels::WeightMatrix::of(m).bytes(0, m.rows);
}

}  // namespace

std::size_t LlamaGgufModel::decode_weight_bytes() const {
  std::size_t total = streamed_bytes(weights_.output);
  for (const LlamaLayerWeights& l : weights_.layers) {
    for (const GgufMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      total += streamed_bytes(*m);
    }
  }
  return total;
}

std::unique_ptr<SequenceState> LlamaGgufModel::new_sequence(int64_t capacity) const {
  if (capacity <= 0 || capacity > config_.max_position_embeddings) {
    fail("context {} is outside 1..{} ({} of {})", capacity, config_.max_position_embeddings,
         gguf_ ? "llama.context_length" : "max_position_embeddings", path_);
  }
  return std::make_unique<LlamaState>(rank_config_, capacity);
}

void LlamaGgufModel::rewind(SequenceState& state, int64_t position) const {
  if (position < 0 || position > state.position()) {
    fail("cannot rewind a sequence of {} tokens to position {}", state.position(), position);
  }
  dynamic_cast<LlamaState&>(state).rewind(position);
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
  Activations& a = activations_;
  float* const q = sized(a.q, n * c.q_dim());
  float* const k = sized(a.k, n * c.kv_dim());
  float* const v = sized(a.v, n * c.kv_dim());
  matmuls({{&layer.q, q}, {&layer.k, k}, {&layer.v, v}}, x, n);
  const auto li = static_cast<std::size_t>(layer_index);
  std::vector<float> angles(static_cast<std::size_t>(hd));  // cos | sin
  for (int64_t t = 0; t < n; ++t) {
    const Row& row = rows[static_cast<std::size_t>(t)];
    rope_.angles(row.position, angles.data(), angles.data() + hd / 2);
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      rope_.apply(q + t * c.q_dim() + h * hd, angles.data(), angles.data() + hd / 2);
    }
    for (int64_t g = 0; g < c.num_key_value_heads; ++g) {
      float* key = k + t * c.kv_dim() + g * hd;
      rope_.apply(key, angles.data(), angles.data() + hd / 2);
      row.state->kv[li].write(g, row.position, key, v + t * c.kv_dim() + g * hd);
    }
  }
  float* const attended = sized(a.attended, n * c.q_dim());
  std::vector<kernels::AttentionRow> attending;
  for (const Row& row : rows) attending.push_back({&row.state->kv[li], row.position + 1});
  kernels::attend_rows({.heads = c.num_attention_heads,
                        .kv_heads = c.num_key_value_heads,
                        .head_dim = hd,
                        .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
                        .q = q,
                        .q_row_stride = c.q_dim(),
                        .q_head_stride = hd,
                        .out = attended,
                        .out_row_stride = c.q_dim()},
                       attending, pool_.get());
  matmuls({{&layer.o, hidden, true}}, attended, n);
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
  Activations& a = activations_;
  float* const hidden = sized(a.hidden, n * h);
  float* const normed = sized(a.normed, n * h);
  for (int64_t t = 0; t < n; ++t) {
    const auto token = static_cast<int64_t>(tokens[static_cast<std::size_t>(t)]);
    const GgufMatrix& e = weights_.embedding;
    (void)kernels::dequantize_row(e.type, e.row(token), hidden + t * h, h);
  }
  const int64_t gated = n * c.intermediate_size;
  float* const gate = sized(a.gate, gated);
  float* const up = sized(a.up, gated);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LlamaLayerWeights& layer = weights_.layers[static_cast<std::size_t>(i)];
    rms_norm_rows(hidden, layer.attn_norm, n, h, eps, normed);
    attention(rows, layer, i, normed, hidden);
    rms_norm_rows(hidden, layer.ffn_norm, n, h, eps, normed);
    matmuls({{&layer.gate, gate}, {&layer.up, up}}, normed, n);
    for (int64_t j = 0; j < gated; ++j) gate[j] = kernels::silu(gate[j]) * up[j];
    matmuls({{&layer.down, hidden, true}}, gate, n);
  }
  const int64_t out_rows = n - first_logit_row;
  rms_norm_rows(hidden + first_logit_row * h, weights_.output_norm, out_rows, h, eps, normed);
  logits.resize(static_cast<std::size_t>(out_rows * c.vocab_size));
  matmuls({{&weights_.output, logits.data()}}, normed, out_rows);
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
  if (executor_ != ExecutorKind::kReference) {
    prefill(state, tokens, which, logits);
    return;
  }
  std::vector<Row> rows;
  for (int64_t t = 0; t < n; ++t) rows.push_back({&state, state.position() + t});
  run(rows, tokens, which == LogitRows::kAll ? 0 : n - 1, logits);
  state.advance(n);
}

void LlamaGgufModel::prefill(LlamaState& state, std::span<const int32_t> tokens, LogitRows which,
                             std::vector<float>& logits) {
  LlamaStep& built = step(RowMode::kPrefill, prefill_rows_, which);
  LlamaState* const states[] = {&state};
  for_each_prefill_chunk(tokens, prefill_rows_, which, config_.vocab_size, logits,
                         [&](std::span<const int32_t> chunk, float* out) {
                           built.prepare(states, chunk, out);
                           executors_.get(executor_).run(built.program());
                           built.finish();
                           ++prefill_program_runs_;
                         });
}

std::vector<LlamaState*> LlamaGgufModel::decode_rows(std::span<SequenceState* const> states,
                                                     std::span<const int32_t> tokens) const {
  if (states.size() != tokens.size()) {
    fail("decode: {} sequences but {} tokens", states.size(), tokens.size());
  }
  check_tokens(tokens);
  std::vector<LlamaState*> rows;
  for (SequenceState* sequence : states) {
    auto& state = dynamic_cast<LlamaState&>(*sequence);
    if (state.position() + 1 > state.capacity()) {
      fail("context full: {} tokens already in a sequence of context {} (raise --context)",
           state.position(), state.capacity());
    }
    for (const LlamaState* row : rows) {
      if (row == &state) fail("decode: the same sequence appears twice in one step");
    }
    rows.push_back(&state);
  }
  return rows;
}

LlamaStep& LlamaGgufModel::step(RowMode mode, int64_t rows, LogitRows logits) {
  if (mode != RowMode::kPrefill) logits = LogitRows::kAll;
  for (auto& built : steps_) {
    if (built->mode() == mode && built->max_rows() == rows && built->logit_rows() == logits)
      return *built;
  }
  steps_.push_back(std::make_unique<LlamaStep>(rank_config_, weights_, rope_, mode, rows, logits,
                                               pool_->size(), config_.max_position_embeddings,
                                               ranks_));
  return *steps_.back();
}

program::Program* LlamaGgufModel::decode_program(int64_t rows) {
  if (rows < 1 || rows > LlamaStep::kMaxRows) return nullptr;
  return &step(RowMode::kIndependent, rows).program();
}

void LlamaGgufModel::run_step(std::span<LlamaState* const> rows, std::span<const int32_t> tokens,
                              float* logits) {
  const auto n = static_cast<int64_t>(rows.size());
  LlamaStep* built = &step(RowMode::kIndependent, n);
  built->prepare(rows, tokens, logits);
  executors_.get(executor_).run(built->program());
  built->finish();
  for (int64_t r = 0; r < n; ++r) last_greedy_.push_back(built->greedy(r));
}

void LlamaGgufModel::decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                            std::vector<float>& logits) {
  std::vector<LlamaState*> rows = decode_rows(states, tokens);
  last_greedy_.clear();
  if (rows.empty()) {  // as the default decode: no rows, no logits
    logits.clear();
    return;
  }
  if (executor_ == ExecutorKind::kReference) {
    std::vector<Row> positioned;
    for (LlamaState* state : rows) positioned.push_back({state, state->position()});
    run(positioned, tokens, 0, logits);
    for (LlamaState* state : rows) state->advance(1);
    return;
  }
  // Steps of up to LlamaStep::kMaxRows rows; the rows are independent, so the split changes no
  // result (and every row was checked above, so no chunk can fail after another ran).
  const int64_t vocab = config_.vocab_size;
  logits.resize(rows.size() * static_cast<std::size_t>(vocab));
  for (std::size_t first = 0; first < rows.size(); first += LlamaStep::kMaxRows) {
    const std::size_t count = std::min<std::size_t>(LlamaStep::kMaxRows, rows.size() - first);
    run_step(std::span(rows).subspan(first, count), tokens.subspan(first, count),
             logits.data() + static_cast<int64_t>(first) * vocab);
  }
}

}  // namespace md
