// Filling HfBpeData's token tables from a vocabulary, merges and added tokens, whatever file
// they came from (tokenizer.json or GGUF metadata).
#include "text/tokenizer_hf_tables.h"

#include <algorithm>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/unicode_normalizer.h"

namespace md {
namespace {

void resize_tables(HfBpeData& data, std::size_t size) {
  data.pieces.resize(size);
  data.bytes.resize(size);
  data.has_token.resize(size, 0);
  data.special.resize(size, 0);
}

}  // namespace

void hf_load_vocab(std::vector<std::pair<std::string, std::int64_t>>& vocab, HfBpeData& data) {
  std::int64_t max_id = -1;
  for (const auto& entry : vocab) max_id = std::max(max_id, entry.second);
  resize_tables(data, static_cast<std::size_t>(max_id + 1));
  data.piece_to_id.reserve(vocab.size() + 1024);
  for (auto& [text, id64] : vocab) {
    const auto id = static_cast<std::int32_t>(id64);
    // A string outside the byte alphabet decodes to its own text, as HF's ByteLevel decoder does.
    auto raw = byte_level::decode(text);
    data.bytes[id] = raw ? std::move(*raw) : text;
    data.has_token[id] = 1;
    data.piece_to_id.emplace(text, id);
    data.pieces[id] = std::move(text);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = data.piece_to_id.find(byte_level::encode(std::string(1, static_cast<char>(b))));
    data.byte_ids[b] = it == data.piece_to_id.end() ? -1 : it->second;
  }
}

void hf_load_merges(const std::vector<std::pair<std::string, std::string>>& merges,
                    const std::string& origin, HfBpeData& data) {
  data.merges.reserve(merges.size());
  std::string joined;
  std::uint32_t rank = 0;
  for (const auto& [left, right] : merges) {
    joined.assign(left).append(right);
    const auto l = data.piece_to_id.find(left);
    const auto r = data.piece_to_id.find(right);
    const auto j = data.piece_to_id.find(joined);
    if (l == data.piece_to_id.end() || r == data.piece_to_id.end() || j == data.piece_to_id.end()) {
      fail("{}: merge #{} '{} {}' uses a token missing from the vocabulary", origin, rank, left,
           right);
    }
    data.merges.insert(l->second, r->second, BpeMerge{rank, j->second});
    ++rank;
  }
}

void hf_add_added_tokens(std::vector<AddedToken> tokens, HfBpeData& data) {
  for (AddedToken& token : tokens) {
    const auto id = static_cast<std::size_t>(token.id);
    if (id >= data.pieces.size()) resize_tables(data, id + 1);
    data.pieces[id] = token.content;
    auto raw = byte_level::decode(token.content);
    data.bytes[id] = raw ? std::move(*raw) : token.content;
    data.has_token[id] = 1;
    data.special[id] = token.special ? 1 : 0;
    data.piece_to_id.insert_or_assign(token.content, token.id);  // added tokens win, as in HF
    if (token.normalized && data.nfc) token.content = nfc(token.content);
  }
  data.added_tokens = std::move(tokens);
}

}  // namespace md
