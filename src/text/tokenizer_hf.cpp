#include "text/tokenizer_hf.h"

#include "base/utf8.h"
#include "text/unicode_normalizer.h"

namespace md {
namespace {

std::vector<AddedToken> select_added(const std::vector<AddedToken>& tokens, bool normalized) {
  std::vector<AddedToken> out;
  for (const AddedToken& t : tokens) {
    if (t.normalized == normalized) out.push_back(t);
  }
  return out;
}

}  // namespace

// Per-call buffers, reused across the segments and pieces of one encode() call.
struct HfBpeTokenizer::Scratch {
  std::vector<TextSegment> segments;
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  std::vector<BpeSymbol> symbols;
};

HfBpeTokenizer::HfBpeTokenizer(HfBpeData data)
    : data_(std::move(data)),
      raw_added_(select_added(data_.added_tokens, false)),
      // Without a normalizer, "normalized" tokens see the same text as the others.
      normalized_added_(select_added(data_.added_tokens, true)),
      pretokenizer_(data_.pretokenizer),
      added_(data_.pieces.size(), 0) {
  for (const AddedToken& token : data_.added_tokens) {
    if (token.id >= 0 && static_cast<std::size_t>(token.id) < added_.size()) added_[token.id] = 1;
  }
}

std::vector<std::int32_t> HfBpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 4);
  Scratch scratch;
  if (raw_added_.empty()) {
    encode_normalized(text, parse_special, scratch, out);
    return out;
  }
  raw_added_.split(text, !parse_special, scratch.segments);
  for (const TextSegment& segment : scratch.segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
    } else {
      encode_normalized(segment.text, parse_special, scratch, out);
    }
  }
  return out;
}

// Normalizes one stretch between raw added tokens, then looks for normalized added tokens in it.
void HfBpeTokenizer::encode_normalized(std::string_view text, bool parse_special, Scratch& scratch,
                                       std::vector<std::int32_t>& out) const {
  std::string normalized;
  if (data_.nfc && nfc_may_change(text)) {
    normalized = nfc(text);
    text = normalized;
  }
  if (normalized_added_.empty()) {
    encode_text(text, scratch, out);
    return;
  }
  std::vector<TextSegment> segments;
  normalized_added_.split(text, !parse_special, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
    } else {
      encode_text(segment.text, scratch, out);
    }
  }
}

void HfBpeTokenizer::encode_text(std::string_view text, Scratch& scratch,
                                 std::vector<std::int32_t>& out) const {
  scratch.pieces.clear();
  scratch.storage.clear();
  pretokenizer_.split(text, scratch.pieces, scratch.storage);
  for (std::string_view piece : scratch.pieces) encode_piece(piece, scratch, out);
}

void HfBpeTokenizer::encode_piece(std::string_view piece, Scratch& scratch,
                                  std::vector<std::int32_t>& out) const {
  if (data_.ignore_merges) {
    const auto it = data_.bytes_to_id.find(piece);
    if (it != data_.bytes_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // HF's BPE (with no unk_token, as in byte-level vocabularies) drops a character that has no
  // token, and its neighbours then merge as if adjacent. SmolLM2's vocabulary lacks 21 bytes.
  std::string kept;
  for (std::size_t i = 0; i < piece.size(); ++i) {
    if (data_.byte_ids[static_cast<std::uint8_t>(piece[i])] >= 0) continue;
    kept.assign(piece.substr(0, i));
    for (char c : piece.substr(i)) {
      if (data_.byte_ids[static_cast<std::uint8_t>(c)] >= 0) kept.push_back(c);
    }
    if (kept.empty()) return;
    piece = kept;
    break;
  }
  if (piece.size() == 1) {
    out.push_back(data_.byte_ids[static_cast<std::uint8_t>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= BpeCache::kMaxPieceBytes;
  if (cacheable && cache_.lookup(piece, out)) return;
  const std::size_t first = out.size();
  bpe_init_symbols(
      piece, [&](std::uint8_t b) { return data_.byte_ids[b]; }, scratch.symbols);
  bpe_merge(
      scratch.symbols,
      [&](const BpeSymbol& l, const BpeSymbol& r) { return data_.merges.find(l.id, r.id); }, out);
  if (cacheable) cache_.store(piece, out.data() + first, out.size() - first);
}

bool HfBpeTokenizer::append_token_bytes(std::int32_t id, std::string& out) const {
  if (id < 0 || id >= vocab_size() || !data_.has_token[id]) return false;
  out += data_.bytes[id];
  return true;
}

std::optional<std::int32_t> HfBpeTokenizer::token_id(std::string_view token_text) const {
  const auto it = data_.piece_to_id.find(token_text);
  if (it == data_.piece_to_id.end()) return std::nullopt;
  return it->second;
}

bool HfBpeTokenizer::is_special(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && data_.special[id];
}

bool HfBpeTokenizer::is_added(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && added_[static_cast<std::size_t>(id)] != 0;
}

std::int32_t HfBpeTokenizer::vocab_size() const {
  return static_cast<std::int32_t>(data_.pieces.size());
}

std::string HfBpeTokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return data_.pieces[id];
}

}  // namespace md
