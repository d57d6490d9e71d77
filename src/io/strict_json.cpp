#include "io/strict_json.h"

#include <string>
#include <vector>

#include "base/error.h"

namespace md {
namespace {

using nlohmann::json;

// A SAX handler that builds the same DOM as json::parse, but can see the object a key is about to
// be inserted into, which is where duplicates are detectable.
class StrictDomBuilder {
 public:
  explicit StrictDomBuilder(std::size_t max_depth) : max_depth_(max_depth) {}

  bool null() { return add(json(nullptr)); }
  bool boolean(bool value) { return add(json(value)); }
  bool number_integer(json::number_integer_t value) { return add(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return add(json(value)); }
  bool number_float(json::number_float_t value, const json::string_t& /*text*/) {
    return add(json(value));
  }
  bool string(json::string_t& value) { return add(json(std::move(value))); }
  bool binary(json::binary_t& value) { return add(json::binary(std::move(value))); }

  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& name) {
    const json::object_t& object = open_.back()->get_ref<const json::object_t&>();
    if (object.find(name) != object.end()) {
      error_ = "duplicate key " + quote_for_message(name) + " in " + location();
      return false;
    }
    key_ = std::move(name);
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& failure) {
    error_ = failure.what();
    // "[json.exception.parse_error.101] parse error at line 1, ..." → keep the readable part.
    if (auto bracket = error_.find("] "); error_.starts_with("[json.") && bracket != error_.npos) {
      error_.erase(0, bracket + 2);
    }
    return false;
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  // Inserts a finished value where the parser is; returns its address inside the DOM.
  json* insert(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      auto& items = parent.get_ref<json::array_t&>();
      items.push_back(std::move(value));
      return &items.back();
    }
    auto& members = parent.get_ref<json::object_t&>();
    return &members.emplace(std::move(key_), std::move(value)).first->second;
  }

  bool add(json&& value) {
    insert(std::move(value));
    return true;
  }

  // Pointers to open containers stay valid: only the innermost one is ever modified, and
  // nodes of its ancestors (vector slots, map nodes) are not touched while it is open.
  bool open(json&& container) {
    if (open_.size() >= max_depth_) {
      error_ = "nesting deeper than " + std::to_string(max_depth_) + " levels at " + location();
      return false;
    }
    // Read the key before insert() consumes it.
    keys_.push_back(!open_.empty() && open_.back()->is_object() ? key_ : std::string());
    open_.push_back(insert(std::move(container)));
    return true;
  }

  bool close() {
    open_.pop_back();
    keys_.pop_back();
    return true;
  }

  // A JSON-pointer-like path of the innermost open container, for messages. The open child of
  // an array is always its last element.
  std::string location() const {
    if (open_.size() <= 1) return "the top-level value";
    std::string path;
    for (std::size_t i = 1; i < open_.size(); ++i) {
      path += open_[i - 1]->is_array() ? "/" + std::to_string(open_[i - 1]->size() - 1)
                                       : "/" + keys_[i];
    }
    return "value " + quote_for_message(path);
  }

  std::size_t max_depth_;
  json root_;
  std::vector<json*> open_;
  std::vector<std::string> keys_;  // the key under which each open container was inserted
  std::string key_;
  std::string error_;
};

}  // namespace

std::string quote_for_message(std::string_view text, std::size_t max_chars) {
  bool cut = text.size() > max_chars;
  std::string quoted = json(std::string(text.substr(0, max_chars)))
                           .dump(-1, ' ', false, json::error_handler_t::replace);
  if (cut) quoted += "...";
  return quoted;
}

json parse_strict_json(std::string_view text, std::string_view origin, std::size_t max_depth) {
  // nlohmann's lexer takes a NUL byte for the end of input, so "{}\0junk" would parse as "{}".
  // JSON text never contains a raw NUL (inside strings it must be escaped).
  if (std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    fail("{}: invalid JSON: NUL byte at offset {}", origin, nul);
  }
  StrictDomBuilder builder(max_depth);
  bool ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (!ok) {
    fail("{}: invalid JSON: {}", origin,
         builder.error().empty() ? std::string("unknown parse failure") : builder.error());
  }
  return std::move(builder.root());
}

}  // namespace md
