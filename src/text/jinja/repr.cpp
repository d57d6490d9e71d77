// Python str() and repr() of template values, byte-for-byte as CPython prints them, because
// jinja2 prints every non-string value through str().
#include <charconv>
#include <cmath>

#include "text/jinja/unicode.h"
#include "text/jinja/value.h"

namespace md::jinja {

namespace {

// Nested values deeper than this are refused rather than risking the stack. The depth is per
// thread, not per call, because a namespace's repr() re-enters repr() for its attributes.
constexpr int kMaxReprDepth = 300;
thread_local int t_repr_depth = 0;

struct ReprDepth {
  ReprDepth() {
    if (++t_repr_depth > kMaxReprDepth) {
      --t_repr_depth;
      throw ValueError("maximum nesting depth exceeded while printing",
                       TemplateError::Kind::kLimit);
    }
  }
  ~ReprDepth() { --t_repr_depth; }
  ReprDepth(const ReprDepth&) = delete;
  ReprDepth& operator=(const ReprDepth&) = delete;
};

void append_repr(std::string& out, const Value& v, int depth);

void append_items(std::string& out, const std::vector<Value>& items, std::size_t from, int depth) {
  for (std::size_t i = from; i < items.size(); ++i) {
    if (i > from) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
}

void append_sequence(std::string& out, const Value& v, int depth) {
  const Sequence& seq = v.seq();
  switch (seq.kind) {
    case SeqKind::kList:
      out += '[';
      append_items(out, seq.items, 0, depth);
      out += ']';
      return;
    case SeqKind::kTuple:
      out += '(';
      append_items(out, seq.items, 0, depth);
      if (seq.items.size() == 1) out += ',';
      out += ')';
      return;
    case SeqKind::kGenerator:
      out += "<generator object>";
      return;
    case SeqKind::kReverseIterator:
      out += "<list_reverseiterator object>";
      return;
    case SeqKind::kDictKeys:
    case SeqKind::kDictValues:
    case SeqKind::kDictItems:
      out += type_name(v);
      out += "([";
      append_items(out, seq.items, 0, depth);
      out += "])";
      return;
    case SeqKind::kRange:
      out += fmt::format("range({}, {}", seq.range_start, seq.range_stop);
      if (seq.range_step != 1) out += fmt::format(", {}", seq.range_step);
      out += ')';
      return;
  }
}

void append_repr(std::string& out, const Value& v, int depth) {
  ReprDepth guard;
  switch (v.type()) {
    case Value::Type::kUndefined:
      out += "Undefined";
      return;
    case Value::Type::kString:
      if (v.is_markup()) {
        out += fmt::format("Markup({})", repr_string(v.str()));
      } else {
        out += repr_string(v.str());
      }
      return;
    case Value::Type::kSeq:
      append_sequence(out, v, depth);
      return;
    case Value::Type::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.dict().entries()) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, key, depth + 1);
        out += ": ";
        append_repr(out, value, depth + 1);
      }
      out += '}';
      return;
    }
    case Value::Type::kObject:
      out += v.obj().repr();
      return;
    default:
      out += to_str(v);
      return;
  }
}

}  // namespace

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(result.ptr - buf));
  bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::string_view exp_text = sci.substr(e + 1);
  if (exp_text.front() == '+') exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
  // Python's repr switches to exponent notation outside 1e-5 <= |f| < 1e16.
  int decpt = exponent + 1;
  int ndigits = static_cast<int>(digits.size());
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (ndigits > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    int x = decpt - 1;
    out += fmt::format("e{}{:02d}", x < 0 ? '-' : '+', x < 0 ? -x : x);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= ndigits) {
    out += digits;
    out.append(static_cast<std::size_t>(decpt - ndigits), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<std::size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<std::size_t>(decpt), std::string::npos);
  }
  return out;
}

std::string repr_string(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t pos = 0; pos < s.size();) {
    char32_t cp = uni::next(s, pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x7F || uni::is_printable(cp)) {
      uni::append(out, cp);
    } else if (cp <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
  }
  out += quote;
  return out;
}

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return "";
    case Value::Type::kNone:
      return "None";
    case Value::Type::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Type::kInt:
      return std::to_string(v.as_int());
    case Value::Type::kFloat:
      return format_float(v.as_double());
    case Value::Type::kString:
      return v.str();
    default:
      return repr(v);
  }
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace md::jinja
