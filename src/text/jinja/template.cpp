#include "text/jinja/template.h"

#include "text/jinja/json.h"
#include "text/jinja/parser.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

Template::Template(std::string_view source, std::string name) : name_(std::move(name)) {
  if (!uni::is_valid_utf8(source)) {
    throw TemplateError(TemplateError::Kind::kSyntax, name_, {}, "template is not valid UTF-8");
  }
  body_ = std::make_shared<const StmtList>(parse_template(source, name_));
}

std::string Template::render(const nlohmann::ordered_json& variables,
                             const RenderLimits& limits) const {
  if (!variables.is_object()) {
    throw TemplateError(TemplateError::Kind::kRuntime, name_, {},
                        "template variables must be a JSON object");
  }
  std::vector<std::pair<std::string, Value>> context;
  context.reserve(variables.size());
  try {
    for (const auto& [key, value] : variables.items()) context.emplace_back(key, from_json(value));
  } catch (const ValueError& e) {
    throw TemplateError(e.kind(), name_, {}, e.what());
  }
  return render(std::move(context), limits);
}

std::string Template::render(std::vector<std::pair<std::string, Value>> variables,
                             const RenderLimits& limits) const {
  Interpreter interp(name_, limits);
  return interp.render(*body_, std::move(variables));
}

}  // namespace md::jinja
