// Splits Jinja template source into tokens exactly as jinja2's lexer does under the settings
// Hugging Face chat templates use (trim_blocks, lstrip_blocks, no trailing newline kept).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/error.h"

namespace md::jinja {

enum class TokenType {
  kData,        // literal text between tags (already whitespace-controlled)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // value holds the decoded string
  kInteger,
  kFloat,
  kOperator,  // value holds the operator text, e.g. "//" or "("
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  std::int64_t int_value = 0;
  double float_value = 0.0;
  SourceLoc loc;

  bool is_op(std::string_view op) const { return type == TokenType::kOperator && value == op; }
  bool is_name(std::string_view name) const { return type == TokenType::kName && value == name; }
};

// How jinja2 prints a token in "unexpected ..." messages.
std::string describe(const Token& token);

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Tokenizes `source`; throws TemplateError (kind kSyntax) naming `template_name`.
std::vector<Token> tokenize(std::string_view source, const std::string& template_name,
                            const LexerOptions& options = {});

// The newline normalisation jinja2 applies before lexing: \r\n and \r become \n, and one
// trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source);

// Decodes the body of a string literal the way jinja2 does (Python "unicode-escape" after
// backslash-replacing non-ASCII characters). Throws ValueError on malformed escapes.
std::string decode_string_literal(std::string_view body);

}  // namespace md::jinja
