// A parsed Jinja template, the public face of the Jinja interpreter: parse once, then render any
// number of times, from any number of threads at once.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace md::jinja {

class Template {
 public:
  // Parses `source`; throws TemplateError (kind kSyntax) naming `name`, the line and column.
  explicit Template(std::string_view source, std::string name = "template");

  // Renders with the members of a JSON object as top-level variables (object key order is
  // kept, as Python dicts keep it). Throws TemplateError.
  std::string render(const nlohmann::ordered_json& variables,
                     const RenderLimits& limits = {}) const;
  std::string render(std::vector<std::pair<std::string, Value>> variables,
                     const RenderLimits& limits = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const StmtList> body_;
};

}  // namespace md::jinja
