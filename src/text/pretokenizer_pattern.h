// Rewrites pre-tokenizer regexes written for Oniguruma (HF tokenizers) or Rust's regex crate
// (tiktoken) into PCRE2 patterns that match exactly the same pieces.
#pragma once

#include <string>
#include <string_view>

namespace md {

// Translates `pattern` for PCRE2 (compiled with PCRE2_UTF | PCRE2_UCP) so that it matches
// what Oniguruma (HF tokenizers) and Rust's regex crate (tiktoken) match:
//  - class intersections `[A&&B]` (Rust regex; PCRE2 has none) become `(?:(?=B)[A])`, which
//    accepts one character in both A and B; e.g. `[\p{L}&&[^\p{Han}]]` ->
//    `(?:(?=[^\p{Han}])[\p{L}])`. Quantifiers after the class then apply to the group.
//  - `\s`/`\S`, outside and inside classes, become `\p{White_Space}`/`\P{White_Space}`: PCRE2's
//    \s (category Z plus \t\n\v\f\r) misses U+0085, which Oniguruma and Rust both count.
//  - script properties `\p{Han}` become `\p{sc:Han}`: PCRE2 (>= 10.40) matches Script_Extensions
//    for a bare script name (so U+3002 IDEOGRAPHIC FULL STOP would count as Han), the others
//    match the Script property.
// `(?i:...)` stays: PCRE2, Oniguruma and Rust all fold U+017F LATIN SMALL LETTER LONG S to "s".
// Throws md::Error naming the construct for class syntax it cannot translate (nested classes
// outside an intersection, a negated class holding an intersection).
std::string translate_pattern_to_pcre2(std::string_view pattern);

}  // namespace md
