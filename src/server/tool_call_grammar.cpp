#include "server/tool_call_grammar.h"

#include <fmt/format.h>

#include <vector>

#include "server/api_error.h"
#include "text/grammar/gbnf_parser.h"
#include "text/grammar/json_schema_grammar.h"

namespace md::server {
namespace {

using Json = nlohmann::ordered_json;

struct Tool {
  std::string name;
  const Json* parameters = nullptr;  // null: none given
  bool strict = false;
  std::string param;  // the request field of its parameters, for errors
};

std::vector<Tool> tools_of(const Json& tools) {
  std::vector<Tool> out;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& function = tools[i]["function"];
    Tool tool;
    tool.name = function["name"].get<std::string>();
    if (function.contains("parameters") && function["parameters"].is_object()) {
      tool.parameters = &function["parameters"];
    }
    tool.strict = function.contains("strict") && function["strict"].is_boolean() &&
                  function["strict"].get<bool>();
    tool.param = fmt::format("tools[{}].function.parameters", i);
    out.push_back(std::move(tool));
  }
  return out;
}

[[noreturn]] void refuse(const Tool& tool, const std::string& why) {
  throw invalid_value_message(tool.param, fmt::format("strict tool '{}': {}", tool.name, why));
}

// A strict tool's schema is enforced (a refusal is the client's error); a non-strict tool's is
// used when it compiles and otherwise any value of the right shape is allowed.
class CallGrammar {
 public:
  explicit CallGrammar(ToolCallFormat format) : format_(format), writer_(/*no_raw_angle=*/true) {}

  // The arguments object (JSON format).
  std::string json_arguments(const Tool& tool, std::size_t index) {
    if (tool.parameters == nullptr) return "jobject";
    try {
      return writer_.value(*tool.parameters, fmt::format("t{}s", index));
    } catch (const grammar::JsonSchemaError& e) {
      if (tool.strict) refuse(tool, e.what());
      return "jobject";
    }
  }

  // The <parameter=…> items (XML format): each property of the schema in order, the required
  // ones always; values by the parser's conversion (§12.2): string schemas as text, the others
  // as JSON.
  std::string xml_parameters(const Tool& tool, std::size_t index) {
    std::string any = "(\"<parameter=\" [A-Za-z0-9_.-]+ \">\\n\" [^<]* \"\\n</parameter>\\n\")*";
    if (tool.parameters == nullptr) return any;
    try {
      return xml_items(tool, index);
    } catch (const grammar::JsonSchemaError& e) {
      if (tool.strict) refuse(tool, e.what());
    } catch (const ApiError&) {
      if (tool.strict) throw;
    }
    return any;
  }

  std::string call(const Tool& tool, std::size_t index) {
    if (format_ == ToolCallFormat::kJson) {
      return "\"{\" ws \"\\\"name\\\"\" ws \":\" ws " +
             grammar::gbnf_literal(Json(tool.name).dump()) +
             " ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws " + json_arguments(tool, index) +
             " ws \"}\"";
    }
    return grammar::gbnf_literal("<function=" + tool.name + ">\n") + " " +
           xml_parameters(tool, index) + " \"</function>\"";
  }

  grammar::JsonGrammarWriter& writer() { return writer_; }

 private:
  std::string xml_items(const Tool& tool, std::size_t index) {
    const Json& schema = *tool.parameters;
    if (!schema.contains("properties")) return "\"\"";
    const Json& properties = schema["properties"];
    if (!properties.is_object()) refuse(tool, "'properties' must be an object");
    std::vector<std::string> required;
    if (schema.contains("required") && schema["required"].is_array()) {
      for (const Json& name : schema["required"]) {
        if (name.is_string()) required.push_back(name.get<std::string>());
      }
    }
    std::string items;
    std::size_t k = 0;
    for (const auto& [key, property] : properties.items()) {
      std::string prefix = fmt::format("t{}p{}s", index, k++);
      std::string item = grammar::gbnf_literal("<parameter=" + key + ">\n") + " " +
                         xml_value(tool, key, property, prefix) + " " +
                         grammar::gbnf_literal("\n</parameter>\n");
      bool needed = std::find(required.begin(), required.end(), key) != required.end();
      if (!items.empty()) items += ' ';
      items.append("(").append(item).append(needed ? ")" : ")?");
    }
    return items.empty() ? "\"\"" : items;
  }

  std::string xml_value(const Tool& tool, const std::string& key, const Json& property,
                        const std::string& prefix) {
    if (!property.is_object()) refuse(tool, fmt::format("property '{}' is not a schema", key));
    const Json* type = property.contains("type") ? &property["type"] : nullptr;
    bool text = (type && type->is_string() && type->get<std::string>() == "string") ||
                (!type && (property.contains("enum") || property.contains("const")) &&
                 !property.contains("anyOf"));
    if (text) return writer_.raw_string(property, prefix);
    if (type && !type->is_string()) {
      refuse(tool, fmt::format("property '{}': a list of types cannot be told apart in the XML "
                               "tool-call format",
                               key));
    }
    if (!type && !property.contains("anyOf")) {
      writer_.value(property, prefix);  // an unsupported keyword is the more useful refusal
      refuse(tool,
             fmt::format("property '{}' needs a type (or anyOf) in the XML tool-call format", key));
    }
    return writer_.value(property, prefix);
  }

  ToolCallFormat format_;
  grammar::JsonGrammarWriter writer_;
};

}  // namespace

std::optional<ToolCallGrammar> tool_call_grammar(const ChatRequest& request,
                                                 ToolCallFormat format) {
  if (request.tools.is_null() || request.tool_choice == ToolChoiceKind::kNone) return std::nullopt;
  std::vector<Tool> tools = tools_of(request.tools);
  CallGrammar calls(format);
  const bool json = format == ToolCallFormat::kJson;
  const std::string close = grammar::gbnf_literal("\n</tool_call>");
  const std::string open_next = grammar::gbnf_literal("\n<tool_call>\n");

  if (request.tool_choice == ToolChoiceKind::kNamed) {
    // The prompt ends inside the call: after `"arguments": ` (JSON) or `<function=NAME>\n` (XML).
    for (std::size_t i = 0; i < tools.size(); ++i) {
      if (tools[i].name != request.tool_choice_name) continue;
      if (!tools[i].strict) return std::nullopt;  // only strict functions are constrained
      std::string rest = json ? calls.json_arguments(tools[i], i) + " ws \"}\""
                              : calls.xml_parameters(tools[i], i) + " \"</function>\"";
      return ToolCallGrammar{calls.writer().finish(rest + " " + close), false};
    }
    return std::nullopt;
  }

  std::vector<std::string> each;
  bool any_strict = false;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    each.push_back(calls.call(tools[i], i));
    any_strict = any_strict || tools[i].strict;
  }
  std::string call = "call";
  std::string body = each.size() == 1 ? each[0] : "(" + each[0];
  for (std::size_t i = 1; i < each.size(); ++i) body += " | " + each[i];
  if (each.size() > 1) body += ")";
  calls.writer().add_rule(call, body);
  if (!any_strict) return std::nullopt;  // only requests with a strict function are constrained

  if (request.tool_choice == ToolChoiceKind::kRequired) {
    // The prompt ends with "<tool_call>\n": the first call, then more if parallel calls are on.
    std::string root = call + " " + close;
    if (request.parallel_tool_calls) root += " (" + open_next + " " + call + " " + close + ")*";
    return ToolCallGrammar{calls.writer().finish(root), false};
  }
  // auto: from the model's <tool_call> token to the end of that call.
  return ToolCallGrammar{calls.writer().finish("\"\\n\" " + call + " " + close), true};
}

}  // namespace md::server
