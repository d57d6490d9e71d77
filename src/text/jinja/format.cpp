// Python string formatting for templates: `"%s" % x` / the `format` filter (printf style) and
// str.format ("{} {name:>8}"), with the format-spec mini-language for str, int and float.
#include <cmath>
#include <cstdio>

#include "text/jinja/builtins.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

std::string c_format(const std::string& spec, double v) {
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof(buf))
    throw ValueError("formatted number too long");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string c_format_int(const std::string& spec, long long v) {
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof(buf))
    throw ValueError("formatted number too long");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string pad_to(const std::string& s, std::size_t width, bool left_align) {
  std::size_t len = uni::length(s);
  if (len >= width) return s;
  check_size(width);
  std::string fill(width - len, ' ');
  return left_align ? s + fill : fill + s;
}

std::string truncate_cps(const std::string& s, std::size_t n) {
  std::size_t pos = 0;
  for (std::size_t i = 0; i < n && pos < s.size(); ++i) uni::next(s, pos);
  return s.substr(0, pos);
}

struct PercentSpec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

std::string percent_one(const PercentSpec& spec, const Value& v, bool escape) {
  bool left = spec.flags.find('-') != std::string::npos;
  std::size_t width = spec.width < 0 ? 0 : static_cast<std::size_t>(spec.width);
  char t = spec.type;
  if (t == 's' || t == 'r' || t == 'a') {
    std::string s = t == 's' ? to_str(v) : repr(v);
    if (escape && !(t == 's' && v.is_markup())) s = html_escape(s);
    if (spec.precision >= 0) s = truncate_cps(s, static_cast<std::size_t>(spec.precision));
    return pad_to(s, width, left);
  }
  if (t == 'c') {
    std::string s;
    if (v.is_integral()) {
      uni::append(s, static_cast<char32_t>(v.as_int()));
    } else if (v.is_string() && uni::length(v.str()) == 1) {
      s = v.str();
    } else {
      throw ValueError("%c requires int or char");
    }
    return pad_to(s, width, left);
  }
  std::string c = fmt::format("%{}", spec.flags);
  if (spec.width >= 0) c += fmt::format("{}", spec.width);
  if (spec.precision >= 0) c += fmt::format(".{}", spec.precision);
  if (t == 'd' || t == 'i' || t == 'u' || t == 'o' || t == 'x' || t == 'X') {
    if (!v.is_number()) {
      value_fail("%{} format: {} is required, not {}", t,
                 t == 'd' || t == 'i' || t == 'u' ? "a real number" : "an integer", type_name(v));
    }
    if (v.is_float() && t != 'd' && t != 'i' && t != 'u') {
      value_fail("%{} format: an integer is required, not float", t);
    }
    long long n = v.is_float() ? static_cast<long long>(std::trunc(v.as_double())) : v.as_int();
    if (t == 'o' && spec.flags.find('#') != std::string::npos) {
      // Python's alternate octal form is 0o17, C's is 017.
      PercentSpec plain = spec;
      plain.flags.erase(plain.flags.find('#'), 1);
      std::string digits = c_format_int("%llo", n < 0 ? -n : n);
      std::string body = std::string(n < 0 ? "-" : "") + "0o" + digits;
      return pad_to(body, width, left);
    }
    return c_format_int(c + "ll" + (t == 'i' || t == 'u' ? 'd' : t), n);
  }
  if (!v.is_number()) value_fail("must be real number, not {}", type_name(v));
  return c_format(c + t, v.as_double());
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args, bool escape) {
  std::vector<Value> positional;
  const Dict* mapping = args.is_dict() ? &args.dict() : nullptr;
  if (args.is_seq() && args.seq().kind == SeqKind::kTuple) {
    positional = args.seq().items;
  } else {
    positional.push_back(args);
  }
  std::size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) throw ValueError("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw ValueError("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const Value* keyed = nullptr;
    if (format[i] == '(') {
      int depth = 1;
      std::size_t start = ++i;
      while (i < format.size() && depth > 0) {
        depth += format[i] == '(' ? 1 : format[i] == ')' ? -1 : 0;
        ++i;
      }
      if (depth > 0) throw ValueError("incomplete format key");
      if (!mapping) throw ValueError("format requires a mapping");
      keyed = mapping->find(std::string_view(format).substr(start, i - 1 - start));
      if (!keyed) value_fail("KeyError: '{}'", format.substr(start, i - 1 - start));
    }
    PercentSpec spec;
    while (i < format.size() &&
           std::string_view("-+ #0").find(format[i]) != std::string_view::npos) {
      spec.flags += format[i++];
    }
    auto number = [&](int& field) {
      if (i < format.size() && format[i] == '*') {
        ++i;
        const Value& w = take();
        if (!w.is_integral()) throw ValueError("* wants int");
        field = static_cast<int>(std::min<std::int64_t>(w.as_int(), 100000));
        return;
      }
      if (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) field = 0;
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) {
        field = std::min(field * 10 + (format[i++] - '0'), 100000);
      }
    };
    number(spec.width);
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      number(spec.precision);
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) throw ValueError("incomplete format");
    spec.type = format[i];
    if (std::string_view("sradiuoxXeEfFgGc").find(spec.type) == std::string_view::npos) {
      value_fail("unsupported format character '{}'", spec.type);
    }
    out += percent_one(spec, keyed ? *keyed : take(), escape);
    check_size(out.size());
  }
  if (!mapping && next < positional.size()) {
    throw ValueError("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

struct FormatSpec {
  std::string fill = " ";
  char align = '\0';
  char sign = '-';
  bool alternate = false;
  std::size_t width = 0;
  char grouping = '\0';
  int precision = -1;
  char type = '\0';
};

FormatSpec parse_spec(const std::string& text) {
  FormatSpec spec;
  std::u32string s = uni::decode(text);
  std::size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill.clear();
    uni::append(spec.fill, s[0]);
    spec.align = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = static_cast<char>(s[0]);
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' '))
    spec.sign = static_cast<char>(s[i++]);
  if (i < s.size() && s[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (!spec.align) {
      spec.fill.assign(1, '0');
      spec.align = '=';
    }
    ++i;
  }
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    spec.width = std::min<std::size_t>(spec.width * 10 + (s[i++] - '0'), 100000);
  }
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = static_cast<char>(s[i++]);
  if (i < s.size() && s[i] == '.') {
    ++i;
    spec.precision = 0;
    if (i >= s.size() || s[i] < '0' || s[i] > '9')
      throw ValueError("Format specifier missing precision");
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      spec.precision = std::min(spec.precision * 10 + static_cast<int>(s[i++] - '0'), 1000);
    }
  }
  if (i < s.size()) spec.type = static_cast<char>(s[i++]);
  if (i != s.size()) throw ValueError("Invalid format specifier");
  return spec;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

std::string align(const std::string& sign, const std::string& body, const FormatSpec& spec,
                  char default_align) {
  std::size_t len = uni::length(sign) + uni::length(body);
  char how = spec.align ? spec.align : default_align;
  if (len >= spec.width) return sign + body;
  check_size(spec.width * spec.fill.size());
  std::size_t total = spec.width - len;
  std::string fill;
  auto fills = [&](std::size_t n) {
    std::string f;
    for (std::size_t k = 0; k < n; ++k) f += spec.fill;
    return f;
  };
  switch (how) {
    case '<':
      return sign + body + fills(total);
    case '^':
      return fills(total / 2) + sign + body + fills(total - total / 2);
    case '=':
      return sign + fills(total) + body;
    default:
      return fills(total) + sign + body;
  }
}

std::string format_number(const Value& v, const FormatSpec& spec) {
  char type = spec.type;
  bool is_int_type = type == '\0' || type == 'd' || type == 'b' || type == 'o' || type == 'x' ||
                     type == 'X' || type == 'n' || type == 'c';
  if (v.is_integral() && is_int_type) {
    if (spec.precision >= 0) throw ValueError("Precision not allowed in integer format specifier");
    std::int64_t n = v.as_int();
    std::uint64_t mag = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
    std::string digits;
    if (type == 'c') {
      uni::append(digits, static_cast<char32_t>(n));
      return align("", digits, spec, '<');
    }
    int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
    do {
      digits.insert(digits.begin(), "0123456789abcdef"[mag % static_cast<unsigned>(base)]);
      mag /= static_cast<unsigned>(base);
    } while (mag > 0);
    if (type == 'X') digits = uni::upper(digits);
    if (spec.grouping) digits = group_digits(digits, spec.grouping);
    std::string sign = n < 0 ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
    if (spec.alternate && base != 10)
      sign += base == 2 ? "0b" : base == 8 ? "0o" : type == 'X' ? "0X" : "0x";
    return align(sign, digits, spec, '>');
  }
  if (!v.is_number())
    value_fail("Unknown format code '{}' for object of type '{}'", type, type_name(v));
  double f = v.as_double();
  if (v.is_float() && is_int_type && type != '\0' && type != 'n') {
    value_fail("Unknown format code '{}' for object of type 'float'", type);
  }
  std::string body;
  double mag = std::fabs(f);
  int precision = spec.precision < 0 ? 6 : spec.precision;
  if (type == '\0' && spec.precision < 0) {
    body = format_float(mag);
  } else if (type == '%') {
    body = c_format(fmt::format("%.{}f", precision), mag * 100) + "%";
  } else if (type == '\0' || type == 'n') {
    body = c_format(fmt::format("%.{}g", std::max(precision, 1)), mag);
    if (body.find_first_of(".e") == std::string::npos && std::isfinite(mag)) body += ".0";
  } else if (std::string_view("eEfFgG").find(type) != std::string_view::npos) {
    body = c_format(fmt::format("%{}.{}{}", spec.alternate ? "#" : "", precision, type), mag);
  } else {
    value_fail("Unknown format code '{}' for object of type 'float'", type);
  }
  if (spec.grouping) {
    std::size_t end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, end), spec.grouping) +
           (end == std::string::npos ? "" : body.substr(end));
  }
  bool negative = std::signbit(f) && !std::isnan(f);
  std::string sign = negative ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
  return align(sign, body, spec, '>');
}

std::string format_value(const Value& v, const std::string& spec_text) {
  if (spec_text.empty()) return to_str(v);
  FormatSpec spec = parse_spec(spec_text);
  if (v.is_string()) {
    if (spec.type != '\0' && spec.type != 's') {
      value_fail("Unknown format code '{}' for object of type 'str'", spec.type);
    }
    std::string s = spec.precision >= 0
                        ? truncate_cps(v.str(), static_cast<std::size_t>(spec.precision))
                        : v.str();
    return align("", s, spec, '<');
  }
  if (v.is_number()) return format_number(v, spec);
  value_fail("unsupported format string passed to {}.__format__", type_name(v));
}

}  // namespace

std::string brace_format(const std::string& format, const CallArgs& args, bool escape) {
  std::string out;
  std::size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (std::size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw ValueError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    std::size_t close = format.find('}', i);
    if (close == std::string::npos) throw ValueError("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos)
      throw ValueError("nested format fields are not supported");
    i = close;
    std::string spec, conversion;
    if (std::size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (std::size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    std::size_t name_end = field.find_first_of(".[");
    std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty() || std::isdigit(static_cast<unsigned char>(head[0]))) {
      std::size_t index = 0;
      if (head.empty()) {
        if (used_manual)
          throw ValueError(
              "cannot switch from manual field specification to automatic field numbering");
        used_auto = true;
        index = auto_index++;
      } else {
        if (used_auto)
          throw ValueError(
              "cannot switch from automatic field numbering to manual field specification");
        used_manual = true;
        index = static_cast<std::size_t>(std::stoul(head));
      }
      if (index >= args.args.size())
        throw ValueError("Replacement index out of range for positional args tuple");
      v = args.args[index];
    } else {
      bool found = false;
      for (const auto& [k, kv] : args.kwargs) {
        if (k == head) {
          v = kv;
          found = true;
        }
      }
      if (!found) value_fail("KeyError: '{}'", head);
    }
    if (name_end != std::string::npos)
      throw ValueError("attribute and index lookups in format fields are not supported");
    if (conversion == "r" || conversion == "a") {
      v = Value::string(repr(v));
    } else if (conversion == "s") {
      v = Value::string(to_str(v));
    } else if (!conversion.empty()) {
      throw ValueError("Unknown conversion specifier " + conversion);
    }
    std::string field_text = format_value(v, spec);
    out += escape && !(v.is_markup() && spec.empty()) ? html_escape(field_text) : field_text;
    check_size(out.size());
  }
  return out;
}

}  // namespace md::jinja
