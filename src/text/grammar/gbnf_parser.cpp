#include "text/grammar/gbnf_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "base/error.h"
#include "base/utf8.h"

namespace md::grammar {
namespace {

constexpr uint32_t kMaxRepeat = 100000;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Grammar parse() {
    skip_space();
    if (at_end()) error("the grammar is empty: define at least `root ::= ...`");
    while (!at_end()) {
      if (peek() == ')') error("unbalanced ')'");
      if (peek() == '|') error("'|' with no alternative before it");
      std::string name = parse_name();
      skip_space();
      if (!consume("::=")) error(fmt::format("expected '::=' after rule name '{}'", name));
      uint32_t rule = builder_.rule(name);
      if (builder_.defined(rule)) error(fmt::format("rule '{}' is defined twice", name));
      parse_alternatives(rule, name);
      skip_space();
    }
    return builder_.finish("root");
  }

 private:
  [[noreturn]] void error(const std::string& message) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n')
        ++line, column = 1;
      else
        ++column;
    }
    fail("grammar error at line {}, column {}: {}", line, column, message);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space() {
    while (!at_end()) {
      char c = text_[pos_];
      if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool consume(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }

  std::string parse_name() {
    std::size_t start = pos_;
    while (!at_end() && name_char(text_[pos_])) ++pos_;
    if (pos_ == start) error(fmt::format("expected a rule name, found '{}'", peek()));
    return std::string(text_.substr(start, pos_ - start));
  }

  // True when a new rule (`name ::=`) starts here: the end of the current one.
  bool at_rule_start() {
    std::size_t save = pos_;
    while (!at_end() && name_char(text_[pos_])) ++pos_;
    bool named = pos_ > save;
    skip_space();
    bool starts = named && text_.substr(pos_, 3) == "::=";
    pos_ = save;
    return starts;
  }

  void parse_alternatives(uint32_t rule, const std::string& base) {
    if (++depth_ > 200) error("groups are nested too deeply");
    for (;;) {
      builder_.add_alternative(rule, parse_sequence(base));
      skip_space();
      if (!consume("|")) break;
    }
    --depth_;
  }

  std::vector<Element> parse_sequence(const std::string& base) {
    std::vector<Element> sequence;
    for (;;) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) return sequence;
      std::vector<Element> term = parse_term(base);
      skip_space();
      apply_quantifier(term, base);
      sequence.insert(sequence.end(), term.begin(), term.end());
    }
  }

  std::vector<Element> parse_term(const std::string& base) {
    char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return {chars(parse_class())};
    if (c == '.') {
      ++pos_;
      return {chars(builder_.char_class({}, /*negated=*/true))};
    }
    if (c == '(') {
      ++pos_;
      uint32_t group = builder_.helper(base);
      parse_alternatives(group, base);
      skip_space();
      if (!consume(")")) error("expected ')' to close the group");
      return {Element{ElementKind::kRule, group}};
    }
    if (name_char(c)) return {Element{ElementKind::kRule, builder_.rule(parse_name())}};
    error(fmt::format("unexpected '{}'", c));
  }

  Element chars(uint32_t class_index) { return Element{ElementKind::kChars, class_index}; }

  char32_t parse_hex(int digits) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      char c = peek();
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) error(fmt::format("expected {} hexadecimal digits in the escape", digits));
      value = value * 16 + static_cast<char32_t>(digit);
      ++pos_;
    }
    if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
      error("the escape is not a Unicode scalar value");
    }
    return value;
  }

  // One character of a literal or class, escapes resolved.
  char32_t parse_char() {
    if (at_end()) error("unterminated literal or class");
    if (peek() != '\\') {
      std::string_view rest = text_.substr(pos_);
      utf8::Step step = utf8::classify(rest, 0);
      if (step.kind != utf8::Step::kValid) error("the grammar is not valid UTF-8");
      std::size_t at = pos_;
      char32_t c = utf8::decode_next(text_, at);
      pos_ = at;
      return c;
    }
    ++pos_;
    char e = peek();
    ++pos_;
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '0':
        return 0;
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '\'':
        return e;
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      default:
        error(fmt::format("unknown escape '\\{}'", e));
    }
  }

  std::vector<Element> parse_literal() {
    ++pos_;  // "
    std::vector<Element> out;
    while (peek() != '"') {
      if (at_end()) error("unterminated literal");
      char32_t c = parse_char();
      out.push_back(chars(builder_.char_class({{c, c}}, false)));
    }
    ++pos_;
    return out;
  }

  uint32_t parse_class() {
    ++pos_;  // [
    bool negated = consume("^");
    std::vector<CodePointRange> ranges;
    while (peek() != ']') {
      if (at_end()) error("unterminated character class");
      char32_t lo = parse_char();
      char32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) error("character range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return builder_.char_class(std::move(ranges), negated);
  }

  std::optional<uint32_t> parse_count() {
    std::size_t start = pos_;
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint64_t>(peek() - '0');
      if (value > kMaxRepeat) error(fmt::format("repetition count above {}", kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<uint32_t>(value);
  }

  // Lowers `term` followed by a quantifier (if any) to plain elements and helper rules.
  void apply_quantifier(std::vector<Element>& term, const std::string& base) {
    uint32_t min = 1;
    std::optional<uint32_t> max = 1;
    char c = peek();
    if (c == '*')
      min = 0, max = std::nullopt;
    else if (c == '+')
      min = 1, max = std::nullopt;
    else if (c == '?')
      min = 0, max = 1;
    else if (c != '{')
      return;
    ++pos_;
    if (c == '{') {
      skip_space();
      std::optional<uint32_t> low = parse_count();
      if (!low) error("expected a number after '{'");
      min = *low;
      skip_space();
      if (consume(",")) {
        skip_space();
        max = parse_count();
      } else {
        max = min;
      }
      skip_space();
      if (!consume("}")) error("expected '}' to close the repetition");
      if (max && *max < min) error("repetition {m,n} with n < m");
    }
    Element item = term.size() == 1 ? term[0] : group(term, base);
    term.clear();
    for (uint32_t i = 0; i < min; ++i) term.push_back(item);
    if (!max) {
      // item* as a right-recursive rule: star ::= item star | (empty). The matcher's tail calls
      // keep its stack flat however long the run.
      uint32_t star = builder_.helper(base);
      builder_.add_alternative(star, {item, Element{ElementKind::kRule, star}});
      builder_.add_alternative(star, {});
      term.push_back(Element{ElementKind::kRule, star});
      return;
    }
    // Up to (max - min) more: opt_k ::= item opt_{k-1} | (empty).
    std::optional<uint32_t> inner;
    for (uint32_t k = min; k < *max; ++k) {
      uint32_t opt = builder_.helper(base);
      std::vector<Element> seq{item};
      if (inner) seq.push_back(Element{ElementKind::kRule, *inner});
      builder_.add_alternative(opt, seq);
      builder_.add_alternative(opt, {});
      inner = opt;
    }
    if (inner) term.push_back(Element{ElementKind::kRule, *inner});
  }

  Element group(const std::vector<Element>& sequence, const std::string& base) {
    uint32_t rule = builder_.helper(base);
    builder_.add_alternative(rule, sequence);
    return Element{ElementKind::kRule, rule};
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  GrammarBuilder builder_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
  return Parser(text).parse();
}

std::string gbnf_literal(std::string_view utf8_text) {
  std::string out = "\"";
  for (unsigned char c : utf8_text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string gbnf_alternatives(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += " | ";
    out += parts[i];
  }
  out += ')';
  return out;
}

std::string gbnf_char_class(const std::vector<CodePointRange>& ranges) {
  if (ranges.empty()) return "";
  auto escaped = [](char32_t c) {
    return c <= 0xFFFF ? fmt::format("\\u{:04X}", static_cast<uint32_t>(c))
                       : fmt::format("\\U{:08X}", static_cast<uint32_t>(c));
  };
  std::string out;
  auto add = [&](char32_t lo, char32_t hi) {
    if (lo > hi) return;
    out += escaped(lo);
    if (hi != lo) {
      out += '-';
      out += escaped(hi);
    }
  };
  for (const CodePointRange& r : ranges) {
    // Surrogates are not characters and cannot be written as escapes: leave them out.
    add(r.lo, std::min<char32_t>(r.hi, 0xD7FF));
    add(std::max<char32_t>(r.lo, 0xE000), r.hi);
  }
  return out.empty() ? std::string() : fmt::format("[{}]", out);
}

}  // namespace md::grammar
