#include "text/tiktoken_pattern.h"

#include <vector>

namespace md {

const std::string_view kKimiPattern =
    R"([\p{Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Reads one raw string literal (r"""...""" or r"...") at source[pos]; advances pos past it.
std::optional<std::string> read_raw_literal(std::string_view source, std::size_t& pos) {
  if (pos >= source.size() || (source[pos] != 'r' && source[pos] != 'R')) return std::nullopt;
  ++pos;
  const std::string_view quote = source.substr(pos, 3) == R"(""")" ? R"(""")"
                                 : source.substr(pos, 3) == "'''"  ? "'''"
                                 : source.substr(pos, 1) == "\""   ? "\""
                                 : source.substr(pos, 1) == "'"    ? "'"
                                                                   : "";
  if (quote.empty()) return std::nullopt;
  pos += quote.size();
  const std::size_t end = source.find(quote, pos);
  if (end == std::string_view::npos) return std::nullopt;
  std::string literal(source.substr(pos, end - pos));
  pos = end + quote.size();
  return literal;
}

void skip_separators(std::string_view source, std::size_t& pos) {
  while (pos < source.size()) {
    const char c = source[pos];
    if (c == '#') {
      const std::size_t eol = source.find('\n', pos);
      pos = eol == std::string_view::npos ? source.size() : eol;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
      ++pos;
    } else {
      return;
    }
  }
}

}  // namespace

std::optional<std::string> extract_pat_str_from_python(std::string_view source) {
  const std::size_t name = source.find("pat_str");
  if (name == std::string_view::npos) return std::nullopt;
  const std::size_t join = source.find(".join(", name);
  if (join == std::string_view::npos || join - name > 40 || join < 3) return std::nullopt;
  const std::string_view separator = source.substr(join - 3, 3);
  if (separator != R"("|")" && separator != "'|'") return std::nullopt;
  std::size_t pos = join + 6;
  skip_separators(source, pos);
  if (pos >= source.size() || source[pos] != '[') return std::nullopt;
  ++pos;
  std::vector<std::string> parts;
  while (true) {
    skip_separators(source, pos);
    if (pos < source.size() && source[pos] == ']') break;
    auto literal = read_raw_literal(source, pos);
    if (!literal) return std::nullopt;
    parts.push_back(std::move(*literal));
  }
  if (parts.empty()) return std::nullopt;
  std::string pattern = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) pattern += "|" + parts[i];
  return pattern;
}

}  // namespace md
