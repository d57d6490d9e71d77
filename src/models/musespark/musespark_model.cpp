#include "models/musespark/musespark_model.h"

#include <cmath>
#include <limits>

#include "base/cache_aligned.h"
#include "base/error.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "kernels/weight_matrix.h"
#include "models/common/config_files.h"
#include "models/musespark/musespark_row_math.h"
#include "models/musespark/musespark_state.h"
#include "models/musespark/musespark_testing.h"

namespace md {

namespace {

using Buffer = CacheAligned<float>;

MuseSparkConfig read_config(const std::string& directory) {
  return parse_musespark_config(read_config_files(directory));
}

double gate_floor(const MuseSparkOptions& options) {
  return options.ablation == testing::MuseAblation::kNoGateClamp ? 0.0 : kResidualGateFloor;
}

// A model with no stated limit runs as long as its state's capacity (the caller's --context).
constexpr int64_t kUnstatedContext = int64_t{1} << 20;

// s ← α ⊙ s + β ⊙ branch on every row.
void gated_residual(const MuseResidualGate& g, const float* branch, int64_t rows, int64_t width,
                    float* stream) {
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < width; ++i) {
      float& s = stream[t * width + i];
      s = g.alpha[static_cast<std::size_t>(i)] * s +
          g.beta[static_cast<std::size_t>(i)] * branch[t * width + i];
    }
  }
}

// The branch as it joins the stream: rms(scale ⊙ branch) (scale null: rms(branch)), eps of the
// post norms.
void post_norm(float* branch, const std::vector<float>* scale, int64_t rows, int64_t width,
               float eps) {
  for (int64_t t = 0; t < rows; ++t) {
    float* b = branch + t * width;
    if (scale != nullptr) {
      muse::scale_then_normalise(b, *scale, width, eps);
    } else {
      muse::rms_unweighted(b, width, eps, b);
    }
  }
}

}  // namespace

MuseSparkModel::MuseSparkModel(const std::string& directory, const ModelRunOptions& run_options,
                               const MuseSparkOptions& options)
    : directory_(directory),
      config_(read_config(directory)),
      checkpoint_(std::make_unique<Checkpoint>(directory)),
      weights_(bind_musespark_weights(*checkpoint_, config_, gate_floor(options))),
      run_options_(run_options),
      options_(options),
      rope_(config_.head_dim, config_.rope_theta),
      pool_(std::make_unique<ThreadPool>(run_options.threads)) {
  apply_run_options();
}

MuseSparkModel::MuseSparkModel(std::string name, MuseSparkConfig config, MuseSparkWeights weights,
                               std::size_t resident_bytes, const ModelRunOptions& run_options,
                               const MuseSparkOptions& options)
    : directory_(std::move(name)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      resident_bytes_(resident_bytes),
      run_options_(run_options),
      options_(options),
      rope_(config_.head_dim, config_.rope_theta),
      pool_(std::make_unique<ThreadPool>(run_options.threads)) {
  apply_run_options();
}

void MuseSparkModel::check_run_options(const ModelRunOptions& run_options,
                                       const std::string& name) {
  if (run_options.matmul_inputs != kernels::MatmulInputs::kF32) {
    fail("{}: muse_spark runs its matrices with f32 inputs only for now", name);
  }
}

void MuseSparkModel::apply_run_options() {
  check_run_options(run_options_, directory_);
  if (run_options_.dense_weights == DenseWeights::kInt8) {
    resident_bytes_ += quantize_dense_int8(weights_, pool_.get());
  }
}

std::string MuseSparkModel::description() const {
  int64_t nvfp4 = 0;
  for (const MuseLayerWeights& layer : weights_.layers) nvfp4 += layer.experts.nvfp4 ? 1 : 0;
  return fmt::format(
      "muse_spark {} layers ({} full NoPE, {} sliding window {}), hidden {}, {} experts top-{} "
      "(NVFP4 on {} layers){}, vocab {} ({})",
      config_.num_layers, config_.num_full_attention_layers(), config_.num_sliding_layers(),
      config_.sliding_window, config_.hidden_size, config_.num_experts,
      config_.num_experts_per_token, nvfp4,
      run_options_.dense_weights == DenseWeights::kInt8 ? ", int8 dense" : "", config_.vocab_size,
      directory_);
}

int64_t MuseSparkModel::max_context() const {
  return config_.max_position_embeddings > 0 ? config_.max_position_embeddings : kUnstatedContext;
}

std::vector<int32_t> MuseSparkModel::stop_token_ids() const {
  return {config_.eos_token_ids.begin(), config_.eos_token_ids.end()};
}

std::size_t MuseSparkModel::state_bytes_per_token() const {
  // Full layers grow with the context; sliding layers hold at most a window.
  return static_cast<std::size_t>(2 * config_.num_full_attention_layers() * config_.kv_dim()) *
         kv_element_bytes();
}

std::size_t MuseSparkModel::state_bytes_fixed() const {
  return static_cast<std::size_t>(2 * config_.num_sliding_layers() *
                                  (config_.sliding_window + kMuseVerifyRows) * config_.kv_dim()) *
         kv_element_bytes();
}

std::size_t MuseSparkModel::kv_element_bytes() const {
  return run_options_.kv_cache == KvCacheType::kBf16 ? sizeof(uint16_t) : sizeof(float);
}

std::unique_ptr<SequenceState> MuseSparkModel::new_sequence(int64_t capacity) const {
  if (capacity <= 0 || capacity > max_context()) {
    fail("context {} is outside 1..{} (the context limit of {})", capacity, max_context(),
         directory_);
  }
  return std::make_unique<MuseSparkState>(config_, capacity, run_options_.kv_cache);
}

std::size_t MuseSparkModel::weight_bytes() const {
  return (checkpoint_ ? checkpoint_->total_bytes() : 0) + resident_bytes_;
}

std::size_t MuseSparkModel::expert_bytes(const MuseExperts& experts) const {
  const int64_t inter = config_.moe_intermediate_size, hm = config_.moe_hidden_size;
  if (!experts.nvfp4) return static_cast<std::size_t>(3 * inter * hm) * sizeof(uint16_t);
  // gate_up and down in NVFP4, plus their three f32 global scales.
  return static_cast<std::size_t>(nvfp4_matrix_bytes(2 * inter, hm) +
                                  nvfp4_matrix_bytes(hm, inter) + 3 * 4);
}

std::size_t MuseSparkModel::dense_decode_bytes() const {
  const auto matrix = [](const kernels::WeightMatrix& m) {
    // int8 rows also read their f32 scale each.
    const std::size_t scales = m.row_scales != nullptr ? sizeof(float) : 0;
    return m.bytes(0, m.rows) + static_cast<std::size_t>(m.rows) * scales;
  };
  std::size_t total = matrix(weights_.lm_head);
  for (const MuseLayerWeights& w : weights_.layers) {
    total += matrix(w.q_proj) + matrix(w.k_proj) + matrix(w.v_proj) + matrix(w.gate_proj) +
             matrix(w.o_proj) + matrix(w.pre_expert_proj) + matrix(w.post_expert_proj) +
             (w.router.size() + w.router_bias.size()) * sizeof(float);
  }
  return total;
}

std::size_t MuseSparkModel::decode_weight_bytes() const {
  std::size_t total = dense_decode_bytes();
  for (const MuseLayerWeights& w : weights_.layers) {
    total += expert_bytes(w.experts) * static_cast<std::size_t>(config_.num_experts_per_token);
  }
  return total;
}

std::size_t MuseSparkModel::last_step_weight_bytes() const {
  return dense_decode_bytes() + step_expert_bytes_;
}

// §4.1: the embedding row through a weightless RMSNorm is the stream.
void MuseSparkModel::embed(std::span<const int32_t> tokens, float* stream) const {
  const int64_t h = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    float* row = stream + static_cast<int64_t>(t) * h;
    if (!kernels::row_to_f32(weights_.embed_tokens, tokens[t], row)) {
      fail("{}: the embedding table's format cannot be read", directory_);
    }
    muse::rms_unweighted(row, h, eps, row);
  }
}

// §4.6: rms(s) ⊙ norm.weight (as stored), lm_head, then cap · tanh(raw · multiplier / cap) with
// the untrained ids at −∞.
void MuseSparkModel::output(const float* stream, int64_t rows, float* logits) const {
  const int64_t h = config_.hidden_size, vocab = config_.vocab_size;
  Buffer normed(static_cast<std::size_t>(rows * h));
  for (int64_t t = 0; t < rows; ++t) {
    kernels::rms_norm(stream + t * h, weights_.final_norm.data(), h,
                      static_cast<float>(config_.rms_norm_eps), normed.data() + t * h);
  }
  kernels::matmul(weights_.lm_head, normed.data(), rows, logits, pool_.get());
  const auto multiplier = static_cast<float>(config_.output_multiplier);
  const auto cap = static_cast<float>(config_.final_logit_softcapping);
  const bool mask = options_.ablation != testing::MuseAblation::kNoTailMask;
  for (int64_t t = 0; t < rows; ++t) {
    float* row = logits + t * vocab;
    for (int64_t i = 0; i < vocab; ++i) {
      row[i] = (mask && i >= config_.vocab_used) ? -std::numeric_limits<float>::infinity()
                                                 : cap * std::tanh(row[i] * multiplier / cap);
    }
  }
}

void MuseSparkModel::run_rows(std::span<const Row> rows, std::span<const int32_t> tokens,
                              float* stream) {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t h = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const auto post_eps = static_cast<float>(config_.post_norm_eps);
  Buffer x(static_cast<std::size_t>(n * h));
  Buffer branch(static_cast<std::size_t>(n * h));
  const auto taps = static_cast<int64_t>(tap_layers_.size());
  last_taps_.assign(static_cast<std::size_t>(n * taps * h), 0.0f);
  step_expert_bytes_ = 0;
  embed(tokens, stream);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const MuseLayerWeights& w = weights_.layers[static_cast<std::size_t>(l)];
    muse::rms_rows(stream, w.input_norm, n, h, eps, x.data());
    attention(l, rows, x.data(), branch.data());
    post_norm(branch.data(), nullptr, n, h, post_eps);
    gated_residual(w.attention_gate, branch.data(), n, h, stream);
    muse::rms_rows(stream, w.pre_ffn_norm, n, h, eps, x.data());
    moe(w, x.data(), n, branch.data());
    post_norm(branch.data(), &w.post_ffn_norm, n, h, post_eps);
    gated_residual(w.ffn_gate, branch.data(), n, h, stream);
    for (int64_t i = 0; i < taps; ++i) {
      if (tap_layers_[static_cast<std::size_t>(i)] != l) continue;
      for (int64_t t = 0; t < n; ++t) {
        std::copy(stream + t * h, stream + (t + 1) * h, last_taps_.data() + (t * taps + i) * h);
      }
    }
  }
}

void MuseSparkModel::forward(SequenceState& base, std::span<const int32_t> tokens, LogitRows rows,
                             std::vector<float>& logits) {
  check_append(base, tokens, config_.vocab_size);
  auto& state = dynamic_cast<MuseSparkState&>(base);
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t h = config_.hidden_size;
  std::vector<Row> step;
  for (int64_t t = 0; t < n; ++t) step.push_back({&state, state.position() + t});
  Buffer stream(static_cast<std::size_t>(n * h));
  run_rows(step, tokens, stream.data());
  state.advance(n);
  state.hold_verified(0);
  const int64_t out_rows = rows == LogitRows::kAll ? n : 1;
  logits.resize(static_cast<std::size_t>(out_rows * config_.vocab_size));
  output(stream.data() + (n - out_rows) * h, out_rows, logits.data());
}

void MuseSparkModel::decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                            std::vector<float>& logits) {
  if (states.size() != tokens.size()) {
    fail("decode: {} sequences but {} tokens", states.size(), tokens.size());
  }
  std::vector<Row> step;
  for (std::size_t i = 0; i < states.size(); ++i) {
    check_append(*states[i], tokens.subspan(i, 1), config_.vocab_size);
    auto* state = dynamic_cast<MuseSparkState*>(states[i]);
    for (const Row& other : step) {
      if (other.state == state) fail("decode: a sequence appears twice in one step");
    }
    step.push_back({state, state->position()});
  }
  const auto n = static_cast<int64_t>(step.size());
  Buffer stream(static_cast<std::size_t>(n * config_.hidden_size));
  run_rows(step, tokens, stream.data());
  for (const Row& row : step) {
    row.state->advance(1);
    row.state->hold_verified(0);
  }
  logits.resize(static_cast<std::size_t>(n * config_.vocab_size));
  output(stream.data(), n, logits.data());
}

void MuseSparkModel::verify(SequenceState& state, std::span<const int32_t> tokens,
                            std::vector<float>& logits) {
  const auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > kMuseVerifyRows) {
    fail("verify takes 1..{} tokens, got {}", kMuseVerifyRows, rows);
  }
  forward(state, tokens, LogitRows::kAll, logits);
  dynamic_cast<MuseSparkState&>(state).hold_verified(rows);
}

void MuseSparkModel::commit(SequenceState& state, int64_t rows_kept) {
  auto& typed = dynamic_cast<MuseSparkState&>(state);
  if (typed.verified_rows() == 0) fail("commit without a verify run on this sequence");
  if (rows_kept < 0 || rows_kept > typed.verified_rows()) {
    fail("commit keeps 0..{} rows, got {}", typed.verified_rows(), rows_kept);
  }
  typed.commit(rows_kept);
}

void MuseSparkModel::set_tap_layers(std::vector<int64_t> layers) {
  for (const int64_t layer : layers) {
    if (layer < 0 || layer >= config_.num_layers) {
      fail("tap layer {} is outside the target's layers [0, {})", layer, config_.num_layers);
    }
  }
  tap_layers_ = std::move(layers);
}

}  // namespace md
