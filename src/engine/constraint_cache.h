// Compiled grammars per served model: the vocabulary's token trie (built once, on first use) and
// the TokenConstraints compiled from GBNF texts, kept by text (least recently used dropped) so
// that requests repeating a schema share its automaton and its cached token masks. Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/grammar/token_constraint.h"
#include "text/tokenizer.h"

namespace md::engine {

class ConstraintCache {
 public:
  // `end_ids`: the model's end tokens (allowed where a grammar accepts). `capacity`: grammars kept;
  // `memory_budget`: bytes their automata and cached masks may hold together.
  ConstraintCache(const Tokenizer& tokenizer, std::vector<int32_t> end_ids,
                  std::size_t capacity = 64, std::size_t memory_budget = std::size_t{1} << 30);

  // The constraint for GBNF `text`; md::Error when the grammar does not parse or is too large.
  // `markers`: added tokens (by their text, e.g. "<tool_call>") the grammar may write as that
  // text; names the tokenizer does not know are skipped.
  std::shared_ptr<grammar::TokenConstraint> get(const std::string& text,
                                                const std::vector<std::string>& markers = {});

  // Mask work of every grammar compiled so far (kept or dropped).
  grammar::MaskStats stats() { return total_->get(); }
  std::size_t compiled() const { return compiled_; }

 private:
  std::shared_ptr<const grammar::TokenTrie> vocabulary();
  void evict_locked();

  const Tokenizer& tokenizer_;
  std::vector<int32_t> end_ids_;
  std::size_t capacity_;
  std::size_t memory_budget_;
  std::mutex mutex_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  std::list<std::string> order_;  // most recently used first
  std::unordered_map<std::string, std::pair<std::shared_ptr<grammar::TokenConstraint>,
                                            std::list<std::string>::iterator>>
      entries_;
  std::shared_ptr<grammar::MaskStatsTotal> total_ = std::make_shared<grammar::MaskStatsTotal>();
  std::size_t compiled_ = 0;
};

// The raw bytes of every token a grammar may produce: added tokens (special or not: markers such as
// <think> or <tool_call> that parsers act on) and ids without a token get none — a grammar never
// allows them (the end tokens are handled apart; a lazy grammar's trigger is not part of it).
std::vector<std::string> grammar_token_bytes(const Tokenizer& tokenizer);

}  // namespace md::engine
