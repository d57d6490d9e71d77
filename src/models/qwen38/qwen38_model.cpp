#include "models/qwen38/qwen38_model.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "base/cache_aligned.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/ggml_type.h"
#include "kernels/activations.h"
#include "kernels/matmul.h"
#include "kernels/moe_routing.h"
#include "kernels/norms.h"
#include "models/common/config_files.h"
#include "models/common/prefill_chunks.h"
#include "models/common/tensor_shard.h"
#include "models/qwen38/qwen38_layers.h"
#include "models/qwen38/qwen38_state.h"
#include "models/qwen38/qwen38_tensor_shard.h"
#include "models/qwen38/qwen38_testing.h"

namespace md {

namespace {

// Cache-line aligned: the matrix tiles load 64 bytes at a time (base/cache_aligned.h).
using Buffer = CacheAligned<float>;
Buffer buffer(int64_t n) {
  return Buffer(static_cast<std::size_t>(n));
}

Qwen38Config read_config(const std::string& directory) {
  return parse_qwen38_config(read_config_files(directory));
}

void normalise_rows(const float* x, const std::vector<float>& scale, int64_t rows, int64_t width,
                    float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    kernels::rms_norm(x + t * width, scale.data(), width, eps, y + t * width);
  }
}

void add_into(float* h, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] += delta[i];
}

// bias (empty: nothing) added to each of `rows` rows of h.
void add_rows(float* h, const std::vector<float>& bias, int64_t rows) {
  const auto width = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < rows; ++t) add_into(h + t * width, bias.data(), width);
}

}  // namespace

Qwen38Model::Qwen38Model(const std::string& directory, const ModelRunOptions& run_options,
                         const Qwen38Options& options)
    : directory_(directory),
      config_(read_config(directory)),
      checkpoint_(std::make_unique<Checkpoint>(directory)),
      weights_(bind_qwen38_weights(config_, *checkpoint_)),
      run_options_(run_options),
      options_(options),
      rope_(config_.rotary_dim(), config_.rope_theta),
      pool_(std::make_unique<ThreadPool>(run_options.threads)),
      threads_(pool_->size()),
      executors_(std::make_unique<program::Executors>(threads_)) {
  apply_run_options();
}

Qwen38Model::Qwen38Model(std::string name, Qwen38Config config, Qwen38Weights weights,
                         const ModelRunOptions& run_options, const Qwen38Options& options)
    : directory_(std::move(name)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      run_options_(run_options),
      options_(options),
      rope_(config_.rotary_dim(), config_.rope_theta),
      pool_(std::make_unique<ThreadPool>(run_options.threads)),
      threads_(pool_->size()),
      executors_(std::make_unique<program::Executors>(threads_)) {
  apply_run_options();
}

void Qwen38Model::apply_run_options() {
  check_prefill_rows(run_options_.prefill_rows);
  kernels::check_matmul_inputs(run_options_.matmul_inputs);
  rank_config_ = config_;
  const std::string name = std::filesystem::path(directory_).filename().string();
  require_step_programs(run_options_, name);
  if (tensor_parallel()) {
    if (options_.ablation != testing::Qwen38Ablation{}) {
      fail("{}: tensor parallelism runs the step programs, not the reference forward's test hooks",
           name);
    }
    dist::Communicator& ranks = *run_options_.ranks;
    // The drafter, which runs beside rank 0 alone (it is small; the ranks' programs are what is
    // split), reads the whole head through the same mapping. Its q8 row groups are not built:
    // it multiplies with f32 inputs then (its drafts, not the output, depend on that).
    whole_lm_head_ = weights_.lm_head;
    if (run_options_.matmul_inputs != kernels::MatmulInputs::kQ8) {
      whole_lm_head_.inputs = run_options_.matmul_inputs;
    }
    Qwen38Shard shard = shard_qwen38(config_, std::move(weights_), ranks.rank(), ranks.size(), name,
                                     run_options_.slices);
    run_options_.slices = nullptr;  // a pack's reader lives only as long as the load
    rank_config_ = shard.config;
    weights_ = std::move(shard.weights);
  }
  if (run_options_.matmul_inputs == kernels::MatmulInputs::kQ8 && !has_q8_matrices(weights_)) {
    throw Error(
        "q8 matmul inputs apply to GGUF Q4_0, Q4_1 and Q8_0 weights; this model has none (use f32 "
        "or bf16 inputs)");
  }
  set_matmul_inputs(weights_, run_options_.matmul_inputs);
}

namespace {

// What a product streams (a tensor-parallel rank's column view: its own blocks only).
std::size_t matrix_bytes(const kernels::WeightMatrix& m) {
  return m.bytes(0, m.rows);
}

}  // namespace

namespace {

std::size_t multiplied_bytes(const Qwen38Weights& weights) {
  std::size_t total = 0;
  for_each_multiplied_matrix(weights,
                             [&](const kernels::WeightMatrix& m) { total += matrix_bytes(m); });
  return total;
}

}  // namespace

// A MoE model's row reads only its top-k experts of each layer (more rows may share them or not).
std::size_t Qwen38Model::decode_weight_bytes() const {
  return multiplied_bytes(weights_) - routed_expert_bytes(weights_) + expected_expert_bytes();
}

// Under expert parallelism the rank's expected share of them.
std::size_t Qwen38Model::expected_expert_bytes() const {
  const std::size_t row = routed_expert_bytes_per_row(weights_, config_.moe.experts_per_token);
  if (!tensor_parallel() || !config_.is_moe()) return row;
  return shard::expert_share(row,
                             shard::routed_experts(config_.moe.experts, run_options_.ranks->rank(),
                                                   run_options_.ranks->size(), directory_),
                             config_.moe.experts);
}

std::size_t Qwen38Model::weight_bytes() const {
  // Tied: lm_head is the embedding table, already counted with the multiplied weights.
  return multiplied_bytes(weights_) +
         (config_.tie_word_embeddings ? 0 : matrix_bytes(weights_.embed_tokens));
}

std::string Qwen38Model::description() const {
  const std::string experts =
      config_.is_moe()
          ? fmt::format(", {} experts top-{}", config_.moe.experts, config_.moe.experts_per_token)
          : "";
  return fmt::format("{} {} layers, hidden {}{}, vocab {} ({})",
                     config_.is_moe() ? "qwen3_5_moe" : "qwen3_5", config_.num_layers,
                     config_.hidden_size, experts, config_.vocab_size, directory_);
}

std::vector<int32_t> Qwen38Model::stop_token_ids() const {
  return {config_.eos_token_ids.begin(), config_.eos_token_ids.end()};
}

std::size_t Qwen38Model::state_bytes_per_token() const {
  return Qwen38State::bytes_per_token(rank_config_, run_options_.kv_cache);
}

std::size_t Qwen38Model::state_bytes_fixed() const {
  return Qwen38State::fixed_bytes(rank_config_);
}

std::unique_ptr<SequenceState> Qwen38Model::new_sequence(int64_t capacity) const {
  if (capacity <= 0 || capacity > config_.max_position_embeddings) {
    fail("context {} is outside 1..{} (max_position_embeddings of {})", capacity,
         config_.max_position_embeddings, directory_);
  }
  return std::make_unique<Qwen38State>(rank_config_, capacity, run_options_.kv_cache);
}

void Qwen38Model::check_tokens(const SequenceState& state, std::span<const int32_t> tokens) const {
  check_append(state, tokens, config_.vocab_size);
}

namespace {

// down(act(x·gateᵀ) · (x·upᵀ)) for `rows` rows of x, [rows][I] intermediates.
void gated_mlp(const kernels::WeightMatrix& gate_proj, const kernels::WeightMatrix& up_proj,
               const kernels::WeightMatrix& down_proj, kernels::Activation act, const float* x,
               int64_t rows, float* out, ThreadPool* pool) {
  Buffer gate = buffer(rows * gate_proj.rows);
  Buffer up = buffer(rows * up_proj.rows);
  kernels::matmul(gate_proj, x, rows, gate.data(), pool);
  kernels::matmul(up_proj, x, rows, up.data(), pool);
  kernels::gated_product(act, gate.data(), up.data(), static_cast<int64_t>(gate.size()));
  kernels::matmul(down_proj, gate.data(), rows, out, pool);
}

}  // namespace

void Qwen38Model::mlp(const Qwen38LayerWeights& layer, const float* x, int64_t rows, float* out) {
  if (config_.is_moe()) {
    sparse_moe(layer.moe, x, rows, out);
    return;
  }
  gated_mlp(layer.gate_proj, layer.up_proj, layer.down_proj,
            testing::reference_activation(config_.hidden_act, options_.ablation), x, rows, out,
            pool_.get());
}

// The sparse block of transformers' Qwen3_5MoeSparseMoeBlock, row by row: the chosen experts'
// outputs weighted and summed in ascending expert order, then σ(shared gate) · shared expert.
void Qwen38Model::sparse_moe(const Qwen38MoeWeights& w, const float* x, int64_t rows, float* out) {
  const int64_t h = config_.hidden_size, experts = config_.moe.experts;
  const int64_t k = config_.moe.experts_per_token;
  Buffer logits = buffer(rows * experts), probs = buffer(experts), gate = buffer(rows);
  Buffer shared = buffer(rows * h), expert_out = buffer(h);
  kernels::matmul(w.router, x, rows, logits.data(), pool_.get());
  kernels::matmul(w.shared_expert_gate, x, rows, gate.data(), pool_.get());
  const kernels::Activation act =
      testing::reference_activation(config_.hidden_act, options_.ablation);
  gated_mlp(w.shared_gate_proj, w.shared_up_proj, w.shared_down_proj, act, x, rows, shared.data(),
            pool_.get());
  std::vector<kernels::ExpertChoice> choices(static_cast<std::size_t>(k));
  for (int64_t t = 0; t < rows; ++t) {
    kernels::route_softmax_top_k(logits.data() + t * experts, experts, k, probs.data(),
                                 choices.data());
    if (options_.ablation == testing::Qwen38Ablation::kMoeUnnormalisedWeights) {
      for (kernels::ExpertChoice& c : choices) c.weight = probs[static_cast<std::size_t>(c.expert)];
    }
    kernels::sort_by_expert(choices.data(), k);
    float* y = out + t * h;
    std::fill(y, y + h, 0.0f);
    for (const kernels::ExpertChoice& choice : choices) {
      const auto e = static_cast<std::size_t>(choice.expert);
      gated_mlp(w.experts.gate[e], w.experts.up[e], w.experts.down[e], act, x + t * h, 1,
                expert_out.data(), pool_.get());
      for (int64_t i = 0; i < h; ++i)
        y[i] += expert_out[static_cast<std::size_t>(i)] * choice.weight;
    }
    const float shared_scale = options_.ablation == testing::Qwen38Ablation::kMoeUngatedSharedExpert
                                   ? 1.0f
                                   : kernels::sigmoid(gate[static_cast<std::size_t>(t)]);
    for (int64_t i = 0; i < h; ++i)
      y[i] += shared_scale * shared[static_cast<std::size_t>(t * h + i)];
  }
}

void Qwen38Model::run_layers(Qwen38State& state, std::span<const int32_t> tokens, float* hidden) {
  int64_t rows = static_cast<int64_t>(tokens.size());
  int64_t width = config_.hidden_size;
  const auto n_taps = static_cast<int64_t>(tap_layers_.size());
  last_taps_.assign(static_cast<std::size_t>(rows * n_taps * width), 0.0f);
  auto eps = static_cast<float>(config_.rms_norm_eps);
  Qwen38LayerContext ctx{config_, options_, rope_, pool_.get()};
  Buffer normed = buffer(rows * width);
  Buffer mixed = buffer(rows * width);
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const Qwen38LayerWeights& layer = weights_.layers[static_cast<std::size_t>(i)];
    normalise_rows(hidden, layer.input_layernorm, rows, width, eps, normed.data());
    if (config_.is_full_attention(i)) {
      gated_attention_forward(ctx, layer.attention, state.kv(config_.full_attention_ordinal(i)),
                              state.position(), normed.data(), rows, mixed.data());
    } else {
      gated_deltanet_forward(ctx, layer.gdn, state.gdn(config_.linear_attention_ordinal(i)),
                             normed.data(), rows, mixed.data());
    }
    add_into(hidden, mixed.data(), rows * width);
    if (options_.ablation != testing::Qwen38Ablation::kSkipAttentionBias) {
      add_rows(hidden, layer.attention.o_bias, rows);  // after the residual add, as the step's
    }
    normalise_rows(hidden, layer.post_attention_layernorm, rows, width, eps, normed.data());
    mlp(layer, normed.data(), rows, mixed.data());
    add_into(hidden, mixed.data(), rows * width);
    auto tapped = std::find(tap_layers_.begin(), tap_layers_.end(), i);
    if (tapped == tap_layers_.end()) continue;
    int64_t k = tapped - tap_layers_.begin();
    for (int64_t t = 0; t < rows; ++t) {
      std::copy(hidden + t * width, hidden + (t + 1) * width,
                last_taps_.begin() + (t * n_taps + k) * width);
    }
  }
}

void Qwen38Model::set_tap_layers(std::vector<int64_t> layers) {
  check_tap_layers(layers, config_.num_layers);
  tap_layers_ = std::move(layers);
  steps_.clear();  // the step programs copy taps out: rebuilt with the new list
}

TargetView Qwen38Model::target_view() const {
  // Under tensor parallelism the drafter reads the whole head, not this rank's part of it.
  return TargetView{
      weights_.embed_tokens,     tensor_parallel() ? whole_lm_head_ : weights_.lm_head,
      config_.hidden_size,       config_.vocab_size,
      config_.num_layers,        &executors_->get(ExecutorKind::kMega),
      run_options_.matmul_inputs};
}

// A prompt longer than prefill_rows runs as chunks of that many on every executor: the chunked
// delta rule's bits depend on where its chunks start, so the reference and the programs split
// alike (and the engine's chunks are no longer than this by default).
void Qwen38Model::forward(SequenceState& sequence, std::span<const int32_t> tokens, LogitRows which,
                          std::vector<float>& logits) {
  check_tokens(sequence, tokens);
  auto& state = dynamic_cast<Qwen38State&>(sequence);
  // Each chunk leaves its rows' taps; a prompt of several gathers them (one keeps its own).
  const bool chunks = static_cast<int64_t>(tokens.size()) > run_options_.prefill_rows;
  std::vector<float> taps;
  for_each_prefill_chunk(tokens, run_options_.prefill_rows, which, config_.vocab_size, logits,
                         [&](std::span<const int32_t> chunk, float* out) {
                           if (prefills_by_program()) {
                             prefill_program(state, chunk, which, out);
                           } else {
                             forward_reference(state, chunk, which, out);
                           }
                           if (chunks)
                             taps.insert(taps.end(), last_taps_.begin(), last_taps_.end());
                         });
  if (chunks) last_taps_ = std::move(taps);
}

bool Qwen38Model::prefills_by_program() const {
  return run_options_.executor != ExecutorKind::kReference &&
         options_.ablation == testing::Qwen38Ablation{};
}

void Qwen38Model::prefill_program(Qwen38State& state, std::span<const int32_t> tokens,
                                  LogitRows which, float* logits) {
  Qwen38Step& built = step(run_options_.prefill_rows, RowMode::kPrefill, which);
  Qwen38State* const states[] = {&state};
  built.prepare(states, tokens, logits);
  executors_->get(run_options_.executor).run(built.program());
  built.finish();
  ++prefill_program_runs_;
  const auto taps = static_cast<int64_t>(tap_layers_.size()) * config_.hidden_size;
  last_taps_.assign(built.taps(), built.taps() + built.rows() * taps);
}

void Qwen38Model::forward_reference(Qwen38State& state, std::span<const int32_t> tokens,
                                    LogitRows which, float* logits) {
  int64_t rows = static_cast<int64_t>(tokens.size());
  int64_t width = config_.hidden_size;
  Buffer hidden = buffer(rows * width);
  for (int64_t t = 0; t < rows; ++t) {
    // The loader checked that the table's format dequantises.
    (void)kernels::row_to_f32(weights_.embed_tokens, tokens[static_cast<std::size_t>(t)],
                              hidden.data() + t * width);
  }
  run_layers(state, tokens, hidden.data());
  state.advance(rows);

  int64_t first = which == LogitRows::kAll ? 0 : rows - 1;
  int64_t out_rows = rows - first;
  Buffer normed = buffer(out_rows * width);
  normalise_rows(hidden.data() + first * width, weights_.norm, out_rows, width,
                 static_cast<float>(config_.rms_norm_eps), normed.data());
  kernels::matmul(weights_.lm_head, normed.data(), out_rows, logits, pool_.get());
}

Qwen38Step& Qwen38Model::step(int64_t rows, RowMode mode, LogitRows logits) {
  if (mode != RowMode::kPrefill) logits = LogitRows::kAll;
  // options() may change between runs (tests): a prefill program is kept per chunk too.
  const int64_t chunk =
      mode == RowMode::kPrefill && options_.chunked_delta_rule ? options_.delta_rule_chunk : 0;
  for (auto& built : steps_) {
    if (built->max_rows() == rows && built->mode() == mode && built->logit_rows() == logits &&
        built->delta_rule_chunk() == chunk)
      return *built;
  }
  steps_.push_back(std::make_unique<Qwen38Step>(rank_config_, weights_, rope_, rows, mode, threads_,
                                                config_.max_position_embeddings, tap_layers_,
                                                logits, chunk, run_options_.ranks));
  return *steps_.back();
}

program::Program* Qwen38Model::decode_program(int64_t rows) {
  if (rows < 1 || rows > Qwen38Step::kMaxRows) return nullptr;
  return &step(rows, RowMode::kIndependent).program();
}

void Qwen38Model::run_step(Qwen38Step& built, std::vector<float>& logits) {
  executors_->get(run_options_.executor).run(built.program());
  built.finish();
  int64_t rows = built.rows();
  logits.assign(built.logits(0), built.logits(0) + rows * config_.vocab_size);
  if (!tap_layers_.empty()) {
    last_taps_.assign(built.taps(), built.taps() + rows * static_cast<int64_t>(tap_layers_.size()) *
                                                       config_.hidden_size);
  }
  last_greedy_.resize(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) last_greedy_[static_cast<std::size_t>(r)] = built.greedy(r);
}

// One reference forward per sequence; the taps of every row are kept (each forward replaces
// them), so that a drafter of each sequence sees its own.
void Qwen38Model::decode_reference(std::span<SequenceState* const> states,
                                   std::span<const int32_t> tokens, std::vector<float>& logits) {
  std::vector<float> taps;
  decode_each(states, tokens, logits,
              [&](std::size_t) { taps.insert(taps.end(), last_taps_.begin(), last_taps_.end()); });
  last_taps_ = std::move(taps);
}

void Qwen38Model::decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                         std::vector<float>& logits) {
  if (run_options_.executor == ExecutorKind::kReference) {
    decode_reference(states, tokens, logits);
    last_decode_.fused = false;
    last_decode_.rows = tokens.size();
    return;
  }
  auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > Qwen38Step::kMaxRows || states.size() != tokens.size()) {
    fail("decode takes 1..{} sequences with one token each (got {} and {})", Qwen38Step::kMaxRows,
         states.size(), tokens.size());
  }
  std::vector<Qwen38State*> typed;
  for (SequenceState* state : states) typed.push_back(&dynamic_cast<Qwen38State&>(*state));
  Qwen38Step& built = step(rows, RowMode::kIndependent);
  built.prepare(typed, tokens);
  run_step(built, logits);
  // The plans are copied: a step may be rebuilt (new taps) before the bytes are asked for.
  last_decode_.fused = true;
  last_decode_.rows = static_cast<std::size_t>(rows);
  built.experts_run(last_decode_.experts_run);
}

std::size_t Qwen38Model::last_step_weight_bytes() const {
  if (last_decode_.rows == 0) return 0;
  // The reference runs one whole forward per row.
  if (!last_decode_.fused) return last_decode_.rows * decode_weight_bytes();
  return decode_weight_bytes() - expected_expert_bytes() +
         routed_expert_bytes_run(weights_, last_decode_.experts_run);
}

void Qwen38Model::verify(SequenceState& state, std::span<const int32_t> tokens,
                         std::vector<float>& logits) {
  auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > Qwen38Step::kMaxRows) {
    fail("verify takes 1..{} tokens, got {}", Qwen38Step::kMaxRows, rows);
  }
  Qwen38State* typed = &dynamic_cast<Qwen38State&>(state);
  Qwen38Step& built = step(rows, RowMode::kVerify);
  built.prepare(std::span<Qwen38State* const>(&typed, 1), tokens);
  run_step(built, logits);
}

void Qwen38Model::commit(SequenceState& state, int64_t rows_kept) {
  for (auto& built : steps_) {
    if (built->mode() == RowMode::kVerify && built->last_state() == &state) {
      built->commit(dynamic_cast<Qwen38State&>(state), rows_kept);
      return;
    }
  }
  fail("commit without a verify run on this sequence");
}

}  // namespace md
