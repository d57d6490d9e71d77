// The byte-level recogniser of a Grammar: a pushdown automaton whose states are interned, so a
// state is a small integer and each (state, byte) transition is computed once and then looked up.
// A state is the set of live parse stacks (a graph-structured stack: frames are interned nodes
// that share their callers), each parked at a character class, plus whether the input so far is
// a complete sentence and the bytes of a character not yet complete (tokens split UTF-8).
// Rule calls in tail position reuse the caller's frame, so repetitions never deepen the stack
// and the states of a long run of string characters repeat (and so do their token masks).
// Not thread-safe: one owner (or a lock) per automaton.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/grammar/grammar.h"

namespace md::grammar {

class GrammarAutomaton {
 public:
  using State = uint32_t;
  static constexpr State kDead = 0;  // no sentence continues this input

  explicit GrammarAutomaton(Grammar grammar);

  State start() const { return start_; }
  // One flat table lookup once the transition is known (the token-mask walk's inner loop).
  State step(State state, uint8_t byte) {
    State known = next_[static_cast<std::size_t>(state) * 256 + byte];
    return known != kUnknown ? known : learn_step(state, byte);
  }
  State step(State state, std::string_view bytes);
  // The input so far is a whole sentence of the grammar.
  bool accepting(State state) const { return states_[state].accepting; }
  // Some byte can still follow (false: the sentence is complete and nothing may be added).
  bool can_continue(State state) const {
    return !states_[state].nodes.empty() || states_[state].pending_length > 0;
  }

  std::size_t state_count() const { return states_.size(); }
  // What the tables hold now (transitions, frames, states), for memory budgets.
  std::size_t memory_bytes() const {
    return next_.capacity() * sizeof(State) + nodes_.capacity() * (sizeof(Node) + 40) +
           states_.capacity() * sizeof(StateData) + state_frames_ * sizeof(uint32_t);
  }

 private:
  struct Node {
    uint32_t pos;  // the element this frame is at
    uint32_t ret;  // the frame to continue (past its rule call) when this one ends; kRoot: accept
  };
  struct StateData {
    std::vector<uint32_t> nodes;  // sorted; each parked at a kChars element
    bool accepting = false;
    uint8_t pending_length = 0;  // bytes of an incomplete character seen so far
    uint8_t pending_needed = 0;  // its total length
    char32_t pending_value = 0;  // its bits so far
  };
  static constexpr uint32_t kRoot = UINT32_MAX;
  static constexpr State kUnknown = UINT32_MAX;

  uint32_t node(uint32_t pos, uint32_t ret);
  // Adds the frames reachable from `id` without consuming input to `out` (class-parked ones).
  void close(uint32_t id, std::vector<uint32_t>& out, bool& accepting);
  State intern(StateData data);
  State compute_step(State state, uint8_t byte);
  State learn_step(State state, uint8_t byte);
  State advance(const StateData& from, char32_t code_point);
  bool any_class_intersects(const StateData& state, char32_t lo, char32_t hi) const;

  Grammar grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<StateData> states_;
  std::vector<State> next_;  // 256 transitions per state, kUnknown until computed
  std::unordered_map<uint64_t, std::vector<State>> state_ids_;  // by hash of the contents
  std::vector<uint32_t> work_;                                  // closure scratch
  std::size_t state_frames_ = 0;  // frames held by all states (memory_bytes)
  State start_ = kDead;
  uint32_t closure_mark_ = 0;
  std::vector<uint32_t> closure_seen_;  // per node: the closure that last visited it
};

// Limits on an automaton's tables: a grammar whose parses explode (highly ambiguous) fails with
// md::Error instead of exhausting memory.
inline constexpr std::size_t kMaxAutomatonNodes = 1u << 20;
inline constexpr std::size_t kMaxAutomatonStates = 1u << 18;  // 256 MiB of transitions at most

}  // namespace md::grammar
