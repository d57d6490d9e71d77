// GBNF, llama.cpp's grammar format, parsed into a Grammar: `name ::= alternatives` rules (a rule
// may span lines), "literals" and [character classes] with \n \r \t \\ \" \] \xHH \uHHHH
// \UHHHHHHHH escapes, [^negated] classes, `.` (any character), ( groups ), the repetitions * + ?
// {m} {m,} {m,n}, # comments. Generation starts at `root`. The `grammar` request field and the
// JSON-schema compiler both come through here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/grammar/grammar.h"

namespace md::grammar {

// Throws md::Error with the line and column of the first problem.
Grammar parse_gbnf(std::string_view text);

// `text` as a GBNF "literal" (quotes included), escaping what the parser would not read back.
std::string gbnf_literal(std::string_view utf8_text);

// "(a | b | …)" for several expressions, the expression itself for one.
std::string gbnf_alternatives(const std::vector<std::string>& parts);

// `ranges` as a GBNF [character class] (every code point escaped); "" for an empty set.
std::string gbnf_char_class(const std::vector<CodePointRange>& ranges);

}  // namespace md::grammar
