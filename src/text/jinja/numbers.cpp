#include "text/jinja/numbers.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

// Python float(str): surrounding whitespace, underscores between digits, inf/nan words.
std::optional<double> parse_float(std::string text) {
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!text.empty() && is_space(text.front())) text.erase(text.begin());
  while (!text.empty() && is_space(text.back())) text.pop_back();
  std::string clean;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_') {
      bool ok = i > 0 && i + 1 < text.size() &&
                std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                std::isdigit(static_cast<unsigned char>(text[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    clean += text[i];
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = uni::lower(clean);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  double sign = lower[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return NAN;
  const char* begin = clean.data() + (clean[0] == '+' ? 1 : 0);
  double out = 0;
  auto [ptr, ec] = std::from_chars(begin, clean.data() + clean.size(), out);
  if (ptr != clean.data() + clean.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    return lower.find("e-") != std::string::npos ? 0.0 * sign : sign * INFINITY;
  }
  if (ec != std::errc()) return std::nullopt;
  return out;
}

// Python int(str, base).
std::optional<std::int64_t> parse_int(std::string text, std::int64_t base) {
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!text.empty() && is_space(text.front())) text.erase(text.begin());
  while (!text.empty() && is_space(text.back())) text.pop_back();
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.erase(text.begin());
  }
  std::string lower = uni::lower(text);
  auto prefixed = [&](char p) { return lower.size() > 2 && lower[0] == '0' && lower[1] == p; };
  if (base == 0) {
    base = prefixed('x') ? 16 : prefixed('o') ? 8 : prefixed('b') ? 2 : 10;
    if (base == 10 && lower.size() > 1 && lower[0] == '0' &&
        lower.find_first_not_of("0_") != std::string::npos) {
      return std::nullopt;
    }
  }
  if (base < 2 || base > 36) throw ValueError("int() base must be >= 2 and <= 36, or 0");
  if ((base == 16 && prefixed('x')) || (base == 8 && prefixed('o')) ||
      (base == 2 && prefixed('b'))) {
    lower = lower.substr(2);
    if (!lower.empty() && lower[0] == '_') lower = lower.substr(1);
  }
  std::string digits;
  for (std::size_t i = 0; i < lower.size(); ++i) {
    if (lower[i] == '_') {
      if (i == 0 || i + 1 == lower.size() || lower[i + 1] == '_') return std::nullopt;
      continue;
    }
    digits += lower[i];
  }
  if (digits.empty()) return std::nullopt;
  std::int64_t value = 0;
  auto [ptr, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value, static_cast<int>(base));
  if (ptr != digits.data() + digits.size()) return std::nullopt;
  if (ec != std::errc()) throw ValueError("integer too large (more than 64 bits)");
  return negative ? -value : value;
}

std::optional<std::int64_t> float_to_int(double f) {
  if (std::isnan(f)) return std::nullopt;
  if (std::isinf(f)) throw ValueError("cannot convert float infinity to integer");
  if (std::fabs(f) >= 9.2e18) throw ValueError("integer too large (more than 64 bits)");
  return static_cast<std::int64_t>(std::trunc(f));
}

double round_half_even(double x, std::int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    // printf rounds the exact binary value correctly (ties to even), as CPython's round() does.
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<std::int64_t>(digits, 300)),
                  x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-digits));
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.0f", x / scale);
  return std::strtod(buf, nullptr) * scale;
}

}  // namespace md::jinja
