#include "text/grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace md::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty()) continue;
    if (bytes_[id].size() > 0xFFFF) fail("token {} is longer than 65535 bytes", id);
    order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<std::size_t>(a)] < bytes_[static_cast<std::size_t>(b)];
  });
  // Sorted strings give the trie in depth-first order: each string shares its longest common
  // prefix with the previous one; the entries deeper than that are closed, the rest opened.
  std::vector<uint32_t> path;  // open entries, one per depth
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[static_cast<std::size_t>(id)];
    std::size_t common = 0;
    if (previous) {
      std::size_t limit = std::min(previous->size(), s.size());
      while (common < limit && (*previous)[common] == s[common]) ++common;
    }
    while (path.size() > common) {
      entries_[path.back()].skip = static_cast<uint32_t>(entries_.size());
      path.pop_back();
    }
    for (std::size_t depth = common; depth < s.size(); ++depth) {
      path.push_back(static_cast<uint32_t>(entries_.size()));
      auto tokens = static_cast<uint32_t>(token_ids_.size());
      entries_.push_back(Entry{0, tokens, tokens, static_cast<uint16_t>(depth + 1),
                               static_cast<uint8_t>(s[depth])});
    }
    // Tokens with the same bytes sort together, so the entry's tokens stay contiguous.
    token_ids_.push_back(id);
    entries_[path.back()].tokens_end = static_cast<uint32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, s.size());
    previous = &s;
  }
  for (uint32_t index : path) entries_[index].skip = static_cast<uint32_t>(entries_.size());
}

}  // namespace md::grammar
