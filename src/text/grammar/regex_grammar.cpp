#include "text/grammar/regex_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"
#include "text/grammar/gbnf_parser.h"
#include "text/grammar/grammar.h"

namespace md::grammar {
namespace {

using Ranges = std::vector<CodePointRange>;

Ranges normalized(Ranges ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  Ranges out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

Ranges complement(const Ranges& set, char32_t top) {
  Ranges out;
  char32_t next = 0;
  for (const CodePointRange& r : normalized(set)) {
    if (r.lo > top) break;
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= top) out.push_back({next, top});
  return out;
}

const Ranges kDigits{{'0', '9'}};
const Ranges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace{{'\t', '\r'}, {' ', ' '}};

// The written form of characters inside a JSON string: most stand for themselves; `"`, `\` and
// control characters are escaped (one spelling each: the short escape where JSON has one).
std::string json_written(const Ranges& set, bool no_angle) {
  Ranges plain;
  std::vector<std::string> escaped;
  for (const CodePointRange& r : normalized(set)) {
    for (char32_t c = r.lo; c <= std::min<char32_t>(r.hi, 0x1F); ++c) {
      switch (c) {
        case '\b':
          escaped.push_back("\\b");
          break;
        case '\f':
          escaped.push_back("\\f");
          break;
        case '\n':
          escaped.push_back("\\n");
          break;
        case '\r':
          escaped.push_back("\\r");
          break;
        case '\t':
          escaped.push_back("\\t");
          break;
        default:
          escaped.push_back(fmt::format("\\u{:04x}", static_cast<uint32_t>(c)));
      }
    }
    char32_t lo = std::max<char32_t>(r.lo, 0x20);
    for (char32_t c : {U'"', U'<', U'\\'}) {
      if (c == '<' && !no_angle) continue;
      if (c >= lo && c <= r.hi) {
        escaped.push_back(c == '"' ? "\\\"" : c == '<' ? "\\u003c" : "\\\\");
        if (c > lo) plain.push_back({lo, c - 1});
        lo = c + 1;
      }
    }
    if (lo <= r.hi) plain.push_back({lo, r.hi});
  }
  std::vector<std::string> options;
  if (std::string cls = gbnf_char_class(plain); !cls.empty()) options.push_back(cls);
  for (const std::string& e : escaped) options.push_back(gbnf_literal(e));
  if (options.empty()) return "[^\\u0000-\\U0010FFFF]";  // matches nothing
  return gbnf_alternatives(options);
}

// Raw text without '<'.
std::string raw_written(const Ranges& set) {
  Ranges kept;
  for (const CodePointRange& r : normalized(set)) {
    if (r.lo <= '<' && '<' <= r.hi) {
      if (r.lo < '<') kept.push_back({r.lo, '<' - 1});
      if (r.hi > '<') kept.push_back({'<' + 1, r.hi});
    } else {
      kept.push_back(r);
    }
  }
  std::string cls = gbnf_char_class(kept);
  return cls.empty() ? "[^\\u0000-\\U0010FFFF]" : cls;
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, std::string_view body_char, RegexText text)
      : pattern_(pattern), body_char_(body_char), text_(text) {}

  std::string parse() {
    if (!utf8::is_valid(pattern_)) refuse("the pattern is not valid UTF-8");
    bool anchored_start = !pattern_.empty() && pattern_[0] == '^';
    if (anchored_start) ++pos_;
    std::string body = alternation();
    bool anchored_end = end_anchor_;
    if (pos_ < pattern_.size()) refuse(fmt::format("unexpected '{}'", pattern_[pos_]));
    if ((anchored_start || anchored_end) && top_level_options_ > 1) {
      refuse("anchors beside a top-level '|' bind to one alternative only; group it: ^(a|b)$");
    }
    std::string out = "(";
    if (!anchored_start) out += std::string(body_char_) + "* ";
    out += body;
    if (!anchored_end) out.append(" ").append(body_char_).append("*");
    return out + ")";
  }

 private:
  [[noreturn]] void refuse(const std::string& what) const {
    fail("pattern {:?}: {} (at character {})", std::string(pattern_), what, pos_);
  }
  bool more() const { return pos_ < pattern_.size() && !end_anchor_; }
  char peek() const { return pos_ < pattern_.size() ? pattern_[pos_] : '\0'; }

  std::string alternation() {
    if (++depth_ > 100) refuse("groups nested too deeply");
    std::vector<std::string> options{sequence()};
    while (more() && peek() == '|') {
      ++pos_;
      options.push_back(sequence());
    }
    --depth_;
    if (depth_ == 0) top_level_options_ = options.size();
    return gbnf_alternatives(options);
  }

  std::string sequence() {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (pos_ != pattern_.size() || depth_ != 1) refuse("'$' is supported only at the end");
        end_anchor_ = true;
        break;
      }
      std::string item = atom();
      item += quantifier();
      if (!out.empty()) out += ' ';
      out += item;
    }
    return out.empty() ? std::string("\"\"") : fmt::format("({})", out);
  }

  std::string quantifier() {
    if (!more()) return "";
    char c = peek();
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      std::size_t close = pattern_.find('}', pos_);
      if (close == std::string_view::npos) refuse("unterminated '{' quantifier");
      std::string_view inside = pattern_.substr(pos_ + 1, close - pos_ - 1);
      bool ok = !inside.empty() && std::all_of(inside.begin(), inside.end(), [](char d) {
        return (d >= '0' && d <= '9') || d == ',';
      });
      if (!ok || inside.front() == ',' || std::count(inside.begin(), inside.end(), ',') > 1) {
        refuse("a '{' quantifier must be {n}, {n,} or {n,m}");
      }
      auto count = [&](std::string_view digits) {
        if (digits.size() > 6) refuse("a quantifier count above 999999");
        return std::stoul(std::string(digits));
      };
      if (std::size_t comma = inside.find(',');
          comma != std::string_view::npos && comma + 1 < inside.size() &&
          count(inside.substr(comma + 1)) < count(inside.substr(0, comma))) {
        refuse("a {n,m} quantifier needs n <= m");
      }
      q = fmt::format("{{{}}}", inside);
      pos_ = close + 1;
    } else {
      return "";
    }
    if (more() && peek() == '?') ++pos_;  // lazy: the same language
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
      refuse("a quantifier cannot follow a quantifier");
    }
    return q;
  }

  std::string atom() {
    char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (pattern_.substr(pos_, 2) != "?:")
          refuse("lookaround and named groups are not supported");
        pos_ += 2;
      }
      std::string inner = alternation();
      if (peek() != ')') refuse("missing ')'");
      ++pos_;
      return fmt::format("({})", inner);
    }
    if (c == '[') return written(bracket_class());
    if (c == '.') {
      ++pos_;
      return written(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, 0x10FFFF));
    }
    if (c == '^') refuse("'^' is supported only at the start");
    if (c == '*' || c == '+' || c == '?' || c == '{') refuse("nothing to repeat");
    if (c == ')') refuse("unbalanced ')'");
    if (c == '\\') return written(escape(/*in_class=*/false));
    std::size_t at = pos_;
    char32_t cp = utf8::decode_next(pattern_, at);
    pos_ = at;
    return written({{cp, cp}});
  }

  char32_t hex(int digits) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      char d = peek();
      int v = d >= '0' && d <= '9'   ? d - '0'
              : d >= 'a' && d <= 'f' ? d - 'a' + 10
              : d >= 'A' && d <= 'F' ? d - 'A' + 10
                                     : -1;
      if (v < 0) refuse("bad hexadecimal escape");
      value = value * 16 + static_cast<char32_t>(v);
    }
    if (value >= 0xD800 && value <= 0xDFFF) refuse("surrogate escapes are not supported");
    return value;
  }

  // After a backslash: the set of characters the escape stands for.
  Ranges escape(bool in_class) {
    ++pos_;
    if (pos_ >= pattern_.size()) refuse("the pattern ends with a lone backslash");
    char e = pattern_[pos_++];
    switch (e) {
      case 'd':
        return kDigits;
      case 'w':
        return kWord;
      case 's':
        return kSpace;
      // Complements within ASCII: Python's \D, \W, \S also exclude non-ASCII digits, letters and
      // spaces, so only ASCII is safe for both.
      case 'D':
        return complement(kDigits, 0x7F);
      case 'W':
        return complement(kWord, 0x7F);
      case 'S':
        return complement(kSpace, 0x7F);
      case 'n':
        return {{'\n', '\n'}};
      case 'r':
        return {{'\r', '\r'}};
      case 't':
        return {{'\t', '\t'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'x': {
        char32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        char32_t v = hex(4);
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        refuse("word boundaries (\\b) are not supported");
      case 'B':
        refuse("word boundaries (\\B) are not supported");
      default:
        break;
    }
    if (e >= '1' && e <= '9') refuse("backreferences are not supported");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      refuse(fmt::format("the escape \\{} is not supported", e));
    }
    auto cp = static_cast<char32_t>(static_cast<unsigned char>(e));
    if (cp >= 0x80) refuse("escape a non-ASCII character by writing it plainly");
    return {{cp, cp}};
  }

  Ranges bracket_class() {
    ++pos_;  // [
    bool negated = peek() == '^';
    if (negated) ++pos_;
    Ranges set;
    bool class_escape = false;  // \d \w \s or their complements inside
    while (pos_ < pattern_.size() && peek() != ']') {
      if (peek() == '\\' && pos_ + 1 < pattern_.size() &&
          std::string_view("dwsDWS").find(pattern_[pos_ + 1]) != std::string_view::npos) {
        class_escape = true;
      }
      Ranges lo = class_atom();
      if (peek() == '-' && pos_ + 1 < pattern_.size() && pattern_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi = class_atom();
        if (lo.size() != 1 || hi.size() != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi) {
          refuse("a class range needs single characters at both ends");
        }
        if (hi[0].lo < lo[0].lo) refuse("a class range is reversed");
        set.push_back({lo[0].lo, hi[0].lo});
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    if (peek() != ']') refuse("unterminated character class");
    ++pos_;
    // ECMA and Python give \d \w \s different non-ASCII members: a complement of a class holding
    // one stays within ASCII, where both agree.
    if (negated) return complement(set, class_escape ? 0x7F : 0x10FFFF);
    return normalized(set);
  }

  Ranges class_atom() {
    if (peek() == '\\') return escape(/*in_class=*/true);
    std::size_t at = pos_;
    char32_t cp = utf8::decode_next(pattern_, at);
    pos_ = at;
    return {{cp, cp}};
  }

  std::string written(const Ranges& set) const {
    if (text_ == RegexText::kRawNoAngle) return raw_written(set);
    return json_written(set, text_ == RegexText::kJsonStringNoAngle);
  }

  std::string_view pattern_;
  std::string_view body_char_;
  RegexText text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  bool end_anchor_ = false;
  std::size_t top_level_options_ = 1;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, std::string_view body_char, RegexText text) {
  return RegexParser(pattern, body_char, text).parse();
}

}  // namespace md::grammar
