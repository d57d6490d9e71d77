#include "engine/constraint_cache.h"

#include "text/grammar/gbnf_parser.h"

namespace md::engine {

std::vector<std::string> grammar_token_bytes(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(static_cast<std::size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_added(id)) continue;
    bytes[static_cast<std::size_t>(id)] = tokenizer.token_bytes(id);
  }
  return bytes;
}

ConstraintCache::ConstraintCache(const Tokenizer& tokenizer, std::vector<int32_t> end_ids,
                                 std::size_t capacity, std::size_t memory_budget)
    : tokenizer_(tokenizer),
      end_ids_(std::move(end_ids)),
      capacity_(capacity),
      memory_budget_(memory_budget) {}

std::shared_ptr<const grammar::TokenTrie> ConstraintCache::vocabulary() {
  if (!trie_) trie_ = std::make_shared<const grammar::TokenTrie>(grammar_token_bytes(tokenizer_));
  return trie_;
}

std::shared_ptr<grammar::TokenConstraint> ConstraintCache::get(
    const std::string& grammar_text, const std::vector<std::string>& markers) {
  std::vector<std::pair<int32_t, std::string>> marker_tokens;
  // The cache key: the markers, length-prefixed (no grammar text can imitate them), then the text.
  std::string text = std::to_string(markers.size()) + ":";
  for (const std::string& name : markers) {
    text += std::to_string(name.size()) + ":" + name;
    if (std::optional<int32_t> id = tokenizer_.token_id(name)) {
      marker_tokens.emplace_back(*id, tokenizer_.token_bytes(*id));
    }
  }
  text += grammar_text;
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(text); it != entries_.end()) {
      order_.splice(order_.begin(), order_, it->second.second);
      // No eviction here: summing the others' memory would wait on any of them whose mask the
      // engine is computing. The budget is checked when a grammar is added.
      return it->second.first;
    }
  }
  // Parsed outside the lock: a large grammar does not hold up requests for cached ones.
  grammar::Grammar parsed = grammar::parse_gbnf(grammar_text);
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(text); it != entries_.end()) return it->second.first;
  auto constraint = std::make_shared<grammar::TokenConstraint>(
      std::move(parsed), vocabulary(), end_ids_, total_, std::move(marker_tokens));
  ++compiled_;
  order_.push_front(text);
  entries_.emplace(text, std::make_pair(constraint, order_.begin()));
  evict_locked();
  return constraint;
}

// Least recently used first, beyond the count or the memory budget (the newest always stays;
// requests still using an evicted grammar keep it alive, and its work keeps counting in total_).
void ConstraintCache::evict_locked() {
  std::size_t bytes = 0;
  for (auto& [key, entry] : entries_) bytes += entry.first->memory_bytes();
  while (entries_.size() > 1 && (entries_.size() > capacity_ || bytes > memory_budget_)) {
    auto victim = entries_.find(order_.back());
    bytes -= std::min(bytes, victim->second.first->memory_bytes());
    entries_.erase(victim);
    order_.pop_back();
  }
}

}  // namespace md::engine
