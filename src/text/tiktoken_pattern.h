// Where a tiktoken model's pre-tokenizer pattern (pat_str) comes from: Kimi's published pattern,
// or the one written in a model's tokenization_kimi.py.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace md {

// Kimi (K2, Linear, K3) pat_str, as published in tokenization_kimi.py (Rust-regex syntax,
// with class intersections; see translate_pattern_to_pcre2).
extern const std::string_view kKimiPattern;

// Reads `pat_str = "|".join([r"""...""", ...])` from the Python source of a tiktoken tokenizer
// class; nullopt when the source does not have that shape (only raw string literals are read).
std::optional<std::string> extract_pat_str_from_python(std::string_view source);

}  // namespace md
