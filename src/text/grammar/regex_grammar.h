// A JSON-schema `pattern` (an ECMA-262 regular expression) as a GBNF expression over the
// characters of a JSON string's body, as they are written: a `"` or `\` the pattern matches is
// written as its escape, control characters likewise. Supported: literals and escapes, classes
// (ranges, negation, \d \w \s and their ASCII complements), `.`, groups ((...), (?:...)),
// alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy forms too), and ^ / $ at the ends;
// without them the match may start or end anywhere (JSON Schema searches, it does not anchor).
// Backreferences, lookaround, word boundaries and flags are refused with md::Error naming them.
// Where ECMA and Python (the validators people check with) disagree, the intersection is used:
// \d is [0-9], \s ASCII white space, `.` excludes line terminators.
#pragma once

#include <string>
#include <string_view>

namespace md::grammar {

// How matched characters are written: inside a JSON string (escaped as JSON requires), or as raw
// text without '<' (a tool call's XML parameter value, which '<' would end).
enum class RegexText { kJsonString, kJsonStringNoAngle, kRawNoAngle };

// The GBNF expression (parenthesised) for string bodies matching `pattern`; `body_char` is the
// name of the rule for one written character of a free string (the unanchored ends).
std::string regex_to_gbnf(std::string_view pattern, std::string_view body_char,
                          RegexText text = RegexText::kJsonString);

}  // namespace md::grammar
