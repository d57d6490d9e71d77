#include "text/grammar/token_constraint.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>

#include "base/error.h"

namespace md::grammar {

void MaskStatsTotal::add(const MaskStats& delta) {
  std::lock_guard lock(mutex_);
  total_.masks += delta.masks;
  total_.computed += delta.computed;
  total_.compute_seconds += delta.compute_seconds;
}

MaskStats MaskStatsTotal::get() {
  std::lock_guard lock(mutex_);
  return total_;
}

TokenConstraint::TokenConstraint(Grammar grammar, std::shared_ptr<const TokenTrie> vocabulary,
                                 std::vector<int32_t> end_ids,
                                 std::shared_ptr<MaskStatsTotal> total,
                                 std::vector<std::pair<int32_t, std::string>> markers)
    : automaton_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      end_ids_(std::move(end_ids)),
      start_(automaton_.start()),
      total_(std::move(total)),
      markers_(std::move(markers)) {}

bool TokenConstraint::is_end(int32_t token) const {
  return std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end();
}

TokenMask TokenConstraint::compute(State state) {
  auto begin = std::chrono::steady_clock::now();
  TokenMask mask((static_cast<std::size_t>(vocabulary_->vocab_size()) + 63) / 64, 0);
  auto set = [&](int32_t id) {
    mask[static_cast<std::size_t>(id) / 64] |= uint64_t{1} << (static_cast<unsigned>(id) % 64);
  };
  const auto& entries = vocabulary_->entries();
  const auto& ids = vocabulary_->token_ids();
  walk_.assign(vocabulary_->max_depth() + 1, GrammarAutomaton::kDead);
  walk_[0] = state;
  for (std::size_t i = 0; i < entries.size();) {
    const TokenTrie::Entry& e = entries[i];
    State next = automaton_.step(walk_[e.depth - 1], e.byte);
    if (next == GrammarAutomaton::kDead) {
      i = e.skip;
      continue;
    }
    walk_[e.depth] = next;
    for (uint32_t t = e.tokens_begin; t < e.tokens_end; ++t) set(ids[t]);
    ++i;
  }
  for (const auto& [id, bytes] : markers_) {
    if (id >= 0 && id < vocabulary_->vocab_size() &&
        automaton_.step(state, bytes) != GrammarAutomaton::kDead) {
      set(id);
    }
  }
  if (automaton_.accepting(state)) {
    for (int32_t id : end_ids_) {
      if (id >= 0 && id < vocabulary_->vocab_size()) set(id);
    }
  }
  stats_.computed += 1;
  stats_.compute_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return mask;
}

void TokenConstraint::check_usable() const {
  if (!failure_.empty()) throw Error(failure_);
}

template <typename Work>
auto TokenConstraint::guarded(Work work) -> decltype(work()) {
  check_usable();
  try {
    return work();
  } catch (const Error& e) {
    failure_ = e.what();
    throw;
  }
}

std::size_t TokenConstraint::memory_bytes() {
  std::lock_guard lock(mutex_);
  return automaton_.memory_bytes() + mask_bytes_;
}

std::shared_ptr<const TokenMask> TokenConstraint::allowed(State state) {
  std::lock_guard lock(mutex_);
  return guarded([&] { return allowed_locked(state); });
}

std::shared_ptr<const TokenMask> TokenConstraint::allowed_locked(State state) {
  stats_.masks += 1;
  auto it = masks_.find(state);
  if (it != masks_.end()) {
    if (total_) total_->add(MaskStats{1, 0, 0});
    return it->second;
  }
  double before = stats_.compute_seconds;
  auto mask = std::make_shared<const TokenMask>(compute(state));
  if (total_) total_->add(MaskStats{1, 1, stats_.compute_seconds - before});
  std::size_t bytes = mask->size() * sizeof(uint64_t);
  if (mask_bytes_ + bytes > kMaskCacheBytes) masks_.clear(), mask_bytes_ = 0;
  masks_.emplace(state, mask);
  mask_bytes_ += bytes;
  return mask;
}

TokenConstraint::State TokenConstraint::advance(State state, int32_t token) {
  std::lock_guard lock(mutex_);
  return guarded([&] { return advance_locked(state, token); });
}

TokenConstraint::State TokenConstraint::advance_locked(State state, int32_t token) {
  if (is_end(token)) return automaton_.accepting(state) ? state : GrammarAutomaton::kDead;
  if (token < 0 || token >= vocabulary_->vocab_size()) return GrammarAutomaton::kDead;
  for (const auto& [id, marker] : markers_) {
    if (id == token) return automaton_.step(state, marker);
  }
  const std::string& bytes = vocabulary_->bytes(token);
  if (bytes.empty()) return GrammarAutomaton::kDead;
  return automaton_.step(state, bytes);
}

bool TokenConstraint::accepting(State state) {
  std::lock_guard lock(mutex_);
  return automaton_.accepting(state);
}

bool TokenConstraint::finished(State state) {
  std::lock_guard lock(mutex_);
  return automaton_.accepting(state) && !automaton_.can_continue(state);
}

MaskStats TokenConstraint::stats() {
  std::lock_guard lock(mutex_);
  return stats_;
}

bool TokenMatcher::mask_logits(std::span<float> logits) {
  std::shared_ptr<const TokenMask> mask = constraint_->allowed(state_);
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  bool any = false;
  // Word by word: a mask is mostly all-allowed runs (inside strings) or all-banned ones.
  for (std::size_t begin = 0; begin < logits.size(); begin += 64) {
    const std::size_t word = begin / 64;
    const std::size_t end = std::min(logits.size(), begin + 64);
    // Only ids the logits have count (a tokenizer may know more ids than the model scores).
    const uint64_t in_range = end - begin < 64 ? (uint64_t{1} << (end - begin)) - 1 : ~uint64_t{0};
    const uint64_t bits = word < mask->size() ? (*mask)[word] & in_range : 0;
    any = any || bits != 0;
    if (bits == in_range) continue;
    if (bits == 0) {
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(begin),
                logits.begin() + static_cast<std::ptrdiff_t>(end), kBanned);
      continue;
    }
    // Only the banned ids, found by bit scans (a per-id loop over 64 branches is the slow part).
    uint64_t banned = ~bits & in_range;
    for (; banned != 0; banned &= banned - 1) {
      logits[begin + static_cast<std::size_t>(std::countr_zero(banned))] = kBanned;
    }
  }
  return any;
}

bool TokenMatcher::accept(int32_t token) {
  TokenConstraint::State next = constraint_->advance(state_, token);
  if (next == GrammarAutomaton::kDead) return false;
  state_ = next;
  return true;
}

}  // namespace md::grammar
