// Parses Jinja template source into a syntax tree following jinja2's grammar (operator
// precedence, tuple rules, tag set of transformers' environment). Constructs jinja2 has but this
// interpreter does not are refused here, at parse time, never rendered approximately.
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/ast.h"

namespace md::jinja {

// Throws TemplateError (kind kSyntax) with the line and column of the offending token.
StmtList parse_template(std::string_view source, const std::string& template_name);

// Names of the filters and tests the interpreter implements (an unknown one is a parse error, as
// it is a compile-time error in jinja2).
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace md::jinja
