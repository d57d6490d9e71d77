// A grammar bound to a vocabulary: which tokens may come next in each state of the grammar's
// automaton, as a bitset over token ids, computed by one walk of the token trie and cached per
// state (states repeat: every character of a free JSON string leaves the same state). Compiled
// once per distinct grammar and shared by every request that uses it (token_constraint_cache.h);
// each choice only holds its current state (TokenMatcher). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "text/grammar/grammar_automaton.h"
#include "text/grammar/token_trie.h"

namespace md::grammar {

using TokenMask = std::vector<uint64_t>;  // bit id set: token id allowed

struct MaskStats {
  uint64_t masks = 0;          // masks asked for
  uint64_t computed = 0;       // of which computed by a trie walk (the rest came from the cache)
  double compute_seconds = 0;  // time in those walks
};

// Mask work summed over many constraints (a server's /metrics).
class MaskStatsTotal {
 public:
  void add(const MaskStats& delta);
  MaskStats get();

 private:
  std::mutex mutex_;
  MaskStats total_;
};

class TokenConstraint {
 public:
  using State = GrammarAutomaton::State;

  // `end_ids` are the model's end tokens: allowed exactly where the grammar accepts. `total`
  // (optional) also receives this constraint's mask work.
  // `markers` are tokens left out of the vocabulary (added tokens such as <tool_call>) that this
  // grammar may write as the text they stand for.
  TokenConstraint(Grammar grammar, std::shared_ptr<const TokenTrie> vocabulary,
                  std::vector<int32_t> end_ids, std::shared_ptr<MaskStatsTotal> total = nullptr,
                  std::vector<std::pair<int32_t, std::string>> markers = {});

  State start() const { return start_; }
  // The tokens allowed after `state` (the end tokens when it accepts).
  std::shared_ptr<const TokenMask> allowed(State state);
  // The state after `token`; GrammarAutomaton::kDead when the token is not allowed (end tokens
  // leave the state as it is).
  State advance(State state, int32_t token);
  bool accepting(State state);
  // Complete and nothing may follow: the choice ends here.
  bool finished(State state);
  MaskStats stats();
  // Automaton tables and cached masks (the vocabulary is shared and not counted).
  std::size_t memory_bytes();

 private:
  bool is_end(int32_t token) const;
  TokenMask compute(State state);
  // A grammar that hit an automaton limit stays refused: later uses fail at once with the same
  // message instead of redoing the work (the tables stay consistent, see GrammarAutomaton).
  void check_usable() const;
  template <typename Work>
  auto guarded(Work work) -> decltype(work());
  std::shared_ptr<const TokenMask> allowed_locked(State state);
  State advance_locked(State state, int32_t token);

  std::mutex mutex_;
  GrammarAutomaton automaton_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  std::vector<int32_t> end_ids_;
  State start_;
  std::unordered_map<State, std::shared_ptr<const TokenMask>> masks_;
  std::size_t mask_bytes_ = 0;
  std::vector<State> walk_;  // scratch: the state at each trie depth
  MaskStats stats_;
  std::shared_ptr<MaskStatsTotal> total_;
  std::vector<std::pair<int32_t, std::string>> markers_;
  std::string failure_;
};

// One choice's position in a constraint.
class TokenMatcher {
 public:
  explicit TokenMatcher(std::shared_ptr<TokenConstraint> constraint)
      : constraint_(std::move(constraint)), state_(constraint_->start()) {}

  // Sets every disallowed logit to -inf; returns false when no token at all is allowed.
  bool mask_logits(std::span<float> logits);
  // Moves past `token` (which the mask allowed); false if it was not allowed.
  bool accept(int32_t token);
  bool finished() const { return constraint_->finished(state_); }
  bool accepting() const { return constraint_->accepting(state_); }

 private:
  std::shared_ptr<TokenConstraint> constraint_;
  TokenConstraint::State state_;
};

// Cached masks are dropped (all at once) when they would pass this many bytes per constraint.
inline constexpr std::size_t kMaskCacheBytes = std::size_t{64} << 20;

}  // namespace md::grammar
