// JSON Schema (the subset OpenAI's strict structured outputs accept, and more) compiled to GBNF,
// and the grammar of any JSON object (response_format json_object). The JSON is compact with at
// most one space between tokens (outlines' default whitespace), properties in schema order.
// Sound first: every sentence of the grammar validates against the schema. Where a constraint
// cannot be expressed exactly the grammar keeps a subset that still validates (number bounds:
// fractions only where the whole unit interval is inside; optional extra properties are never
// generated), and keywords it cannot honour at all are refused by name (JsonSchemaError).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"

namespace md::grammar {

// A schema the compiler refuses: `keyword` is the offending keyword (e.g. "allOf") and
// `location` its JSON pointer within the schema ("#/properties/a").
class JsonSchemaError : public Error {
 public:
  JsonSchemaError(std::string keyword_name, std::string pointer, const std::string& message)
      : Error(message), keyword(std::move(keyword_name)), location(std::move(pointer)) {}
  std::string keyword;
  std::string location;
};

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// One GBNF text from several schemas (tool calls): JSON's rules once, each schema's rules under its
// own prefix, and whatever rules the caller adds around them.
class JsonGrammarWriter {
 public:
  // `no_raw_angle`: strings never hold a raw '<' (written \u003c instead) — inside a tool call,
  // whose parser ends the call at the first "</tool_call>".
  explicit JsonGrammarWriter(bool no_raw_angle = false) : no_raw_angle_(no_raw_angle) {}
  // The expression for the JSON values `schema` allows (JsonSchemaError when refused).
  std::string value(const nlohmann::ordered_json& schema, const std::string& prefix);
  // The expression for the raw text of a string schema, unquoted, without '<' and never the text
  // null (a tool call's XML parameter value, which the parser keeps as text).
  std::string raw_string(const nlohmann::ordered_json& schema, const std::string& prefix);
  void add_rule(const std::string& name, const std::string& body);
  // JSON's rules, the added ones, and `root ::= <root>`.
  std::string finish(const std::string& root) const;

 private:
  template <typename Compile>
  std::string restoring(Compile compile);

  std::string rules_;
  bool no_raw_angle_;
};

// Any JSON object (its values any JSON).
std::string json_object_gbnf();

}  // namespace md::grammar
