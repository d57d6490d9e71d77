// Tokenizer and parser of the Jinja interpreter: tokens, whitespace control, literals, and
// syntax errors that name the template, line and column.
#include <gtest/gtest.h>

#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"
#include "text/jinja/template.h"

namespace md::jinja {
namespace {

std::vector<TokenType> types(const std::vector<Token>& tokens) {
  std::vector<TokenType> out;
  for (const auto& t : tokens) out.push_back(t.type);
  return out;
}

TEST(JinjaLexer, SplitsDataVariablesAndBlocks) {
  auto tokens = tokenize("a{{ x.y }}b{% if z %}c{% endif %}", "t");
  std::vector<TokenType> want = {
      TokenType::kData,       TokenType::kVarBegin, TokenType::kName,     TokenType::kOperator,
      TokenType::kName,       TokenType::kVarEnd,   TokenType::kData,     TokenType::kBlockBegin,
      TokenType::kName,       TokenType::kName,     TokenType::kBlockEnd, TokenType::kData,
      TokenType::kBlockBegin, TokenType::kName,     TokenType::kBlockEnd, TokenType::kEof};
  EXPECT_EQ(types(tokens), want);
  EXPECT_EQ(tokens[0].value, "a");
  EXPECT_EQ(tokens[3].value, ".");
}

TEST(JinjaLexer, NumbersFollowPythonLiterals) {
  auto tokens = tokenize("{{ 1_000 0x1F 0o17 0b101 1.5e3 2E-2 3.0 }}", "t");
  EXPECT_EQ(tokens[1].int_value, 1000);
  EXPECT_EQ(tokens[2].int_value, 31);
  EXPECT_EQ(tokens[3].int_value, 15);
  EXPECT_EQ(tokens[4].int_value, 5);
  EXPECT_EQ(tokens[5].type, TokenType::kFloat);
  EXPECT_DOUBLE_EQ(tokens[5].float_value, 1500.0);
  EXPECT_DOUBLE_EQ(tokens[6].float_value, 0.02);
  EXPECT_DOUBLE_EQ(tokens[7].float_value, 3.0);
}

TEST(JinjaLexer, AttributeNumbersAreNotFloats) {
  auto tokens = tokenize("{{ x.0.1 }}", "t");
  EXPECT_EQ(tokens[3].type, TokenType::kInteger);
  EXPECT_EQ(tokens[5].type, TokenType::kInteger);
}

TEST(JinjaLexer, StringLiteralEscapesAsPython) {
  EXPECT_EQ(decode_string_literal(R"(a\nb\t\x41\u00e9\\d\')"), "a\nb\tA\xC3\xA9\\d'");
  EXPECT_EQ(decode_string_literal(R"(\101\0)"), std::string("A\0", 2));
  EXPECT_EQ(decode_string_literal("\\\xC3\xA9"), "\\xe9");  // Python's quirk for "\é"
  EXPECT_EQ(decode_string_literal(R"(\U0001F600)"), "\xF0\x9F\x98\x80");
  EXPECT_THROW(decode_string_literal(R"(\x4)"), ValueError);
  EXPECT_THROW(decode_string_literal(R"(\ud800)"), ValueError);
}

TEST(JinjaLexer, NewlinesNormalizedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(normalize_newlines("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(normalize_newlines("a\n\n"), "a\n");
  EXPECT_EQ(normalize_newlines("a\xE2\x80\xA8"), "a\xE2\x80\xA8");
}

TEST(JinjaLexer, WhitespaceControlAndBlockTrimming) {
  auto data = [](std::string_view src) {
    std::string out;
    for (const auto& t : tokenize(src, "t")) {
      if (t.type == TokenType::kData) out += "[" + t.value + "]";
    }
    return out;
  };
  EXPECT_EQ(data("a  {%- if x %}\nb"), "[a][b]");       // "-" strips before, trim after
  EXPECT_EQ(data("a\n  {% if x %}  b"), "[a\n][  b]");  // lstrip_blocks
  EXPECT_EQ(data("a\n  {%+ if x %}b"), "[a\n  ][b]");   // "+" keeps indentation
  EXPECT_EQ(data("a\n  {{ x }}"), "[a\n  ]");           // never for {{
  EXPECT_EQ(data("{% if x -%}\n\n  b"), "[b]");
  EXPECT_EQ(data("{% if x +%}\nb"), "[\nb]");
  EXPECT_EQ(data("x {# c #}\ny"), "[x ][y]");
  EXPECT_EQ(data("{% raw %}{{ a }}{% endraw %}"), "[{{ a }}]");
}

struct SyntaxCase {
  const char* source;
  int line;
  int column;
  const char* message;
};

TEST(JinjaParser, SyntaxErrorsNameLineAndColumn) {
  const SyntaxCase cases[] = {
      {"{{ 1 + }}", 1, 8, "unexpected 'end of print statement'"},
      {"line\n  {{ (1 + 2 }}", 2, 13, "unexpected '}', expected ')'"},
      {"a\nb\n{% frobnicate %}", 3, 4, "Encountered unknown tag 'frobnicate'."},
      {"{{ x | nosuch }}", 1, 8, "No filter named 'nosuch'."},
      {"{{ x is nosuch }}", 1, 9, "No test named 'nosuch'."},
      {"{% break %}", 1, 4, "'break' outside loop"},
      {"{% if x %}\nnever closed", 2, 13, "Unexpected end of template."},
      {"{{ 'abc }}", 1, 4, "unterminated string literal"},
      {"{# open", 1, 1, "Missing end of comment tag"},
      {"{% set true = 1 %}", 1, 8, "can't assign to 'const'"},
      {"{% extends 'x' %}", 1, 4, "'extends' tag is not supported"},
      {"{% for x in y recursive %}{% endfor %}", 1, 15, "recursive for loops are not supported"},
      {"{% macro m() %}{% endmacro %}{% call m() %}{% endcall %}", 1, 33, "'call' tag"},
      {"{{ f(*args) }}", 1, 6, "*args and **kwargs"},
      {"{{ a ! b }}", 1, 6, "unexpected character '!'"},
  };
  for (const auto& c : cases) {
    try {
      Template t(c.source, "my.jinja");
      ADD_FAILURE() << "no error for " << c.source;
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), TemplateError::Kind::kSyntax) << c.source;
      EXPECT_EQ(e.line(), c.line) << c.source << " -> " << e.what();
      EXPECT_EQ(e.column(), c.column) << c.source << " -> " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("my.jinja"), std::string::npos) << e.what();
    }
  }
}

TEST(JinjaParser, RefusesRunawayNesting) {
  std::string deep(5000, '(');
  EXPECT_THROW(Template("{{ " + deep + " }}", "t"), TemplateError);
  std::string chain = "{{ x";
  for (int i = 0; i < 5000; ++i) chain += ".a";
  EXPECT_THROW(Template(chain + " }}", "t"), TemplateError);
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_THROW(Template(nots + "x }}", "t"), TemplateError);
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if x %}";
  EXPECT_THROW(Template(ifs, "t"), TemplateError);
}

TEST(JinjaParser, RejectsInvalidUtf8Source) {
  EXPECT_THROW(Template("\xFF{{ x }}", "t"), TemplateError);
}

}  // namespace
}  // namespace md::jinja
