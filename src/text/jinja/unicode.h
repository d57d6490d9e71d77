// The Unicode pieces the Jinja interpreter needs to behave like Python's str: code point
// iteration over UTF-8, str.isspace/isprintable/isalnum and case mapping.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace md::jinja::uni {

// Decodes UTF-8 into code points. Input is expected to be valid; a stray byte decodes to itself
// so that malformed data never crashes the interpreter.
std::u32string decode(std::string_view text);
// Decodes one code point at text[pos] and advances pos.
char32_t next(std::string_view text, std::size_t& pos);
void append(std::string& out, char32_t cp);
std::string encode(std::u32string_view cps);
bool is_ascii(std::string_view text);
bool is_valid_utf8(std::string_view text);
// Number of code points (Python len()).
std::size_t length(std::string_view text);

bool is_space(char32_t cp);      // str.isspace
bool is_printable(char32_t cp);  // str.isprintable (decides \x / \u escapes in repr)
bool is_alnum(char32_t cp);      // str.isalnum (the \w of Python's re, with '_')
bool is_cased(char32_t cp);      // letter with case (Lu, Ll, Lt)
bool is_lower_cp(char32_t cp);
bool is_upper_cp(char32_t cp);
bool is_digit(char32_t cp);  // str.isdigit (decimal digits)
bool is_alpha(char32_t cp);  // str.isalpha

// Full case mappings as Python applies them (including the few one-to-many mappings that occur in
// real text, and the Greek final sigma rule of str.lower()).
std::string upper(std::string_view text);
std::string lower(std::string_view text);
std::string title(std::string_view text);       // str.title
std::string capitalize(std::string_view text);  // str.capitalize
std::string swapcase(std::string_view text);

// str.strip/lstrip/rstrip: without `chars`, Python whitespace is removed.
std::string strip(std::string_view text, const std::u32string* chars, bool left, bool right);

}  // namespace md::jinja::uni
