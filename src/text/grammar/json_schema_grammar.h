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

// Any JSON object (its values any JSON).
std::string json_object_gbnf();

}  // namespace md::grammar
