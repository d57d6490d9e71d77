#include "text/tool_call_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace md {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

// One definition of whitespace for trimming, holding and dropping, so the streaming and whole
// parses cannot disagree about it.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim_start(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  return text;
}

std::string_view trim_end(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string_view trim(std::string_view text) {
  return trim_end(trim_start(text));
}

// Start of the whitespace run that ends at `end`.
std::size_t space_run_start(std::string_view text, std::size_t end) {
  while (end > 0 && is_space(text[end - 1])) --end;
  return end;
}

// Length of the longest proper prefix of `marker` that `text` ends with.
std::size_t partial_marker_length(std::string_view text, std::string_view marker) {
  for (std::size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length) {
    if (text.ends_with(marker.substr(0, length))) return length;
  }
  return 0;
}

bool consume(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// Model text may hold invalid UTF-8; a replacement character beats an exception mid-response.
std::string compact(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---- XML parameter values, converted by the property's JSON-schema type ----

// The `properties` object of the tool named `name`, or null when there is none.
const Json* find_properties(const Json& tools, std::string_view name) {
  if (!tools.is_array()) return nullptr;
  for (const Json& tool : tools) {
    if (!tool.is_object()) continue;
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) continue;
    auto tool_name = function->find("name");
    if (tool_name == function->end() || !tool_name->is_string() ||
        tool_name->get_ref<const std::string&>() != name) {
      continue;
    }
    auto parameters = function->find("parameters");
    if (parameters == function->end() || !parameters->is_object()) return nullptr;
    auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) return nullptr;
    return &*properties;
  }
  return nullptr;
}

// The types to try, in order. A schema without a `type` is free JSON when it combines
// subschemas (anyOf/oneOf/allOf) and text when it is a bare enum.
std::vector<std::string> schema_types(const Json& schema) {
  std::vector<std::string> types;
  auto type = schema.find("type");
  if (type != schema.end() && type->is_string()) types.push_back(type->get<std::string>());
  if (type != schema.end() && type->is_array()) {
    for (const Json& each : *type) {
      if (each.is_string()) types.push_back(each.get<std::string>());
    }
  }
  if (types.empty() &&
      (schema.contains("anyOf") || schema.contains("oneOf") || schema.contains("allOf"))) {
    types.push_back("json");
  }
  return types;
}

std::optional<Json> parse_integer(std::string_view text) {
  const char* end = text.data() + text.size();
  std::int64_t signed_value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), end, signed_value);
  if (ec == std::errc() && ptr == end && !text.empty()) return Json(signed_value);
  std::uint64_t unsigned_value = 0;
  auto [uptr, uec] = std::from_chars(text.data(), end, unsigned_value);
  if (uec == std::errc() && uptr == end && !text.empty()) return Json(unsigned_value);
  return std::nullopt;
}

// An overflowing literal such as 1e999 parses to infinity, which would serialize as null: a
// value the model never wrote. Iterative, since model JSON may nest deeply.
bool all_finite(const Json& root) {
  std::vector<const Json*> stack = {&root};
  while (!stack.empty()) {
    const Json* value = stack.back();
    stack.pop_back();
    if (value->is_number_float() && !std::isfinite(value->get<double>())) return false;
    if (value->is_structured()) {
      for (const Json& child : *value) stack.push_back(&child);
    }
  }
  return true;
}

std::optional<Json> parse_json(std::string_view text) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !all_finite(value)) return std::nullopt;
  return value;
}

std::optional<Json> parse_number(std::string_view text) {
  std::optional<Json> value = parse_json(text);
  if (!value || !value->is_number()) return std::nullopt;
  return value;
}

std::optional<Json> parse_boolean(std::string_view text) {
  auto equals_lower = [&](std::string_view word) {
    return std::ranges::equal(text, word, [](char a, char b) {
      return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
    });
  };
  if (equals_lower("true")) return Json(true);
  if (equals_lower("false")) return Json(false);
  return std::nullopt;
}

// `value` is the parameter text; `bare` is the same without surrounding whitespace, which only
// the non-text types ignore.
std::optional<Json> convert_as(std::string_view type, std::string_view value,
                               std::string_view bare) {
  if (type == "string" || type == "enum") return Json(std::string(value));
  if (type == "integer") return parse_integer(bare);
  if (type == "number") return parse_number(bare);
  if (type == "boolean") return parse_boolean(bare);
  if (type == "object" || type == "array" || type == "json") return parse_json(bare);
  return std::nullopt;
}

Json convert_value(std::string_view value, const Json* properties, const std::string& key) {
  if (!properties) return std::string(value);
  auto schema = properties->find(key);
  if (schema == properties->end() || !schema->is_object()) return std::string(value);
  std::string_view bare = trim(value);
  if (bare == "null") return nullptr;
  for (const std::string& type : schema_types(*schema)) {
    if (std::optional<Json> converted = convert_as(type, value, bare)) return *converted;
  }
  return std::string(value);
}

// ---- block bodies ----

std::optional<ToolCall> parse_json_block(std::string_view body) {
  std::optional<Json> block = parse_json(body);
  if (!block || !block->is_object()) return std::nullopt;
  auto name = block->find("name");
  if (name == block->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ToolCall call{.id = {}, .name = name->get<std::string>(), .arguments = "{}"};
  auto arguments = block->find("arguments");
  if (arguments == block->end() || arguments->is_null()) return call;
  if (arguments->is_string()) {
    call.arguments = arguments->get<std::string>();
  } else if (arguments->is_object()) {
    call.arguments = compact(*arguments);
  } else {
    return std::nullopt;
  }
  return call;
}

// Text up to the '>' that ends an XML opening tag, moving `text` past it.
std::optional<std::string> tag_value(std::string_view& text) {
  std::size_t end = text.find('>');
  if (end == std::string_view::npos) return std::nullopt;
  std::string value(trim(text.substr(0, end)));
  text.remove_prefix(end + 1);
  // A name or key is one line of text: a '<' or newline means the tag was never closed.
  if (value.empty() || value.find_first_of("<\n") != std::string::npos) return std::nullopt;
  return value;
}

// One <parameter=KEY>VALUE</parameter>, added to `arguments`. A missing </parameter> ends the
// value at the next <parameter=, at </function> or at the end (vLLM's Qwen3-Coder parser accepts
// the same; models do drop closing tags).
bool parse_parameter(std::string_view& text, const Json* properties, Json& arguments) {
  if (!consume(text, kParameterOpen)) return false;
  std::optional<std::string> key = tag_value(text);
  if (!key) return false;
  std::size_t end = std::min({text.find(kParameterClose), text.find(kParameterOpen),
                              text.find(kFunctionClose), text.size()});
  std::string_view value = text.substr(0, end);
  text.remove_prefix(end);
  consume(text, kParameterClose);
  // The template writes each value between newlines; only those two are markup.
  if (value.starts_with('\n')) value.remove_prefix(1);
  if (value.ends_with('\n')) value.remove_suffix(1);
  arguments[*key] = convert_value(value, properties, *key);
  return true;
}

// Nothing but parameters between <function=NAME> and </function>, nothing after it; a missing
// </function> (or </parameter>) at the end of the block is accepted, as by vLLM.
std::optional<ToolCall> parse_xml_block(std::string_view body, const Json& tools) {
  body = trim_start(body);
  if (!consume(body, kFunctionOpen)) return std::nullopt;
  std::optional<std::string> name = tag_value(body);
  if (!name) return std::nullopt;
  const Json* properties = find_properties(tools, *name);
  Json arguments = Json::object();
  for (;;) {
    body = trim_start(body);
    if (body.empty() || consume(body, kFunctionClose)) break;
    if (!parse_parameter(body, properties, arguments)) return std::nullopt;
  }
  if (!trim_start(body).empty()) return std::nullopt;
  return ToolCall{.id = {}, .name = std::move(*name), .arguments = compact(arguments)};
}

// A call without its id (assigned by the caller, so failed blocks consume none).
std::optional<ToolCall> parse_block(std::string_view body, const Json& tools) {
  std::string_view start = trim_start(body);
  if (start.starts_with('{')) return parse_json_block(body);
  if (start.starts_with(kFunctionOpen)) return parse_xml_block(body, tools);
  return std::nullopt;
}

}  // namespace

ToolCallFormat tool_call_format_for_template(std::string_view template_source) {
  return template_source.find(kFunctionOpen) != std::string_view::npos ? ToolCallFormat::kXml
                                                                       : ToolCallFormat::kJson;
}

std::string random_tool_call_id() {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  // Per thread, so concurrent requests need no lock; seeded with 128 bits so threads started
  // together do not share a sequence.
  thread_local std::mt19937_64 engine = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  std::uniform_int_distribution<std::size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(engine)];
  return id;
}

// ---- streaming ----

ToolCallParser::ToolCallParser(nlohmann::ordered_json tools, std::function<std::string()> make_id)
    : tools_(std::move(tools)),
      make_id_(make_id ? std::move(make_id) : std::function<std::string()>(random_tool_call_id)) {}

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output out;
  pending_ += text;
  while (in_block_ ? scan_block(out) : scan_content(out)) {
  }
  return out;
}

ToolCallParser::Output ToolCallParser::finish() {
  Output out;
  if (in_block_) {
    end_block(/*closed=*/false, out);
  } else {
    // Trailing whitespace of the last segment touches no call, so it is kept.
    emit(pending_, out);
  }
  pending_.clear();
  return out;
}

// Releases content up to the next block or the held tail; true when a block opened.
bool ToolCallParser::scan_content(Output& out) {
  std::size_t open = pending_.find(kOpen);
  if (open != std::string::npos) {
    std::size_t space = space_run_start(pending_, open);
    emit(std::string_view(pending_).substr(0, space), out);
    // Still after a call: this whitespace belongs to the stripped start of a segment.
    space_before_block_ = after_call_ ? "" : pending_.substr(space, open - space);
    pending_.erase(0, open + kOpen.size());
    in_block_ = true;
    scanned_ = 0;
    return true;
  }
  std::size_t release = pending_.size() - partial_marker_length(pending_, kOpen);
  std::size_t space = space_run_start(pending_, release);
  emit(std::string_view(pending_).substr(0, space), out);
  pending_.erase(0, after_call_ ? release : space);
  return false;
}

// Looks for the end of the open block; true when it closed.
bool ToolCallParser::scan_block(Output& out) {
  std::size_t close = pending_.find(kClose, scanned_);
  if (close == std::string::npos) {
    // Only a tail shorter than the tag may still grow into it; do not rescan the rest.
    scanned_ = pending_.size() - std::min(pending_.size(), kClose.size() - 1);
    return false;
  }
  std::string rest = pending_.substr(close + kClose.size());
  pending_.resize(close);
  block_closed_ = true;
  end_block(/*closed=*/true, out);
  pending_ = std::move(rest);
  return true;
}

// Parses the body in pending_ into a call, or gives it back to content as written.
void ToolCallParser::end_block(bool closed, Output& out) {
  if (std::optional<ToolCall> call = parse_block(pending_, tools_)) {
    call->id = make_id_();
    out.calls.push_back(std::move(*call));
    ++calls_;
    after_call_ = true;
  } else {
    std::string raw = space_before_block_;
    raw.append(kOpen).append(pending_).append(closed ? kClose : "");
    emit(raw, out);
  }
  space_before_block_.clear();
  in_block_ = false;
}

void ToolCallParser::emit(std::string_view text, Output& out) {
  if (after_call_) {
    text = trim_start(text);
    if (!text.empty()) after_call_ = false;
  }
  out.content += text;
}

// ---- whole text ----

ParsedToolCalls parse_tool_calls(std::string_view text, const nlohmann::ordered_json& tools,
                                 std::function<std::string()> make_id) {
  if (!make_id) make_id = random_tool_call_id;
  ParsedToolCalls result;
  std::string content;
  std::string segment;  // content since the last call; failed blocks are part of it
  bool after_call = false;
  std::size_t pos = 0;
  for (;;) {
    std::size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) break;
    segment += text.substr(pos, open - pos);
    std::size_t body_start = open + kOpen.size();
    std::size_t close = std::min(text.find(kClose, body_start), text.size());
    std::size_t end = close == text.size() ? close : close + kClose.size();
    std::optional<ToolCall> call = parse_block(text.substr(body_start, close - body_start), tools);
    if (call) {
      std::string_view touched = trim_end(segment);
      content += after_call ? trim_start(touched) : touched;
      segment.clear();
      after_call = true;
      call->id = make_id();
      result.calls.push_back(std::move(*call));
    } else {
      segment += text.substr(open, end - open);
    }
    pos = end;
  }
  segment += text.substr(pos);
  content += after_call ? trim_start(segment) : std::string_view(segment);
  if (result.calls.empty() || !trim(content).empty()) result.content = std::move(content);
  return result;
}

}  // namespace md
