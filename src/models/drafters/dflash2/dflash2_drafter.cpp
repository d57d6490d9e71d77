// The DFlash2 draft forward of one round (qwen38-dflash2.md §11.5) and the drafter's plumbing.
#include "models/drafters/dflash2/dflash2_drafter.h"

#include <algorithm>
#include <cmath>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/attention_runs.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/common/config_files.h"
#include "models/drafters/dflash2/dflash2_conv.h"
#include "models/drafters/dflash2/dflash2_head_math.h"
#include "models/drafters/dflash2/dflash2_selector.h"
#include "models/drafters/dflash2/dflash2_step.h"
#include "models/drafters/dflash2/dflash2_testing.h"
#include "models/drafters/draft_context_program.h"
#include "models/drafters/draft_rows.h"
#include "models/drafters/draft_team.h"
#include "models/model_family.h"
#include "program/executor.h"

namespace md {

namespace {

using Buffer = std::vector<float>;
Buffer buffer(int64_t n) {
  return Buffer(static_cast<std::size_t>(n));
}
std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

void check_target_matrix(const kernels::WeightMatrix& m, const char* name, const DFlash2Config& c) {
  if (m.data == nullptr || m.rows != c.vocab_size || m.cols != c.hidden_size) {
    fail(
        "{}: the target's {} is [{}, {}] but the drafter needs [{}, {}] (vocab_size, "
        "hidden_size)",
        c.config_path, name, m.rows, m.cols, c.vocab_size, c.hidden_size);
  }
}

DFlash2Config checked_against(DFlash2Config config, const TargetView& target) {
  // The drafter only ever drafts for qwen3_5 targets; the view carries no family name.
  check_dflash2_target(
      config, DraftTarget{"qwen3_5", target.hidden_size, target.vocab_size, target.num_layers});
  check_target_matrix(target.embed_tokens, "embed_tokens", config);
  check_target_matrix(target.lm_head, "lm_head", config);
  return config;
}

DFlash2Config read_drafter_config(const std::string& directory, const TargetView& target) {
  ConfigFiles files = read_config_files(directory);
  ModelFamily family = detect_model_family(files.config, files.config_path);
  if (family != ModelFamily::kDFlash2) {
    fail("{}: a {} model, not a DFlash2DraftModel drafter", files.config_path, family_name(family));
  }
  return checked_against(parse_dflash2_config(files), target);
}

}  // namespace

struct DFlash2Drafter::Block {
  explicit Block(const DFlash2Config& c)
      : rows(c.block_size),
        h(buffer(rows * c.hidden_size)),
        x(buffer(rows * c.hidden_size)),
        mixed(buffer(rows * c.hidden_size)),
        projected(buffer(rows * c.hidden_size)),
        coeffs(buffer(rows * c.kernel_projection_rows())),
        q(buffer(rows * c.q_dim())),
        k(buffer(rows * c.kv_dim())),
        v(buffer(rows * c.kv_dim())),
        attended(buffer(rows * c.q_dim())),
        gate(buffer(rows * c.intermediate_size)),
        up(buffer(rows * c.intermediate_size)) {}

  int64_t rows;
  Buffer h;          // the residual stream
  Buffer x;          // a sub-layer's normalised input
  Buffer mixed;      // a block conv's output
  Buffer projected;  // o_proj or down_proj output
  Buffer coeffs;     // the sub-layer's dynamic conv coefficients
  Buffer q, k, v;
  Buffer attended;
  Buffer gate, up;
};

struct DFlash2Drafter::Shared {
  Shared(const std::string& directory, const TargetView& target_view, int threads,
         const DFlash2Options& drafter_options)
      : config(read_drafter_config(directory, target_view)),
        target(target_view),
        options(drafter_options),
        checkpoint(std::make_unique<Checkpoint>(directory)),
        weights(bind_dflash2_weights(config, *checkpoint)),
        rope(config.head_dim, config.rope_theta),
        pool(std::make_unique<ThreadPool>(threads)) {
    set_matmul_inputs(weights, target.matmul_inputs);
    context = dflash2_context_spec(config, weights);
    build_context_program();
  }
  Shared(DFlash2Config drafter_config, DFlash2Weights drafter_weights,
         const TargetView& target_view, int threads, const DFlash2Options& drafter_options)
      : config(checked_against(std::move(drafter_config), target_view)),
        target(target_view),
        options(drafter_options),
        weights(std::move(drafter_weights)),
        rope(config.head_dim, config.rope_theta),
        pool(std::make_unique<ThreadPool>(threads)) {
    set_matmul_inputs(weights, target.matmul_inputs);
    context = dflash2_context_spec(config, weights);
    build_context_program();
  }

  // The fused round's program, built by the first fused round, with its executor (one worker
  // per pool thread): the target's persistent team when it has one of that size, so that the
  // two never keep two spinning teams on the same cores.
  DFlash2Step& fused_step() {
    if (step == nullptr) {
      step = std::make_unique<DFlash2Step>(config, weights, context, target, rope, pool->size());
    }
    return *step;
  }
  void run(program::Program& program) {
    team.get(target, pool->size(), options.executor).run(program);
  }
  bool fused() const {
    return options.executor != ExecutorKind::kReference &&
           options.ablation == testing::DFlash2Ablation::kNone;
  }
  // A fused drafter's sequences run their prompts' context rows as programs on the same team.
  void build_context_program() {
    if (!fused()) return;
    context_rows = std::make_unique<DraftContextProgram>(
        context, rope, pool->size(), [this](program::Program& program) { run(program); });
  }

  DFlash2Config config;
  TargetView target;
  DFlash2Options options;
  std::unique_ptr<Checkpoint> checkpoint;
  DFlash2Weights weights;
  kernels::Rope rope;
  std::unique_ptr<ThreadPool> pool;
  DraftContextSpec context;  // views of `weights` for each sequence's context store
  std::unique_ptr<DFlash2Step> step;
  DraftTeam team;
  std::unique_ptr<DraftContextProgram> context_rows;  // fused only
};

DFlash2Drafter::DFlash2Drafter(const std::string& directory, const TargetView& target, int threads,
                               const DFlash2Options& options)
    : DFlash2Drafter(std::make_shared<Shared>(directory, target, threads, options)) {}

DFlash2Drafter::DFlash2Drafter(DFlash2Config config, DFlash2Weights weights,
                               const TargetView& target, int threads, const DFlash2Options& options)
    : DFlash2Drafter(std::make_shared<Shared>(std::move(config), std::move(weights), target,
                                              threads, options)) {}

DFlash2Drafter::DFlash2Drafter(std::shared_ptr<Shared> shared)
    : shared_(std::move(shared)),
      config_(shared_->config),
      target_(shared_->target),
      options_(shared_->options),
      weights_(shared_->weights),
      rope_(shared_->rope),
      pool_(shared_->pool.get()),
      context_(std::make_unique<PendingDraftContext>(shared_->context, rope_, pool_,
                                                     fused() ? DFlash2Step::kMaxNewContextRows : 0,
                                                     shared_->context_rows.get())) {}

std::unique_ptr<SpeculativeDrafter> DFlash2Drafter::new_sequence() const {
  return std::unique_ptr<SpeculativeDrafter>(new DFlash2Drafter(shared_));
}

std::unique_ptr<SpeculativeDrafter> DFlash2Drafter::clone() const {
  std::unique_ptr<DFlash2Drafter> copy(new DFlash2Drafter(shared_));
  copy->context_ = std::make_unique<PendingDraftContext>(*context_);
  return copy;
}

DFlash2Drafter::~DFlash2Drafter() = default;

bool DFlash2Drafter::fused() const {
  return shared_->fused();
}

void DFlash2Drafter::append_context(std::span<const float> taps, int64_t rows) {
  context_->append(taps, rows);
}

void DFlash2Drafter::truncate_context(int64_t length) {
  context_->truncate(length);
}

void DFlash2Drafter::embed_block(int32_t anchor, Block& b) const {
  int64_t h = config_.hidden_size;
  for (int64_t t = 0; t < b.rows; ++t) {
    int64_t token = t == 0 ? anchor : config_.mask_token_id;
    // The target's loader checked that its table's format dequantises.
    (void)kernels::row_to_f32(target_.embed_tokens, token, b.h.data() + t * h);
  }
}

void DFlash2Drafter::block_conv(const DFlash2ConvWeights& w, int side, const float* in,
                                const float* coeffs, float* out) const {
  int64_t n = config_.block_size * config_.hidden_size;
  if (options_.ablation == testing::DFlash2Ablation::kSkipBlockConv) {
    std::copy(in, in + n, out);
    return;
  }
  dflash2::BlockConvShape shape{config_.hidden_size, config_.conv_kernel_size,
                                config_.conv_group_size};
  dflash2::apply_block_conv(w.base_kernel, coeffs, side, shape, in, config_.block_size, out);
}

void DFlash2Drafter::attention_sublayer(int64_t layer, int64_t start, Block& b) {
  const DFlash2Config& c = config_;
  const DFlash2LayerWeights& w = weights_.layers[size(layer)];
  int64_t hd = c.head_dim;
  auto eps = static_cast<float>(c.rms_norm_eps);
  normalise_draft_rows(b.h.data(), w.input_layernorm, b.rows, c.hidden_size, eps, b.x.data());
  dflash2::project_block_conv(w.attention_conv, b.x.data(), b.rows, b.coeffs.data(), pool_);
  block_conv(w.attention_conv, 0, b.x.data(), b.coeffs.data(), b.mixed.data());
  kernels::matmul(w.q_proj, b.mixed.data(), b.rows, b.q.data(), pool_);
  kernels::matmul(w.k_proj, b.mixed.data(), b.rows, b.k.data(), pool_);
  kernels::matmul(w.v_proj, b.mixed.data(), b.rows, b.v.data(), pool_);
  Buffer cos_values = buffer(hd / 2);
  Buffer sin_values = buffer(hd / 2);
  for (int64_t t = 0; t < b.rows; ++t) {
    // Each block row sits at its own position, as do the context keys (§11.5).
    rope_.angles(start + t, cos_values.data(), sin_values.data());
    for (int64_t head = 0; head < c.num_attention_heads; ++head) {
      dflash2::normalise_and_rotate(b.q.data() + t * c.q_dim() + head * hd, w.q_norm, hd, eps,
                                    rope_, cos_values.data(), sin_values.data());
    }
    for (int64_t kv = 0; kv < c.num_key_value_heads; ++kv) {
      dflash2::normalise_and_rotate(b.k.data() + t * c.kv_dim() + kv * hd, w.k_norm, hd, eps, rope_,
                                    cos_values.data(), sin_values.data());
    }
  }
  attend_block(layer, start, b);
  kernels::matmul(w.o_proj, b.attended.data(), b.rows, b.projected.data(), pool_);
  block_conv(w.attention_conv, 1, b.projected.data(), b.coeffs.data(), b.mixed.data());
  add_draft_rows(b.h.data(), b.mixed.data(), b.rows * c.hidden_size);
}

void DFlash2Drafter::attend_block(int64_t layer, int64_t start, Block& b) {
  const DFlash2Config& c = config_;
  int64_t hd = c.head_dim;
  int64_t window = c.sliding_window;
  int64_t group = c.num_attention_heads / c.num_key_value_heads;
  float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  bool causal = options_.ablation == testing::DFlash2Ablation::kCausalBlock;
  auto run = [&](int64_t first, int64_t last) {
    Buffer scores = buffer(window + b.rows);
    for (int64_t task = first; task < last; ++task) {
      int64_t t = task / c.num_attention_heads;
      int64_t head = task % c.num_attention_heads;
      int64_t kv = head / group;
      // Visible: context positions p with (start + t) − p < window, and every block row within
      // the window — all of them, before and after t, as the block is bidirectional.
      std::vector<dflash2::KeyRun> runs =
          context_->stored().key_runs(layer, kv, start + t - window + 1, start);
      dflash2::BlockRows visible = dflash2::visible_block_rows(t, b.rows, window, causal);
      int64_t lo = visible.first;
      int64_t hi = visible.last;
      int64_t offset = lo * c.kv_dim() + kv * hd;
      runs.push_back(
          dflash2::KeyRun{b.k.data() + offset, b.v.data() + offset, hi - lo + 1, c.kv_dim()});
      dflash2::attend_runs(b.q.data() + t * c.q_dim() + head * hd, runs, hd, scale, scores.data(),
                           b.attended.data() + t * c.q_dim() + head * hd);
    }
  };
  int64_t tasks = b.rows * c.num_attention_heads;
  // Two passes (scores, values) over every visible key of every head.
  pool_->parallel_for_work(tasks, 2 * tasks * (window + b.rows) * hd, run);
}

void DFlash2Drafter::mlp_sublayer(int64_t layer, Block& b) {
  const DFlash2Config& c = config_;
  const DFlash2LayerWeights& w = weights_.layers[size(layer)];
  auto eps = static_cast<float>(c.rms_norm_eps);
  normalise_draft_rows(b.h.data(), w.post_attention_layernorm, b.rows, c.hidden_size, eps,
                       b.x.data());
  dflash2::project_block_conv(w.mlp_conv, b.x.data(), b.rows, b.coeffs.data(), pool_);
  block_conv(w.mlp_conv, 0, b.x.data(), b.coeffs.data(), b.mixed.data());
  kernels::matmul(w.gate_proj, b.mixed.data(), b.rows, b.gate.data(), pool_);
  kernels::matmul(w.up_proj, b.mixed.data(), b.rows, b.up.data(), pool_);
  for (std::size_t i = 0; i < b.gate.size(); ++i) b.gate[i] = kernels::silu(b.gate[i]) * b.up[i];
  kernels::matmul(w.down_proj, b.gate.data(), b.rows, b.projected.data(), pool_);
  block_conv(w.mlp_conv, 1, b.projected.data(), b.coeffs.data(), b.mixed.data());
  add_draft_rows(b.h.data(), b.mixed.data(), b.rows * c.hidden_size);
}

DraftProposal DFlash2Drafter::propose(int32_t anchor, float temperature,
                                      std::span<const double> uniforms, bool keep_logits) {
  const DFlash2Config& c = config_;
  int64_t drafts = c.block_size - 1;
  if (anchor < 0 || anchor >= c.vocab_size) {
    fail("DFlash2 propose: anchor token {} is outside the vocabulary of {}", anchor, c.vocab_size);
  }
  if (temperature > 0 && static_cast<int64_t>(uniforms.size()) < drafts) {
    fail("DFlash2 propose: sampling {} drafts needs as many uniforms, got {}", drafts,
         uniforms.size());
  }
  return fused() ? propose_fused(anchor, temperature, uniforms, keep_logits)
                 : propose_reference(anchor, temperature, uniforms, keep_logits);
}

DraftProposal DFlash2Drafter::propose_fused(int32_t anchor, float temperature,
                                            std::span<const double> uniforms, bool keep_logits) {
  DFlash2Step& step = shared_->fused_step();
  auto [taps, rows] = context_->take_pending();  // the program computes them
  step.prepare(anchor, context_->stored(), taps, rows);
  shared_->run(step.program());
  step.finish();
  return select(anchor, step.logits(), step.rho(), step.candidates(), temperature, uniforms,
                keep_logits);
}

DraftProposal DFlash2Drafter::propose_reference(int32_t anchor, float temperature,
                                                std::span<const double> uniforms,
                                                bool keep_logits) {
  const DFlash2Config& c = config_;
  int64_t drafts = c.block_size - 1;
  int64_t start = context_->length();
  context_->stored().prepare_keys(start - c.sliding_window + 1);
  Block b(c);
  embed_block(anchor, b);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    attention_sublayer(l, start, b);
    mlp_sublayer(l, b);
  }
  // Row 0 (the anchor) served as key, value and conv predecessor; only rows 1.. predict.
  int64_t h = c.hidden_size;
  Buffer hidden = buffer(drafts * h);
  normalise_draft_rows(b.h.data() + h, weights_.norm, drafts, h, static_cast<float>(c.rms_norm_eps),
                       hidden.data());
  Buffer logits = buffer(drafts * c.vocab_size);
  kernels::matmul(target_.lm_head, hidden.data(), drafts, logits.data(), pool_);
  Buffer rho = buffer(drafts * c.selector_rank);
  kernels::matmul(weights_.selector.hidden_projection, hidden.data(), drafts, rho.data(), pool_);

  std::vector<std::vector<dflash2::Candidate>> candidates;
  for (int64_t i = 0; i < drafts; ++i) {
    candidates.push_back(
        dflash2::top_candidates(logits.data() + i * c.vocab_size, c.vocab_size, c.selector_top_k));
  }
  return select(anchor, logits, rho.data(), candidates, temperature, uniforms, keep_logits);
}

DraftProposal DFlash2Drafter::select(int32_t anchor, std::span<const float> logits,
                                     const float* rho,
                                     std::span<const std::vector<dflash2::Candidate>> candidates,
                                     float temperature, std::span<const double> uniforms,
                                     bool keep_logits) const {
  dflash2::SelectorPath path =
      dflash2::select_path(weights_.selector, anchor, candidates, rho, temperature, uniforms);
  DraftProposal proposal;
  proposal.tokens = std::move(path.tokens);
  proposal.q = std::move(path.q);
  if (keep_logits) proposal.logits.assign(logits.begin(), logits.end());
  return proposal;
}

std::unique_ptr<SpeculativeDrafter> load_dflash2_drafter(const std::string& directory,
                                                         const TargetView& target, int threads,
                                                         ExecutorKind executor) {
  return std::make_unique<DFlash2Drafter>(directory, target, threads,
                                          DFlash2Options{.executor = executor});
}

}  // namespace md
