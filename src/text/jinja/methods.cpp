// Methods of str, dict, list and tuple as templates call them ("x".startswith(...), d.get(...)).
// The immutable sandbox refuses the mutating ones (append, pop, update, ...).
#include <algorithm>
#include <array>

#include "text/jinja/builtins.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

constexpr std::array<std::string_view, 47> kStrMethods = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
constexpr std::array<std::string_view, 6> kDictSafe = {"get",    "items", "keys",
                                                       "values", "copy",  "fromkeys"};
constexpr std::array<std::string_view, 5> kDictUnsafe = {"clear", "pop", "popitem", "setdefault",
                                                         "update"};
constexpr std::array<std::string_view, 3> kListSafe = {"copy", "count", "index"};
constexpr std::array<std::string_view, 8> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                                         "pop",    "remove", "reverse", "sort"};

template <std::size_t N>
bool in(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const std::string& str_arg(const Value& v, std::string_view method) {
  if (!v.is_string()) value_fail("{}() argument must be str, not {}", method, type_name(v));
  return v.str();
}

std::int64_t int_arg(const Value& v, std::string_view method) {
  if (auto i = as_index(v)) return *i;
  value_fail("{}() argument must be int, not {}", method, type_name(v));
}

// Clamps Python start/end (None allowed) to [0, len].
std::pair<std::size_t, std::size_t> span(const Value& start, const Value& end, std::size_t len) {
  auto fix = [&](const Value& v, std::int64_t dflt) {
    std::int64_t x = v.is_none() ? dflt : int_arg(v, "slice");
    auto n = static_cast<std::int64_t>(len);
    if (x < 0) x += n;
    return static_cast<std::size_t>(std::clamp<std::int64_t>(x, 0, n));
  };
  return {fix(start, 0), fix(end, static_cast<std::int64_t>(len))};
}

Value str_list(const std::vector<std::string>& parts, bool markup) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::string(p, markup));
  return Value::sequence(std::move(items));
}

std::vector<std::string> split_whitespace(const std::u32string& s, std::int64_t maxsplit,
                                          bool from_right) {
  std::vector<std::string> out;
  auto n = static_cast<std::int64_t>(s.size());
  if (!from_right) {
    std::int64_t i = 0;
    while (true) {
      while (i < n && uni::is_space(s[static_cast<std::size_t>(i)])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        out.push_back(uni::encode(std::u32string_view(s).substr(static_cast<std::size_t>(i))));
        break;
      }
      std::int64_t j = i;
      while (j < n && !uni::is_space(s[static_cast<std::size_t>(j)])) ++j;
      out.push_back(uni::encode(std::u32string_view(s).substr(static_cast<std::size_t>(i),
                                                              static_cast<std::size_t>(j - i))));
      i = j;
    }
    return out;
  }
  std::int64_t i = n - 1;
  while (true) {
    while (i >= 0 && uni::is_space(s[static_cast<std::size_t>(i)])) --i;
    if (i < 0) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.push_back(uni::encode(std::u32string_view(s).substr(0, static_cast<std::size_t>(i + 1))));
      break;
    }
    std::int64_t j = i;
    while (j >= 0 && !uni::is_space(s[static_cast<std::size_t>(j)])) --j;
    out.push_back(uni::encode(std::u32string_view(s).substr(static_cast<std::size_t>(j + 1),
                                                            static_cast<std::size_t>(i - j))));
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep,
                                   std::int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw ValueError("empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      std::size_t pos = s.find(sep, start);
      if (pos == std::string::npos) break;
      out.push_back(s.substr(start, pos - start));
      start = pos + sep.size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  std::size_t end = s.size();
  while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
    if (end < sep.size()) break;
    std::size_t pos = s.rfind(sep, end - sep.size());
    if (pos == std::string::npos) break;
    out.push_back(s.substr(pos + sep.size(), end - pos - sep.size()));
    end = pos;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_lines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t pos = 0; pos < s.size();) {
    std::size_t at = pos;
    char32_t cp = uni::next(s, pos);
    bool boundary = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                    cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!boundary) continue;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    out.push_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string pad(const std::string& s, std::int64_t width, const std::string& fill, char how) {
  auto len = static_cast<std::int64_t>(uni::length(s));
  if (width <= len) return s;
  check_size(static_cast<std::size_t>(width) * fill.size());
  std::int64_t total = width - len, left = 0;
  if (how == '<') left = 0;
  if (how == '>') left = total;
  // CPython's str.center puts the odd extra character on the left when width is odd.
  if (how == '^') left = total / 2 + (total & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (std::int64_t i = left; i < total; ++i) out += fill;
  return out;
}

std::string fill_char(const Value& v, bool escape) {
  const std::string f = escape ? html_escape(str_arg(v, "fill")) : str_arg(v, "fill");
  if (uni::length(f) != 1)
    throw ValueError("The fill character must be exactly one character long");
  return f;
}

std::int64_t find_in(const Value& self, const std::vector<Value>& a, bool reverse) {
  std::u32string hay = uni::decode(self.str());
  std::u32string needle = uni::decode(str_arg(a[0], "find"));
  auto [start, end] = span(a[1], a[2], hay.size());
  if (start > end || end - start < needle.size()) {
    return needle.empty() && start <= end ? static_cast<std::int64_t>(reverse ? end : start) : -1;
  }
  std::u32string_view window = std::u32string_view(hay).substr(start, end - start);
  std::size_t pos = reverse ? window.rfind(needle) : window.find(needle);
  return pos == std::u32string_view::npos ? -1 : static_cast<std::int64_t>(start + pos);
}

bool affix_match(const Value& self, const std::vector<Value>& a, bool prefix) {
  std::u32string s = uni::decode(self.str());
  auto [start, end] = span(a[1], a[2], s.size());
  if (start > end) return false;
  std::u32string_view window = std::u32string_view(s).substr(start, end - start);
  auto test = [&](const Value& v) {
    std::u32string x = uni::decode(str_arg(v, prefix ? "startswith" : "endswith"));
    if (x.size() > window.size()) return false;
    return prefix ? window.substr(0, x.size()) == x : window.substr(window.size() - x.size()) == x;
  };
  if (a[0].is_seq() && a[0].seq().kind == SeqKind::kTuple) {
    return std::any_of(a[0].seq().items.begin(), a[0].seq().items.end(), test);
  }
  return test(a[0]);
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& repl,
                        std::int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    std::int64_t done = 0;
    std::size_t pos = 0;
    while (pos <= s.size()) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (pos == s.size()) break;
      std::size_t start = pos;
      uni::next(s, pos);
      out.append(s, start, pos - start);
      check_size(out.size());
    }
    return out;
  }
  std::size_t start = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    std::size_t pos = s.find(old, start);
    if (pos == std::string::npos) break;
    out.append(s, start, pos - start);
    out += repl;
    check_size(out.size());
    start = pos + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (std::size_t pos = 0; pos < s.size();) {
    if (!pred(uni::next(s, pos))) return false;
  }
  return true;
}

// str.islower / isupper: at least one cased character and no cased character of the other case.
bool cased_as(const std::string& s, bool lower) {
  bool any = false;
  for (std::size_t pos = 0; pos < s.size();) {
    char32_t cp = uni::next(s, pos);
    if (lower ? uni::is_upper_cp(cp) : uni::is_lower_cp(cp)) return false;
    if (lower ? uni::is_lower_cp(cp) : uni::is_upper_cp(cp)) any = true;
  }
  return any;
}

Value string_method(const Value& self, std::string_view name, CallArgs& args);

Value dict_method(const Value& self, std::string_view name, CallArgs& args) {
  const Dict& d = self.dict();
  if (name == "get") {
    auto a = bind_args("get", args, {{"key", std::nullopt}, {"default", Value::none()}});
    require_hashable(a[0]);
    const Value* v = d.find(a[0]);
    return v ? *v : a[1];
  }
  bind_args(std::string(name), args, {});
  if (name == "copy") return self;
  if (name != "keys" && name != "values" && name != "items") {
    value_fail("dict.{}() is not supported by this template engine", name);
  }
  std::vector<Value> out;
  for (const auto& [k, v] : d.entries()) {
    if (name == "keys") {
      out.push_back(k);
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::sequence({k, v}, SeqKind::kTuple));
    }
  }
  SeqKind kind = name == "keys"     ? SeqKind::kDictKeys
                 : name == "values" ? SeqKind::kDictValues
                                    : SeqKind::kDictItems;
  return Value::sequence(std::move(out), kind);
}

Value list_method(const Value& self, std::string_view name, CallArgs& args) {
  const auto& items = self.seq().items;
  if (name == "copy") {
    bind_args("copy", args, {});
    return Value::sequence(items, SeqKind::kList);
  }
  if (name == "count") {
    auto a = bind_args("count", args, {{"value", std::nullopt}});
    return Value::integer(std::count_if(items.begin(), items.end(),
                                        [&](const Value& v) { return py_equal(v, a[0]); }));
  }
  auto a = bind_args("index", args,
                     {{"value", std::nullopt}, {"start", Value::none()}, {"stop", Value::none()}});
  auto [start, end] = span(a[1], a[2], items.size());
  for (std::size_t i = start; i < end; ++i) {
    if (py_equal(items[i], a[0])) return Value::integer(static_cast<std::int64_t>(i));
  }
  value_fail("{} is not in list", repr(a[0]));
}

}  // namespace

MethodKind method_kind(const Value& receiver, std::string_view name) {
  switch (receiver.type()) {
    case Value::Type::kString:
      return in(kStrMethods, name) ? MethodKind::kSafe : MethodKind::kNone;
    case Value::Type::kDict:
      if (in(kDictSafe, name)) return MethodKind::kSafe;
      return in(kDictUnsafe, name) ? MethodKind::kUnsafe : MethodKind::kNone;
    case Value::Type::kSeq:
      if (receiver.seq().kind == SeqKind::kList) {
        if (in(kListSafe, name)) return MethodKind::kSafe;
        return in(kListUnsafe, name) ? MethodKind::kUnsafe : MethodKind::kNone;
      }
      if (receiver.seq().kind == SeqKind::kTuple && (name == "count" || name == "index")) {
        return MethodKind::kSafe;
      }
      return MethodKind::kNone;
    default:
      return MethodKind::kNone;
  }
}

Value call_method(const Value& receiver, std::string_view name, CallArgs& args) {
  switch (receiver.type()) {
    case Value::Type::kString:
      return string_method(receiver, name, args);
    case Value::Type::kDict:
      return dict_method(receiver, name, args);
    case Value::Type::kSeq:
      return list_method(receiver, name, args);
    default:
      value_fail("'{}' object has no attribute '{}'", type_name(receiver), name);
  }
}

namespace {

Value string_method(const Value& self, std::string_view name, CallArgs& args) {
  const std::string& s = self.str();
  // markupsafe (3.x) keeps Markup results Markup and escapes the text these methods insert
  // (replace's new text, fill characters, joined items, format fields).
  const bool markup = self.is_markup();
  auto arg_text = [&](const Value& v, std::string_view method) -> std::string {
    const std::string& text = str_arg(v, method);
    return markup && !v.is_markup() ? html_escape(text) : text;
  };
  auto result = [&](std::string text) { return Value::string(std::move(text), markup); };
  auto chars_arg = [&](const Value& v, std::string_view method) -> std::optional<std::u32string> {
    if (v.is_none()) return std::nullopt;
    return uni::decode(str_arg(v, method));
  };
  const Value none = Value::none();

  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "swapcase" || name == "casefold") {
    bind_args(std::string(name), args, {});
    if (name == "upper") return result(uni::upper(s));
    if (name == "title") return result(uni::title(s));
    if (name == "capitalize") return result(uni::capitalize(s));
    if (name == "swapcase") return result(uni::swapcase(s));
    return result(uni::lower(s));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = bind_args(std::string(name), args, {{"chars", none}});
    auto chars = chars_arg(a[0], name);
    return result(uni::strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto a = bind_args(std::string(name), args, {{"sep", none}, {"maxsplit", Value::integer(-1)}});
    std::int64_t maxsplit = int_arg(a[1], name);
    bool right = name == "rsplit";
    auto parts = a[0].is_none() ? split_whitespace(uni::decode(s), maxsplit, right)
                                : split_sep(s, str_arg(a[0], name), maxsplit, right);
    return str_list(parts, markup);
  }
  if (name == "splitlines") {
    auto a = bind_args("splitlines", args, {{"keepends", Value::boolean(false)}});
    return str_list(split_lines(s, truthy(a[0])), markup);
  }
  if (name == "startswith" || name == "endswith") {
    auto a = bind_args(std::string(name), args,
                       {{"prefix", std::nullopt}, {"start", none}, {"end", none}});
    return Value::boolean(affix_match(self, a, name == "startswith"));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    auto a =
        bind_args(std::string(name), args, {{"sub", std::nullopt}, {"start", none}, {"end", none}});
    std::int64_t pos = find_in(self, a, name[0] == 'r');
    if (pos < 0 && (name == "index" || name == "rindex")) throw ValueError("substring not found");
    return Value::integer(pos);
  }
  if (name == "count") {
    auto a = bind_args("count", args, {{"sub", std::nullopt}, {"start", none}, {"end", none}});
    std::u32string hay = uni::decode(s);
    std::u32string needle = uni::decode(str_arg(a[0], "count"));
    auto [start, end] = span(a[1], a[2], hay.size());
    if (start > end) return Value::integer(0);
    if (needle.empty()) return Value::integer(static_cast<std::int64_t>(end - start + 1));
    std::int64_t n = 0;
    for (std::size_t p = hay.find(needle, start);
         p != std::u32string::npos && p + needle.size() <= end;
         p = hay.find(needle, p + needle.size())) {
      ++n;
    }
    return Value::integer(n);
  }
  if (name == "replace") {
    auto a =
        bind_args("replace", args,
                  {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::integer(-1)}});
    return result(replace_all(s, str_arg(a[0], "replace"), arg_text(a[1], "replace"),
                              int_arg(a[2], "replace")));
  }
  if (name == "join") {
    auto a = bind_args("join", args, {{"iterable", std::nullopt}});
    std::string out;
    std::size_t i = 0;
    for (const Value& item : iterate(a[0])) {
      if (!item.is_string()) {
        value_fail("sequence item {}: expected str instance, {} found", i, type_name(item));
      }
      if (i++ > 0) out += s;
      out += markup && !item.is_markup() ? html_escape(item.str()) : item.str();
      check_size(out.size());
    }
    return result(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto a = bind_args(std::string(name), args,
                       {{"width", std::nullopt}, {"fillchar", Value::string(" ")}});
    char how = name == "center" ? '^' : name == "ljust" ? '<' : '>';
    return result(pad(s, int_arg(a[0], name), fill_char(a[1], markup), how));
  }
  if (name == "zfill") {
    auto a = bind_args("zfill", args, {{"width", std::nullopt}});
    std::int64_t width = int_arg(a[0], "zfill");
    bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    std::string body = pad(sign ? s.substr(1) : s, width - (sign ? 1 : 0), "0", '>');
    return result(sign ? s.substr(0, 1) + body : body);
  }
  if (name == "partition" || name == "rpartition") {
    auto a = bind_args(std::string(name), args, {{"sep", std::nullopt}});
    std::string sep = str_arg(a[0], name);
    if (sep.empty()) throw ValueError("empty separator");
    std::size_t pos = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (pos == std::string::npos) {
      bool left = name == "partition";
      parts = {result(left ? s : ""), result(""), result(left ? "" : s)};
    } else {
      parts = {result(s.substr(0, pos)), result(sep), result(s.substr(pos + sep.size()))};
    }
    return Value::sequence(std::move(parts), SeqKind::kTuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = bind_args(std::string(name), args, {{"affix", std::nullopt}});
    const std::string& x = str_arg(a[0], name);
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return result(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return result(s.substr(0, s.size() - x.size()));
    }
    return result(s);
  }
  if (name == "format") {
    std::string out = brace_format(s, args, markup);
    return result(std::move(out));
  }
  if (name == "isalnum" || name == "isalpha" || name == "isdigit" || name == "isdecimal" ||
      name == "isnumeric" || name == "isspace" || name == "islower" || name == "isupper" ||
      name == "isascii") {
    bind_args(std::string(name), args, {});
    if (name == "isalnum") return Value::boolean(all_chars(s, uni::is_alnum));
    if (name == "isalpha") return Value::boolean(all_chars(s, uni::is_alpha));
    if (name == "isspace") return Value::boolean(all_chars(s, uni::is_space));
    if (name == "islower") return Value::boolean(cased_as(s, true));
    if (name == "isupper") return Value::boolean(cased_as(s, false));
    if (name == "isascii") return Value::boolean(uni::is_ascii(s));
    return Value::boolean(all_chars(s, uni::is_digit));
  }
  value_fail("str.{}() is not supported by this template engine", name);
}

}  // namespace

}  // namespace md::jinja
