#include "text/tiktoken_tokenizer.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/utf8.h"
#include "text/byte_level.h"
#include "text/pretokenizer_pattern.h"
#include "text/tiktoken_pattern.h"

namespace md {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::vector<AddedToken> special_tokens(const std::vector<std::string>& names, std::int32_t n_base) {
  std::vector<AddedToken> tokens;
  for (std::size_t i = 0; i < names.size(); ++i) {
    AddedToken t;
    t.content = names[i];
    t.id = n_base + static_cast<std::int32_t>(i);
    t.special = true;
    tokens.push_back(std::move(t));
  }
  return tokens;
}

// Names for ids n_base .. n_base+count-1: added_tokens_decoder when it names them, else
// "<|reserved_token_{id}|>" (the absolute id), as Kimi's tokenizer does; and whether each is
// special (Kimi K3 marks its structure markers <|open|>, <|close|>, <|sep|> "special": false, so
// that decoded text keeps them for the output parsers).
struct SpecialNames {
  std::vector<std::string> names;
  std::vector<bool> special;
};
SpecialNames special_names(const std::string& config_path, std::int32_t n_base, int count) {
  SpecialNames out;
  std::vector<std::string>& names = out.names;
  for (int i = 0; i < count; ++i) names.push_back(fmt::format("<|reserved_token_{}|>", n_base + i));
  out.special.assign(static_cast<std::size_t>(count), true);
  if (config_path.empty()) return out;
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", config_path, e.what());
  }
  const auto decoder = config.find("added_tokens_decoder");
  if (decoder == config.end() || !decoder->is_object()) return out;
  for (const auto& [key, entry] : decoder->items()) {
    std::int64_t id = -1;
    std::from_chars(key.data(), key.data() + key.size(), id);
    if (id < n_base || id >= n_base + count || !entry.contains("content")) {
      log::debug("{}: added token {} is outside the special range {}..{}; ignored", config_path,
                 key, n_base, n_base + count - 1);
      continue;
    }
    const auto at = static_cast<std::size_t>(id - n_base);
    if (!entry["content"].is_string())
      fail("{}: added token {} has no string content", config_path, key);
    names[at] = entry["content"].get<std::string>();
    const auto special = entry.find("special");
    out.special[at] = special == entry.end() || !special->is_boolean() || special->get<bool>();
  }
  return out;
}

std::string resolve_pattern(const TiktokenFiles& files) {
  if (!files.pattern.empty()) return files.pattern;
  if (!files.config_path.empty()) {
    const auto config = nlohmann::json::parse(read_text_file(files.config_path), nullptr, false);
    if (config.is_object() && config.contains("pat_str") && config["pat_str"].is_string()) {
      return config["pat_str"].get<std::string>();
    }
  }
  const auto dir = std::filesystem::path(files.model_path).parent_path();
  const std::string python = (dir / "tokenization_kimi.py").string();
  if (file_exists(python)) {
    if (auto pattern = extract_pat_str_from_python(read_text_file(python))) return *pattern;
    log::debug("{}: no pat_str found in it", python);
  }
  log::debug("no pre-tokenizer pattern given for {}; using Kimi's pat_str", files.model_path);
  return std::string(kKimiPattern);
}

}  // namespace

std::optional<std::string> decode_base64(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const int v = base64_value(c);
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return out;
}

std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::string& origin) {
  std::vector<std::string> by_rank;
  std::vector<std::uint8_t> seen;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    std::int64_t rank = -1;
    const std::string_view rank_text =
        space == std::string_view::npos ? "" : line.substr(space + 1);
    const auto [ptr, ec] =
        std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    auto bytes =
        space == std::string_view::npos ? std::nullopt : decode_base64(line.substr(0, space));
    if (!bytes || ec != std::errc() || ptr != rank_text.data() + rank_text.size() || rank < 0 ||
        rank > (1 << 30)) {
      fail("{}:{}: expected \"<base64 token> <rank>\"", origin, line_no);
    }
    if (static_cast<std::size_t>(rank) >= by_rank.size()) {
      by_rank.resize(static_cast<std::size_t>(rank) + 1);
      seen.resize(static_cast<std::size_t>(rank) + 1, 0);
    }
    if (seen[rank]) fail("{}:{}: rank {} appears twice", origin, line_no, rank);
    seen[rank] = 1;
    by_rank[rank] = std::move(*bytes);
  }
  for (std::size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r])
      fail("{}: rank {} is missing (ranks must be 0..{} without gaps)", origin, r, seen.size() - 1);
  }
  return by_rank;
}

TiktokenTokenizer::TiktokenTokenizer(std::vector<std::string> ranks,
                                     std::vector<std::string> specials, const std::string& pattern,
                                     std::vector<bool> special_flags)
    : bytes_(std::move(ranks)),
      specials_(std::move(specials)),
      special_flags_(std::move(special_flags)),
      special_matcher_(special_tokens(specials_, static_cast<std::int32_t>(bytes_.size()))),
      regex_(translate_pattern_to_pcre2(pattern)) {
  rank_of_.reserve(bytes_.size());
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    rank_of_.emplace(bytes_[id], static_cast<std::int32_t>(id));
  }
  for (std::size_t i = 0; i < specials_.size(); ++i) {
    special_id_.emplace(specials_[i], static_cast<std::int32_t>(bytes_.size() + i));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = rank_of_.find(std::string(1, static_cast<char>(b)));
    byte_rank_[b] = it == rank_of_.end() ? -1 : it->second;
  }
}

std::vector<std::int32_t> TiktokenTokenizer::encode(std::string_view text,
                                                    bool parse_special) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 4);
  std::vector<std::string_view> pieces;
  std::vector<BpeSymbol> symbols;
  if (!parse_special) {
    encode_text(text, pieces, symbols, out);
    return out;
  }
  std::vector<TextSegment> segments;
  special_matcher_.split(text, false, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
    } else {
      encode_text(segment.text, pieces, symbols, out);
    }
  }
  return out;
}

void TiktokenTokenizer::encode_text(std::string_view text, std::vector<std::string_view>& pieces,
                                    std::vector<BpeSymbol>& symbols,
                                    std::vector<std::int32_t>& out) const {
  pieces.clear();
  regex_.split_isolated(text, pieces);
  for (std::string_view piece : pieces) encode_piece(piece, symbols, out);
}

// tiktoken: a piece that is itself a token is taken whole; otherwise bytes are merged, lowest
// rank of the concatenated pair first, and the rank is the token id.
void TiktokenTokenizer::encode_piece(std::string_view piece, std::vector<BpeSymbol>& symbols,
                                     std::vector<std::int32_t>& out) const {
  const auto whole = rank_of_.find(piece);
  if (whole != rank_of_.end()) {
    out.push_back(whole->second);
    return;
  }
  for (char c : piece) {
    if (byte_rank_[static_cast<std::uint8_t>(c)] < 0) {
      fail("cannot encode byte 0x{:02X}: tiktoken.model has no rank for it",
           static_cast<std::uint8_t>(c));
    }
  }
  const bool cacheable = piece.size() <= BpeCache::kMaxPieceBytes;
  if (cacheable && cache_.lookup(piece, out)) return;
  const std::size_t first = out.size();
  bpe_init_symbols(
      piece, [&](std::uint8_t b) { return byte_rank_[b]; }, symbols);
  bpe_merge(
      symbols,
      [&](const BpeSymbol& l, const BpeSymbol& r) {
        const auto it = rank_of_.find(piece.substr(l.begin, r.end - l.begin));
        if (it == rank_of_.end()) return BpeMerge{};
        return BpeMerge{static_cast<std::uint32_t>(it->second), it->second};
      },
      out);
  if (cacheable) cache_.store(piece, out.data() + first, out.size() - first);
}

bool TiktokenTokenizer::append_token_bytes(std::int32_t id, std::string& out) const {
  if (id < 0 || id >= vocab_size()) return false;
  const auto n_base = static_cast<std::int32_t>(bytes_.size());
  out += id < n_base ? bytes_[id] : specials_[id - n_base];
  return true;
}

std::optional<std::int32_t> TiktokenTokenizer::token_id(std::string_view token_text) const {
  const auto special = special_id_.find(token_text);
  if (special != special_id_.end()) return special->second;
  const auto bytes = byte_level::decode(token_text);
  if (!bytes) return std::nullopt;
  const auto it = rank_of_.find(*bytes);
  if (it == rank_of_.end()) return std::nullopt;
  return it->second;
}

bool TiktokenTokenizer::is_added(std::int32_t id) const {
  return id >= static_cast<std::int32_t>(bytes_.size()) && id < vocab_size();
}

bool TiktokenTokenizer::is_special(std::int32_t id) const {
  if (!is_added(id)) return false;
  const auto at = static_cast<std::size_t>(id) - bytes_.size();
  return at >= special_flags_.size() || special_flags_[at];
}

std::int32_t TiktokenTokenizer::vocab_size() const {
  return static_cast<std::int32_t>(bytes_.size() + specials_.size());
}

std::string TiktokenTokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const auto n_base = static_cast<std::int32_t>(bytes_.size());
  return id < n_base ? byte_level::encode(bytes_[id]) : specials_[id - n_base];
}

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const TiktokenFiles& files) {
  if (!file_exists(files.model_path)) fail("tiktoken model file not found: {}", files.model_path);
  if (!files.config_path.empty() && !file_exists(files.config_path)) {
    fail("tokenizer config not found: {}", files.config_path);
  }
  auto ranks = parse_tiktoken_ranks(read_text_file(files.model_path), files.model_path);
  const auto n_base = static_cast<std::int32_t>(ranks.size());
  int reserved = files.num_reserved_special_tokens;
  if (files.vocab_limit > n_base) {
    reserved = static_cast<int>(std::min<std::int64_t>(reserved, files.vocab_limit - n_base));
  }
  SpecialNames specials = special_names(files.config_path, n_base, reserved);
  return std::make_unique<TiktokenTokenizer>(std::move(ranks), std::move(specials.names),
                                             resolve_pattern(files), std::move(specials.special));
}

}  // namespace md
