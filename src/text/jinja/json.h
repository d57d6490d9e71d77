// Bridges between template values and JSON: nlohmann JSON in (the chat request), and Python's
// json.dumps out (the `tojson` filter transformers installs), byte-for-byte.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace md::jinja {

// JSON → value. Object key order is kept (Python dicts are ordered). Throws ValueError for
// invalid UTF-8, integers beyond 64 bits and nesting deeper than a safety limit.
Value from_json(const nlohmann::ordered_json& json);

// The arguments of json.dumps that the `tojson` filter forwards.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // nullopt: single line
  std::optional<std::string> item_separator;  // default ", " (or "," with indent)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
};

// Python json.dumps(value, ...). Throws ValueError for values JSON cannot hold (Undefined,
// namespaces, generators, tuple keys ...), with Python's message.
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace md::jinja
