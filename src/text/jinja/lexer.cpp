#include "text/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Operators, longest first so that "//" wins over "/" as in jinja2's operator regex.
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name, const LexerOptions& options)
      : src_(source), name_(name), options_(options) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    Token eof;
    eof.type = TokenType::kEof;
    eof.loc = loc_at(src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  SourceLoc loc_at(std::size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    std::size_t line_start = *(it - 1);
    SourceLoc loc;
    loc.line = static_cast<int>(it - line_starts_.begin());
    loc.column = static_cast<int>(uni::length(src_.substr(line_start, pos - line_start))) + 1;
    return loc;
  }

  [[noreturn]] void fail_at(std::size_t pos, const std::string& message) const {
    throw TemplateError(TemplateError::Kind::kSyntax, name_, loc_at(pos), message);
  }

  bool starts_with(std::size_t pos, std::string_view what) const {
    return src_.substr(pos, what.size()) == what;
  }

  void push(TokenType type, std::size_t pos, std::string value = {}) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.loc = loc_at(pos);
    tokens_.push_back(std::move(t));
  }

  // Skips Python whitespace (\s) from pos_.
  void skip_space() {
    while (pos_ < src_.size()) {
      std::size_t p = pos_;
      if (!uni::is_space(uni::next(src_, p))) break;
      pos_ = p;
    }
  }

  // Emits `text` as data after jinja2's whitespace control for the tag that follows it: "-"
  // strips all trailing whitespace; otherwise lstrip_blocks removes the indentation before a
  // block or comment tag that starts its line (unless the tag says "+").
  void emit_data(std::size_t start, std::string_view text, char sign, bool is_variable) {
    if (sign == '-') {
      std::size_t end = 0;
      for (std::size_t p = 0; p < text.size();) {
        if (!uni::is_space(uni::next(text, p))) end = p;
      }
      text = text.substr(0, end);
    } else if (sign != '+' && options_.lstrip_blocks && !is_variable) {
      std::size_t nl = text.rfind('\n');
      std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      bool line_starting = start == 0 || src_[start - 1] == '\n';
      if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_space(text.substr(l_pos))) {
        text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) push(TokenType::kData, start, std::string(text));
  }

  static bool all_space(std::string_view text) {
    for (std::size_t p = 0; p < text.size();) {
      if (!uni::is_space(uni::next(text, p))) return false;
    }
    return true;
  }

  // Length of "{%(-|+|)\s*raw\s*(-%}\s*|%})" at pos, or 0 when it is not a raw block start.
  std::size_t match_raw_begin(std::size_t pos) const {
    std::size_t p = pos + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space_from(p);
    if (!starts_with(p, "raw")) return 0;
    p = skip_space_from(p + 3);
    if (starts_with(p, "-%}")) return skip_space_from(p + 3) - pos;
    if (starts_with(p, "%}")) return p + 2 - pos;
    return 0;
  }

  std::size_t skip_space_from(std::size_t p) const {
    while (p < src_.size()) {
      std::size_t q = p;
      if (!uni::is_space(uni::next(src_, q))) break;
      p = q;
    }
    return p;
  }

  void lex_root() {
    std::size_t start = pos_;
    std::size_t tag = src_.find('{', pos_);
    while (tag != std::string_view::npos &&
           (tag + 1 >= src_.size() ||
            (src_[tag + 1] != '{' && src_[tag + 1] != '%' && src_[tag + 1] != '#'))) {
      tag = src_.find('{', tag + 1);
    }
    if (tag == std::string_view::npos) {
      push(TokenType::kData, start, std::string(src_.substr(start)));
      pos_ = src_.size();
      return;
    }
    char kind = src_[tag + 1];
    char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                    ? src_[tag + 2]
                    : '\0';
    std::string_view text = src_.substr(start, tag - start);
    emit_data(start, text, sign, kind == '{');
    std::size_t after = tag + 2 + (sign ? 1 : 0);
    if (kind == '%') {
      if (std::size_t raw = match_raw_begin(tag)) {
        pos_ = tag + raw;
        lex_raw(tag);
        return;
      }
    }
    pos_ = after;
    if (kind == '#') {
      lex_comment(tag);
    } else {
      push(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, tag);
      lex_tag(kind == '%', tag);
    }
  }

  void lex_comment(std::size_t tag) {
    for (std::size_t p = pos_; p < src_.size(); ++p) {
      if (starts_with(p, "+#}")) {
        pos_ = p + 3;
        return;
      }
      if (starts_with(p, "-#}")) {
        pos_ = skip_space_from(p + 3);
        return;
      }
      if (starts_with(p, "#}")) {
        pos_ = p + 2;
        if (options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
        return;
      }
    }
    fail_at(tag, "Missing end of comment tag");
  }

  void lex_raw(std::size_t tag) {
    std::size_t start = pos_;
    for (std::size_t p = pos_; p + 1 < src_.size(); ++p) {
      if (src_[p] != '{' || src_[p + 1] != '%') continue;
      std::size_t q = p + 2;
      char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : '\0';
      if (sign) ++q;
      q = skip_space_from(q);
      if (!starts_with(q, "endraw")) continue;
      q = skip_space_from(q + 6);
      std::size_t end = 0;
      if (starts_with(q, "+%}")) {
        end = q + 3;
      } else if (starts_with(q, "-%}")) {
        end = skip_space_from(q + 3);
      } else if (starts_with(q, "%}")) {
        end = q + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      emit_data(start, src_.substr(start, p - start), sign, false);
      pos_ = end;
      return;
    }
    fail_at(tag, "Missing end of raw directive");
  }

  // Tries the closing delimiter; jinja2 ignores it while brackets are open.
  bool try_tag_end(bool is_block) {
    if (is_block) {
      if (starts_with(pos_, "+%}")) {
        push(TokenType::kBlockEnd, pos_);
        pos_ += 3;
        return true;
      }
      if (starts_with(pos_, "-%}")) {
        push(TokenType::kBlockEnd, pos_);
        pos_ = skip_space_from(pos_ + 3);
        return true;
      }
      if (starts_with(pos_, "%}")) {
        push(TokenType::kBlockEnd, pos_);
        pos_ += 2;
        if (options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
        return true;
      }
      return false;
    }
    if (starts_with(pos_, "-}}")) {
      push(TokenType::kVarEnd, pos_);
      pos_ = skip_space_from(pos_ + 3);
      return true;
    }
    if (starts_with(pos_, "}}")) {
      push(TokenType::kVarEnd, pos_);
      pos_ += 2;
      return true;
    }
    return false;
  }

  void lex_tag(bool is_block, std::size_t tag) {
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) {
        fail_at(tag, is_block ? "unexpected end of template, expected '%}'"
                              : "unexpected end of template, expected '}}'");
      }
      if (balance.empty() && try_tag_end(is_block)) return;
      std::size_t p = pos_;
      if (uni::is_space(uni::next(src_, p))) {
        skip_space();
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  // (\d+_)*\d+ starting at p; returns the end, or p when there is no digit.
  std::size_t scan_digits(std::size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return p;
    while (p < src_.size() && is_digit(src_[p])) ++p;
    while (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
      ++p;
      while (p < src_.size() && is_digit(src_[p])) ++p;
    }
    return p;
  }

  bool digit_at(std::size_t p) const { return p < src_.size() && is_digit(src_[p]); }

  std::size_t scan_exponent(std::size_t p) const {
    if (p >= src_.size() || (src_[p] != 'e' && src_[p] != 'E')) return 0;
    ++p;
    if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
    return digit_at(p) ? scan_digits(p) : 0;
  }

  std::size_t match_float() const {
    if (pos_ > 0 && src_[pos_ - 1] == '.') return 0;
    std::size_t p = scan_digits(pos_);
    if (p == pos_) return 0;
    if (p < src_.size() && src_[p] == '.' && digit_at(p + 1)) {
      std::size_t frac_end = scan_digits(p + 1);
      if (std::size_t e = scan_exponent(frac_end)) return e;
      if (std::size_t e = scan_exponent(p)) return e;
      return frac_end;
    }
    return scan_exponent(p);
  }

  std::size_t match_integer() const {
    auto lower = [&](std::size_t p) {
      return p < src_.size() ? static_cast<char>(src_[p] | 0x20) : '\0';
    };
    if (!digit_at(pos_)) return 0;
    if (src_[pos_] == '0') {
      char base = lower(pos_ + 1);
      if (base == 'b' || base == 'o' || base == 'x') {
        auto ok = [&](char c) {
          return base == 'b'   ? (c == '0' || c == '1')
                 : base == 'o' ? (c >= '0' && c <= '7')
                               : is_hex(c);
        };
        std::size_t p = pos_ + 2;
        std::size_t end = 0;
        while (p < src_.size()) {
          std::size_t q = p + (src_[p] == '_' ? 1 : 0);
          if (q >= src_.size() || !ok(src_[q])) break;
          p = q + 1;
          end = p;
        }
        if (end) return end;
      }
      std::size_t p = pos_ + 1;
      while (true) {
        std::size_t q = p + (p < src_.size() && src_[p] == '_' ? 1 : 0);
        if (q >= src_.size() || src_[q] != '0') break;
        p = q + 1;
      }
      return p;
    }
    std::size_t p = pos_ + 1;
    while (true) {
      std::size_t q = p + (p < src_.size() && src_[p] == '_' ? 1 : 0);
      if (!digit_at(q)) break;
      p = q + 1;
    }
    return p;
  }

  bool lex_number() {
    if (std::size_t end = match_float()) {
      std::string text;
      for (char c : src_.substr(pos_, end - pos_)) {
        if (c != '_') text.push_back(c);
      }
      Token t;
      t.type = TokenType::kFloat;
      t.loc = loc_at(pos_);
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), t.float_value);
      if (ec == std::errc::result_out_of_range) {
        // Python's float() overflows to inf and underflows to 0.0 instead of failing.
        bool tiny = text.find("e-") != std::string::npos || text.find("E-") != std::string::npos;
        t.float_value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
      }
      (void)ptr;
      t.value = text;
      tokens_.push_back(std::move(t));
      pos_ = end;
      return true;
    }
    std::size_t end = match_integer();
    if (!end) return false;
    std::string text;
    for (char c : src_.substr(pos_, end - pos_)) {
      if (c != '_') text.push_back(c);
    }
    int base = 10;
    std::size_t skip = 0;
    if (text.size() > 1 && text[0] == '0' && (text[1] | 0x20) != '0') {
      char b = static_cast<char>(text[1] | 0x20);
      base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
      skip = 2;
    }
    Token t;
    t.type = TokenType::kInteger;
    t.loc = loc_at(pos_);
    t.value = text;
    auto [ptr, ec] =
        std::from_chars(text.data() + skip, text.data() + text.size(), t.int_value, base);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      fail_at(pos_, "integer literal too large (more than 64 bits)");
    }
    tokens_.push_back(std::move(t));
    pos_ = end;
    return true;
  }

  bool lex_name() {
    std::size_t p = pos_;
    char32_t first = uni::next(src_, p);
    if (!(first == '_' || (first < 0x80 && std::isalpha(static_cast<int>(first))) ||
          (first >= 0x80 && uni::is_alpha(first)))) {
      return false;
    }
    while (p < src_.size()) {
      std::size_t q = p;
      char32_t cp = uni::next(src_, q);
      bool ok =
          cp == '_' || (cp < 0x80 ? std::isalnum(static_cast<int>(cp)) != 0 : uni::is_alnum(cp));
      if (!ok) break;
      p = q;
    }
    push(TokenType::kName, pos_, std::string(src_.substr(pos_, p - pos_)));
    pos_ = p;
    return true;
  }

  bool lex_string() {
    char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    std::size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) fail_at(pos_, "unterminated string literal");
    Token t;
    t.type = TokenType::kString;
    t.loc = loc_at(pos_);
    try {
      t.value = decode_string_literal(src_.substr(pos_ + 1, p - pos_ - 1));
    } catch (const ValueError& e) {
      fail_at(pos_, e.what());
    }
    tokens_.push_back(std::move(t));
    pos_ = p + 1;
    return true;
  }

  void lex_operator(std::vector<char>& balance) {
    for (std::string_view op : kOperators) {
      if (!starts_with(pos_, op)) continue;
      char c = op[0];
      if (op.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (op.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) fail_at(pos_, fmt::format("unexpected '{}'", c));
        if (balance.back() != c) {
          fail_at(pos_, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
        }
        balance.pop_back();
      }
      push(TokenType::kOperator, pos_, std::string(op));
      pos_ += op.size();
      return;
    }
    std::size_t p = pos_;
    std::string ch;
    uni::append(ch, uni::next(src_, p));
    fail_at(pos_, fmt::format("unexpected character '{}'", ch));
  }

  std::string_view src_;
  const std::string& name_;
  LexerOptions options_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      c = '\n';
    }
    out.push_back(c);
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVarBegin:
      return "begin of print statement";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return token.value;
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return token.value;
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

std::vector<Token> tokenize(std::string_view source, const std::string& template_name,
                            const LexerOptions& options) {
  std::string normalized = normalize_newlines(source);
  // Tokens copy what they need, so the normalized text may go away afterwards.
  return Lexer(normalized, template_name, options).run();
}

}  // namespace md::jinja
