#include "engine/speculative_round.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "engine/counter_rng.h"
#include "program/instruction.h"

namespace md::engine {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The drafter reads the taps of the rows the sequence kept (the first `kept` of `rows`).
void append_kept_taps(const LanguageModel& model, SpeculativeDrafter& drafter, int64_t rows,
                      int64_t kept) {
  std::span<const float> taps = model.last_taps();
  std::size_t per_row = taps.size() / static_cast<std::size_t>(rows);
  drafter.append_context(taps.subspan(0, per_row * static_cast<std::size_t>(kept)), kept);
}

// The drafts a round verifies: those before the first whose confidence is below the threshold.
int64_t confident_drafts(const DraftProposal& proposal, float threshold) {
  if (threshold <= 0) return static_cast<int64_t>(proposal.tokens.size());
  // A NaN confidence is not confident.
  auto low = std::find_if(proposal.confidence.begin(), proposal.confidence.end(),
                          [threshold](float c) { return !(c >= threshold); });
  return low - proposal.confidence.begin();
}

}  // namespace

float checked_confidence_threshold(const SpeculativeDrafter& drafter, float threshold,
                                   int64_t force_accept) {
  if (!(threshold >= 0 && threshold <= 1)) {
    fail("--spec-confidence-threshold must be between 0 (off) and 1, got {}", threshold);
  }
  if (threshold > 0 && force_accept > 0) {
    fail(
        "--spec-confidence-threshold and --force-accept do not go together: a forced acceptance "
        "length needs every round to verify its drafts");
  }
  if (threshold > 0 && !drafter.has_confidence()) {
    fail(
        "--spec-confidence-threshold needs a drafter with a confidence head (a DSpark drafter "
        "with enable_confidence_head); this one has none");
  }
  return threshold;
}

int64_t checked_block_size(const LanguageModel& model, const SpeculativeDrafter& drafter,
                           int64_t block_size, int64_t force_accept) {
  if (!model.supports_verify()) {
    fail("speculative decoding needs verify rows, which {} does not have", model.description());
  }
  // Every family's verify step takes at most program::kMaxStepRows rows.
  const int64_t most = std::min<int64_t>(drafter.block_size(), program::kMaxStepRows);
  if (block_size == 0) block_size = most;
  if (block_size < 2 || block_size > most) {
    fail("--block-size must be between 2 and {} (the drafter's {}, a verify step's {}), got {}",
         most, drafter.block_size(), program::kMaxStepRows, block_size);
  }
  if (force_accept < 0 || force_accept > block_size) {
    fail("--force-accept must be between 1 and the block size {}, got {}", block_size,
         force_accept);
  }
  return block_size;
}

SpeculativeRounds::SpeculativeRounds(LanguageModel& model, int64_t block_size, int64_t force_accept,
                                     float confidence_threshold)
    : model_(model),
      block_size_(block_size),
      force_accept_(force_accept),
      confidence_threshold_(confidence_threshold) {}

SpeculativeRound SpeculativeRounds::plain_step(SequenceState& state, SpeculativeDrafter& drafter,
                                               ChoiceDecoder& decoder, int32_t anchor) {
  SequenceState* states = &state;
  model_.decode(std::span<SequenceState* const>(&states, 1), std::span<const int32_t>(&anchor, 1),
                logits_);
  drafter.append_context(model_.last_taps(), 1);
  SpeculativeRound round;
  round.fed.push_back(anchor);
  round.outcomes.push_back(decoder.next(logits_, state.position()));
  return round;
}

SpeculativeRound SpeculativeRounds::run(SequenceState& state, SpeculativeDrafter& drafter,
                                        ChoiceDecoder& decoder, int32_t anchor,
                                        SpeculationStats& stats) {
  const int64_t s = state.position();
  int64_t rows = std::min(block_size_, state.capacity() - s);
  if (rows < 2) return plain_step(state, drafter, decoder, anchor);
  stats.accepted_at.resize(static_cast<std::size_t>(block_size_ - 1), 0);
  const float temperature =
      decoder.greedy() ? 0.0f : std::max(kGreedyTemperature, decoder.temperature());

  Clock::time_point draft_start = Clock::now();
  // A uniform for every draft the drafter makes (it drafts a whole block even when fewer rows are
  // verified: a shorter --block-size, or the end of the context).
  std::vector<double> uniforms;
  for (int64_t i = 1; i < drafter.block_size(); ++i) {
    uniforms.push_back(uniform_at_lane(decoder.seed(), s + i, 3));
  }
  DraftProposal proposal = drafter.propose(anchor, temperature, uniforms);
  rows = std::min(rows, 1 + confident_drafts(proposal, confidence_threshold_));
  Clock::time_point verify_start = Clock::now();
  if (rows < 2) {
    // No draft is confident enough: the anchor alone, as plain decoding feeds it. Like a plain
    // step at the end of the context it is not a round (rounds, τ and the server's metrics count
    // verify steps that carried drafts); the drafting it cost is.
    SpeculativeRound round = plain_step(state, drafter, decoder, anchor);
    stats.draft_seconds += seconds_between(draft_start, verify_start);
    return round;
  }
  std::vector<int32_t> block{anchor};
  block.insert(block.end(), proposal.tokens.begin(), proposal.tokens.begin() + (rows - 1));
  model_.verify(state, block, logits_);
  Clock::time_point verified = Clock::now();
  stats.draft_seconds += seconds_between(draft_start, verify_start);
  stats.verify_seconds += seconds_between(verify_start, verified);

  SpeculativeRound round;
  round.drafted = rows - 1;
  // Row i of the verify logits predicts position s + i + 1.
  const auto vocab = static_cast<std::size_t>(model_.vocab_size());
  int64_t kept = 1;  // rows the sequence keeps: the anchor, then each accepted draft
  for (int64_t i = 0; i < rows; ++i) {
    std::span<float> row(logits_.data() + static_cast<std::size_t>(i) * vocab, vocab);
    const int64_t position = s + i + 1;
    bool accepted = false;
    TokenOutcome outcome;
    if (i + 1 < rows) {
      const int32_t draft = block[static_cast<std::size_t>(i + 1)];
      if (force_accept_ > 0) {
        accepted = i + 1 < force_accept_;
        outcome = accepted ? decoder.force(draft) : decoder.next(row, position);
      } else {
        outcome = decoder.verify_draft(row, position, draft,
                                       proposal.q[static_cast<std::size_t>(i)], accepted);
      }
    } else {
      outcome = decoder.next(row, position);  // every draft accepted: the bonus token
    }
    const bool finished = outcome.finished;
    round.outcomes.push_back(std::move(outcome));
    if (!accepted) break;  // the correction or the bonus: the next anchor
    ++round.accepted;
    ++stats.accepted_at[static_cast<std::size_t>(i)];
    if (finished) break;  // a finishing token is never fed (as in plain decoding)
    ++kept;
  }
  model_.commit(state, kept);
  append_kept_taps(model_, drafter, rows, kept);
  round.fed.assign(block.begin(), block.begin() + kept);
  ++stats.rounds;
  stats.drafted += round.drafted;
  stats.accepted += round.accepted;
  stats.produced += kept;
  return round;
}

}  // namespace md::engine
