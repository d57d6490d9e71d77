// Errors raised while parsing or rendering a Jinja template: an md::Error that also carries the
// template name, the 1-based line and column of the construct at fault, and what went wrong.
#pragma once

#include <string>

#include "base/error.h"

namespace md::jinja {

// A place in the template source (1-based; 0 when unknown).
struct SourceLoc {
  int line = 0;
  int column = 0;
};

class TemplateError : public Error {
 public:
  enum class Kind {
    kSyntax,   // the template cannot be parsed (or uses an unsupported construct)
    kRuntime,  // rendering failed (type error, undefined value used, ...)
    kRaised,   // the template called raise_exception(message)
    kLimit,    // a safety limit (output size, steps, recursion depth) was exceeded
  };

  TemplateError(Kind kind, const std::string& template_name, SourceLoc loc,
                const std::string& detail)
      : Error(format(template_name, loc, detail)),
        kind_(kind),
        template_name_(template_name),
        loc_(loc),
        detail_(detail) {}

  Kind kind() const { return kind_; }
  const std::string& template_name() const { return template_name_; }
  int line() const { return loc_.line; }
  int column() const { return loc_.column; }
  // The message without the location prefix (for raise_exception: exactly the template's text).
  const std::string& detail() const { return detail_; }

 private:
  static std::string format(const std::string& name, SourceLoc loc, const std::string& detail) {
    if (loc.line <= 0) return fmt::format("template '{}': {}", name, detail);
    return fmt::format("template '{}', line {}, column {}: {}", name, loc.line, loc.column, detail);
  }

  Kind kind_;
  std::string template_name_;
  SourceLoc loc_;
  std::string detail_;
};

// Errors thrown deep inside value operations do not know where in the template they happen; the
// interpreter catches this and rethrows it as a TemplateError at the node being evaluated.
class ValueError : public std::runtime_error {
 public:
  explicit ValueError(const std::string& message,
                      TemplateError::Kind kind = TemplateError::Kind::kRuntime)
      : std::runtime_error(message), kind_(kind) {}
  TemplateError::Kind kind() const { return kind_; }

 private:
  TemplateError::Kind kind_;
};

// Throws ValueError with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void value_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw ValueError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace md::jinja
