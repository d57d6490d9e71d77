// The vocabulary as a byte trie laid out in depth-first order, so that the allowed-token mask of a
// grammar state is one linear walk that skips a whole subtree as soon as its prefix leaves the
// grammar (token_constraint.h). Built once per tokenizer and shared by every compiled grammar.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace md::grammar {

class TokenTrie {
 public:
  struct Entry {
    uint32_t skip;          // index of the next entry outside this one's subtree
    uint32_t tokens_begin;  // into token_ids(): the tokens whose bytes end here
    uint32_t tokens_end;
    uint16_t depth;  // 1 for a token's first byte
    uint8_t byte;
  };

  // `token_bytes[id]` are token id's raw bytes; an empty string leaves the token out (special
  // tokens, unused ids): a grammar never allows it.
  explicit TokenTrie(std::vector<std::string> token_bytes);

  const std::vector<Entry>& entries() const { return entries_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<std::size_t>(id)]; }
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  std::size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Entry> entries_;
  std::vector<int32_t> token_ids_;
  std::size_t max_depth_ = 0;
};

}  // namespace md::grammar
