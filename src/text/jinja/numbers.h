// Python's number conversions as the int, float and round filters use them: int(str, base),
// float(str), truncation of floats and round() with ties to even.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace md::jinja {

// Python float(text); nullopt where Python raises ValueError.
std::optional<double> parse_float(std::string text);
// Python int(text, base) within 64 bits; nullopt where Python raises ValueError. Throws
// ValueError for an invalid base or a value beyond 64 bits.
std::optional<std::int64_t> parse_int(std::string text, std::int64_t base);
// Python int(float): nullopt for NaN; throws for infinities and values beyond 64 bits.
std::optional<std::int64_t> float_to_int(double f);
// Python round(x, digits) for floats.
double round_half_even(double x, std::int64_t digits);

}  // namespace md::jinja
