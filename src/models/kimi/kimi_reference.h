// Kimi K3's plain reference forward (docs/models/kimi-k3-dspark.md §5–§9), each token following
// the spec's per-token timeline literally on the shared kernels (the tokens of a prompt share
// each matrix read, which does not change a token's bits): the attention-residual
// mixes (kernels/residual_mix.h), KDA's short convs, lower-bound gate, per-channel delta rule and
// gated output norm (kernels/kda_rule.h), MLA without RoPE decoded in the absorbed form over the
// latent cache (kernels/latent_attention.h), SiTU, the corrected sigmoid router and the latent MoE
// over MXFP4 experts. Activations stay f32 (house numerics: the spec's bf16 roundings of
// activations are not applied). The fused step (kimi_step.h) lowers the same order.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "models/kimi/kimi_config.h"
#include "models/kimi/kimi_weights.h"

namespace md {

// One sequence's state (§6.1, §7.2): per KDA layer the last K − 1 raw q, k, v projections and the
// f32 delta-rule state S[head][value][key]; per MLA layer every position's normed latent and
// shared key (the absorbed cache), or, in the non-absorbed form, every head's key and value.
struct KimiSequenceState {
  std::vector<std::vector<float>> conv_history;  // per KDA slot: [3][K − 1][C], oldest first
  std::vector<std::vector<float>> delta_state;   // per KDA slot: [heads][d][d]
  std::vector<std::vector<float>> latent_cache;  // per MLA slot: [positions][kv_lora + shared]
  // The same rows as bf16 bits, in place of latent_cache with KimiReferenceOptions::
  // bf16_latent_cache (half the memory, §10's cache type).
  std::vector<std::vector<uint16_t>> latent_cache_bf16;
  std::vector<std::vector<float>> kv_cache;  // non-absorbed: [positions][heads][qk + v]
  int64_t position = 0;
};

// What a test switches off to show that its bound notices (negative controls).
enum class KimiAblation : uint8_t {
  kNone,
  kNoResidualMix,     // every mix returns the prefix (an ordinary residual stream)
  kNoCorrectionBias,  // the router selects by the plain scores
};

struct KimiReferenceOptions {
  KimiAblation ablation = KimiAblation::kNone;
  // Prompt tokens the chunked delta rule takes at a time (§6.3's example 64; tests use a few, so
  // that a short prompt spans several chunks and a partial one).
  int64_t kda_chunk = 64;
  // MLA decoded over the latent cache (§7.3, the default), or by §7.1's non-absorbed form, which
  // expands every position into per-head keys and values (kept for the test that compares them).
  bool absorbed_mla = true;
  // The absorbed cache stored in bf16 (rounded to nearest even as a row is written; the engine's
  // default cache type), else in f32.
  bool bf16_latent_cache = false;
  // Tests only: each f32 cached element times 1 ± this (hashed signs, noise-like), the
  // size of bf16's largest rounding at 2^-9: how much the logits move for a cache perturbed as
  // much as a bf16 cache may be, the bound the bf16 cache is held to.
  float latent_cache_perturbation = 0;
  uint64_t latent_cache_perturbation_seed = 0;  // which signs (tests draw several)
};

class KimiReference {
 public:
  // `pool` (may be null) runs each matrix product's output rows on its workers: the bits do not
  // depend on it (each row is one task's, in the kernels' fixed order).
  KimiReference(const KimiK3Config& config, const KimiK3Weights& weights,
                KimiReferenceOptions options = {}, ThreadPool* pool = nullptr);
  // It refers to the config and weights it was given: copies would too, and outlive them.
  KimiReference(const KimiReference&) = delete;
  KimiReference& operator=(const KimiReference&) = delete;

  KimiSequenceState new_state() const;
  // Token `token` at the state's position: logits [vocab] out, the state advanced by one.
  void step(int32_t token, KimiSequenceState& state, float* logits) const;
  // A prompt at once: the same layers with KDA in its chunked form (§6.3), logits [ids][vocab]
  // out for every position; equal to stepping the tokens up to the chunked form's rounding.
  void prefill(const std::vector<int32_t>& ids, KimiSequenceState& state, float* logits) const;
  // Either form for `n` tokens, with logits [logit_rows][vocab] for the last `logit_rows` (0..n)
  // only, and `taps` (when not null) [n][tap_layers().size() · hidden]: each token's prefix right
  // after each tapped layer finished (§11's aux taps: the in-block partial sum, not a mix).
  void run(const int32_t* ids, int64_t n, KimiSequenceState& state, bool chunked, float* logits,
           int64_t logit_rows, float* taps) const;
  // The 0-based layers whose post-layer prefix run() copies out.
  void set_tap_layers(std::vector<int64_t> layers) { tap_layers_ = std::move(layers); }
  const std::vector<int64_t>& tap_layers() const { return tap_layers_; }
  const KimiReferenceOptions& options() const { return options_; }
  // MLA slot `slot`'s W_UK_hᵀ of every head, [heads][kv_lora][nope] (the fused step reads them).
  const float* key_absorb(int64_t slot) const {
    return key_absorb_[static_cast<std::size_t>(slot)].data();
  }

 private:
  void mix(const std::vector<const float*>& blocks, const float* prefix, const float* w,
           float* out) const;
  void kda(int64_t layer, const float* x, int64_t n, KimiSequenceState& state, float* out,
           bool chunked) const;
  void mla(int64_t layer, const float* x, int64_t n, KimiSequenceState& state, float* out) const;
  void attend(int64_t layer, const float* q, const float* ckv, const float* gate,
              KimiSequenceState& state, float* y) const;
  std::span<const float> cached_latents(int64_t slot, const std::vector<float>& latent,
                                        const float* shared_key, KimiSequenceState& state,
                                        std::vector<float>& widened) const;
  void expanded_attention(int64_t layer, const float* q, const std::vector<float>& latent,
                          const float* shared_key, KimiSequenceState& state, float* y) const;
  void ffn(int64_t layer, const float* x, int64_t n, float* out) const;
  void copy_taps(int64_t layer, const float* prefix, int64_t n, float* taps) const;

  const KimiK3Config& config_;
  const KimiK3Weights& weights_;
  KimiReferenceOptions options_;
  ThreadPool* pool_;
  std::vector<int64_t> tap_layers_;
  // Per MLA slot, each head's W_UK_hᵀ [kv_lora × nope] in turn: kv_b_proj's key rows transposed
  // (exact copies), so that the absorbed query is a plain product.
  std::vector<std::vector<float>> key_absorb_;
};

}  // namespace md
