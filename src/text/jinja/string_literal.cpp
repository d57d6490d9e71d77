// Python string literal decoding for the Jinja lexer (lexer.h declares it).
#include "text/jinja/lexer.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return (c | 0x20) - 'a' + 10;
}

}  // namespace

std::string decode_string_literal(std::string_view body) {
  // Python's codec sees the body with every non-ASCII character written as \xNN, \uNNNN or
  // \UNNNNNNNN first; doing the same keeps quirks such as "\é" identical.
  std::string ascii;
  ascii.reserve(body.size());
  for (std::size_t pos = 0; pos < body.size();) {
    char32_t cp = uni::next(body, pos);
    if (cp < 0x80) {
      ascii.push_back(static_cast<char>(cp));
    } else if (cp < 0x100) {
      ascii += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x10000) {
      ascii += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      ascii += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
  }
  std::string out;
  auto put = [&](std::uint32_t cp) {
    if (cp > 0x10FFFF) throw ValueError("illegal Unicode character in string literal");
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      throw ValueError("surrogate code points are not supported in string literals");
    }
    uni::append(out, cp);
  };
  for (std::size_t i = 0; i < ascii.size(); ++i) {
    char c = ascii[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i >= ascii.size()) throw ValueError("\\ at end of string");
    c = ascii[i];
    switch (c) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        std::size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        std::uint32_t cp = 0;
        for (std::size_t k = 1; k <= digits; ++k) {
          if (i + k >= ascii.size() || !is_hex(ascii[i + k])) {
            throw ValueError(fmt::format("truncated \\{} escape in string literal", c));
          }
          cp = cp * 16 + static_cast<std::uint32_t>(hex_value(ascii[i + k]));
        }
        i += digits;
        put(cp);
        break;
      }
      case 'N':
        throw ValueError("\\N{...} escapes are not supported in string literals");
      default:
        if (c >= '0' && c <= '7') {
          std::uint32_t cp = static_cast<std::uint32_t>(c - '0');
          for (int k = 0;
               k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<std::uint32_t>(ascii[++i] - '0');
          }
          put(cp);
        } else {
          out.push_back('\\');
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace md::jinja
