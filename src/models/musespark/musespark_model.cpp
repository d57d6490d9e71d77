#include "models/musespark/musespark_model.h"

#include <algorithm>
#include <filesystem>

#include "base/cache_aligned.h"
#include "base/error.h"
#include "kernels/gated_residual.h"
#include "kernels/logit_softcap.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "kernels/weight_matrix.h"
#include "models/common/config_files.h"
#include "models/common/prefill_chunks.h"
#include "models/common/tensor_shard.h"
#include "models/musespark/musespark_experts.h"
#include "models/musespark/musespark_row_math.h"
#include "models/musespark/musespark_state.h"
#include "models/musespark/musespark_tensor_shard.h"
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

// The branch joins the stream on every row: b ← rms(scale ⊙ b) (scale null: rms(b)), eps of the
// post norms, then s ← α ⊙ s + β ⊙ b.
void join_branch(const MuseResidualGate& g, const float* scale, float eps, float* branch,
                 int64_t rows, int64_t width, float* stream) {
  for (int64_t t = 0; t < rows; ++t) {
    kernels::scaled_rms_norm(branch + t * width, scale, width, eps);
    kernels::gated_residual(g.alpha.data(), g.beta.data(), branch + t * width, width,
                            stream + t * width);
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
  require_step_programs(run_options, name);
  if (dist::tensor_parallel(run_options.ranks)) {
    if (run_options.dense_weights == DenseWeights::kInt8) {
      fail(
          "{}: int8 dense weights are not split across tensor-parallel ranks yet (use "
          "--dense-weights as-stored)",
          name);
    }
  }
  if (run_options.matmul_inputs != kernels::MatmulInputs::kF32) {
    fail("{}: muse_spark runs its matrices with f32 inputs only for now", name);
  }
  check_prefill_rows(run_options.prefill_rows);
}

void MuseSparkModel::apply_run_options() {
  check_run_options(run_options_, directory_);
  rank_config_ = config_;
  if (tensor_parallel()) {
    if (!fused()) {
      fail(
          "{}: tensor parallelism runs the step programs, not the reference forward's test "
          "hooks",
          directory_);
    }
    whole_lm_head_ = weights_.lm_head;
    dist::Communicator& ranks = *run_options_.ranks;
    MuseSparkShard shard =
        shard_musespark(config_, std::move(weights_), ranks.rank(), ranks.size(),
                        std::filesystem::path(directory_).filename().string(), run_options_.slices);
    run_options_.slices = nullptr;  // a pack's reader lives only as long as the load
    rank_config_ = shard.config;
    weights_ = std::move(shard.weights);
  }
  if (run_options_.dense_weights == DenseWeights::kInt8) {
    resident_bytes_ += quantize_dense_int8(weights_, pool_.get());
  }
  for (const MuseLayerWeights& layer : weights_.layers) {
    experts_.push_back(muse_expert_matrices(layer.experts, config_));
  }
  executors_ = std::make_unique<program::Executors>(pool_->size());
}

std::string MuseSparkModel::description() const {
  int64_t nvfp4 = 0;
  for (const MuseLayerWeights& layer : weights_.layers) nvfp4 += layer.experts.nvfp4 ? 1 : 0;
  return fmt::format(
      "muse_spark {} layers ({} full NoPE, {} sliding window {}), hidden {}, {} experts top-{} "
      "(NVFP4 on {} layers){}, vocab {}{} ({})",
      config_.num_layers, config_.num_full_attention_layers(), config_.num_sliding_layers(),
      config_.sliding_window, config_.hidden_size, config_.num_experts,
      config_.num_experts_per_token, nvfp4,
      run_options_.dense_weights == DenseWeights::kInt8 ? ", int8 dense" : "", config_.vocab_size,
      tensor_parallel()
          ? fmt::format(", rank {} of {}", run_options_.ranks->rank(), run_options_.ranks->size())
          : "",
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
  return static_cast<std::size_t>(2 * config_.num_full_attention_layers() * rank_config_.kv_dim()) *
         kv_element_bytes();
}

std::size_t MuseSparkModel::state_bytes_fixed() const {
  return static_cast<std::size_t>(2 * config_.num_sliding_layers() *
                                  (config_.sliding_window + kMuseVerifyRows) *
                                  rank_config_.kv_dim()) *
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
  return std::make_unique<MuseSparkState>(rank_config_, capacity, run_options_.kv_cache);
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
  // int8 rows also read their f32 scale each (WeightMatrix::bytes counts it).
  const auto matrix = [](const kernels::WeightMatrix& m) { return m.bytes(0, m.rows); };
  std::size_t total = matrix(weights_.lm_head);
  for (const MuseLayerWeights& w : weights_.layers) {
    total += matrix(w.q_proj) + matrix(w.k_proj) + matrix(w.v_proj) + matrix(w.gate_proj) +
             matrix(w.o_proj) + matrix(w.pre_expert_proj) + matrix(w.post_expert_proj) +
             (w.router.size() + w.router_bias.size()) * sizeof(float);
  }
  return total;
}

std::size_t MuseSparkModel::decode_weight_bytes() const {
  // Under expert parallelism the rank's expected share of the k experts a token takes.
  const dist::Range held =
      tensor_parallel() ? shard::routed_experts(config_.num_experts, run_options_.ranks->rank(),
                                                run_options_.ranks->size(), directory_)
                        : dist::Range{0, config_.num_experts};
  std::size_t total = dense_decode_bytes();
  for (const MuseLayerWeights& w : weights_.layers) {
    total += shard::expert_share(
        expert_bytes(w.experts) * static_cast<std::size_t>(config_.num_experts_per_token), held,
        config_.num_experts);
  }
  return total;
}

std::size_t MuseSparkModel::last_step_weight_bytes() const {
  if (!last_step_fused_) return dense_decode_bytes() + step_expert_bytes_;
  std::size_t experts = 0;
  for (std::size_t l = 0; l < experts_run_.size(); ++l) {
    experts += static_cast<std::size_t>(experts_run_[l]) * expert_bytes(weights_.layers[l].experts);
  }
  return dense_decode_bytes() + experts;
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
    kernels::rms_norm_unweighted(row, h, eps, row);
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
  const bool mask = options_.ablation != testing::MuseAblation::kNoTailMask;
  for (int64_t t = 0; t < rows; ++t) {
    kernels::softcap_logits(logits + t * vocab, 0, vocab, mask ? config_.vocab_used : vocab,
                            static_cast<float>(config_.output_multiplier),
                            static_cast<float>(config_.final_logit_softcapping));
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
  last_step_fused_ = false;
  last_greedy_.clear();  // the reference computes no greedy tokens
  embed(tokens, stream);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const MuseLayerWeights& w = weights_.layers[static_cast<std::size_t>(l)];
    muse::rms_rows(stream, w.input_norm, n, h, eps, x.data());
    attention(l, rows, x.data(), branch.data());
    join_branch(w.attention_gate, nullptr, post_eps, branch.data(), n, h, stream);
    muse::rms_rows(stream, w.pre_ffn_norm, n, h, eps, x.data());
    moe(l, x.data(), n, branch.data());
    join_branch(w.ffn_gate, w.post_ffn_norm.data(), post_eps, branch.data(), n, h, stream);
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
  if (fused()) {
    prefill(state, tokens, rows, logits);
    return;
  }
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

bool MuseSparkModel::fused() const {
  return run_options_.executor != ExecutorKind::kReference &&
         options_.ablation == testing::MuseAblation::kNone && options_.probe == nullptr;
}

MuseStep& MuseSparkModel::step(int64_t rows, RowMode mode, LogitRows logits) {
  if (mode != RowMode::kPrefill) logits = LogitRows::kAll;
  for (auto& built : steps_) {
    if (built->max_rows() == rows && built->mode() == mode && built->logit_rows() == logits)
      return *built;
  }
  steps_.push_back(std::make_unique<MuseStep>(rank_config_, weights_, experts_, rope_, rows, mode,
                                              pool_->size(), tap_layers_, logits,
                                              run_options_.ranks));
  return *steps_.back();
}

// Every row is its own arithmetic (no chunked recurrence), so the chunks change no result.
void MuseSparkModel::prefill(MuseSparkState& state, std::span<const int32_t> tokens,
                             LogitRows which, std::vector<float>& logits) {
  const int64_t taps = static_cast<int64_t>(tap_layers_.size()) * config_.hidden_size;
  MuseStep& built = step(run_options_.prefill_rows, RowMode::kPrefill, which);
  last_taps_.clear();
  MuseSparkState* const states[] = {&state};
  for_each_prefill_chunk(tokens, run_options_.prefill_rows, which, config_.vocab_size, logits,
                         [&](std::span<const int32_t> chunk, float* out) {
                           built.prepare(states, chunk, out);
                           executors_->get(run_options_.executor).run(built.program());
                           built.finish();
                           ++prefill_program_runs_;
                           last_taps_.insert(last_taps_.end(), built.taps(),
                                             built.taps() + built.rows() * taps);
                         });
}

program::Program* MuseSparkModel::decode_program(int64_t rows) {
  if (rows < 1 || rows > MuseStep::kMaxRows) return nullptr;
  return &step(rows, RowMode::kIndependent).program();
}

void MuseSparkModel::run_step(MuseStep& built, std::vector<float>& logits) {
  executors_->get(run_options_.executor).run(built.program());
  built.finish();
  const int64_t rows = built.rows();
  logits.assign(built.logits(0), built.logits(0) + rows * config_.vocab_size);
  last_taps_.assign(built.taps(), built.taps() + rows * static_cast<int64_t>(tap_layers_.size()) *
                                                     config_.hidden_size);
  last_greedy_.resize(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) last_greedy_[static_cast<std::size_t>(r)] = built.greedy(r);
  built.experts_run(experts_run_);
  last_step_fused_ = true;
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
  if (fused()) {
    if (n < 1 || n > MuseStep::kMaxRows) {
      fail("decode takes 1..{} sequences, got {}", MuseStep::kMaxRows, n);
    }
    std::vector<MuseSparkState*> typed;
    for (const Row& row : step) typed.push_back(row.state);
    MuseStep& built = this->step(n, RowMode::kIndependent);
    built.prepare(typed, tokens);
    run_step(built, logits);
    return;
  }
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
  if (fused()) {
    check_append(state, tokens, config_.vocab_size);
    MuseSparkState* typed = &dynamic_cast<MuseSparkState&>(state);
    MuseStep& built = step(rows, RowMode::kVerify);
    built.prepare(std::span<MuseSparkState* const>(&typed, 1), tokens);
    run_step(built, logits);
    return;
  }
  forward(state, tokens, LogitRows::kAll, logits);
  dynamic_cast<MuseSparkState&>(state).hold_verified(rows);
}

void MuseSparkModel::commit(SequenceState& state, int64_t rows_kept) {
  auto& typed = dynamic_cast<MuseSparkState&>(state);
  check_commit(typed.verified_rows(), rows_kept);
  typed.commit(rows_kept);
}

TargetView MuseSparkModel::target_view() const {
  return TargetView{.embed_tokens = weights_.embed_tokens,
                    .lm_head = tensor_parallel() ? whole_lm_head_ : weights_.lm_head,
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .num_layers = config_.num_layers,
                    // The drafter's fused rounds borrow the persistent team (draft_team.h).
                    .executor = &executors_->get(ExecutorKind::kMega),
                    .matmul_inputs = kernels::MatmulInputs::kF32};
}

void MuseSparkModel::set_tap_layers(std::vector<int64_t> layers) {
  check_tap_layers(layers, config_.num_layers);
  tap_layers_ = std::move(layers);
  steps_.clear();  // the step programs copy taps out: rebuilt with the new list
}

}  // namespace md
