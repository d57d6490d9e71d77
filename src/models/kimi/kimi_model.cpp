#include "models/kimi/kimi_model.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "models/common/config_files.h"
#include "models/common/prefill_chunks.h"
#include "models/common/tensor_shard.h"
#include "models/kimi/kimi_tensor_shard.h"

namespace md {

namespace {

std::size_t matrix_bytes(const kernels::WeightMatrix& m) {
  return m.bytes(0, m.rows);
}

// The latent cache in the run's KV cache type (--kv-cache; bf16 by default).
KimiReferenceOptions with_cache_type(KimiReferenceOptions options, const ModelRunOptions& run) {
  options.bf16_latent_cache = run.kv_cache == KvCacheType::kBf16;
  return options;
}

}  // namespace

KimiModel::KimiModel(const std::string& directory, const ModelRunOptions& run_options,
                     KimiReferenceOptions reference_options)
    : directory_(directory),
      config_(parse_kimi_k3_config(read_config_files(directory))),
      checkpoint_(std::make_unique<Checkpoint>(directory)),
      weights_(bind_kimi_k3_weights(*checkpoint_, config_)),
      pool_(std::make_unique<ThreadPool>(run_options.threads)),
      executor_(run_options.executor),
      prefill_rows_(run_options.prefill_rows),
      executors_(std::make_unique<program::Executors>(pool_->size())) {
  apply_run_options(run_options, reference_options);
}

KimiModel::KimiModel(std::string name, KimiK3Config config, KimiK3Weights weights,
                     std::size_t resident_bytes, const ModelRunOptions& run_options)
    : directory_(std::move(name)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      resident_bytes_(resident_bytes),
      pool_(std::make_unique<ThreadPool>(run_options.threads)),
      executor_(run_options.executor),
      prefill_rows_(run_options.prefill_rows),
      executors_(std::make_unique<program::Executors>(pool_->size())) {
  apply_run_options(run_options, {});
}

void KimiModel::apply_run_options(const ModelRunOptions& run_options,
                                  const KimiReferenceOptions& reference_options) {
  check_run_options(run_options, directory_);
  const KimiReferenceOptions options = with_cache_type(reference_options, run_options);
  rank_config_ = config_;
  if (dist::tensor_parallel(run_options.ranks)) {
    if (!runs_programs(executor_, options)) {
      fail(
          "{}: tensor parallelism runs the step programs, not the reference forward's test "
          "hooks",
          directory_);
    }
    ranks_ = run_options.ranks;
    whole_lm_head_ = weights_.lm_head;
    KimiShard shard =
        shard_kimi(config_, std::move(weights_), ranks_->rank(), ranks_->size(),
                   std::filesystem::path(directory_).filename().string(), run_options.slices);
    rank_config_ = shard.config;
    weights_ = std::move(shard.weights);
    experts_ =
        shard::routed_experts(config_.num_experts, ranks_->rank(), ranks_->size(), directory_);
  }
  // Over the heads the rank holds: its key-absorb matrices and its share of the KDA state.
  reference_ = std::make_unique<KimiReference>(rank_config_, weights_, options, pool_.get());
}

void KimiModel::check_run_options(const ModelRunOptions& run_options, const std::string& name) {
  require_stored_dense_weights(run_options, name);
  require_step_programs(run_options, name);
  if (run_options.matmul_inputs != kernels::MatmulInputs::kF32) {
    fail("{}: kimi_k3 runs its matrices with f32 inputs only for now", name);
  }
  check_prefill_rows(run_options.prefill_rows);
}

std::string KimiModel::description() const {
  return fmt::format(
      "kimi_k3 {} layers ({} KDA, {} MLA), hidden {}, {} experts top-{} (MXFP4), vocab {}{} ({})",
      config_.num_layers, config_.num_kda_layers(), config_.num_mla_layers(), config_.hidden_size,
      config_.num_experts, config_.num_experts_per_token, config_.vocab_size,
      tensor_parallel() ? fmt::format(", rank {} of {} (experts {}..{})", ranks_->rank(),
                                      ranks_->size(), experts_.begin, experts_.end - 1)
                        : "",
      directory_);
}

int64_t KimiModel::max_context() const {
  return config_.max_position_embeddings;
}

std::vector<int32_t> KimiModel::stop_token_ids() const {
  return {config_.eos_token_ids.begin(), config_.eos_token_ids.end()};
}

std::size_t KimiModel::state_bytes_per_token() const {
  // The absorbed latent cache (§7.2) in the run's cache type.
  return static_cast<std::size_t>(config_.num_mla_layers() * config_.mla_latent_cache_width()) *
         (reference_->options().bf16_latent_cache ? sizeof(uint16_t) : sizeof(float));
}

std::size_t KimiModel::state_bytes_fixed() const {
  // The rank's KDA heads (all of them on one rank).
  const KimiK3Config& c = rank_config_;
  const int64_t conv = 3 * (c.short_conv_kernel - 1) * c.kda_channels();
  const int64_t delta = c.kda_num_heads * c.kda_head_dim * c.kda_head_dim;
  return static_cast<std::size_t>(config_.num_kda_layers() * (conv + delta)) * sizeof(float);
}

std::unique_ptr<SequenceState> KimiModel::new_sequence(int64_t capacity) const {
  if (capacity <= 0 || capacity > max_context()) {
    fail("context {} is outside 1..{} (the context limit of {})", capacity, max_context(),
         directory_);
  }
  return std::make_unique<KimiState>(rank_config_, reference_->new_state(), capacity,
                                     reference_->options().bf16_latent_cache);
}

// Every row's taps are written by the step, so the buffer is only sized, not cleared.
float* KimiModel::taps_for(int64_t rows) {
  last_taps_.resize(static_cast<std::size_t>(rows * tap_width()));
  return tap_layers_.empty() ? nullptr : last_taps_.data();
}

float* KimiModel::tap_row(float* taps, int64_t row) const {
  return taps != nullptr ? taps + row * tap_width() : nullptr;
}

// A single token runs the decode form, several the chunked prefill form, in pieces of
// prefill_rows (bounding the per-token activations the reference keeps; each piece runs KDA
// chunked, in chunks of KimiReferenceOptions::kda_chunk, as the prefill programs do).
void KimiModel::run_tokens(KimiState& state, const int32_t* ids, int64_t n, float* logits,
                           int64_t logit_rows, float* taps) const {
  const int64_t vocab = config_.vocab_size, first_logit = n - logit_rows;
  for (int64_t begin = 0; begin < n; begin += prefill_rows_) {
    const int64_t end = std::min(n, begin + prefill_rows_);
    const int64_t from = std::max(begin, first_logit);
    const int64_t rows = std::max<int64_t>(0, end - from);
    reference_->run(ids + begin, end - begin, state.data(), /*chunked=*/n > 1,
                    rows > 0 ? logits + (from - first_logit) * vocab : nullptr, rows,
                    tap_row(taps, begin));
  }
  state.sync_position();
}

void KimiModel::forward(SequenceState& base, std::span<const int32_t> tokens, LogitRows rows,
                        std::vector<float>& logits) {
  check_append(base, tokens, config_.vocab_size);
  auto& state = dynamic_cast<KimiState&>(base);
  state.keep_all();
  const auto n = static_cast<int64_t>(tokens.size());
  // One token runs the decode form (the reference's recurrence: a one-row decode step computes
  // the same bits), several the chunked form.
  if (fused()) {
    if (n > 1) {
      prefill(state, tokens, rows, logits);
    } else {
      run_one_sequence(state, tokens, RowMode::kIndependent, logits);
    }
    return;
  }
  const int64_t out_rows = rows == LogitRows::kAll ? n : 1;
  logits.resize(static_cast<std::size_t>(out_rows * config_.vocab_size));
  run_tokens(state, tokens.data(), n, logits.data(), out_rows, taps_for(n));
}

// The chunks are run_tokens' pieces, so KDA's chunks start where the reference's do.
void KimiModel::prefill(KimiState& state, std::span<const int32_t> tokens, LogitRows which,
                        std::vector<float>& logits) {
  KimiStep& built = step(prefill_rows_, RowMode::kPrefill, which);
  float* taps = taps_for(static_cast<int64_t>(tokens.size()));
  KimiState* const states[] = {&state};
  for_each_prefill_chunk(tokens, prefill_rows_, which, config_.vocab_size, logits,
                         [&](std::span<const int32_t> chunk, float* out) {
                           built.prepare(states, chunk, out);
                           executors_->get(executor_).run(built.program());
                           built.finish();
                           ++prefill_program_runs_;
                           if (taps == nullptr) return;
                           const int64_t floats = built.rows() * tap_width();
                           taps = std::copy(built.taps(), built.taps() + floats, taps);
                         });
}

void KimiModel::decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                       std::vector<float>& logits) {
  if (states.size() != tokens.size()) {
    fail("decode: {} sequences but {} tokens", states.size(), tokens.size());
  }
  for (std::size_t i = 0; i < states.size(); ++i) {
    check_append(*states[i], tokens.subspan(i, 1), config_.vocab_size);
    for (std::size_t j = 0; j < i; ++j) {
      if (states[j] == states[i]) fail("decode: sequence {} is also row {}", i, j);
    }
  }
  const auto rows = static_cast<int64_t>(states.size());
  if (fused()) {
    if (rows < 1 || rows > KimiStep::kMaxRows) {
      fail("decode takes 1..{} sequences, got {}", KimiStep::kMaxRows, rows);
    }
    std::vector<KimiState*> typed;
    for (SequenceState* state : states) typed.push_back(&dynamic_cast<KimiState&>(*state));
    KimiStep& built = step(rows, RowMode::kIndependent);
    built.prepare(typed, tokens);
    run_step(built, logits);
    return;
  }
  last_step_fused_ = false;
  last_step_rows_ = rows;
  const int64_t vocab = config_.vocab_size;
  logits.resize(static_cast<std::size_t>(rows * vocab));
  float* taps = taps_for(rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto& state = dynamic_cast<KimiState&>(*states[r]);
    state.keep_all();
    run_tokens(state, &tokens[r], 1, logits.data() + r * vocab, 1, tap_row(taps, r));
  }
}

void KimiModel::verify(SequenceState& base, std::span<const int32_t> tokens,
                       std::vector<float>& logits) {
  const auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > kKimiVerifyRows) {
    fail("verify takes 1..{} tokens, got {}", kKimiVerifyRows, rows);
  }
  check_append(base, tokens, config_.vocab_size);
  auto& state = dynamic_cast<KimiState&>(base);
  if (fused()) {
    run_one_sequence(state, tokens, RowMode::kVerify, logits);
    return;
  }
  const int64_t vocab = config_.vocab_size;
  logits.resize(static_cast<std::size_t>(rows * vocab));
  float* taps = taps_for(rows);
  last_step_fused_ = false;
  last_step_rows_ = rows;
  state.begin_verify();
  for (int64_t r = 0; r < rows; ++r) {
    if (r > 0) state.after_verify_row();
    run_tokens(state, &tokens[r], 1, logits.data() + r * vocab, 1, tap_row(taps, r));
  }
  state.end_verify(rows);
}

void KimiModel::commit(SequenceState& base, int64_t rows_kept) {
  auto& state = dynamic_cast<KimiState&>(base);
  check_commit(state.verified_rows(), rows_kept);
  state.commit(rows_kept);
}

void KimiModel::set_tap_layers(std::vector<int64_t> layers) {
  check_tap_layers(layers, config_.num_layers);
  tap_layers_ = layers;
  reference_->set_tap_layers(std::move(layers));
  steps_.clear();  // the step programs copy taps out: rebuilt with the new list
}

TargetView KimiModel::target_view() const {
  return TargetView{.embed_tokens = weights_.embed_tokens,
                    .lm_head = tensor_parallel() ? whole_lm_head_ : weights_.lm_head,
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .num_layers = config_.num_layers,
                    // The drafter's fused rounds borrow the persistent team (draft_team.h).
                    .executor = &executors_->get(ExecutorKind::kMega),
                    .matmul_inputs = kernels::MatmulInputs::kF32};
}

bool KimiModel::runs_programs(ExecutorKind executor, const KimiReferenceOptions& o) {
  return executor != ExecutorKind::kReference && o.ablation == KimiAblation::kNone &&
         o.absorbed_mla && o.latent_cache_perturbation == 0;
}

bool KimiModel::fused() const {
  return runs_programs(executor_, reference_->options());
}

KimiStep& KimiModel::step(int64_t rows, RowMode mode, LogitRows logits) {
  if (mode != RowMode::kPrefill) logits = LogitRows::kAll;
  for (auto& built : steps_) {
    if (built->max_rows() == rows && built->mode() == mode && built->logit_rows() == logits)
      return *built;
  }
  steps_.push_back(std::make_unique<KimiStep>(rank_config_, weights_, *reference_, rows, mode,
                                              pool_->size(), tap_layers_, logits, ranks_));
  return *steps_.back();
}

program::Program* KimiModel::decode_program(int64_t rows) {
  if (rows < 1 || rows > KimiStep::kMaxRows) return nullptr;
  return &step(rows, RowMode::kIndependent).program();
}

void KimiModel::run_one_sequence(KimiState& state, std::span<const int32_t> tokens, RowMode mode,
                                 std::vector<float>& logits) {
  KimiState* const states[] = {&state};
  KimiStep& built = step(static_cast<int64_t>(tokens.size()), mode);
  built.prepare(states, tokens);
  run_step(built, logits);
}

void KimiModel::run_step(KimiStep& built, std::vector<float>& logits) {
  executors_->get(executor_).run(built.program());
  built.finish();
  const int64_t rows = built.rows();
  logits.assign(built.logits(0), built.logits(0) + rows * config_.vocab_size);
  last_taps_.assign(built.taps(), built.taps() + rows * tap_width());
  last_greedy_.resize(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) last_greedy_[static_cast<std::size_t>(r)] = built.greedy(r);
  built.experts_run(experts_run_);
  last_step_fused_ = true;
  last_step_rows_ = rows;
}

std::size_t KimiModel::decode_weight_bytes() const {
  // Under expert parallelism the rank's expected share of the k experts a token takes.
  const dist::Range held = tensor_parallel() ? experts_ : dist::Range{0, config_.num_experts};
  std::size_t total = dense_decode_bytes();
  for (int64_t l = config_.first_k_dense_replace; l < config_.num_layers; ++l) {
    total += shard::expert_share(
        expert_bytes(l) * static_cast<std::size_t>(config_.num_experts_per_token), held,
        config_.num_experts);
  }
  return total;
}

std::size_t KimiModel::expert_bytes(int64_t layer) const {
  const kernels::ExpertMatrices& e = weights_.layers[static_cast<std::size_t>(layer)].moe.experts;
  return matrix_bytes(e.gate[0]) + matrix_bytes(e.up[0]) + matrix_bytes(e.down[0]);
}

std::size_t KimiModel::last_step_weight_bytes() const {
  if (last_step_rows_ == 0) return 0;
  // The reference forward reads every matrix again for each row.
  if (!last_step_fused_) return decode_weight_bytes() * static_cast<std::size_t>(last_step_rows_);
  std::size_t total = dense_decode_bytes();
  for (std::size_t i = 0; i < experts_run_.size(); ++i) {
    const int64_t layer = config_.first_k_dense_replace + static_cast<int64_t>(i);
    total += expert_bytes(layer) * static_cast<std::size_t>(experts_run_[i]);
  }
  return total;
}

std::size_t KimiModel::dense_decode_bytes() const {
  std::size_t total = matrix_bytes(weights_.lm_head);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const KimiLayerWeights& w = weights_.layers[l];
    total += matrix_bytes(w.g_proj) + matrix_bytes(w.o_proj);
    if (config_.layer_kind(l) == KimiLayerKind::kKda) {
      const KimiKdaWeights& k = w.kda;
      total += matrix_bytes(k.q_proj) + matrix_bytes(k.k_proj) + matrix_bytes(k.v_proj) +
               matrix_bytes(k.f_a_proj) + matrix_bytes(k.f_b_proj) + matrix_bytes(k.b_proj);
    } else {
      const KimiMlaWeights& m = w.mla;
      total += matrix_bytes(m.q_a_proj) + matrix_bytes(m.q_b_proj) + matrix_bytes(m.kv_a_proj) +
               matrix_bytes(m.kv_b_proj);
    }
    if (!config_.is_moe_layer(l)) {
      total += matrix_bytes(w.dense_gate) + matrix_bytes(w.dense_up) + matrix_bytes(w.dense_down);
      continue;
    }
    const KimiMoeWeights& m = w.moe;
    total += matrix_bytes(m.router) + matrix_bytes(m.latent_down) + matrix_bytes(m.latent_up);
    if (config_.num_shared_experts > 0) {
      total +=
          matrix_bytes(m.shared_gate) + matrix_bytes(m.shared_up) + matrix_bytes(m.shared_down);
    }
  }
  return total;
}

}  // namespace md
