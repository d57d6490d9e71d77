// One speculative round on one sequence (qwen38-dflash2.md §10): the drafter proposes
// block-1 tokens after the anchor, the target verifies the anchor and the drafts in one step
// (verify rows), the choice decoder accepts the longest agreeing prefix (greedy) or applies the
// lossless rejection rule (sampled), and the sequence keeps the anchor plus the accepted drafts.
// The token after them — the target's correction or its bonus — is the next anchor.
//
// Run, chat (Generator) and serve (BatchScheduler) all drive rounds through this one unit, so a
// request speculates the same way everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/choice_decoder.h"
#include "models/drafters/speculative_drafter.h"
#include "models/language_model.h"

namespace md::engine {

// Speculative decoding of one request (all zero without a drafter).
struct SpeculationStats {
  int64_t rounds = 0;
  int64_t drafted = 0;               // draft tokens proposed
  int64_t accepted = 0;              // draft tokens accepted (bonus tokens excluded)
  int64_t produced = 0;              // tokens committed by rounds, bonus included
  std::vector<int64_t> accepted_at;  // acceptances per draft position
  double draft_seconds = 0;
  double verify_seconds = 0;
  // τ: tokens per round, bonus included.
  double mean_acceptance_length() const {
    return rounds > 0 ? static_cast<double>(produced) / static_cast<double>(rounds) : 0;
  }
};

struct SpeculativeRound {
  // Every token the round chose, in order: the accepted drafts, then the correction or bonus.
  // The list ends early at a finished token (tokens after a stop are neither emitted nor
  // counted); otherwise its last token is the next anchor, not yet fed to the sequence.
  std::vector<TokenOutcome> outcomes;
  std::vector<int32_t> fed;  // the tokens the sequence took: the anchor and accepted drafts
  int64_t drafted = 0;       // 0: no room for a block, the round was one plain decode step
  int64_t accepted = 0;
};

// Checks a round's shape against the model and drafter (md::Error with the flag's name):
// block_size 0 means the drafter's; force_accept 0 means off. Returns the block size.
int64_t checked_block_size(const LanguageModel& model, const SpeculativeDrafter& drafter,
                           int64_t block_size, int64_t force_accept);
// --spec-confidence-threshold: 0 (off) or in (0, 1], only for a drafter whose proposals carry a
// confidence, and not with a forced acceptance length (md::Error otherwise). Returns it.
float checked_confidence_threshold(const SpeculativeDrafter& drafter, float threshold,
                                   int64_t force_accept = 0);

class SpeculativeRounds {
 public:
  // force_accept (benchmarks only): every round takes exactly force_accept-1 drafts and then the
  // target's own token, to time rounds at that acceptance length; output is then not the model's.
  // confidence_threshold > 0: a round verifies only the drafts before the first whose confidence
  // is below it (none: one plain decode step of the anchor, not counted as a round); the output
  // is unchanged, only how many drafts each round risks.
  SpeculativeRounds(LanguageModel& model, int64_t block_size, int64_t force_accept = 0,
                    float confidence_threshold = 0);

  // One round for `state`, whose next token to feed is `anchor` (already chosen and emitted by
  // the caller). The drafter's context must hold every position of `state`; it is kept current.
  // Near the end of the context the block shrinks, down to one plain decode step.
  SpeculativeRound run(SequenceState& state, SpeculativeDrafter& drafter, ChoiceDecoder& decoder,
                       int32_t anchor, SpeculationStats& stats);

  int64_t block_size() const { return block_size_; }

 private:
  SpeculativeRound plain_step(SequenceState& state, SpeculativeDrafter& drafter,
                              ChoiceDecoder& decoder, int32_t anchor);

  LanguageModel& model_;
  int64_t block_size_;
  int64_t force_accept_;
  float confidence_threshold_;
  std::vector<float> logits_;
};

}  // namespace md::engine
