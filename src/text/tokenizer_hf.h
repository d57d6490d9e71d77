// Hugging Face tokenizer.json byte-level BPE (GPT-2 / Qwen family): NFC normalizer, added tokens,
// regex pre-tokenizer, ranked merges and the ByteLevel decoder.
#pragma once

#include <array>
#include <deque>
#include <string>
#include <vector>

#include "text/bpe.h"
#include "text/bpe_cache.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/tokenizer_added_tokens.h"
#include "text/tokenizer_id_map.h"

namespace md {

// Everything tokenizer.json describes, checked and in the form encoding needs.
struct HfBpeData {
  std::vector<std::string> pieces;           // id -> vocabulary string ("" where no token)
  std::vector<std::string> bytes;            // id -> raw bytes of the token
  std::vector<std::uint8_t> has_token;       // id -> 1 if the id is a token
  std::vector<std::uint8_t> special;         // id -> 1 for special added tokens
  TokenIdMap piece_to_id;                    // vocabulary strings and added-token contents
  std::array<std::int32_t, 256> byte_ids{};  // byte -> its one-byte token, -1 if none
  PairRankTable merges;
  bool ignore_merges = false;
  TokenIdMap bytes_to_id;  // raw bytes -> id, filled only for ignore_merges
  std::vector<AddedToken> added_tokens;
  bool nfc = false;  // normalizer NFC (else none)
  PreTokenizerSpec pretokenizer;
};

// Parses and validates a tokenizer.json; `origin` (a path) names it in errors.
HfBpeData parse_hf_tokenizer_json(std::string_view json_text, const std::string& origin);

class HfBpeTokenizer final : public Tokenizer {
 public:
  explicit HfBpeTokenizer(HfBpeData data);

  std::vector<std::int32_t> encode(std::string_view text, bool parse_special = true) const override;
  bool append_token_bytes(std::int32_t id, std::string& out) const override;
  std::optional<std::int32_t> token_id(std::string_view token_text) const override;
  bool is_special(std::int32_t id) const override;
  bool is_added(std::int32_t id) const override;
  std::int32_t vocab_size() const override;
  std::string piece(std::int32_t id) const override;

 private:
  struct Scratch;
  void encode_text(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out) const;
  void encode_normalized(std::string_view text, bool parse_special, Scratch& scratch,
                         std::vector<std::int32_t>& out) const;
  void encode_piece(std::string_view piece, Scratch& scratch, std::vector<std::int32_t>& out) const;

  HfBpeData data_;
  AddedTokenMatcher raw_added_;         // added tokens with normalized=false: matched first
  AddedTokenMatcher normalized_added_;  // normalized=true: matched in the normalized text
  PreTokenizer pretokenizer_;
  BpeCache cache_;
  std::vector<std::uint8_t> added_;  // id -> 1 for added tokens
};

}  // namespace md
