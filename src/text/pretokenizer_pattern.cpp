#include "text/pretokenizer_pattern.h"

#include <vector>

#include "base/error.h"

namespace md {
namespace {

class Translator {
 public:
  explicit Translator(std::string_view pattern) : pattern_(pattern) {}

  std::string run() {
    std::string out;
    while (pos_ < pattern_.size()) {
      const char c = pattern_[pos_];
      if (c == '\\') {
        out += translate_escape();
      } else if (c == '[') {
        out += translate_class();
      } else {
        out += c;
        ++pos_;
      }
    }
    return out;
  }

 private:
  // An escape such as \r, \p{L}, \x{20}; returned translated (\s, \S and scripts change).
  std::string translate_escape() {
    const std::string escape = read_escape();
    if (escape == "\\s") return "\\p{White_Space}";
    if (escape == "\\S") return "\\P{White_Space}";
    if (escape.size() > 4 && (escape[1] == 'p' || escape[1] == 'P') && escape[2] == '{') {
      const std::string name = escape.substr(3, escape.size() - 4);
      if (is_script_name(name)) return escape.substr(0, 3) + "sc:" + name + "}";
    }
    return escape;
  }

  // Property names other than general categories and binary properties are scripts
  // (\p{Han}, \p{Latin}, \p{Old_Italic}).
  static bool is_script_name(std::string_view name) {
    if (name.empty() || name.find(':') != std::string_view::npos ||
        name.find('=') != std::string_view::npos) {
      return false;
    }
    if (name.size() <= 2 || name == "L&" || name == "Any") return false;  // L, Lu, Nd, ...
    static constexpr std::string_view kNotScripts[] = {"Letter",
                                                       "Cased_Letter",
                                                       "Uppercase_Letter",
                                                       "Lowercase_Letter",
                                                       "Titlecase_Letter",
                                                       "Modifier_Letter",
                                                       "Other_Letter",
                                                       "Mark",
                                                       "Combining_Mark",
                                                       "Nonspacing_Mark",
                                                       "Spacing_Mark",
                                                       "Enclosing_Mark",
                                                       "Number",
                                                       "Decimal_Number",
                                                       "Letter_Number",
                                                       "Other_Number",
                                                       "Punctuation",
                                                       "Connector_Punctuation",
                                                       "Dash_Punctuation",
                                                       "Open_Punctuation",
                                                       "Close_Punctuation",
                                                       "Initial_Punctuation",
                                                       "Final_Punctuation",
                                                       "Other_Punctuation",
                                                       "Symbol",
                                                       "Math_Symbol",
                                                       "Currency_Symbol",
                                                       "Modifier_Symbol",
                                                       "Other_Symbol",
                                                       "Separator",
                                                       "Space_Separator",
                                                       "Line_Separator",
                                                       "Paragraph_Separator",
                                                       "Other",
                                                       "Control",
                                                       "Format",
                                                       "Surrogate",
                                                       "Private_Use",
                                                       "Unassigned",
                                                       "White_Space",
                                                       "Alphabetic",
                                                       "Emoji",
                                                       "Uppercase",
                                                       "Lowercase",
                                                       "ASCII",
                                                       "Assigned"};
    for (std::string_view n : kNotScripts) {
      if (name == n) return false;
    }
    return true;
  }

  std::string read_escape() {
    const std::size_t begin = pos_;
    pos_ += 2;
    if (pos_ > pattern_.size()) fail("regex pattern ends with a lone backslash: {}", pattern_);
    const char kind = pattern_[pos_ - 1];
    const bool braced = (kind == 'p' || kind == 'P' || kind == 'x') && pos_ < pattern_.size() &&
                        pattern_[pos_] == '{';
    if (braced) {
      const std::size_t close = pattern_.find('}', pos_);
      if (close == std::string_view::npos) fail("unterminated \\{}{{ in regex: {}", kind, pattern_);
      pos_ = close + 1;
    }
    return std::string(pattern_.substr(begin, pos_ - begin));
  }

  // One bracketed class starting at '['. Without '&&' it is copied (escapes translated); with
  // intersections it becomes a lookahead per extra operand followed by the first operand.
  std::string translate_class() {
    const std::size_t begin = pos_;
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < pattern_.size() && pattern_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::string> operands(1);
    bool first = true;
    while (true) {
      if (pos_ >= pattern_.size()) fail("unterminated character class in regex: {}", pattern_);
      const char c = pattern_[pos_];
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '\\') {
        operands.back() += translate_escape();
      } else if (pattern_.substr(pos_, 2) == "&&") {
        pos_ += 2;
        operands.emplace_back();
      } else if (c == '[') {
        if (operands.size() == 1) {
          fail("unsupported nested character class at offset {} in regex: {}", pos_, pattern_);
        }
        operands.back() += translate_class();
      } else {
        operands.back() += c;
        ++pos_;
      }
    }
    if (operands.size() == 1) return std::string(negated ? "[^" : "[") + operands[0] + "]";
    if (negated) {
      fail("unsupported negated class intersection at offset {} in regex: {}", begin, pattern_);
    }
    std::string out = "(?:";
    for (std::size_t i = 1; i < operands.size(); ++i) out += "(?=" + as_class(operands[i]) + ")";
    return out + "[" + operands[0] + "])";
  }

  // An intersection operand is either one nested class or bare class items.
  static std::string as_class(const std::string& operand) {
    if (!operand.empty() && operand.front() == '[') return operand;
    if (operand.rfind("(?:", 0) == 0) return operand;  // a nested intersection, already a group
    return "[" + operand + "]";
  }

  std::string_view pattern_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string translate_pattern_to_pcre2(std::string_view pattern) {
  return Translator(pattern).run();
}

}  // namespace md
