#include "engine/prefix_cache.h"

#include <algorithm>
#include <utility>

#include "kernels/kv_cache.h"

namespace md::engine {

struct PrefixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> run;                                 // the tokens from the parent to here
  int64_t depth = 0;                                        // tokens from the root to here
  std::map<int32_t, std::unique_ptr<Node>> children;        // by the first token of their run
  std::unique_ptr<SequenceState> checkpoint;                // holds exactly the path's tokens
  std::vector<std::pair<const void*, std::size_t>> blocks;  // the checkpoint's KV blocks
  std::size_t own_bytes = 0;                                // the rest of its memory
  uint64_t used = 0;              // the cache's clock when last stored or resumed from
  int64_t checkpoints_below = 0;  // in the subtree, this node's own not counted
};

namespace {

// How many of `run`'s first tokens equal `tokens`' (at most `limit`).
std::size_t common_length(const std::vector<int32_t>& run, std::span<const int32_t> tokens,
                          std::size_t limit) {
  const std::size_t n = std::min({run.size(), tokens.size(), limit});
  std::size_t i = 0;
  while (i < n && run[i] == tokens[i]) ++i;
  return i;
}

}  // namespace

PrefixCache::PrefixCache(const LanguageModel& model, std::size_t memory_budget)
    : model_(model),
      budget_(memory_budget),
      rewinds_(model.can_rewind() && model.split_invariant()),
      root_(std::make_unique<Node>()) {
  stats_.budget = budget_;
}

PrefixCache::~PrefixCache() = default;

PrefixCache::Hit PrefixCache::lookup(std::span<const int32_t> prompt, int64_t limit) {
  std::lock_guard lock(mutex_);
  ++stats_.lookups;
  stats_.looked_up_tokens += static_cast<int64_t>(prompt.size());
  const auto bound =
      static_cast<std::size_t>(std::clamp<int64_t>(limit, 0, static_cast<int64_t>(prompt.size())));
  // Walk the prompt down the tree: `best` is the deepest checkpoint on its path; every sequence
  // at or below `below` starts with the prompt's first `matched` tokens.
  Node* node = root_.get();
  Node* best = nullptr;
  Node* below = nullptr;
  std::size_t matched = 0;
  for (;;) {
    if (node->checkpoint && static_cast<std::size_t>(node->depth) <= bound) best = node;
    below = node;
    if (matched >= bound) break;
    auto next = node->children.find(prompt[matched]);
    if (next == node->children.end()) break;
    Node* child = next->second.get();
    const std::size_t common = common_length(child->run, prompt.subspan(matched), bound - matched);
    matched += common;
    if (common < child->run.size()) {
      below = child;
      break;
    }
    node = child;
  }
  Hit hit;
  const int64_t exact = best != nullptr ? best->depth : 0;
  if (rewinds_ && static_cast<int64_t>(matched) > exact) {
    if (Node* longer = freshest_checkpoint(*below);
        longer != nullptr && longer->depth > static_cast<int64_t>(matched)) {
      longer->used = ++clock_;
      hit.state = longer->checkpoint->clone();
      model_.rewind(*hit.state, static_cast<int64_t>(matched));
      hit.tokens = static_cast<int64_t>(matched);
      hit.rewound = true;
    }
  }
  if (!hit.state && best != nullptr) {
    best->used = ++clock_;
    hit.state = best->checkpoint->clone();
    hit.tokens = best->depth;
  }
  if (hit.state) {
    ++stats_.hits;
    stats_.reused_tokens += hit.tokens;
  }
  return hit;
}

PrefixCache::Node* PrefixCache::freshest_checkpoint(Node& node) {
  Node* freshest = node.checkpoint ? &node : nullptr;
  if (node.checkpoints_below == 0) return freshest;
  for (auto& [token, child] : node.children) {
    Node* found = freshest_checkpoint(*child);
    if (found != nullptr && (freshest == nullptr || found->used > freshest->used)) {
      freshest = found;
    }
  }
  return freshest;
}

bool PrefixCache::insert(std::span<const int32_t> tokens, const SequenceState& state) {
  std::lock_guard lock(mutex_);
  if (tokens.empty() || budget_ == 0) return false;
  Node* node = root_.get();
  std::size_t at = 0;
  while (at < tokens.size()) {
    auto next = node->children.find(tokens[at]);
    if (next == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->parent = node;
      leaf->run.assign(tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.end());
      leaf->depth = static_cast<int64_t>(tokens.size());
      Node* added = leaf.get();
      node->children.emplace(tokens[at], std::move(leaf));
      node = added;
      break;
    }
    Node* child = next->second.get();
    const std::size_t common = common_length(child->run, tokens.subspan(at), tokens.size() - at);
    if (common < child->run.size()) {
      // The tokens leave (or end inside) the child's run: a node where they part.
      auto middle = std::make_unique<Node>();
      middle->parent = node;
      middle->run.assign(child->run.begin(),
                         child->run.begin() + static_cast<std::ptrdiff_t>(common));
      middle->depth = node->depth + static_cast<int64_t>(common);
      middle->checkpoints_below = child->checkpoints_below + (child->checkpoint ? 1 : 0);
      std::unique_ptr<Node> moved = std::move(next->second);
      moved->run.erase(moved->run.begin(),
                       moved->run.begin() + static_cast<std::ptrdiff_t>(common));
      moved->parent = middle.get();
      middle->children.emplace(moved->run.front(), std::move(moved));
      next->second = std::move(middle);
      child = next->second.get();
    }
    node = child;
    at += common;
  }
  if (node->checkpoint) {
    node->used = ++clock_;
    return false;
  }
  std::unique_ptr<SequenceState> copy;
  std::vector<std::pair<const void*, std::size_t>> blocks;
  try {
    copy = state.clone();
    copy->append_blocks(blocks);
  } catch (...) {
    prune(node);  // no node without a checkpoint is left behind
    throw;
  }
  std::size_t block_bytes = 0;
  for (const auto& [block, bytes] : blocks) block_bytes += bytes;
  const std::size_t own_bytes = copy->bytes() - std::min(block_bytes, copy->bytes());
  // It would not fit even alone (evicting the checkpoints it shares blocks with frees none of
  // them): refused before anything is evicted for it.
  if (own_bytes + block_bytes > budget_) {
    prune(node);
    return false;
  }
  node->checkpoint = std::move(copy);
  node->blocks = std::move(blocks);
  node->own_bytes = own_bytes;
  node->used = ++clock_;
  for (Node* up = node->parent; up != nullptr; up = up->parent) ++up->checkpoints_below;
  hold_blocks(*node);
  ++stats_.checkpoints;
  if (!evict_within_budget(node)) return false;
  ++stats_.stored;
  return true;
}

void PrefixCache::hold_blocks(const Node& node) {
  stats_.bytes += node.own_bytes;
  for (const auto& [block, bytes] : node.blocks) {
    SharedBlock& shared = blocks_[block];
    if (shared.holders++ == 0) {
      shared.bytes = bytes;
      stats_.bytes += bytes;
    }
  }
}

void PrefixCache::release_blocks(const Node& node) {
  stats_.bytes -= node.own_bytes;
  for (const auto& [block, bytes] : node.blocks) {
    auto shared = blocks_.find(block);
    if (--shared->second.holders == 0) {
      stats_.bytes -= shared->second.bytes;
      blocks_.erase(shared);
    }
  }
}

bool PrefixCache::evict_within_budget(Node* keep) {
  while (stats_.bytes > budget_) {
    Node* oldest = nullptr;
    std::vector<Node*> pending{root_.get()};
    while (!pending.empty()) {
      Node* node = pending.back();
      pending.pop_back();
      if (node->checkpoint && node != keep && (oldest == nullptr || node->used < oldest->used)) {
        oldest = node;
      }
      if (node->checkpoints_below == 0) continue;
      for (auto& [token, child] : node->children) pending.push_back(child.get());
    }
    if (oldest == nullptr) {
      // The new checkpoint alone is over the budget (with blocks others held when it came).
      drop_checkpoint(*keep);
      return false;
    }
    drop_checkpoint(*oldest);
    ++stats_.evicted;
  }
  return true;
}

void PrefixCache::drop_checkpoint(Node& node) {
  release_blocks(node);
  --stats_.checkpoints;
  node.checkpoint.reset();
  node.blocks.clear();
  node.own_bytes = 0;
  for (Node* up = node.parent; up != nullptr; up = up->parent) --up->checkpoints_below;
  prune(&node);
}

void PrefixCache::prune(Node* node) {
  // Nodes that hold nothing and lead nowhere go; the root stays.
  while (node->parent != nullptr && !node->checkpoint && node->children.empty()) {
    Node* parent = node->parent;
    parent->children.erase(node->run.front());
    node = parent;
  }
  // One that holds nothing and leads one way only is folded into its child (walks stay short).
  if (node->parent != nullptr && !node->checkpoint && node->children.size() == 1) {
    Node* parent = node->parent;
    std::unique_ptr<Node> child = std::move(node->children.begin()->second);
    child->run.insert(child->run.begin(), node->run.begin(), node->run.end());
    child->parent = parent;
    const int32_t first = child->run.front();
    parent->children[first] = std::move(child);  // `node` goes here
  }
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace md::engine
