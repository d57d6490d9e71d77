// States of earlier traffic kept across requests, so that a prompt which starts like an earlier
// one resumes from a copy of that state instead of prefilling from zero.
//
// A radix tree of token runs: the path from the root to a node spells a token sequence, and a
// node may hold a checkpoint, a copy of a sequence state that holds exactly those tokens (KV
// blocks shared with the row it was taken from until either side writes: kernels::KvCache; the
// recurrent and conv states of hybrid layers copied whole). A lookup walks the prompt down the
// tree and resumes from the deepest checkpoint on its path; where the model can rewind a state
// and is split invariant (attention-only families), any checkpoint below the point where the
// prompt leaves the tree serves, rewound to that point.
//
// Which states may be stored is the scheduler's decision (batch_scheduler.h): resuming must give
// the bits a cold prefill gives, so a model whose results depend on how a prompt is split
// (LanguageModel::split_invariant) is only checkpointed at the prefill-chunk boundaries every
// prefill shares.
//
// Memory is what the checkpoints hold, counted as the system holds it: each one's own state
// (recurrent and conv states) plus every KV block any of them holds, once however many share it
// (SequenceState::append_blocks). Past the budget the least recently used checkpoints go first.
// Used by the scheduler's thread; stats() from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "models/language_model.h"

namespace md::engine {

struct PrefixCacheStats {
  int64_t lookups = 0;  // prompts looked up
  int64_t hits = 0;     // of which resumed from a checkpoint
  int64_t looked_up_tokens = 0;
  int64_t reused_tokens = 0;  // prompt tokens not prefilled thanks to the cache
  int64_t checkpoints = 0;    // held now
  int64_t stored = 0;         // checkpoints taken so far
  int64_t evicted = 0;
  std::size_t bytes = 0;  // charged to the checkpoints held now
  std::size_t budget = 0;
};

class PrefixCache {
 public:
  PrefixCache(const LanguageModel& model, std::size_t memory_budget);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Hit {
    std::unique_ptr<SequenceState> state;  // null: nothing cached fits
    int64_t tokens = 0;                    // the prompt's first tokens it holds
    bool rewound = false;                  // taken from a longer sequence and rewound
  };
  // A copy of the state of the longest cached prefix of `prompt`, at most `limit` tokens long.
  Hit lookup(std::span<const int32_t> prompt, int64_t limit);

  // Keeps a copy of `state`, which holds exactly `tokens`, unless one is kept for them already
  // or it would not fit in the budget beside the checkpoints it shares blocks with (false then).
  bool insert(std::span<const int32_t> tokens, const SequenceState& state);

  PrefixCacheStats stats() const;
  // Whether a lookup may rewind a longer state (then intermediate states are not needed).
  bool rewinds() const { return rewinds_; }

 private:
  struct Node;
  struct SharedBlock {
    int64_t holders = 0;
    std::size_t bytes = 0;
  };
  // Counts `node`'s blocks in (or out of) the cache's memory.
  void hold_blocks(const Node& node);
  void release_blocks(const Node& node);
  // Drops least recently used checkpoints until the budget holds; `keep`, just stored, only when
  // nothing else is left (false then).
  bool evict_within_budget(Node* keep);
  void drop_checkpoint(Node& node);
  // Removes `node` and the ancestors left holding nothing and leading nowhere, and folds the
  // first one left holding nothing with one child into it (never the root). Nodes that hold a
  // checkpoint stay where they are in memory.
  void prune(Node* node);
  // The most recently used checkpoint at or below `node`.
  Node* freshest_checkpoint(Node& node);

  const LanguageModel& model_;
  const std::size_t budget_;
  // Rewinding serves a prompt from a longer sequence's state: only where the model can, and
  // where a state resumed at any position gives the bits a cold prefill gives.
  const bool rewinds_;
  mutable std::mutex mutex_;
  std::unique_ptr<Node> root_;
  std::unordered_map<const void*, SharedBlock> blocks_;  // the KV blocks checkpoints hold
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace md::engine
