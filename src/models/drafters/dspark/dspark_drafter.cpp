#include "models/drafters/dspark/dspark_drafter.h"

#include <algorithm>
#include <cmath>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/attention_runs.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/common/config_files.h"
#include "models/drafters/draft_context_program.h"
#include "models/drafters/draft_rows.h"
#include "models/drafters/draft_team.h"
#include "models/drafters/dspark/dspark_step.h"
#include "models/model_family.h"

namespace md {

namespace {

using Buffer = std::vector<float>;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

DSparkConfig checked_against(DSparkConfig config, const TargetView& target) {
  check_dspark_target(
      config, DraftTarget{"the target", target.hidden_size, target.vocab_size, target.num_layers});
  return config;
}

DSparkConfig read_config(const std::string& directory, const TargetView& target) {
  ConfigFiles files = read_config_files(directory);
  ModelFamily family = detect_model_family(files.config, files.config_path);
  if (family != ModelFamily::kDSpark) {
    fail("{}: a {} model, not a DSpark drafter", files.config_path, family_name(family));
  }
  return checked_against(parse_dspark_config(files), target);
}

// Row `r` of a bf16 matrix widened to f32 (a Markov code lookup).
void widen_row(const kernels::Bf16Matrix& m, int64_t r, float* out) {
  const uint16_t* row = m.row(r);
  for (int64_t c = 0; c < m.cols; ++c) out[c] = bf16_to_f32(row[c]);
}

int32_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) best = row[i] > row[best] ? i : best;  // ties: lowest id
  return static_cast<int32_t>(best);
}

using Distribution = std::vector<std::pair<int32_t, float>>;

// A draft from its row of logits (draft ids): temperature <= 0, the first maximum with q =
// {draft: 1}; otherwise the draw of `uniform` from softmax(logits / T) by its cumulative sum in
// id order, q that whole distribution. `scratch` holds a row.
int32_t choose_draft(const Buffer& logits, float temperature, double uniform, Buffer& scratch,
                     Distribution& q) {
  const auto vocab = static_cast<int64_t>(logits.size());
  const int32_t best = argmax(logits.data(), vocab);
  if (temperature <= 0) {
    q.emplace_back(best, 1.0f);
    return best;
  }
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    scratch[size(i)] = std::exp((logits[size(i)] - logits[size(best)]) / temperature);
    total += scratch[size(i)];
  }
  const double target = uniform * total;
  double cumulative = 0;
  auto drawn = static_cast<int32_t>(vocab - 1);
  bool found = false;
  q.reserve(size(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    cumulative += scratch[size(i)];
    if (!found && cumulative > target) {
      drawn = static_cast<int32_t>(i);
      found = true;
    }
    q.emplace_back(static_cast<int32_t>(i), static_cast<float>(scratch[size(i)] / total));
  }
  return drawn;
}

}  // namespace

// What every sequence's drafter of one checkpoint shares.
struct DSparkDrafter::Shared {
  Shared(const std::string& directory, const TargetView& target_view, int threads,
         const DSparkOptions& drafter_options)
      : config(read_config(directory, target_view)),
        target(target_view),
        options(drafter_options),
        checkpoint(std::make_unique<Checkpoint>(directory)),
        weights(bind_dspark_weights(config, *checkpoint, target)),
        context(dspark_context_spec(config, weights)),
        rope(config.head_dim, config.rope_theta),
        pool(std::make_unique<ThreadPool>(threads)) {
    build_context_program();
  }
  Shared(DSparkConfig drafter_config, DSparkWeights drafter_weights, const TargetView& target_view,
         int threads, const DSparkOptions& drafter_options)
      : config(checked_against(std::move(drafter_config), target_view)),
        target(target_view),
        options(drafter_options),
        weights(std::move(drafter_weights)),
        context(dspark_context_spec(config, weights)),
        rope(config.head_dim, config.rope_theta),
        pool(std::make_unique<ThreadPool>(threads)) {
    build_context_program();
  }

  // The fused round's program, built by the first fused round (one worker per pool thread).
  DSparkStep& fused_step() {
    if (step == nullptr) {
      step = std::make_unique<DSparkStep>(config, weights, context, rope, pool->size());
    }
    return *step;
  }
  void run(program::Program& program) {
    team.get(target, pool->size(), options.executor).run(program);
  }
  bool fused() const { return options.executor != ExecutorKind::kReference; }
  // A fused drafter's sequences run their prompts' context rows as programs on the same team.
  void build_context_program() {
    if (!fused()) return;
    context_rows = std::make_unique<DraftContextProgram>(
        context, rope, pool->size(), [this](program::Program& program) { run(program); });
  }

  DSparkConfig config;
  TargetView target;
  DSparkOptions options;
  std::unique_ptr<Checkpoint> checkpoint;
  DSparkWeights weights;
  DraftContextSpec context;
  kernels::Rope rope;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<DSparkStep> step;
  DraftTeam team;
  std::unique_ptr<DraftContextProgram> context_rows;  // fused only
};

// The block's activations: rows [rows][width] each.
struct DSparkDrafter::Block {
  Block(const DSparkConfig& c, int64_t block_rows)
      : rows(block_rows),
        x(size(rows * c.hidden_size)),
        normed(size(rows * c.hidden_size)),
        projected(size(rows * c.hidden_size)),
        q(size(rows * c.q_dim())),
        k(size(rows * c.kv_dim())),
        v(size(rows * c.kv_dim())),
        attended(size(rows * c.q_dim())),
        gate(size(rows * c.intermediate_size)),
        up(size(rows * c.intermediate_size)) {}
  int64_t rows;
  Buffer x, normed, projected, q, k, v, attended, gate, up;
};

DSparkDrafter::DSparkDrafter(const std::string& directory, const TargetView& target, int threads,
                             const DSparkOptions& options)
    : DSparkDrafter(std::make_shared<Shared>(directory, target, threads, options)) {}

DSparkDrafter::DSparkDrafter(DSparkConfig config, DSparkWeights weights, const TargetView& target,
                             int threads, const DSparkOptions& options)
    : DSparkDrafter(std::make_shared<Shared>(std::move(config), std::move(weights), target, threads,
                                             options)) {}

DSparkDrafter::DSparkDrafter(std::shared_ptr<Shared> shared)
    : shared_(std::move(shared)),
      config_(shared_->config),
      weights_(shared_->weights),
      rope_(shared_->rope),
      pool_(shared_->pool.get()),
      context_(std::make_unique<PendingDraftContext>(shared_->context, rope_, pool_,
                                                     fused() ? DSparkStep::kMaxNewContextRows : 0,
                                                     shared_->context_rows.get())) {}

bool DSparkDrafter::fused() const {
  return shared_->fused();
}

std::vector<int64_t> DSparkDrafter::tap_layers() const {
  std::vector<int64_t> layers;
  for (int64_t id : config_.aux_hidden_state_layer_ids) layers.push_back(id - 1);
  return layers;
}

std::unique_ptr<SpeculativeDrafter> DSparkDrafter::new_sequence() const {
  return std::unique_ptr<SpeculativeDrafter>(new DSparkDrafter(shared_));
}

std::unique_ptr<SpeculativeDrafter> DSparkDrafter::clone() const {
  std::unique_ptr<DSparkDrafter> copy(new DSparkDrafter(shared_));
  copy->context_ = std::make_unique<PendingDraftContext>(*context_);
  return copy;
}

// §13.5 steps 1–4: the input norm, q/k/v with their per-head norms and RoPE at each row's
// position, attention per query head over the context window and the block rows up to its own,
// o added to the rows.
void DSparkDrafter::attention(int64_t layer, int64_t anchor_position, Block& b) const {
  const DSparkConfig& c = config_;
  const DSparkLayerWeights& w = weights_.layers[size(layer)];
  const int64_t hd = c.head_dim, group = c.gqa_group();
  const auto eps = static_cast<float>(c.rms_norm_eps);
  normalise_draft_rows(b.x.data(), w.input_layernorm, b.rows, c.hidden_size, eps, b.normed.data());
  kernels::matmul(w.q_proj, b.normed.data(), b.rows, b.q.data(), pool_);
  kernels::matmul(w.k_proj, b.normed.data(), b.rows, b.k.data(), pool_);
  kernels::matmul(w.v_proj, b.normed.data(), b.rows, b.v.data(), pool_);
  Buffer cos_values(size(hd / 2)), sin_values(size(hd / 2));
  for (int64_t t = 0; t < b.rows; ++t) {
    rope_.angles(anchor_position + t, cos_values.data(), sin_values.data());
    auto prepare = [&](float* head, const uint16_t* norm) {
      kernels::rms_norm(head, norm, hd, eps, kernels::NormWeight::kPlain, head);
      rope_.apply(head, cos_values.data(), sin_values.data());
    };
    for (int64_t h = 0; h < c.num_attention_heads; ++h)
      prepare(&b.q[size(t * c.q_dim() + h * hd)], w.q_norm);
    for (int64_t g = 0; g < c.num_key_value_heads; ++g)
      prepare(&b.k[size(t * c.kv_dim() + g * hd)], w.k_norm);
  }
  // Visible (§13.4): the context positions [anchor − window, anchor) and block rows 0..t.
  const int64_t first = std::max<int64_t>(0, anchor_position - c.sliding_window);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto run = [&](int64_t begin, int64_t end) {
    Buffer scores(size(c.sliding_window + b.rows));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / c.num_attention_heads, h = task % c.num_attention_heads;
      const int64_t g = h / group;
      std::vector<kernels::KeyRun> runs =
          context_->stored().key_runs(layer, g, first, anchor_position);
      runs.push_back({b.k.data() + g * hd, b.v.data() + g * hd, t + 1, c.kv_dim()});
      kernels::attend_runs(b.q.data() + t * c.q_dim() + h * hd, runs, hd, scale, scores.data(),
                           b.attended.data() + t * c.q_dim() + h * hd);
    }
  };
  const int64_t tasks = b.rows * c.num_attention_heads;
  pool_->parallel_for_work(tasks, 2 * tasks * (c.sliding_window + b.rows) * hd, run);
  kernels::matmul(w.o_proj, b.attended.data(), b.rows, b.projected.data(), pool_);
  add_draft_rows(b.x.data(), b.projected.data(), b.rows * c.hidden_size);
}

// §13.5 steps 5–7: the post-attention norm and the SwiGLU MLP added to the rows.
void DSparkDrafter::mlp(int64_t layer, Block& b) const {
  const DSparkConfig& c = config_;
  const DSparkLayerWeights& w = weights_.layers[size(layer)];
  normalise_draft_rows(b.x.data(), w.post_attention_layernorm, b.rows, c.hidden_size,
                       static_cast<float>(c.rms_norm_eps), b.normed.data());
  kernels::matmul(w.gate_proj, b.normed.data(), b.rows, b.gate.data(), pool_);
  kernels::matmul(w.up_proj, b.normed.data(), b.rows, b.up.data(), pool_);
  for (std::size_t i = 0; i < b.gate.size(); ++i) b.gate[i] = kernels::silu(b.gate[i]) * b.up[i];
  kernels::matmul(w.down_proj, b.gate.data(), b.rows, b.projected.data(), pool_);
  add_draft_rows(b.x.data(), b.projected.data(), b.rows * c.hidden_size);
}

void DSparkDrafter::markov_logits(int32_t previous, const float* base, float* out) const {
  const DSparkConfig& c = config_;
  Buffer code(size(c.markov_rank));
  widen_row(weights_.markov_w1, previous, code.data());
  kernels::matmul(weights_.markov_w2, code.data(), 1, out, pool_);
  for (int64_t i = 0; i < c.draft_vocab_size; ++i) out[i] = base[i] + out[i];
}

int32_t DSparkDrafter::target_token(int32_t draft_id) const {
  const std::vector<int32_t>& map = weights_.draft_to_target;
  return map.empty() ? draft_id : map[size(draft_id)];
}

float DSparkDrafter::confidence(int32_t previous, const float* hidden) const {
  const DSparkConfig& c = config_;
  const uint16_t* w = weights_.confidence.row(0);
  double logit = weights_.confidence_bias[0];
  for (int64_t i = 0; i < c.hidden_size; ++i) logit += double{bf16_to_f32(w[i])} * hidden[i];
  if (c.confidence_head_with_markov) {
    const uint16_t* code = weights_.markov_w1.row(previous);
    for (int64_t r = 0; r < c.markov_rank; ++r) {
      logit += double{bf16_to_f32(w[c.hidden_size + r])} * bf16_to_f32(code[r]);
    }
  }
  return static_cast<float>(1.0 / (1.0 + std::exp(-logit)));
}

DraftProposal DSparkDrafter::propose(int32_t anchor, float temperature,
                                     std::span<const double> uniforms, bool keep_logits) {
  const DSparkConfig& c = config_;
  const int64_t drafts = c.block_size - 1;
  if (anchor < 0 || anchor >= c.vocab_size) {
    fail("DSpark: anchor token {} is outside the vocabulary of {}", anchor, c.vocab_size);
  }
  if (temperature > 0 && static_cast<int64_t>(uniforms.size()) < drafts) {
    fail("DSpark: sampling {} drafts needs as many uniforms, got {}", drafts, uniforms.size());
  }
  if (fused()) {
    DSparkStep& step = shared_->fused_step();
    auto [taps, rows] = context_->take_pending();  // the program computes them
    step.prepare(anchor, context_->stored(), taps, rows);
    shared_->run(step.program());
    step.finish();
    return chain(anchor, step.logits().data(), step.hidden(), temperature, uniforms, keep_logits);
  }
  Block b(c, drafts);
  const Buffer base = block_forward(anchor, b);
  return chain(anchor, base.data(), b.normed.data(), temperature, uniforms, keep_logits);
}

std::vector<float> DSparkDrafter::block_forward(int32_t anchor, Block& b) const {
  const DSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  DraftContext& context = context_->stored();
  const int64_t anchor_position = context.length();
  context.prepare_keys(anchor_position - c.sliding_window);
  // The block's last row only predicts a token after the last draft, which is never verified,
  // and the block is causal: the rows before it do not see it, so it is not run.
  for (int64_t t = 0; t < b.rows; ++t) {
    const int32_t token = t == 0 ? anchor : static_cast<int32_t>(c.mask_token_id);
    if (!kernels::row_to_f32(weights_.embed_tokens, token, b.x.data() + t * h)) {
      fail("DSpark: cannot read embedding rows stored as {}", weights_.embed_tokens.format_name());
    }
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    attention(l, anchor_position, b);
    mlp(l, b);
  }
  normalise_draft_rows(b.x.data(), weights_.norm, b.rows, h, static_cast<float>(c.rms_norm_eps),
                       b.normed.data());
  Buffer base(size(b.rows * c.draft_vocab_size));
  kernels::matmul(weights_.lm_head, b.normed.data(), b.rows, base.data(), pool_);
  return base;
}

DraftProposal DSparkDrafter::chain(int32_t anchor, const float* base, const float* hidden,
                                   float temperature, std::span<const double> uniforms,
                                   bool keep_logits) const {
  const DSparkConfig& c = config_;
  const int64_t drafts = c.block_size - 1, vocab = c.draft_vocab_size;
  // §13.6: the Markov chain, left to right, each draft conditioning the next. Rows are over the
  // draft vocabulary; tokens, q and the next row's Markov code are target ids.
  DraftProposal proposal;
  Buffer logits(size(vocab)), scratch(size(vocab));
  int32_t previous = anchor;
  for (int64_t k = 0; k < drafts; ++k) {
    markov_logits(previous, base + k * vocab, logits.data());
    if (keep_logits) proposal.logits.insert(proposal.logits.end(), logits.begin(), logits.end());
    Distribution q;
    const int32_t token = target_token(
        choose_draft(logits, temperature, temperature > 0 ? uniforms[size(k)] : 0, scratch, q));
    for (auto& entry : q) entry.first = target_token(entry.first);
    if (c.enable_confidence_head) {
      proposal.confidence.push_back(confidence(previous, hidden + k * c.hidden_size));
    }
    proposal.tokens.push_back(token);
    proposal.q.push_back(std::move(q));
    previous = token;
  }
  return proposal;
}

std::unique_ptr<SpeculativeDrafter> load_dspark_drafter(const std::string& directory,
                                                        const TargetView& target, int threads,
                                                        ExecutorKind executor) {
  return std::make_unique<DSparkDrafter>(directory, target, threads,
                                         DSparkOptions{.executor = executor});
}

}  // namespace md
