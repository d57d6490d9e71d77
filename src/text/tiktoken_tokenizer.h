// tiktoken-format BPE (Kimi K2/K3): ranked byte strings from tiktoken.model, a pat_str
// pre-tokenizer regex, and a block of reserved special tokens after the ranks.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "text/bpe.h"
#include "text/bpe_cache.h"
#include "text/pretokenizer_regex.h"
#include "text/tokenizer.h"
#include "text/tokenizer_added_tokens.h"
#include "text/tokenizer_id_map.h"

namespace md {

// Parses tiktoken.model text: one "base64(bytes) rank" per line. Returns id -> bytes; throws
// md::Error naming `origin` and the line for malformed lines, duplicate or non-dense ranks.
std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::string& origin);

// Decodes standard base64 (with '=' padding); nullopt if malformed.
std::optional<std::string> decode_base64(std::string_view text);

class TiktokenTokenizer final : public Tokenizer {
 public:
  // `ranks`: id -> bytes for the ordinary tokens; `specials`: names of ids ranks.size()...;
  // `pattern`: tiktoken pat_str (Rust regex syntax); `special_flags`: per name whether it is
  // special (empty: all are). Every name is matched in text with parse_special, as tiktoken's
  // allowed specials are, and none without it.
  TiktokenTokenizer(std::vector<std::string> ranks, std::vector<std::string> specials,
                    const std::string& pattern, std::vector<bool> special_flags = {});

  std::vector<std::int32_t> encode(std::string_view text, bool parse_special = true) const override;
  bool append_token_bytes(std::int32_t id, std::string& out) const override;
  std::optional<std::int32_t> token_id(std::string_view token_text) const override;
  bool is_special(std::int32_t id) const override;
  bool is_added(std::int32_t id) const override;
  std::int32_t vocab_size() const override;
  // Ordinary tokens in GPT-2 byte-level form (printable, like HF vocabularies); specials by name.
  std::string piece(std::int32_t id) const override;

 private:
  void encode_text(std::string_view text, std::vector<std::string_view>& pieces,
                   std::vector<BpeSymbol>& symbols, std::vector<std::int32_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<BpeSymbol>& symbols,
                    std::vector<std::int32_t>& out) const;

  std::vector<std::string> bytes_;     // id -> bytes (ordinary tokens)
  std::vector<std::string> specials_;  // (id - n_base) -> name
  std::vector<bool> special_flags_;    // (id - n_base) -> special (absent: special)
  TokenIdMap rank_of_;                 // bytes -> id
  TokenIdMap special_id_;              // name -> id
  std::array<std::int32_t, 256> byte_rank_{};
  AddedTokenMatcher special_matcher_;
  PretokenizerRegex regex_;
  BpeCache cache_;
};

}  // namespace md
